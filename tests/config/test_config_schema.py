"""Typed configuration (issue 14 part 6): the schemas of conf/ and the messages for a bad key, type or strategy.

Each issue item has a test here with the exact answer, and the advice each answer gives is followed and must work.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
import shlex
import subprocess
import sys
import typing
from pathlib import Path

import pytest
import torch
from hydra.errors import ConfigCompositionException
from hydra.utils import get_object
from omegaconf import OmegaConf
from tiny_config import compose_cfg

from ganlab import CONFIG_DIR
from ganlab.callbacks.detector import DetectorConfig
from ganlab.config.check import ConfigError, _variants, check_command_line
from ganlab.config.run import check_config
from ganlab.config.schema import HYDRA_KEYS, schema_of, strategy_schema, strategy_targets
from ganlab.run.build import build_trainer, make

STRATEGIES = ("ada, d_lr_damping, diffaugment, ema, minibatch_discrimination, minibatch_stddev, mode_seeking, "
              "pacgan, r1, rollback, spectral_norm, ttur, unrolled, wgan_gp")
TRAINER_KEYS = ("steps, batch_size, n_critic, update, accumulate, eval_every, ckpt_every, log_every, grid_size, "
                "resume, progress, projector, precision, compile, channels_last, fused_optim, distributed, "
                "dist_timeout_s, sync_batchnorm, ensemble, ensemble_workers")


def refused(*overrides: str, multirun: bool = False) -> str:
    with pytest.raises(ConfigError) as err:
        check_command_line(list(overrides), multirun=multirun)
    return str(err.value)


# ------------------------------------------------------------------ the items, with their exact answers
def test_a_strategy_name_given_as_a_strategy_s_settings() -> None:
    assert refused("strategy=[r1]", "strategy.r1=wgan_gp") == (
        "strategy.r1=wgan_gp: strategy.r1 holds the settings of strategy r1 (gamma, interval), not a value; to use "
        "wgan_gp "
        "as well, list it: 'strategy=[r1,wgan_gp]'; to change a setting: strategy.r1.<key>=<value> "
        "(e.g. strategy.r1.gamma=...)")
    check_command_line(["strategy=[r1,wgan_gp]"])  # the advice works
    assert list(compose_cfg(["strategy=[r1,wgan_gp]"]).strategy) == ["r1", "wgan_gp"]


def test_model_conditional_as_a_word_is_refused_before_a_sweep_starts() -> None:
    assert refused("model=dcgan", "model.conditional=no") == (
        "model.conditional=no: model.conditional must be true or false, got 'no'")
    assert refused("model=dcgan", "model.conditional=true,no", multirun=True) == (
        "model.conditional=no: model.conditional must be true or false, got 'no'")
    check_command_line(["model=dcgan", "model.conditional=true,false"], multirun=True)  # the advice works


def test_a_word_for_a_number() -> None:
    assert refused("strategy=[wgan_gp]", "strategy.wgan_gp.lambda_gp=abc") == (
        "strategy.wgan_gp.lambda_gp=abc: strategy.wgan_gp.lambda_gp must be a number, got 'abc'")


def test_a_fraction_for_an_integer_is_refused_not_truncated() -> None:
    assert refused("trainer.eval_every=2.5") == "trainer.eval_every=2.5: trainer.eval_every must be an integer, got 2.5"
    with pytest.raises(ConfigCompositionException):  # OmegaConf refuses it while composing, whoever composes
        compose_cfg(["trainer.eval_every=2.5"])


def test_a_word_for_an_integer_names_the_key() -> None:
    assert refused("trainer.steps=abc") == "trainer.steps=abc: trainer.steps must be an integer, got 'abc'"
    assert refused("trainer.steps=null") == "trainer.steps=null: trainer.steps must be an integer, got null"



def test_an_optional_setting_written_with_a_bar_says_its_type() -> None:
    """``int | None`` (PEP 604) annotations were answered "must be a value" (only ``Optional[int]`` was read)."""
    assert refused("trainer.ensemble=two") == (
        "trainer.ensemble=two: trainer.ensemble must be an integer or null, got 'two'")
    assert refused("monitor.clip=abc") == "monitor.clip=abc: monitor.clip must be a number or null, got 'abc'"
    check_command_line(["trainer.ensemble=2", "monitor.clip=1.0"])  # the types named, followed


@pytest.mark.parametrize(("overrides", "message", "advice"), [
    (["model=dcgan", "dataset=digits", "model.generator.width=abc"],  # was: Hydra's TypeError, a FAILED folder
     "model.generator.width must be an integer, got 'abc'", "model.generator.width=16"),
    (["model=resnet", "dataset=digits", "model.discriminator.spectral_norm=no"],  # was: 'no' switched it on
     "model.discriminator.spectral_norm must be true or false, got 'no'", "model.discriminator.spectral_norm=false"),
    (["dataset=grid25", "dataset.std=x"], "dataset.std must be a number, got 'x'", "dataset.std=0.1"),
    (["model=dcgan", "dataset=digits", "dataset.image_size=2.5"], "dataset.image_size must be an integer, got 2.5",
     "dataset.image_size=16"),
])
def test_untyped_nodes_values_are_checked_against_their_targets(overrides: list[str], message: str,
                                                                 advice: str) -> None:
    """dataset, model.*, loss, metrics nodes have no schema; their true/false, integer and number keys are checked
    against the ``_target_``'s annotations by check_config, before anything is built."""
    with pytest.raises(ConfigError, match=message):
        check_config(compose_cfg(overrides))
    assert refused(*overrides) == message  # ganlab-train's check before Hydra starts
    check_config(compose_cfg([*overrides[:-1], advice]))  # the type named, followed


def test_untyped_values_of_a_sweep_are_checked_before_any_job() -> None:
    assert refused("model=dcgan", "dataset=digits", "model.generator.width=8,abc", multirun=True) == (
        "model.generator.width must be an integer, got 'abc'")


@pytest.mark.slow  # ~30 s: one composition per option
def test_every_shipped_option_passes_the_target_value_check() -> None:
    """No false alarm on the YAML as shipped: every option of the untyped groups and every experiment."""
    from ganlab.config.check import check_target_values

    for group in ("dataset", "model", "loss", "metrics/embedder", "experiment"):
        for f in sorted((Path(CONFIG_DIR) / group).glob("*.yaml")):
            images = ["dataset=digits"] if group == "model" and f.stem in ("dcgan", "resnet") else []
            check_target_values(compose_cfg([f"{group}={f.stem}", *images], tiny=False))

def test_a_typo_gets_did_you_mean_and_no_plus_advice() -> None:
    answer = f"trainer.step is not a setting of trainer; did you mean trainer.steps? trainer takes: {TRAINER_KEYS}"
    assert refused("trainer.step=10") == f"trainer.step=10: {answer}"
    assert refused("+trainer.step=10") == answer  # what Hydra's own advice led to
    check_command_line(["trainer.steps=10"])  # the advice works


def test_the_plus_typo_fails_before_training_on_the_start_error_path(tmp_path: Path) -> None:
    cfg = compose_cfg(["logger=none", "+trainer.step=10"])  # composes (Hydra adds a key with +) ...
    with pytest.raises(ValueError, match=r"did you mean trainer\.steps\?"):  # ... a TypeError in the loop before
        build_trainer(cfg, tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_an_unknown_strategy_lists_the_strategies() -> None:
    assert refused("strategy=[wgan]") == (f"there is no strategy wgan; did you mean wgan_gp? the strategies: "
                                          f"{STRATEGIES} (choose with 'strategy=[name,...]')")
    assert refused("strategy=[ema,nothing_alike]") == (f"there is no strategy nothing_alike; the strategies: "
                                                       f"{STRATEGIES} (choose with 'strategy=[name,...]')")
    check_command_line(["strategy=[wgan_gp]"])


def test_a_top_level_key_is_checked_with_and_without_plus() -> None:
    named = ("lr is not a setting of ganlab{}; the settings named lr: optim.generator.lr, optim.discriminator.lr; "
             "set the one you mean, e.g. optim.generator.lr=1e-3")
    assert refused("lr=1e-3") == "lr=1e-3: " + named.format("")
    assert refused("+lr=1e-3") == "+lr=1e-3: " + named.format(" (a + adds a key nothing reads)")
    assert refused("++lr=1e-3").startswith("++lr=1e-3: lr is not a setting of ganlab (a + adds")
    assert refused("seed=0,1", "+lr=1e-3,2e-3", multirun=True).startswith("+lr=1e-3,2e-3: lr is not a setting")
    check_command_line(["optim.generator.lr=1e-3", "optim.discriminator.lr=1e-3"])  # the advice works
    assert compose_cfg(["optim.generator.lr=1e-3"]).optim.generator.lr == 1e-3
    with pytest.raises(ConfigError, match=r"^\+lr=0.001: lr is not a setting"):  # a config composed in Python
        check_config(compose_cfg(["+lr=1e-3"]))


def test_top_level_near_misses_name_the_settings_that_exist() -> None:
    assert refused("+seeed=1").startswith("+seeed=1: seeed is not a setting of ganlab (a + adds a key nothing "
                                          "reads); did you mean seed? (top level: dataset, model, loss, optim,")
    assert refused("stpes=10") == ("stpes=10: stpes is not a setting of ganlab; the settings closest to stpes: "
                                   "trainer.steps, monitor.preflight.steps; set the one you mean, e.g. "
                                   "trainer.steps=10")
    assert refused("+gamma=3") == ("+gamma=3: gamma is not a setting of ganlab (a + adds a key nothing reads); the "
                                   "settings named gamma: strategy.r1.gamma (with 'strategy=[r1]')")
    check_command_line(["strategy=[r1]", "strategy.r1.gamma=3"])  # that advice works too
    assert refused("from_step=0") == ("from_step=0: from_step is not a setting of ganlab; the settings named "
                                      "from_step: callbacks.collapse_detector.from_step; set it, e.g. "
                                      "callbacks.collapse_detector.from_step=0")  # a default callback's key
    check_command_line(["callbacks.collapse_detector.from_step=0"])


def test_a_plus_key_inside_an_untyped_node_is_checked_against_its_target() -> None:
    assert refused("model=dcgan", "dataset=digits", "+model.generator.widht=8") == (
        "model.generator.widht is not a setting of model.generator; did you mean model.generator.width? "
        "model.generator takes: data_shape, z_dim, width, num_classes")  # was: Hydra's TypeError when building
    assert refused("+dataset.stdd=0.1").startswith("dataset.stdd is not a setting of dataset; did you mean "
                                                   "dataset.std? dataset takes: num_modes, radius, std,")
    check_command_line(["model=dcgan", "dataset=digits", "model.generator.width=8"])  # the advice works


POLICY = "strategy.diffaugment.policy"
QUOTED = "\"strategy.diffaugment.policy='color,translation'\""  # one shell word; Hydra reads one string


def test_a_comma_in_a_string_setting_gets_the_quoting_that_works() -> None:
    assert refused("strategy=[diffaugment]", f"{POLICY}=color,translation") == (
        f"{POLICY}=color,translation: a comma separates the values of a sweep (-m); for the one string "
        f"'color,translation', quote it for both the shell and Hydra: {QUOTED}")
    assert refused("strategy=[diffaugment]", f"{POLICY}=[color,translation]") == (
        f"{POLICY}=[color,translation]: {POLICY} must be a string, got ['color', 'translation']; for several names "
        f"in one string, quote it: {QUOTED}")
    (followed,) = shlex.split(QUOTED)  # the advice as a shell passes it on
    check_command_line(["strategy=[diffaugment]", followed])
    check_command_line(["strategy=[diffaugment]", followed], multirun=True)
    assert compose_cfg(["strategy=[diffaugment]", followed]).strategy.diffaugment.policy == "color,translation"


def test_a_sweep_never_splits_a_comma_separated_setting_silently() -> None:
    assert refused("strategy=[diffaugment]", f"{POLICY}=color,translation", multirun=True) == (
        f"{POLICY}=color,translation: under -m the commas would split {POLICY}, a comma-separated list in one "
        f"string, into one job per name ({POLICY}=color, {POLICY}=translation); for one job with all of them "
        f"quote it: {QUOTED}; for that sweep say so: '{POLICY}=choice(color,translation)'")
    (explicit,) = shlex.split(f"'{POLICY}=choice(color,translation)'")
    check_command_line(["strategy=[diffaugment]", explicit], multirun=True)  # that advice works too
    check_command_line(["dataset=ring8,grid25", "seed=0,1"], multirun=True)  # other sweeps are sweeps


def test_every_combination_of_swept_groups_is_checked_and_named() -> None:
    variants = _variants(["model=mlp,dcgan", "dataset=ring8,digits", "seed=0,1", "trainer.steps=3"], True)
    assert [swept for _, swept in variants] == [["model=mlp", "dataset=ring8"], ["model=mlp", "dataset=digits"],
                                                ["model=dcgan", "dataset=ring8"], ["model=dcgan", "dataset=digits"],
                                                ["model=mlp", "dataset=ring8"]]  # the last: seed=1
    assert variants[-1][0] == ["trainer.steps=3", "model=mlp", "dataset=ring8", "seed=1"]
    assert refused("model=dcgan,mlp", "model.generator.width=8", multirun=True) == (
        "model.generator.width=8: model.generator.width is not a setting of model.generator; model.generator takes: "
        "z_dim, hidden, batch_norm (in the sweep's jobs with model=mlp)")
    check_command_line(["model=dcgan,resnet", "model.generator.width=8"], multirun=True)


# ------------------------------------------------------------------ the other answers, and their advice
def test_setting_a_strategy_that_is_not_selected() -> None:
    assert refused("strategy=[ema]", "strategy.r1.gamma=3") == (
        "strategy.r1.gamma=3: strategy r1 is not selected; select it: 'strategy=[ema,r1]' strategy.r1.gamma=3")
    check_command_line(["strategy=[ema,r1]", "strategy.r1.gamma=3"])
    assert refused("strategy.emma.beta=0.9").startswith(
        "strategy.emma.beta=0.9: there is no strategy emma; did you mean ema?")


def test_an_optimiser_keyword_missing_from_the_yaml_is_added_with_plus() -> None:
    assert refused("optim.generator.weight_decay=0.01") == (
        "optim.generator.weight_decay=0.01: optim.generator.weight_decay is not in the YAML, but torch.optim.Adam "
        "takes it: add it with +optim.generator.weight_decay=0.01")
    check_command_line(["+optim.generator.weight_decay=0.01"])  # the advice works ...
    opt = make(compose_cfg(["+optim.generator.weight_decay=0.01"]).optim.generator)([torch.zeros(1)])
    assert opt.param_groups[0]["weight_decay"] == 0.01  # ... and reaches the optimiser
    assert refused("+optim.generator.wd=0.01") == ("optim.generator.wd is not a setting of optim.generator; "
                                                   "optim.generator takes: lr, betas")


def test_nested_and_untyped_nodes_and_other_groups() -> None:
    assert refused("callbacks.collapse_detector.patiense=3").endswith(
        "did you mean callbacks.collapse_detector.patience? callbacks.collapse_detector takes: coverage_fraction, "
        "similarity_threshold, duplicate_threshold, drop_fraction, min_rise, patience, from_step")
    assert refused("callbacks.collapse_risk.weights.d_gap=abc") == (
        "callbacks.collapse_risk.weights.d_gap=abc: callbacks.collapse_risk.weights.d_gap must be a number, got 'abc'")
    assert refused("strategy=[wgan_gp]", "strategy.wgan_gp.betas=0.5") == (
        "strategy.wgan_gp.betas=0.5: strategy.wgan_gp.betas must be a list of numbers or null, got 0.5")
    assert "did you mean dataset.std?" in refused("dataset.stdd=0.1")  # a group without a schema: its YAML's keys
    assert refused("dataset=ring9").startswith("there is no dataset ring9; did you mean dataset=ring8? the options "
                                               "of dataset: cifar10, digits,")


def test_every_value_of_a_sweep_is_checked() -> None:
    assert refused("seed=0,1", "trainer.steps=5,x", multirun=True) == ("trainer.steps=x: trainer.steps must be an "
                                                                        "integer, got 'x'")
    check_command_line(["seed=0,1", "strategy=[],[r1]", "trainer.steps=5,6"], multirun=True)


def test_every_job_of_a_sweep_gets_the_run_checks_before_launch() -> None:
    """``ganlab-train`` passes check_config: a value only the run's checks refuse (a negative lr, steps <= 0) stops
    the sweep before its first job; the message names the key and the value, and the sweep without it passes."""
    with pytest.raises(ConfigError, match=r"^optim\.generator\.lr must be positive, got -1\.0$"):
        check_command_line(["optim.generator.lr=-1,0.0002"], multirun=True, check=check_config)
    with pytest.raises(ConfigError, match=r"^trainer\.steps must be a positive integer, got 0"):
        check_command_line(["seed=0,1", "trainer.steps=5,0"], multirun=True, check=check_config)
    check_command_line(["optim.generator.lr=0.001,0.0002", "trainer.steps=5,6"], multirun=True, check=check_config)
    check_command_line(["optim.generator.lr=-1,0.0002"], multirun=True)  # without the run's checks: types only


def test_frozen_runtime_dataclasses_become_writable_schemas() -> None:
    schema = schema_of(DetectorConfig)
    assert schema is not DetectorConfig and not schema.__dataclass_params__.frozen
    assert [(f.name, f.default) for f in dataclasses.fields(schema)] == \
        [(f.name, f.default) for f in dataclasses.fields(DetectorConfig)]
    assert compose_cfg(["callbacks.collapse_detector.patience=5"]).callbacks.collapse_detector.patience == 5


# ------------------------------------------------------------------ the schemas cannot drift from the code
@pytest.mark.parametrize("name", sorted(strategy_targets(CONFIG_DIR)))
def test_every_strategy_schema_is_its_constructor(name: str) -> None:
    cls = get_object(strategy_targets(CONFIG_DIR)[name])
    schema = strategy_schema(cls)
    params = {n: p for n, p in list(inspect.signature(cls.__init__).parameters.items())[1:]}
    fields = {f.name: f for f in dataclasses.fields(schema) if f.name not in HYDRA_KEYS}
    assert list(fields) == list(params)  # exactly the keyword arguments, in order
    cfg = compose_cfg([f"strategy=[{name}]"])
    node = cfg.strategy[name]
    assert OmegaConf.get_type(node) is schema  # the YAML names its schema
    yaml_node = OmegaConf.load(CONFIG_DIR / "strategy" / f"{name}.yaml")[name]
    assert sorted(node) == sorted(yaml_node)  # the schema adds no key to what the YAML sets (saved configs unchanged)
    hints = typing.get_type_hints(schema)
    wrong = {int: "not-a-number", float: "not-a-number", typing.Optional[float]: "not-a-number", bool: "maybe"}
    checked = [key for key in fields if hints[key] in wrong]  # (OmegaConf turns any scalar into a string)
    assert checked, "every strategy has a number or a flag to check"
    for key in checked:  # a wrong type for each of them is refused, naming the key
        with pytest.raises(ConfigError, match=rf"strategy\.{name}\.{key} must be"):
            check_command_line([f"strategy=[{name}]", f"strategy.{name}.{key}={wrong[hints[key]]}"])


def test_every_trainer_monitor_and_optim_key_of_the_yaml_is_in_the_schema() -> None:
    cfg = compose_cfg([], tiny=False)
    for group in ("trainer", "monitor", "optim"):
        assert OmegaConf.get_type(cfg[group]) is not dict, group


# ------------------------------------------------------------------ ganlab-train as a user runs it
def test_the_command_prints_one_line_and_makes_no_run_folder(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "ganlab.cli.train", "trainer.step=10", f"hydra.run.dir={tmp_path / 'run'}"]
    env = {k: v for k, v in os.environ.items() if k != "HYDRA_FULL_ERROR"} | {"OMP_NUM_THREADS": "1"}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr == f"ganlab-train: trainer.step=10: trainer.step is not a setting of trainer; did you mean " \
                          f"trainer.steps? trainer takes: {TRAINER_KEYS}\n"
    assert not (tmp_path / "run").exists()  # HYDRA_FULL_ERROR=1's traceback: tests/cli/test_cli.py


@pytest.mark.slow  # one more start of ganlab-train (~7 s)
def test_cfg_job_still_prints_the_config(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "ganlab.cli.train", "trainer.steps=7", "--cfg", "job"]
    shown = subprocess.run(cmd, capture_output=True, text=True, env=os.environ | {"OMP_NUM_THREADS": "1"},
                           cwd=tmp_path)
    assert shown.returncode == 0 and "steps: 7" in shown.stdout


def test_a_top_level_typo_is_answered_before_torch_is_imported(tmp_path: Path) -> None:
    cmd = [sys.executable, "-X", "importtime", "-m", "ganlab.cli.train", "+lr=1e-3",
           f"hydra.run.dir={tmp_path / 'run'}"]
    env = {k: v for k, v in os.environ.items() if k != "HYDRA_FULL_ERROR"}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path)
    assert done.returncode == 1 and done.stdout == ""
    imported = [line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time")]
    assert "omegaconf" in imported and "torch" not in imported  # the answer came from the YAML alone
    assert done.stderr.splitlines()[-1].startswith("ganlab-train: +lr=1e-3: lr is not a setting of ganlab")
    assert not (tmp_path / "run").exists()


def test_a_config_pickled_to_another_process_keeps_its_schemas(tmp_path: Path) -> None:
    """Hydra's submitit launcher pickles each job's config; the job's process must find the generated schemas."""
    import pickle

    (tmp_path / "cfg.pkl").write_bytes(pickle.dumps(compose_cfg(["strategy=[r1,wgan_gp]"])))
    code = ("import pickle, sys; from omegaconf import OmegaConf; from ganlab.config.check import check_typed; "
            "c = pickle.load(open(sys.argv[1], 'rb')); check_typed(c); "
            "print(OmegaConf.get_type(c.strategy.r1).__name__, "
            "OmegaConf.get_type(c.callbacks.collapse_detector).__name__)")
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "cfg.pkl")], capture_output=True, text=True,
                          env=os.environ | {"OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["R1Schema", "CollapseDetectorCallbackSchema"]
