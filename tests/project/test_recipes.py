"""The recipes of docs/extending/ run as written, so the documentation cannot drift from the code.

Each recipe page shows files as fenced code blocks with a ``title="<path>"``: package files (``ganlab/...``), config
files (``conf/...``) and a test (``tests/...``). This test writes them into a temporary overlay (the package files
beside the real package, the YAMLs into a copy of ``conf/``) and runs the recipe's own test with pytest in a fresh
process, so nothing a recipe registers (a Scorer subclass, a ConfigStore schema) leaks into this session.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RECIPES = sorted(p for p in (ROOT / "docs" / "extending").glob("*.md") if p.stem != "index")
BLOCK = re.compile(r'^```(\w+)[^\n]*?title="([^"]+)"[^\n]*\n(.*?)^```\s*$', re.S | re.M)

# Runs in the fresh process: the overlay's package folders join the real packages' __path__ before pytest imports
# the recipe's test, then pytest runs it.
RUNNER = """
import importlib, sys
for package, folder in {overlays!r}:
    importlib.import_module(package).__path__.append(folder)
import pytest
sys.exit(pytest.main([*{tests!r}, "-q", "-p", "no:cacheprovider", "-o", "addopts=", "--rootdir", {root!r}]))
"""


def recipe_files(page: Path) -> dict[str, str]:
    """``path -> content`` of every titled code block of ``page``, in order.

    Raises:
        ValueError: two blocks name the same path.
    """
    out: dict[str, str] = {}
    for _lang, path, code in BLOCK.findall(page.read_text()):
        if path in out:
            raise ValueError(f"{page.name}: two code blocks are titled {path}")
        out[path] = code
    return out


def test_recipe_blocks_are_found() -> None:
    """The extraction itself: every recipe page has a package file and a test, and the pattern reads a hand-made
    page exactly."""
    assert {p.stem for p in RECIPES} >= {"strategy", "score", "dataset", "callback", "command"}
    for page in RECIPES:
        files = recipe_files(page)
        assert any(p.startswith("tests/") for p in files), f"{page.name} has no test block"
        assert any(p.startswith("ganlab/") for p in files), f"{page.name} has no package block"
    text = ('x\n```python title="ganlab/a.py"\nA = 1\n```\n\n```yaml title="conf/b.yaml"\nb: 2\n```\n'
            '```python\nno\n```\n')
    assert [m[1:] for m in BLOCK.findall(text)] == [("ganlab/a.py", "A = 1\n"), ("conf/b.yaml", "b: 2\n")]


@pytest.mark.e2e
def test_recipes_run(tmp_path: Path) -> None:
    """Every recipe's files, written into one overlay; every recipe's test, run in one fresh process (one start-up
    of torch for all of them)."""
    conf = tmp_path / "conf"
    shutil.copytree(ROOT / "conf", conf)
    overlays, tests = [], []
    for page in RECIPES:
        for rel, code in recipe_files(page).items():
            parts = Path(rel).parts
            if parts[0] == "conf":
                target = conf.joinpath(*parts[1:])
            elif parts[0] in ("ganlab", "tests"):
                target = tmp_path / "overlay" / rel
                if parts[0] == "ganlab" and (".".join(parts[:-1]), str(target.parent)) not in overlays:
                    overlays.append((".".join(parts[:-1]), str(target.parent)))
                tests += [target] if parts[0] == "tests" else []
            else:
                raise AssertionError(f"{page.name}: a code block titled {rel} is not under ganlab/, conf/ or tests/")
            assert not target.exists() and not (ROOT / rel).exists(), f"{page.name}: {rel} is a shipped file's path"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(code)
    env = {**os.environ, "GANLAB_CONF": str(conf), "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    code = RUNNER.format(overlays=overlays, tests=[str(t) for t in tests], root=str(tmp_path))
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, f"a recipe's test failed:\n{done.stdout[-6000:]}\n{done.stderr[-2000:]}"
    expected = sum(len(re.findall(r"^def test_", t.read_text(), re.M)) for t in tests)
    assert re.search(rf"\b{expected} passed", done.stdout) and "failed" not in done.stdout, done.stdout
