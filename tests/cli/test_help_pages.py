"""The ``--help`` pages of the commands: one layout (usage, what the command does, examples, options), each printed by
the command itself, and every example on them a command that runs: parsed by the command's own parser and its
settings composed and checked as the command will (nothing is trained), quoted so that zsh takes it as typed."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable

import pytest
from hydra import compose, initialize_config_dir
from hydra._internal.utils import get_args_parser
from omegaconf import OmegaConf
from shell_words import PLACEHOLDER, unquoted_globs
from tiny_config import compose_cfg

from ganlab import CONFIG_DIR
from ganlab.cli import compare, evaluate, sample
from ganlab.cli import study as study_cli
from ganlab.cli.help import WIDTH, examples_of, page, rows, train_help
from ganlab.cli.train import check_arguments
from ganlab.config.check import check_command_line
from ganlab.config.compose import compose_stored
from ganlab.metrics.directions import score_directions


def pages() -> dict[str, str]:
    return {"ganlab-train": train_help(CONFIG_DIR), "ganlab-eval": evaluate.HELP, "ganlab-sample": sample.HELP,
            "ganlab-compare": compare.help_page(compare.parser()), "ganlab-study": study_cli.usage()}


def printed(main: Callable[[], object], capsys: pytest.CaptureFixture) -> str:
    with pytest.raises(SystemExit) as stop:
        main()
    assert stop.value.code in (0, None)
    return capsys.readouterr().out


def test_each_command_prints_its_page(capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    want = pages()
    assert printed(lambda: check_arguments(["--help"]), capsys) == want["ganlab-train"]
    assert printed(lambda: evaluate.main(["--help"]), capsys) == want["ganlab-eval"]
    assert printed(lambda: sample.main(["-h"]), capsys) == want["ganlab-sample"]
    assert printed(lambda: compare.main(["runs", "--help"]), capsys) == want["ganlab-compare"]
    monkeypatch.setattr(sys, "argv", ["ganlab-study", "--help"])
    assert printed(study_cli.main, capsys) == want["ganlab-study"]


@pytest.mark.parametrize("name", list(pages()))
def test_the_pages_share_one_layout(name: str) -> None:
    text = pages()[name]
    lines = text.splitlines()
    assert lines[0].startswith(f"usage: {name} ") and "\nexamples:\n" in text
    assert max(len(line) for line in lines) <= WIDTH + 4 and len(lines) < 80
    assert "schema" not in text  # no internal ConfigStore groups
    examples = examples_of(text)
    assert len(examples) >= 5 and all(e.split()[0] == name for e in examples)


def test_the_layout_by_hand() -> None:
    assert rows([("a", "one"), ("bbb", "two")]) == ["  a    one", "  bbb  two"]
    long = "x" * 60
    assert rows([("a", "one"), (long, "two")]) == ["  a" + " " * 51 + "  one", f"  {long}", " " * 56 + "two"]
    text = page(["cmd [x]"], "Does things.", [("cmd a=1", "first"), ("cmd 'b=[1,2]'", "")], [("options", ["  -h"])])
    assert text == ("usage: cmd [x]\n\nDoes things.\n\nexamples:\n  cmd a=1        first\n  cmd 'b=[1,2]'\n\n"
                    "options:\n  -h\n")
    assert examples_of(text) == ["cmd a=1", "cmd 'b=[1,2]'"]


def _train(args: list[str]) -> None:
    parsed = get_args_parser().parse_args(args)
    check_command_line(parsed.overrides, multirun=parsed.multirun)


def _eval(args: list[str]) -> None:
    path, *overrides = args
    data = "digits" if "digits" in path else "ring8"
    compose_stored(compose_cfg([f"dataset={data}"] + (["model=dcgan"] if data == "digits" else [])), overrides)


def _sample(args: list[str]) -> None:
    path, *overrides = args
    assert path and sample.load_settings(overrides)


def _compare(args: list[str]) -> None:
    parsed = compare.parser().parse_args(args)
    names = [k for arg in parsed.keys or [] for k in arg.split(",") if k]
    assert set(names) <= set(score_directions()) | {"all"}, names


def _study(args: list[str]) -> None:
    if args[0] == "blocks":
        assert set(args[1:]) <= {"--check"}
        return
    overrides = study_cli.hydra_argv(args)
    hydra = any(o.startswith("hydra") for o in overrides)
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3", job_name="help_check"):
        cfg = compose("ganlab_study", overrides=overrides, return_hydra_config=hydra)
    assert cfg.action in study_cli.ACTIONS
    OmegaConf.to_object(cfg.study)  # typed by the study schema


CHECKS = {"ganlab-train": _train, "ganlab-eval": _eval, "ganlab-sample": _sample, "ganlab-compare": _compare,
          "ganlab-study": _study}


@pytest.mark.parametrize(("name", "example"), [(n, e) for n, text in pages().items() for e in examples_of(text)])
def test_every_example_runs(name: str, example: str) -> None:
    assert not unquoted_globs(example), f"quote {unquoted_globs(example)} (zsh reads brackets as a pattern)"
    words = shlex.split(PLACEHOLDER.sub("PLACEHOLDER", example))
    assert words[0] == name
    CHECKS[name](words[1:])
