"""Argument checks of the result scripts under ``scripts/`` (run in-process; nothing is trained)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def load_script(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("first,trials", [(3, 2), (3, 3), (-1, 2)])
def test_pacgan_table_refuses_a_seed_range_with_no_trial(first, trials, tmp_path, monkeypatch, capsys):
    """``--first-trial 3 --trials 2`` used to run nothing and write a table of paper rows only."""
    script = load_script("pacgan_table")
    monkeypatch.setattr(sys, "argv", ["pacgan_table.py", "--first-trial", str(first), "--trials", str(trials),
                                      "--out", str(tmp_path / "out")])
    with pytest.raises(SystemExit) as exc:
        script.main()
    assert exc.value.code == 2
    assert "--first-trial 3 --trials 5 runs seeds 3 and 4" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


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


def test_rollback_study_table_by_hand(monkeypatch):
    """Final modes (9 +- t(1) x 1 for seeds [8, 10]), Welch's p against the base, and the late-window means."""
    from scipy import stats

    monkeypatch.syspath_prepend(str(ROOT / "scripts"))  # rollback_study imports pacgan_table
    study = load_script("rollback_study")
    base, halved = list(study.ARMS)[:2]
    rows = []
    for arm, finals in ((base, [8, 10]), (halved, [14, 16])):
        for seed, final in enumerate(finals):
            for step in range(500, 3001, 500):  # 6 evaluations; the last 5 are 1000..3000
                value = final if step == 3000 else (20 if step == 500 else final - 2)
                rows.append({"arm": arm, "seed": seed, "step": step, "modes_covered": value})
    text = study.study_table(rows, "modes_covered", 3000, 2, 25.0)
    base_line = next(line for line in text.splitlines() if line.startswith(f"| {base} "))
    halved_line = next(line for line in text.splitlines() if line.startswith(f"| {halved} "))
    h = 12.706 * 2 ** 0.5 / 2 ** 0.5  # t(0.975, 1 df) from a printed t-table, x sd / sqrt(n)
    assert f"| 9.00 [{9 - h:.2f}, {9 + h:.2f}] | 0 | 20.00 | - |" in base_line
    p = stats.ttest_ind([14, 16], [8, 10], equal_var=False).pvalue
    assert f"| +6.00, p = {p:.3g} |" in halved_line
    # last 5 evaluations of seed 0: 4 x 12 and the final 14 -> 12.4; seed 1: 4 x 14 and 16 -> 14.4
    assert halved_line.endswith(f"| 13.40 [{13.4 - h:.2f}, {13.4 + h:.2f}] |")


def test_rollback_study_factorial_by_hand(monkeypatch):
    """Cells [1, 3], [5, 7], [2, 4], [6, 8] (base, D lr halved, rollback, both): means 2, 6, 3, 7; pooled variance
    2 on 4 df; main effects +1 (rollback) and +4 (D lr), standard error 1; interaction 0, standard error 2."""
    from scipy import stats

    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    study = load_script("rollback_study")
    cells = dict(zip(list(study.ARMS)[:4], ([1, 3], [5, 7], [2, 4], [6, 8])))
    rows = [{"arm": a, "seed": s, "step": 100, "modes_covered": v} for a, vs in cells.items() for s, v in enumerate(vs)]
    text = study.factorial(rows, "modes_covered", 100)
    t = stats.t.ppf(0.975, 4)  # 2.776
    assert f"| periodic rollback (on - off) | +1.00 [{1 - t:+.2f}, {1 + t:+.2f}] | {2 * stats.t.sf(1, 4):.3g} |" in text
    assert f"| D lr halved (halved - as is) | +4.00 [{4 - t:+.2f}, {4 + t:+.2f}] | {2 * stats.t.sf(4, 4):.3g} |" in text
    assert f"| +0.00 [{-2 * t:+.2f}, {2 * t:+.2f}] | 1 |" in text
    assert study.factorial(rows[:-1], "modes_covered", 100) == ""  # a cell with one seed: no table


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
