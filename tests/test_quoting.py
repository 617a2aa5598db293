"""Every command ganlab prints gives Hydra the folder it names, whatever the folder's name (issue 44): each
printed line is split as bash and zsh split it, and each override is read by Hydra's own parser."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import open_dict

from ganlab import CONFIG_DIR, layout
from ganlab.quoting import hydra_override, hydra_value, override_word, shell_join

#: Folder names Hydra's grammar or a shell would misread unquoted.
AWKWARD = ["run a b", "run=x", "run,x", "run [a]", "it's", "back\\", "a\\'b", "naïve", "null", "$HOME!`x`", 'say "hi"',
           "~tilde", "{a}", "100"]


def shell_words(line: str, shell: str = "bash") -> list[str]:
    """The words ``shell`` hands the program of the pasted ``line`` (the program word itself left out)."""
    out = subprocess.run([shell, "-c", f"printf '%s\\0' {line}"], capture_output=True, check=True)
    return out.stdout.decode().split("\0")[:-1]


def hydra_values(words: list[str]) -> dict[str, object]:
    """``{key: value}`` of the ``key=value`` words, as Hydra's override parser reads them."""
    parsed = OverridesParser.create().parse_overrides([w for w in words if "=" in w and not w.startswith("-")])
    return {o.key_or_group: o.value() for o in parsed}


@pytest.mark.parametrize("name", AWKWARD)
def test_a_quoted_override_reads_back_as_the_same_string_in_bash_and_zsh(name: str) -> None:
    for key in ("hydra.run.dir", "++trainer.resume"):
        line = shell_join([hydra_override(key, f"/r/{name}")])
        assert shell_words(line) == shell_words(line, "zsh") == shlex.split(line)
        (override,) = OverridesParser.create().parse_overrides(shlex.split(line))
        assert override.value() == f"/r/{name}" and not override.is_sweep_override()
    (word,) = shlex.split(override_word("strategy.diffaugment.policy", name))
    assert hydra_values([word]) == {"strategy.diffaugment.policy": name}


def test_a_plain_value_stays_bare_and_a_typed_one_is_quoted() -> None:
    assert hydra_value("/runs/ring8/2026-01-01_10-00-00") == "/runs/ring8/2026-01-01_10-00-00"
    assert [hydra_value(v) for v in ("null", "true", "1e3", "-1")] == ["'null'", "'true'", "'1e3'", "'-1'"]
    assert override_word("strategy.diffaugment.policy", "color,translation") == \
        "\"strategy.diffaugment.policy='color,translation'\""


def multirun_config(sweep_dir: Path, task: list[str], hydra: list[str]):
    """A multirun's composed config, as SweepSummary sees it when the sweep starts."""
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose("train", return_hydra_config=True)  # compose runs no sweep: the overrides are set as typed
    with open_dict(cfg):
        cfg.hydra.sweep.dir = str(sweep_dir)
        cfg.hydra.overrides.task = task
        cfg.hydra.overrides.hydra = [*hydra, f"hydra.sweep.dir={hydra_value(str(sweep_dir))}", "hydra.mode=MULTIRUN"]
    return cfg


@pytest.mark.parametrize("name", ["sweep [a] b=c,d", "it's", "back\\"])
def test_the_whole_sweep_command_gives_hydra_the_sweep_folder_and_the_same_sweep(tmp_path: Path, name: str) -> None:
    from ganlab.cli.sweep import sweep_resume_command

    sweep_dir = tmp_path / name
    task = ["seed=0,1", "strategy=[]", "++trainer.steps=40", "+extra='a,b'", "trainer.resume=/old"]
    line = sweep_resume_command(multirun_config(sweep_dir, task, ["hydra/launcher=basic"]))
    program, *words = shlex.split(line)
    assert Path(program).name == "ganlab-train" and words[0] == "-m"
    assert shell_words(line.split(" ", 1)[1]) == shell_words(line.split(" ", 1)[1], "zsh") == words
    assert words[1:] == ["hydra/launcher=basic", *task[:-1], "trainer.resume=auto",
                         hydra_override("hydra.sweep.dir", str(sweep_dir))]  # the sweep as typed, no hydra.mode
    parsed = OverridesParser.create().parse_overrides(words[1:])
    assert {o.key_or_group: o.value() for o in parsed}["hydra.sweep.dir"] == str(sweep_dir)
    assert [o.key_or_group for o in parsed if o.is_sweep_override()] == ["seed"]  # the folder's comma sweeps nothing


@pytest.mark.parametrize("name", ["run a b", "x=y,z", "it's"])
def test_the_run_commands_and_advice_give_hydra_the_folder(tmp_path: Path, name: str) -> None:
    from ganlab.cli.train import resume_command, start_command
    from ganlab.run.session import RunFolderTaken, claim_folder
    from ganlab.trainer.checkpoint import find_checkpoint

    run = tmp_path / name
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose("train", overrides=["seed=3", "strategy=[]"], return_hydra_config=True)
    HydraConfig.instance().set_config(cfg)
    for line in (resume_command(run), start_command(run)):
        _, *words = shlex.split(line)
        assert shell_words(line.split(" ", 1)[1]) == words
        values = hydra_values(words)
        assert values["hydra.run.dir"] == str(run) and values.get("trainer.resume", str(run)) == str(run)
        assert values["seed"] == 3 and values["strategy"] == []
    (run / layout.CHECKPOINT_DIR).mkdir(parents=True)
    (run / layout.CHECKPOINT_DIR / "step_0000001.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(RunFolderTaken) as refused:
        claim_folder(run, None)
    advice = str(refused.value).rsplit("continue that run: ", 1)[1]
    assert hydra_values(shlex.split(advice)) == {"trainer.resume": str(run), "hydra.run.dir": str(run)}
    with pytest.raises(ValueError) as corrupt:
        find_checkpoint(run / layout.CHECKPOINT_DIR / "step_0000001.pt")
    hint = str(corrupt.value).rsplit("; ", 1)[1].removesuffix(" takes the newest intact checkpoint of that run")
    assert hydra_values(shlex.split(hint)) == {"trainer.resume": str(run)}
