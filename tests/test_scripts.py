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


def test_study_train_continues_a_finished_run_only_when_asked_for_more_steps(tmp_path, monkeypatch):
    """rollback_study.train: a run whose metrics.json is at step 10 is skipped for steps=None
    or 10, and continued in place from its checkpoints (trainer.resume=<folder>) for steps=20."""
    import json
    import subprocess

    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    study = load_script("rollback_study")
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "checkpoints" / "step_0000010.pt").write_bytes(b"")
    (run / "metrics.json").write_text(json.dumps({"step": 10}))
    calls = []
    monkeypatch.setattr(subprocess, "run", lambda cmd, **kw: calls.append(cmd) or subprocess.CompletedProcess(cmd, 0))
    study.train(run, ["trainer.steps=10"])
    study.train(run, ["trainer.steps=10"], steps=10)
    assert calls == []
    study.train(run, ["trainer.steps=20"], steps=20)
    assert len(calls) == 1 and "trainer.steps=20" in calls[0] and f"trainer.resume={run}" in calls[0]
