"""``ganlab-train --help``: usage, examples, the config groups with their options and the top-level keys, read from
the config folder (so the text follows ``conf/``). Hydra's own help, which also lists the internal schema groups of
the ConfigStore, stays behind ``--hydra-help``."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

USAGE = """\
usage: ganlab-train [group=option ...] [key=value ...]
       ganlab-train -m [group=a,b ...] [key=v1,v2 ...]     (a sweep: one job per combination)

Train one GAN experiment composed from conf/train.yaml and the groups below; the run folder is
runs/<dataset>/<date>/ (metrics.json, metrics.jsonl, checkpoints/, samples/, TensorBoard events).

examples:
  ganlab-train                                         the default: ring of 8 Gaussians, MLP G and D
  ganlab-train dataset=grid25 strategy=[wgan_gp] trainer.steps=2000 seed=1
  ganlab-train experiment=fashion_mnist_dcgan          a preset that sets several groups
  ganlab-train strategy=[minibatch_discrimination,ema] strategy.ema.beta=0.99
  ganlab-train preflight=true                          a short dry run: pass/fail table, then exit
  ganlab-train trainer.resume=runs/ring8/<date>        continue a run from its last checkpoint
  ganlab-train -m strategy=[],[wgan_gp] seed=0,1,2     a sweep; compare it with ganlab-compare <sweep dir>
  ganlab-train --cfg job                               print the composed config and exit
"""

FOOTER = """\
Any key of the composed config can be set with key=value (see it with --cfg job, e.g. trainer.steps,
optim.generator.lr, metrics.num_samples); a group's option file is conf/<group>/<option>.yaml.
Hydra's own flags and help: ganlab-train --hydra-help.
"""

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


def train_help(config_dir: Path) -> str:
    """The text of ``ganlab-train --help`` for the configs in ``config_dir``."""
    lines = (config_dir / "train.yaml").read_text().splitlines()
    out = [USAGE, "config groups (group=option; default in brackets):"]
    for group, default, note in _groups(lines):
        out.append(f"  {group} [{default}]{': ' + note if note else ''}")
        out.append(textwrap.fill(", ".join(options(config_dir, group)), 116, initial_indent=" " * 6,
                                 subsequent_indent=" " * 6))
        for sub in sorted(p.name for p in (config_dir / group).iterdir() if p.is_dir()):
            out.append(f"    {group}/{sub}: {', '.join(options(config_dir, f'{group}/{sub}'))}")
    launchers = options(config_dir, "hydra/launcher")
    if launchers:
        out.append(f"  hydra/launcher (sweeps): basic, joblib, submitit_local, submitit_slurm, {', '.join(launchers)}")
    out += ["", "top-level keys (key=value; default in brackets):"]
    out += [textwrap.fill(f"{key} [{value}]{': ' + note if note else ''}", 116, initial_indent="  ",
                          subsequent_indent=" " * 6) for key, value, note in _keys(lines)]
    out += ["  strategy.<name>.<key>: a setting of a selected strategy (e.g. strategy.wgan_gp.lambda_gp=5)",
            "  debug.fail_at_step, debug.inject_nan_at_step: fault injection for tests (null = off)", "", FOOTER]
    return "\n".join(out)
