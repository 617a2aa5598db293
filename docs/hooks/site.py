"""MkDocs hook: the pages generated from the code, so the site cannot drift from it.

Added before the site is built (none of them is a file in the repository):

- ``reference/api/<module>.md``: one page per module of the ``ganlab`` package, found by walking it, rendered by
  mkdocstrings from the docstrings; ``reference/api/index.md`` lists them. A module moved or renamed is picked up
  without an edit; a docstring reference that no longer resolves fails the strict build.
- ``reference/config.md``: every config group of ``conf/`` with each option's YAML (comments included), and every
  schema stored in Hydra's ConfigStore (key, type, default).
- ``reference/commands.md``: each ``ganlab-*`` command of ``pyproject.toml`` with its ``--help`` output, run at
  build time (a command that fails to print its help fails the build).
- The run folder's names on ``reference/run-directory.md`` (where the page holds the marker
  ``<!-- generated: the run folder's names -->``), from ``ganlab/layout.py``.
- The score table on ``concepts/scores.md`` (where the page holds the marker ``<!-- generated: the score table -->``),
  one row per score family registered in ``ganlab.metrics.registry``, in table order.
- ``notebooks/*.ipynb``: the notebooks of ``notebooks/``, rendered by mkdocs-jupyter (not executed).
- The Results section of the navigation, and a list at the end of ``results/index.md``: one entry per
  ``docs/results/*/README.md``.

The docstrings' Sphinx roles (``:func:`x```) become cross-references or code through the Griffe extension of
``docs/hooks/roles.py`` (mkdocs.yml); text this hook copies from the code (the API index's module summaries, the run
folder's names) gets code spans, or bare names inside a code block.

Links from a page to a repository file outside ``docs/`` (a source file, a script) become code text, since the
site has no copy of them; a link to a file that exists nowhere is left alone, so the strict build reports it.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import logging
import os
import re
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path
from typing import Any

from mkdocs.plugins import event_priority
from mkdocs.structure.files import File, Files

log = logging.getLogger("mkdocs.hooks.ganlab")
ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "ganlab"


def _roles_module() -> Any:
    """``docs/hooks/roles.py`` (the docstrings' Sphinx roles as Markdown), loaded from its file: the hooks folder is
    no package."""
    spec = importlib.util.spec_from_file_location("ganlab_docs_roles", Path(__file__).with_name("roles.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def plain_roles(text: str) -> str:
    """Docstring text copied onto a generated page with its Sphinx roles as code spans (``:func:`page``` ->
    ```page```)."""
    return _roles_module().convert_roles(text, lambda target: None)


def bare_roles(text: str) -> str:
    """Docstring text copied into a code block with its Sphinx roles as bare names (``:func:`page``` -> ``page``)."""
    return _roles_module().strip_roles(text)


# ---------------------------------------------------------------- API reference


def api_modules(root: Path = ROOT) -> list[str]:
    """Dotted names of every module and package under ``root/ganlab`` (private ``_x`` modules and folders without
    ``__init__.py`` left out), sorted."""
    out = []
    base = root / PACKAGE
    for path in sorted(base.rglob("*.py")):
        rel = path.relative_to(root).with_suffix("")
        parts = list(rel.parts)
        if any(p.startswith("_") and p != "__init__" for p in parts):
            continue
        if not all((root / Path(*parts[:i]) / "__init__.py").is_file() for i in range(1, len(parts))):
            continue
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out.append(".".join(parts))
    return out


def api_index(modules: list[str]) -> str:
    """The API index page: the modules grouped by subpackage, each with the first line of its docstring."""
    lines = ["# Python API", "", "Generated from the docstrings of every module of `ganlab` (found by walking the "
             "package). Each page lists the module's public functions and classes.", ""]
    current = None
    for name in modules:
        group = ".".join(name.split(".")[:2])
        if group != current:
            current = group
            lines += ["", f"## `{group}`", ""]
        lines.append(f"- [`{name}`]({name}.md){_summary(name)}")
    return "\n".join(lines) + "\n"


def _summary(module: str) -> str:
    """``: <first docstring line>`` of a module, read without importing it."""
    parts = module.split(".")
    path = ROOT.joinpath(*parts).with_suffix(".py")
    if not path.is_file():
        path = ROOT.joinpath(*parts, "__init__.py")
    import ast

    try:
        doc = ast.get_docstring(ast.parse(path.read_text()))
    except SyntaxError:
        return ""
    first = (doc or "").strip().split("\n\n")[0].replace("\n", " ")
    return f": {plain_roles(first)}" if first else ""


# ---------------------------------------------------------------- config reference


def config_reference(conf: Path = ROOT / "conf") -> str:
    """The config groups of ``conf`` (each option's YAML, comments included) and the ConfigStore schemas."""
    lines = ["# Config groups", "",
             "Generated from `conf/` and the schemas in Hydra's ConfigStore. `ganlab-train` composes "
             "`conf/train.yaml`; choose an option of a group with `group=option` (e.g. `dataset=grid25`), set a key "
             "with `group.key=value`. Every YAML is shown as shipped; its comments say what each key does.", ""]
    primary = conf / "train.yaml"
    if primary.is_file():
        lines += ["## `train.yaml` (the primary config)", "", "```yaml", primary.read_text().rstrip(), "```", ""]
    for group in sorted({p.parent for p in conf.rglob("*.yaml")} - {conf}):
        name = group.relative_to(conf).as_posix()
        options = sorted(group.glob("*.yaml"))
        lines += [f"## `{name}`", "", "Options: " + ", ".join(f"`{p.stem}`" for p in options) + ".", ""]
        for path in options:
            lines += [f"### `{name}={path.stem}`", "", "```yaml", path.read_text().rstrip(), "```", ""]
    for path in sorted(conf.glob("*.yaml")):
        if path.name != "train.yaml":
            lines += [f"## `{path.name}`", "", "```yaml", path.read_text().rstrip(), "```", ""]
    lines += schema_reference()
    return "\n".join(lines) + "\n"


def schema_reference() -> list[str]:
    """One table per schema that ganlab stores in Hydra's ConfigStore: key, type, default."""
    from hydra.core.config_store import ConfigStore
    from omegaconf import OmegaConf

    import ganlab

    _ = ganlab.CONFIG_DIR  # its first use stores the schemas
    lines = ["## Schemas", "",
             "The typed groups name a schema in their defaults list (`- /schema/<name>@_here_`): OmegaConf then "
             "refuses a wrong type or an unknown key while the config is composed. The defaults below are the only "
             "ones: a YAML names each key with `???` (the schema's default) and its documentation. A strategy's schema "
             "is made from its class's `__init__`, a callback's from its `__init__` and its `Settings` dataclass.",
             ""]
    for path, node in _store_nodes(ConfigStore.instance().repo):
        cls = OmegaConf.get_type(node.node)
        if cls is None or not dataclasses.is_dataclass(cls):
            continue
        lines += [f"### `{path}`", "", "| key | type | default |", "|---|---|---|"]
        lines += [f"| `{f.name}` | `{_type_name(f.type)}` | `{_default(f)}` |" for f in dataclasses.fields(cls)]
        lines.append("")
    return lines


def _store_nodes(repo: dict, prefix: str = "") -> list[tuple[str, Any]]:
    """(path, ConfigNode) of every node below ``schema`` in the ConfigStore's repository, sorted by path."""
    out = []
    for key, value in repo.items():
        path = f"{prefix}/{key}" if prefix else key
        if isinstance(value, dict):
            out += _store_nodes(value, path)
        elif path.startswith("schema/") and getattr(value, "provider", None) == PACKAGE:
            out.append((path.removesuffix(".yaml"), value))
    return sorted(out, key=lambda item: item[0])


def _type_name(tp: Any) -> str:
    return tp.__name__ if isinstance(tp, type) else str(tp).replace("typing.", "")


def _default(field: dataclasses.Field) -> str:
    if field.default is not dataclasses.MISSING:
        return repr(field.default)
    if field.default_factory is not dataclasses.MISSING:
        return repr(field.default_factory())
    return "required"


# ---------------------------------------------------------------- commands


def commands(root: Path = ROOT) -> dict[str, str]:
    """``pyproject.toml``'s console scripts: name -> ``module:function``."""
    return tomllib.loads((root / "pyproject.toml").read_text())["project"]["scripts"]


def command_help(name: str, target: str, root: Path = ROOT) -> str:
    """What ``<name> --help`` prints, run as its console script would be (from ``root``, with a 120 s limit).

    Raises:
        RuntimeError: the command exits non-zero or prints nothing.
    """
    module, func = target.split(":")
    code = f"import sys; sys.argv[0] = {name!r}; from {module} import {func} as main; sys.exit(main())"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]),
           "COLUMNS": "100", "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", code, "--help"], cwd=root, env=env, capture_output=True, text=True,
                          timeout=120)
    text = (done.stdout or done.stderr).rstrip()
    if done.returncode != 0 or not text:
        raise RuntimeError(f"`{name} --help` exited {done.returncode}: {done.stderr.strip()[-500:]}")
    return text


def commands_reference(root: Path = ROOT) -> str:
    lines = ["# Commands", "", "Generated at build time: each command of `pyproject.toml`'s `[project.scripts]` "
             "with what its `--help` prints.", ""]
    for name, target in sorted(commands(root).items()):
        try:
            text = command_help(name, target, root)
        except (RuntimeError, subprocess.TimeoutExpired) as err:
            log.warning("commands reference: %s", err)
            text = f"(no help: {err})"
        lines += [f"## `{name}`", "", f"Entry point: `{target}`.", "", "```text", text, "```", ""]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- run directory

LAYOUT = ROOT / "ganlab" / "layout.py"
LAYOUT_MARK = "<!-- generated: the run folder's names -->"


def run_layout() -> str:
    """The run folder as ``ganlab.layout`` defines it: the layout drawn in its docstring, then every name constant
    (``NAME = "value"  # comment``) as a table row."""
    import ast

    tree = ast.parse(LAYOUT.read_text())
    doc = ast.get_docstring(tree) or ""
    drawn = textwrap.dedent(doc.split("::", 1)[1].split("\n\n")[1]) if "::" in doc else ""
    lines = LAYOUT.read_text().splitlines()
    rows = []
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id.isupper() and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)):
            comment = lines[node.lineno - 1].partition("#")[2].strip()
            rows.append(f"| `{node.value.value}` | `{node.targets[0].id}` | {plain_roles(comment)} |")
    return "\n".join(["Generated from [`ganlab.layout`](api/ganlab.layout.md), the one module that names "
                      "them (the trainer, the commands and the notebook API take the names from there):", "",
                      "```text", bare_roles(drawn.rstrip()), "```", "", "| name | constant | what |", "|---|---|---|",
                      *rows])


# ---------------------------------------------------------------- score table

SCORES_MARK = "<!-- generated: the score table -->"
ARROWS = {True: "↑", False: "↓", None: "–"}


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def score_table() -> str:
    """The score table: one row per registered score family that documents itself (``what``), in table order; its
    scores, its ``metrics.scorers`` key, what, range, the direction of each score, the source."""
    from ganlab.metrics.registry import families

    api = "../reference/api/ganlab.metrics.registry.md"
    lines = [f"Generated from the score registry ([`ganlab.metrics.registry`]({api})), in the order of the tables; "
             "better: ↑ higher, ↓ lower, – neither, one arrow per score.", "",
             "| score | entry | what | range | better | source |", "|---|---|---|---|---|---|"]
    for f in families():
        if not f.what:
            continue
        scores = ", ".join(f"`{k}`" for k in f.higher_is_better)
        entry = f"`metrics.scorers.{f.name}`" if f.scorer is not None else ""
        arrows = " ".join(ARROWS[d] for d in f.higher_is_better.values())
        lines.append(f"| {scores} | {entry} | {_cell(f.what)} | {_cell(f.range)} | {arrows} | {_cell(f.source)} |")
    return "\n".join(lines)


# ---------------------------------------------------------------- results


def result_pages(docs: Path) -> list[Path]:
    """The study pages: ``docs/results/<study>/README.md``, sorted (the benchmarks' folders under ``bench/`` belong
    to the Performance page)."""
    return sorted((docs / "results").glob("*/README.md"))


def _title(path: Path) -> str:
    """A page's first heading, without a trailing parenthetical (a nav entry stays one or two lines)."""
    for line in path.read_text().splitlines():
        if line.startswith("# "):
            return re.sub(r"\s*\([^()]*\)\s*$", "", line[2:].strip()).strip("` ") or path.parent.name
    return path.parent.name


def results_list(docs: Path) -> str:
    """The section appended to ``results/index.md``: a link to every study page."""
    lines = ["", "## Every study page", "",
             "Each holds its protocol, budget, the commands that regenerate it, its table and the raw data (CSV) the "
             "table comes from.", ""]
    for page in result_pages(docs):
        rel = page.relative_to(docs / "results").as_posix()
        lines.append(f"- [{_title(page)}]({rel})")
    if (docs / "results" / "collapse_detection.md").is_file():
        lines.append("- [Collapse detection, measured as a classifier](collapse_detection.md)")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- MkDocs events


#: Plugins whose INFO lines report progress only (mkdocs-jupyter: each notebook converted, cached and copied): shown
#: with ``mkdocs build -v``, else only their warnings.
CHATTY_LOGGERS = ("mkdocs.plugins.mkdocs_jupyter",)


def quiet_plugins() -> None:
    """Only the warnings of :data:`CHATTY_LOGGERS`, unless mkdocs runs verbose (``-v``: its logger at DEBUG)."""
    if not logging.getLogger("mkdocs").isEnabledFor(logging.DEBUG):
        for name in CHATTY_LOGGERS:
            logging.getLogger(name).setLevel(logging.WARNING)


def on_config(config: Any) -> Any:
    """The Results section of the navigation: the index, then one entry per study page; the plugins' progress
    lines off (:func:`quiet_plugins`)."""
    quiet_plugins()
    docs = Path(config["docs_dir"])
    entries: list[Any] = [{"Overview": "results/index.md"}]
    entries += [{_title(p): p.relative_to(docs).as_posix()} for p in result_pages(docs)]
    nav = config["nav"] or []
    for i, item in enumerate(nav):
        if isinstance(item, dict) and "Results" in item:
            nav[i] = {"Results": entries}
    return config


@event_priority(100)  # before mkdocs-jupyter and mkdocstrings look at the files
def on_files(files: Files, config: Any) -> Files:
    modules = api_modules()
    for name in modules:
        files.append(File.generated(config, f"reference/api/{name}.md", content=f"::: {name}\n"))
    files.append(File.generated(config, "reference/api/index.md", content=api_index(modules)))
    files.append(File.generated(config, "reference/config.md", content=config_reference()))
    files.append(File.generated(config, "reference/commands.md", content=commands_reference()))
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        if not nb.stem.endswith("_executed"):
            files.append(File(f"notebooks/{nb.name}", str(ROOT), config["site_dir"], config["use_directory_urls"]))
    return files


LINK = re.compile(r"(?<!!)\[([^\]]+)\]\(([^)\s]+)\)")


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    """A link to a repository file outside ``docs/`` becomes code text (the site has no copy of it)."""
    if page.file.abs_src_path is None or page.file.generated_by:
        return markdown
    if page.file.src_uri == "results/index.md":
        markdown += results_list(Path(config["docs_dir"]))
    if LAYOUT_MARK in markdown:
        markdown = markdown.replace(LAYOUT_MARK, run_layout())
    if SCORES_MARK in markdown:
        markdown = markdown.replace(SCORES_MARK, score_table())
    src = Path(page.file.abs_src_path).parent
    docs = Path(config["docs_dir"]).resolve()

    def repl(match: re.Match) -> str:
        text, target = match.group(1), match.group(2)
        if re.match(r"^[a-z]+:", target) or target.startswith("#"):
            return match.group(0)
        path = (src / target.split("#")[0]).resolve()
        inside = path == docs or docs in path.parents
        if inside or not path.exists() or ROOT not in path.parents:
            return match.group(0)
        rel = path.relative_to(ROOT).as_posix()
        return text if text.strip("`") == rel or text.startswith("`") else f"{text} (`{rel}`)"

    return LINK.sub(repl, markdown)
