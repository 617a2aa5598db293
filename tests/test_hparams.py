"""HParams session and custom-scalars layout written into the run's own event file at the end of a run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig, OmegaConf
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.plugins.custom_scalar import layout_pb2
from tensorboard.plugins.hparams import api_pb2
from tensorboard.plugins.hparams import metadata as hp_metadata
from tensorboard.plugins.hparams.plugin_data_pb2 import HParamsPluginData

from ganlab import CONFIG_DIR
from ganlab.hparams import (
    DIFFERS,
    HPARAM_KEYS,
    SWEPT_KEYS_ENV,
    hparams_summaries,
    metric_tags,
    run_hparams,
    scores_layout,
    strategy_label,
    varied_keys,
)
from ganlab.run.build import build_trainer

TINY = ["device=cpu", "trainer.steps=6", "trainer.batch_size=16", "trainer.eval_every=3", "trainer.ckpt_every=3",
        "trainer.log_every=2", "trainer.grid_size=16", "trainer.progress=false", "metrics.num_samples=200",
        "dataset.num_samples=2000"]


def compose_cfg(overrides: list[str]) -> DictConfig:
    """``train.yaml`` with the TINY overrides, then ``overrides``."""
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        return compose("train", overrides=TINY + overrides)


def test_hparams_row_has_every_key_and_no_none() -> None:
    cfg = compose_cfg(["strategy=[rollback,d_lr_damping]"])
    row = run_hparams(OmegaConf.to_container(cfg, resolve=True), {"dataset": "ring8", "seed": 3,
                                                                  "strategies": ["rollback", "d_lr_damping"]})
    assert tuple(row)[:len(HPARAM_KEYS)] == HPARAM_KEYS and all(isinstance(v, (str, int, float)) for v in row.values())
    assert row["strategy"] == "rollback+d_lr_damping" and row["seed"] == 3 and row["model"] == "MLP"
    assert row["loss"] == "NonSaturating" and row["lr_D"] == pytest.approx(2e-4) and row["z_dim"] == 16
    assert strategy_label([]) == "plain"


def test_integer_hparams_are_written_as_text() -> None:
    # HParams has no integer type and its table prints numbers with toPrecision(5): seed 0 read "0.0000"
    row = {"strategy": "plain", "seed": 0, "batch_size": 64, "steps": 3000, "lr_G": 2e-4}
    exp, start, _ = (HParamsPluginData.FromString(s.value[0].metadata.plugin_data.content)
                     for s in hparams_summaries(row, ["diversity/reverse_kl"]))
    types = {h.name: api_pb2.DataType.Name(h.type) for h in exp.experiment.hparam_infos}
    assert types == {"strategy": "DATA_TYPE_STRING", "seed": "DATA_TYPE_STRING", "batch_size": "DATA_TYPE_STRING",
                     "steps": "DATA_TYPE_STRING", "lr_G": "DATA_TYPE_FLOAT64"}
    values = start.session_start_info.hparams
    assert [values[k].string_value for k in ("seed", "batch_size", "steps")] == ["0", "64", "3000"]
    assert values["lr_G"].number_value == pytest.approx(2e-4)


def test_layout_and_metric_tags_skip_the_data_baseline() -> None:
    scores = {"reverse_kl": 0.1, "modes_covered": 8.0, "data/modes_covered": 8.0, "new_score": 1.0}
    assert metric_tags(scores) == ["diversity/modes_covered", "diversity/reverse_kl", "diversity/new_score"]
    charts = scores_layout(scores)["scores (every run)"]
    assert charts["reverse_kl"] == ["Multiline", ["^diversity/reverse_kl$"]] and len(charts) == 3


def test_run_writes_hparams_into_its_own_event_file(run_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SWEPT_KEYS_ENV, raising=False)  # not a sweep: only DIFFERS is flagged
    cfg = compose_cfg(["strategy=[wgan_gp]", "logger=tensorboard", "seed=2"])
    metrics = build_trainer(cfg, run_dir).fit()
    events = list(run_dir.rglob("events.out.tfevents.*"))
    assert [p.parent for p in events] == [run_dir]  # no sub-run folder (as SummaryWriter.add_hparams would make)
    acc = EventAccumulator(str(run_dir), size_guidance={"tensors": 0})
    acc.Reload()
    content = acc.PluginTagToContent(hp_metadata.PLUGIN_NAME)
    start = hp_metadata.parse_session_start_info_plugin_data(content[hp_metadata.SESSION_START_INFO_TAG])
    assert start.hparams["strategy"].string_value == "wgan_gp" and start.hparams["seed"].string_value == "2"
    assert start.hparams["n_critic"].string_value == "5"  # the effective value, set by the strategy
    assert start.hparams["lr_G"].number_value == pytest.approx(1e-4)  # WGAN-GP's Adam settings
    experiment = hp_metadata.parse_experiment_plugin_data(content[hp_metadata.EXPERIMENT_TAG])
    assert [m.name.tag for m in experiment.metric_infos] == metric_tags(metrics["scores"])
    assert [h.name for h in experiment.hparam_infos][:len(HPARAM_KEYS)] == list(HPARAM_KEYS)
    assert {h.name for h in experiment.hparam_infos if h.differs} == set(DIFFERS)  # shown first in the table
    assert start.hparams["loss"].string_value == "Wasserstein"  # the loss in use, not the configured one
    final = acc.Scalars("diversity/reverse_kl")[-1]  # the HParams metric is the last value of this tag
    assert final.step == 6 and final.value == pytest.approx(metrics["scores"]["reverse_kl"], rel=1e-6)
    layout = layout_pb2.Layout.FromString(acc.Tensors("custom_scalars__config__")[0].tensor_proto.string_val[0])
    assert {c.title for c in layout.category[0].chart} == {t.removeprefix("diversity/")
                                                            for t in metric_tags(metrics["scores"])}
    assert json.loads((run_dir / "metrics.json").read_text())["strategies"] == ["wgan_gp"]


def test_two_runs_differing_only_in_a_nested_list_key_differ_in_hparams(tmp_path: Path) -> None:
    """``model.generator.hidden=[64,64]`` against the default [128, 128, 128]: the HParams rows differ in that key
    (as its text) and in no other, also as read back from the event files by TensorBoard's reader."""
    from torch.utils.tensorboard import SummaryWriter

    rows = {}
    for name, extra in (("narrow", ["model.generator.hidden=[64,64]"]), ("default", [])):
        cfg = OmegaConf.to_container(compose_cfg(extra), resolve=True)
        row = run_hparams(cfg, {"dataset": "ring8", "seed": 0, "strategies": []})
        writer = SummaryWriter(str(tmp_path / name))
        for summary in hparams_summaries(row, ["diversity/reverse_kl"]):
            writer.file_writer.add_summary(summary)
        writer.close()
        acc = EventAccumulator(str(tmp_path / name))
        acc.Reload()
        content = acc.PluginTagToContent(hp_metadata.PLUGIN_NAME)
        rows[name] = hp_metadata.parse_session_start_info_plugin_data(content[hp_metadata.SESSION_START_INFO_TAG])
    narrow, default = rows["narrow"].hparams, rows["default"].hparams
    assert set(narrow) == set(default) and len(narrow) > len(HPARAM_KEYS)
    assert [k for k in narrow if narrow[k] != default[k]] == ["model.generator.hidden"]
    assert narrow["model.generator.hidden"].string_value == "[64, 64]"
    assert default["model.generator.hidden"].string_value == "[128, 128, 128]"
    assert "model.generator._convert_" not in narrow  # Hydra's flags are no setting


def test_swept_keys_and_the_keys_under_them_are_flagged_as_varying() -> None:
    row = {"strategy": "plain", "seed": "0", "dataset": "ring8", "model.generator.hidden": "[64]",
           "optim.generator.lr": 1e-3, "optim.discriminator.lr": 1e-3, "modelx": "a"}
    assert varied_keys(row, "model,optim.generator.lr") == (*DIFFERS, "model.generator.hidden", "optim.generator.lr")
    exp = HParamsPluginData.FromString(hparams_summaries(row, [], varied_keys(row, "model"))[0].value[0]
                                       .metadata.plugin_data.content)
    assert {h.name for h in exp.experiment.hparam_infos if h.differs} == {*DIFFERS, "model.generator.hidden"}
