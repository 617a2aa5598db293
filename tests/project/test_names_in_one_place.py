"""The run folder's file and folder names and the score-name prefixes are spelled once, in ``ganlab.layout``
(``ganlab.metrics.registry`` re-exports the prefixes); every other module, the light study modules included, takes
them from there."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from ganlab import layout
from ganlab.metrics import registry

PACKAGE = Path(layout.__file__).resolve().parent  # ganlab/
#: Where the same words mean something else, or a light module avoids importing the package that holds the name.
ELSEWHERE = {
    "metrics/embedders.py": {layout.CHECKPOINT_DIR},  # torch hub's folder of downloaded weights
    "trainer/visuals.py": {layout.SAMPLES_DIR},       # the TensorBoard tag of the sample grid
}


def _strings(path: Path) -> list[tuple[int, str]]:
    """``(line, text)`` of every string constant of ``path`` that is not a docstring."""
    tree = ast.parse(path.read_text())
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings]


def _spelled_out(names: set[str], pattern: str | None, owner: str) -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel == owner:
            continue
        allowed = ELSEWHERE.get(rel, set())
        found += [f"{rel}:{line} {text!r}" for line, text in _strings(path)
                  if text not in allowed and (text in names or (pattern and re.match(pattern, text)))]
    return found


def test_run_folder_names_come_from_the_layout() -> None:
    names = {v for k, v in vars(layout).items() if k.isupper() and isinstance(v, str)} - {layout.EVAL_DIR,
                                                                                          layout.SAMPLE_DIR}
    assert {"metrics.json", "checkpoints", "last.pt", ".hydra", "nan_dumps"} <= names  # what the scan looks for
    assert _spelled_out(names, None, "layout.py") == []


def test_score_prefixes_come_from_the_layout() -> None:
    assert (layout.DATA_PREFIX, layout.FIXED_Z_PREFIX) == ("data/", "fixed_z/")
    assert (registry.DATA_PREFIX, registry.FIXED_Z_PREFIX) == (layout.DATA_PREFIX, layout.FIXED_Z_PREFIX)
    pattern = f"^({re.escape(layout.DATA_PREFIX)}|{re.escape(layout.FIXED_Z_PREFIX)})"
    assert _spelled_out(set(), pattern, "layout.py") == []
