"""The ``--help`` pages of the commands, written for a person: usage, what the command does, examples, then the
options (:func:`page`, the one layout they share). ``ganlab-train``'s is read from the config folder (so it follows
``conf/``); Hydra's own help, which also lists the internal schema groups of the ConfigStore, stays behind
``--hydra-help``. Every example of every page is checked to run by ``tests/cli/test_help_pages.py``.
"""

from __future__ import annotations

import argparse
import re
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

#: The width of a page (its lines wrap before it).
WIDTH = 116
#: The widest first column of a table of rows (an example's command, an option's name) before its text moves under it.
FIRST_COLUMN = 52


def rows(pairs: Sequence[tuple[str, str]], indent: int = 2) -> list[str]:
    """Two columns, ``name  text``: the text aligned after the widest name (at most :data:`FIRST_COLUMN`), wrapped to
    :data:`WIDTH`; a longer name has its text on the lines below it."""
    width = min(max((len(a) for a, _ in pairs), default=0), FIRST_COLUMN)
    out = []
    for name, text in pairs:
        lead = " " * indent + name
        if not text:
            out.append(lead)
            continue
        hang = " " * (indent + width + 2)
        if len(name) > width:
            out.append(lead)
            out += textwrap.wrap(text, WIDTH, initial_indent=hang, subsequent_indent=hang)
        else:
            out += textwrap.wrap(text, WIDTH, initial_indent=f"{lead:<{indent + width}}  ", subsequent_indent=hang)
    return out


def page(usage: Sequence[str], about: str, examples: Sequence[tuple[str, str]],
         sections: Sequence[tuple[str, Sequence[str]]] = (), footer: str = "") -> str:
    """A command's help page: ``usage:`` lines, a paragraph on what it does, ``examples:`` (command, what it does),
    then each section (``title:`` and its lines, e.g. from :func:`rows`) and a footer paragraph."""
    out = [f"{'usage:' if i == 0 else '      '} {line}" for i, line in enumerate(usage)]
    out += ["", *textwrap.wrap(" ".join(about.split()), WIDTH), "", "examples:", *rows(examples)]
    for title, lines in sections:
        out += ["", f"{title}:", *lines]
    if footer:
        out += ["", *textwrap.wrap(" ".join(footer.split()), WIDTH)]
    return "\n".join(out) + "\n"


def examples_of(text: str) -> list[str]:
    """The example commands of a help page made by :func:`page`: the first column of its ``examples:`` section."""
    lines = text.split("\nexamples:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    return [re.split(r"\s{2,}", ln.strip())[0] for ln in lines if ln.startswith("  ") and not ln.startswith("   ")]


def option_rows(parser: argparse.ArgumentParser) -> list[tuple[str, str]]:
    """The options of an argparse ``parser`` as :func:`rows`: ``--name VALUE`` (or the positional's name) and its help,
    so a page lists exactly what the parser takes."""
    out = []
    for action in parser._actions:  # argparse keeps no public list of them
        if action.help == argparse.SUPPRESS:
            continue
        if action.option_strings:
            value = "" if action.nargs == 0 else f" {action.metavar or action.dest.upper()}"
            if action.choices and action.nargs != 0:
                value = " {" + ",".join(map(str, action.choices)) + "}"
            name = ", ".join(action.option_strings) + value
        else:
            name = str(action.metavar or action.dest)
        out.append((name, (action.help or "").replace("%%", "%")))
    return out


class HelpAction(argparse.Action):
    """``-h``/``--help`` of an argparse command that prints its :func:`page` (``text``) and exits 0, before the
    other arguments are checked (as argparse's own help does)."""

    def __init__(self, option_strings: Sequence[str], dest: str, text: str = "", **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)
        self.text = text

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> NoReturn:
        print(self.text() if callable(self.text) else self.text, end="")
        sys.exit(0)


USAGE = ["ganlab-train [group=option ...] [key=value ...]",
         "ganlab-train -m [group=a,b ...] [key=v1,v2 ...]     (a sweep: one job per combination)"]

ABOUT = """Train one GAN experiment composed from conf/train.yaml and the groups below; the run folder is
runs/<dataset>/<date>/ (metrics.json, metrics.jsonl, checkpoints/, samples/, TensorBoard events)."""

EXAMPLES = [
    ("ganlab-train", "the default: ring of 8 Gaussians, MLP G and D"),
    ("ganlab-train dataset=grid25 'strategy=[wgan_gp]' trainer.steps=2000 seed=1", ""),
    ("ganlab-train experiment=fashion_mnist_dcgan", "a preset that sets several groups"),
    ("ganlab-train 'strategy=[minibatch_discrimination,ema]' strategy.ema.beta=0.99", ""),
    ("ganlab-train preflight=true", "a short dry run: pass/fail table, then exit"),
    ("ganlab-train trainer.resume=runs/ring8/<date> trainer.steps=10000", "continue a run to 10,000 steps in all"),
    ("ganlab-train -m 'strategy=[],[wgan_gp]' seed=0,1,2", "a sweep; compare it with ganlab-compare <sweep dir>"),
    ("ganlab-train --cfg job", "print the composed config and exit"),
]

FOOTER = """Any key of the composed config can be set with key=value (see it with --cfg job, e.g. trainer.steps,
optim.generator.lr, metrics.num_samples); a group's option file is conf/<group>/<option>.yaml. A list value
('strategy=[a,b]') goes in single quotes, which zsh needs. Hydra's own flags and help: ganlab-train --hydra-help."""

_DEFAULT = re.compile(r"^\s*-\s*(?P<group>[\w/]+):\s*(?P<default>[^#]*?)\s*(#\s*(?P<note>.*))?$")
_KEY = re.compile(r"^(?P<key>\w+):\s*(?P<value>[^#]*?)\s*(#\s*(?P<note>.*))?$")


def options(config_dir: Path, group: str) -> list[str]:
    """The options of a config group: the stems of ``<config_dir>/<group>/*.yaml``, sorted."""
    return sorted(p.stem for p in (config_dir / group).glob("*.yaml"))


def _groups(train_yaml: list[str]) -> list[tuple[str, str, str]]:
    """``(group, default, note)`` of each group in the defaults list of ``train.yaml``."""
    found = []
    for line in train_yaml:
        m = _DEFAULT.match(line)
        if m and m["group"] != "_self_":
            found.append((m["group"], m["default"].strip() or "-", (m["note"] or "").strip()))
    return found


def _keys(train_yaml: list[str]) -> list[tuple[str, str, str]]:
    """``(key, default, note)`` of the top-level keys of ``train.yaml`` set there (not the groups' nodes)."""
    found: list[tuple[str, str, str]] = []
    for line in train_yaml:
        m = _KEY.match(line)
        if m and m["key"] not in ("defaults", "hydra", "strategy", "debug"):
            found.append((m["key"], m["value"].strip(), (m["note"] or "").strip()))
        elif found and not m and re.match(r"^\s{8,}#", line):  # a comment continued on the next line
            key, value, note = found[-1]
            found[-1] = (key, value, f"{note} {line.strip().lstrip('#').strip()}")
    return found


def yaml_settings(path: Path) -> list[tuple[str, str]]:
    """``("key [default]", comment)`` of every setting of a flat YAML such as ``conf/sample.yaml`` (a nested key as
    ``parent.key``), for :func:`rows`; the comments are the YAML's own, so the page follows the file."""
    out, parent = [], ""
    for line in path.read_text().splitlines():
        indent = len(line) - len(line.lstrip())
        m = _KEY.match(line.strip())
        if not m or line.lstrip().startswith("#"):
            continue
        if indent == 0:
            parent = ""
        if not m["value"] and not m["note"]:  # a group of settings: its keys follow, indented
            parent = m["key"]
            continue
        key = f"{parent}.{m['key']}" if parent and indent else m["key"]
        out.append((f"{key} [{m['value']}]", (m["note"] or "").strip()))
    return out


def train_help(config_dir: Path) -> str:
    """The text of ``ganlab-train --help`` for the configs in ``config_dir``."""
    lines = (config_dir / "train.yaml").read_text().splitlines()
    groups = []
    for group, default, note in _groups(lines):
        groups.append(f"  {group} [{default}]{': ' + note if note else ''}")
        groups.append(textwrap.fill(", ".join(options(config_dir, group)), WIDTH, initial_indent=" " * 6,
                                    subsequent_indent=" " * 6))
        for sub in sorted(p.name for p in (config_dir / group).iterdir() if p.is_dir()):
            groups.append(f"    {group}/{sub}: {', '.join(options(config_dir, f'{group}/{sub}'))}")
    launchers = options(config_dir, "hydra/launcher")
    if launchers:
        groups.append(f"  hydra/launcher (sweeps): basic, joblib, submitit_local, submitit_slurm, "
                      f"{', '.join(launchers)}")
    keys = [textwrap.fill(f"{key} [{value}]{': ' + note if note else ''}", WIDTH, initial_indent="  ",
                          subsequent_indent=" " * 6) for key, value, note in _keys(lines)]
    keys += ["  strategy.<name>.<key>: a setting of a selected strategy (e.g. strategy.wgan_gp.lambda_gp=5)",
             "  debug.fail_at_step, debug.inject_nan_at_step: fault injection for tests (null = off)"]
    return page(USAGE, ABOUT, EXAMPLES, [("config groups (group=option; default in brackets)", groups),
                                         ("top-level keys (key=value; default in brackets)", keys)], FOOTER)
