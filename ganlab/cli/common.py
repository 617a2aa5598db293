"""What the commands share: the end-of-run score table, a command's name as a user can type it, and the frame of a
command on one checkpoint (``ganlab-eval``, ``ganlab-sample``)."""

from __future__ import annotations

import argparse
import logging
import re
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ganlab.cli.help import HelpAction
from ganlab.metrics.directions import higher_is_better, score_directions
from ganlab.metrics.registry import DATA_PREFIX
from ganlab.metrics.scorers import VENDI_READING

#: How to read a score that has no better direction, printed under the end-of-run table.
SCORE_READINGS = {"vendi": VENDI_READING}
#: Score keys of one class (``class/3/recall``, ``pred_class/0/clusters_covered``), left out of the end-of-run table.
PER_CLASS = re.compile(r"^(pred_)?class/\d+/")


def format_scores(scores: dict[str, float]) -> str:
    """A table: one row per score with the model's value beside the data baseline (``data/<score>``, "-" when
    none) and the better direction (higher / lower), in the scorers' order (:mod:`ganlab.metrics.directions`).
    Scores of single classes (``class/<c>/...``, ``pred_class/<c>/...``) are left to ``metrics.json``: the table
    keeps their ``mean`` and ``worst`` rows and ends with one line counting the rest. A score without a better
    direction but with a data baseline (``vendi``) reads "near data", with its reading below the table."""
    names = [k for k in scores if not k.startswith(DATA_PREFIX)]
    per_class = [k for k in names if PER_CLASS.match(k)]
    names = [k for k in names if not PER_CLASS.match(k)]
    order = {k: i for i, k in enumerate(score_directions())}
    names.sort(key=lambda k: (order.get(k, len(order)), k))
    width = max([len(k) for k in names] + [5])
    direction = {True: "higher", False: "lower", None: ""}
    lines = [f"  {'score':<{width}}  {'model':>10}  {'data':>10}  better"]
    for k in names:
        data = scores.get(f"{DATA_PREFIX}{k}")
        data_cell = f"{data:>10.4g}" if data is not None else f"{'-':>10}"
        better = direction[higher_is_better(k)] or ("near data" if data is not None else "")
        lines.append(f"  {k:<{width}}  {scores[k]:>10.4g}  {data_cell}  {better}".rstrip())
    lines += [f"  {SCORE_READINGS[k]}" for k in names if k in SCORE_READINGS]
    if per_class:
        lines.append(f"  (+ {len(per_class)} scores of single classes in metrics.json)")
    return "\n".join(lines)


def program(name: str) -> str:
    """A command of this Python's environment (``tensorboard``, ``ganlab-train``) as a user can type it: the bare
    name when it is the one on PATH, else its full path (a venv that is not activated)."""
    here = Path(sys.executable).parent / name
    on_path = shutil.which(name)
    return name if here.is_file() and on_path and Path(on_path).resolve() == here.resolve() else str(here)


def checkpoint_command(prog: str, help_page: str, argv: list[str] | None,
                       run: Callable[[str, list[str]], dict[str, Any]],
                       report: Callable[[dict[str, Any]], str]) -> int:
    """A command on one checkpoint (``ganlab-eval``, ``ganlab-sample``): parse ``<path> [key=value ...]``, call
    ``run(path, overrides)`` and print ``report(result)``; ``-h``/``--help`` prints ``help_page``
    (:func:`ganlab.cli.help.page`). A FileNotFoundError or ValueError (bad input, named by ``run``) is printed as
    ``<prog>: <message>`` on stderr with exit status 2; otherwise the status is 0."""
    parser = argparse.ArgumentParser(prog=prog, add_help=False, usage=help_page.splitlines()[0].removeprefix("usage: "))
    parser.add_argument("-h", "--help", action=HelpAction, text=help_page)
    parser.add_argument("path")
    parser.add_argument("overrides", nargs="*", default=[])
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        result = run(args.path, args.overrides)
    except (FileNotFoundError, ValueError) as err:
        print(f"{prog}: {err}", file=sys.stderr)
        return 2
    print(report(result))
    return 0
