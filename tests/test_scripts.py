"""Argument checks of the result scripts under ``scripts/`` (run in-process; nothing is trained)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def load_script(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_shipped_diversity_drop_is_the_one_fixed_on_the_corpus_ring8_runs(monkeypatch):
    """``monitor.risk.diversity_drop`` in conf/monitor/default.yaml is what collapse_table.py derives from the
    committed corpus (largest fraction at which no healthy ring8 run warns), and one step above it does warn."""
    from omegaconf import OmegaConf

    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    table = load_script("collapse_table")
    runs, signals = table.read("runs"), table.read("signals")
    by_name = {r["name"]: r for r in runs}
    shipped = OmegaConf.load(ROOT / "conf" / "monitor" / "default.yaml").risk.diversity_drop
    assert table.fit_drop(signals, by_name) == shipped == 0.86
    healthy = [r for r in runs if r["dataset"] == "ring8" and r["collapsed"] == 0]
    assert sum(table.drop_warning(signals, r, 0.87) is not None for r in healthy) == 2
