"""Every default of the typed config nodes is written once, in the dataclass the run is built from; the node's YAML
names each key (``???``: "the schema's default") with its documentation, and gives no value of its own. The composed
default config is therefore those dataclasses' defaults, and the two cannot drift."""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path
from typing import Any

import pytest
import yaml
from omegaconf import OmegaConf
from tiny_config import compose_cfg

from ganlab import CONFIG_DIR
from ganlab.callbacks.collapse_alarm import AlarmConfig, CollapseAlarmCallback
from ganlab.callbacks.corpus import CorpusRecorder
from ganlab.callbacks.detector import DetectorConfig
from ganlab.callbacks.risk import RiskConfig
from ganlab.health import MonitorConfig
from ganlab.trainer.config import TrainerConfig


def init_defaults(cls: type) -> dict[str, Any]:
    """The defaults of ``cls.__init__``'s keyword arguments."""
    return {n: p.default for n, p in inspect.signature(cls.__init__).parameters.items() if n != "self"}


#: ``(YAML file under conf/, its node's key there (None: the file is the node), where the node composes, the
#: single source of its defaults, keys of the node that are not settings with a default)``.
NODES = [
    ("trainer/default.yaml", None, "trainer", TrainerConfig(), ()),
    ("monitor/default.yaml", None, "monitor", MonitorConfig(), ()),
    ("callbacks/collapse_alarm.yaml", "collapse_alarm", "callbacks.collapse_alarm", AlarmConfig(), ("_target_",)),
    ("callbacks/collapse_detector.yaml", "collapse_detector", "callbacks.collapse_detector", DetectorConfig(),
     ("_target_",)),
    ("callbacks/collapse_risk.yaml", "collapse_risk", "callbacks.collapse_risk", RiskConfig(),
     ("_target_", "_convert_", "every")),
    ("callbacks/collapse_corpus.yaml", "collapse_corpus", "callbacks.collapse_corpus", init_defaults(CorpusRecorder),
     ("_target_",)),
]


def setting_keys(source: Any, prefix: str = "") -> list[str]:
    """The dotted keys of a source of defaults: a dataclass's fields (a nested dataclass's fields below its name; a
    dict-valued field is one setting) or a dict's keys."""
    if not dataclasses.is_dataclass(source):
        return [f"{prefix}{k}" for k in source]
    out = []
    for f in dataclasses.fields(source):
        value = getattr(source, f.name)
        out += setting_keys(value, f"{prefix}{f.name}.") if dataclasses.is_dataclass(value) else [f"{prefix}{f.name}"]
    return out


def leaves(node: Any, prefix: str = "") -> dict[str, Any]:
    """``{dotted key: value}`` of every plain value of a nested dict (a dict value ``???`` is a leaf too)."""
    out: dict[str, Any] = {}
    for key, value in node.items():
        if isinstance(value, dict) and value:
            out |= leaves(value, f"{prefix}{key}.")
        else:
            out[f"{prefix}{key}"] = value
    return out


@pytest.mark.parametrize(("file", "key", "where", "source", "other"), NODES, ids=[n[0] for n in NODES])
def test_each_default_is_written_once_and_composes_as_written(file: str, key: str | None, where: str,
                                                             source: Any, other: tuple[str, ...]) -> None:
    content = yaml.safe_load((Path(CONFIG_DIR) / file).read_text())
    content.pop("defaults")
    written = leaves(content[key] if key else content)
    settings = {k: v for k, v in written.items() if k not in other}
    with_value = {k: v for k, v in settings.items() if v != "???"}
    assert with_value == {}, f"{file} gives values of its own; write them in the dataclass and ??? here"
    assert sorted(settings) == sorted(setting_keys(source)), f"{file} must name every key of its schema, no other"
    cfg = compose_cfg(["callbacks=[default,collapse_corpus]"], tiny=False)
    composed = OmegaConf.to_container(OmegaConf.select(cfg, where), resolve=True)
    expected = dataclasses.asdict(source) if dataclasses.is_dataclass(source) else source
    assert {k: v for k, v in composed.items() if k not in other} == expected


def test_code_that_builds_the_settings_directly_gets_the_shipped_defaults() -> None:
    assert TrainerConfig().steps == 5000 and TrainerConfig().precision == "32"
    assert MonitorConfig().every == 20 and MonitorConfig().preflight.grad_norm_max == 100.0
    assert RiskConfig().threshold == 0.99 and RiskConfig().weights["diversity"] == -1.96
    assert DetectorConfig().from_step == 1000
    assert AlarmConfig() == AlarmConfig(n_z=64, tau=0.9, patience=3)
    alarm = CollapseAlarmCallback()
    assert (alarm.n_z, alarm.tau, alarm.patience) == (64, 0.9, 3)


def test_a_callback_that_follows_another_node_takes_that_node_s_default() -> None:
    """The risk runs on the health monitor's steps: its ``every`` follows ``monitor.every`` (by interpolation in
    the YAML) and, built directly, defaults to :class:`MonitorConfig`'s, never a number of its own."""
    from ganlab.callbacks.risk import CollapseRiskCallback

    assert init_defaults(CollapseRiskCallback)["every"] == MonitorConfig().every
    assert compose_cfg(["monitor.every=7"]).callbacks.collapse_risk.every == 7
