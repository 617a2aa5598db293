"""The documentation site: the docstrings' Sphinx roles rendered as Markdown (``docs/hooks/roles.py``, issue 44), and a
strict build that prints only what needs attention (issue 46). Skipped without the docs extra."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def roles() -> Any:
    """``docs/hooks/roles.py``, loaded from its file (needs griffe, of the docs extra)."""
    pytest.importorskip("griffe", reason="the docs hooks need the docs extra: pip install -e '.[docs]'")
    spec = importlib.util.spec_from_file_location("docs_roles", ROOT / "docs" / "hooks" / "roles.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


#: What a hand-written resolver knows: target as written -> the full path of an object the site shows.
KNOWN = {"run": "ganlab.cli.train.run", "ganlab.data.GANData": "ganlab.data.base.GANData",
         "ganlab.trainer.stats.Stats": "ganlab.trainer.stats.Stats", "ganlab.metrics": "ganlab.metrics"}


@pytest.mark.parametrize(("text", "expected"), [
    (":func:`run`", "[`run`][ganlab.cli.train.run]"),
    ("see :class:`~ganlab.data.GANData`.", "see [`GANData`][ganlab.data.base.GANData]."),
    (":attr:`Trainer.stats <ganlab.trainer.stats.Stats>`", "[`Trainer.stats`][ganlab.trainer.stats.Stats]"),
    (":mod:`ganlab.metrics` and :py:meth:`~torch.nn.Module.train`", "[`ganlab.metrics`][ganlab.metrics] and `train`"),
    (":data:`SWEPT_KEYS_ENV` (:func:`_private`)", "`SWEPT_KEYS_ENV` (`_private`)"),
    (":meth:`.fit` ``:not a role``", "`fit` ``:not a role``"),
    ("no role here: a dict {a: b}", "no role here: a dict {a: b}"),
])
def test_roles_become_cross_references_or_code(roles: Any, text: str, expected: str) -> None:
    assert roles.convert_roles(text, KNOWN.get) == expected


def test_roles_in_text_shown_verbatim_become_bare_names(roles: Any) -> None:
    text = "failure.json  a job that raised (:func:`record_failure`, :class:`~a.b.C`, :attr:`x <a.b>`)"
    assert roles.strip_roles(text) == "failure.json  a job that raised (record_failure, C, x)"


def test_the_extension_links_what_the_site_shows_and_codes_the_rest(roles: Any) -> None:
    import griffe

    pkg = griffe.load("ganlab", search_paths=[str(ROOT)], extensions=griffe.load_extensions(roles.SphinxRoles()))
    table = pkg["analysis.table"]
    assert "[`headline_of`][ganlab.analysis.table.headline_of]" in table["headline_keys"].docstring.value
    # a name the module imports: the path where it is defined (its heading on the site)
    assert "[`one_run_per_seed`][ganlab.analysis.plots.one_run_per_seed]" in table["seed_values"].docstring.value
    # a constant documented by a #: comment has no docstring for mkdocstrings, so no heading: code
    assert "`HEADLINE` for the kind of data" in table["headline_of"].docstring.value
    sweep = pkg["cli.sweep"]
    assert "(:func:" not in sweep["SweepSummary"].docstring.value
    left = [o.path for o in _objects(pkg) if o.docstring and re.search(r":(mod|class|func|meth|attr|data):`",
                                                                       o.docstring.value)]
    assert left == []
    assert roles.shown(pkg["cli.train"]) and not roles.shown(pkg["cli.train._report"])


def _objects(obj: Any) -> list[Any]:
    """``obj`` and every object defined in it (imports left out)."""
    found = [obj]
    for member in obj.members.values():
        if not member.is_alias:
            found += _objects(member)
    return found


#: The only lines a clean strict build prints (mkdocs' own progress); anything else needs attention.
EXPECTED = re.compile(r"INFO    -  (Cleaning site directory|Building documentation to directory: .*"
                      r"|Documentation built in [\d.]+ seconds)")


@pytest.mark.slow  # a full build: about 80 s on two busy cores (the API reference renders every module)
def test_a_strict_build_prints_only_what_needs_attention(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs", reason="the site needs the docs extra: pip install -e '.[docs]'")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    res = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    printed = [line for line in (res.stdout + res.stderr).splitlines() if line.strip()]
    assert res.returncode == 0, "\n".join(printed[-40:])
    assert not any("not included in the" in line for line in printed)
    assert [line for line in printed if not EXPECTED.fullmatch(line)] == []
    pages = list((tmp_path / "site" / "reference" / "api").rglob("index.html"))
    assert len(pages) > 100
    assert not [p for p in pages if re.search(r":(mod|class|func|meth|attr|data):`", p.read_text())]
