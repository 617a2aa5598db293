"""Each strategy's Python defaults equal its ``conf/strategy/<name>.yaml`` values, and the YAML sets every
constructor argument (issue 15: mutants of the Python defaults survived, since runs always pass the YAML)."""

from __future__ import annotations

import importlib
import inspect
from typing import Any

import pytest
from omegaconf import OmegaConf

from ganlab import CONFIG_DIR

YAMLS = sorted((CONFIG_DIR / "strategy").glob("*.yaml"))


def _plain(value: Any) -> Any:
    """Tuples as lists, so a default (0.0, 0.9) compares equal to the YAML's [0.0, 0.9]."""
    return list(value) if isinstance(value, tuple) else value


@pytest.mark.parametrize("path", YAMLS, ids=[p.stem for p in YAMLS])
def test_python_defaults_equal_the_yaml(path) -> None:
    """Constructing a strategy from Python without arguments gives the run that ``strategy=[<name>]`` gives."""
    yaml = OmegaConf.to_container(OmegaConf.load(path))
    assert list(yaml)[0] == "defaults"  # its schema (ganlab/config/schema.py), then the keys under its name
    (name, node), = ((k, v) for k, v in yaml.items() if k != "defaults")
    module, cls_name = node["_target_"].rsplit(".", 1)
    params = inspect.signature(getattr(importlib.import_module(module), cls_name)).parameters
    values = {k: v for k, v in node.items() if not k.startswith("_")}
    assert sorted(values) == sorted(params), f"{name}: the YAML and the constructor name different arguments"
    for key, value in values.items():
        assert _plain(params[key].default) == value, f"strategy.{name}.{key}"
