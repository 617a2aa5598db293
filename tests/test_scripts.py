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


def test_fair_table_chooses_the_lr_by_mean_modes_then_hq(monkeypatch):
    """Tuning seeds at 3 lrs: the highest mean final modes wins (1e-3: 7.5); a tie on modes goes to the higher HQ
    (grid25: 3e-4 over 1e-4), an unfinished tuning run leaves its (arm, data set) without a choice."""
    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    fair = load_script("fair_table")
    arm = next(iter(fair.ARMS))
    modes = {("ring8", 1e-4): (6, 7), ("ring8", 3e-4): (8, 6), ("ring8", 1e-3): (8, 7),
             ("grid25", 1e-4): (20, 20), ("grid25", 3e-4): (20, 20), ("grid25", 1e-3): (10, 12)}
    hq = {1e-4: 0.5, 3e-4: 0.6, 1e-3: 0.9}
    rows = [{"arm": arm, "dataset": d, "lr": lr, "seed": s, "step": 100, "modes_covered": m, "hq_fraction": hq[lr]}
            for (d, lr), ms in modes.items() for s, m in zip(fair.TUNE_SEEDS, ms)]
    lrs = (1e-4, 3e-4, 1e-3)
    assert fair.choose_lr(rows, [arm], 100, lrs) == {(arm, "ring8"): 1e-3, (arm, "grid25"): 3e-4}
    assert fair.choose_lr(rows[1:], [arm], 100, lrs) == {(arm, "grid25"): 3e-4}  # ring8 lr 1e-4 lacks a seed
    assert fair.choose_lr(rows, [arm], 200, lrs) == {}  # no run reached step 200
    assert fair.choose_lr(rows, [arm], 100) == {}  # the protocol's 3e-3 has no run


def test_fair_table_refuses_steps_that_miss_the_last_evaluation(tmp_path, monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    fair = load_script("fair_table")
    monkeypatch.setattr(sys, "argv", ["fair_table.py", "all", "--steps", "2500", "--eval-every", "1000",
                                      "--out", str(tmp_path / "out")])
    with pytest.raises(SystemExit) as exc:
        fair.main()
    assert exc.value.code == 2
    assert "--steps a multiple of --eval-every" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_study_train_continues_a_finished_run_only_when_asked_for_more_steps(tmp_path, monkeypatch):
    """rollback_study.train (used by fair_table.py): a run whose metrics.json is at step 10 is skipped for steps=None
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


def test_fair_table_row_by_hand(monkeypatch):
    """Plain GAN seeds end at 8 and 6 modes, the other arm's at 8 and 8 (Welch: t = 1 / 1 on 1 df, p = 0.5); every
    seed's 6 evaluations are 2 modes at the first and its final value after, so the last-5 mean is the final one.
    A run at another lr, or one that did not reach the last step, is left out."""
    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    fair = load_script("fair_table")
    plain, other = list(fair.ARMS)[:2]
    rows = []
    for arm, finals in ((plain, [8, 6]), (other, [8, 8])):
        for seed, final in enumerate(finals):
            for step in range(100, 601, 100):
                rows.append({"arm": arm, "dataset": "ring8", "lr": 1e-3, "seed": seed, "step": step,
                             "modes_covered": 2 if step == 100 else final, "hq_fraction": 0.5, "reverse_kl": 0.1})
    rows.append({**rows[-1], "lr": 1e-4, "modes_covered": 0})  # not the chosen lr
    rows.append({**rows[-1], "lr": 1e-3, "seed": 9, "step": 300})  # unfinished seed
    best = {(plain, "ring8"): 1e-3, (other, "ring8"): 1e-3}
    text = fair.table(rows, best, type("A", (), {"steps": 600})())
    lines = text.splitlines()
    same = "| 50.0 ± 0.0 | 0.100 ± 0.000 |"
    assert lines[2] == f"| ring8 | {plain} | 0.001 | 2 | 7.0 ± 1.4 | - {same} 1/2 | 7.0 ± 1.4, 50.0 ± 0.0 |"
    assert lines[3] == f"| ring8 | {other} | 0.001 | 2 | 8.0 ± 0.0 | +1.0, p = 0.5 {same} 2/2 | 8.0 ± 0.0, 50.0 ± 0.0 |"


def test_fair_table_collect_from_an_empty_folder_says_so(tmp_path, monkeypatch):
    """``--jobs 0`` (collect only) on a folder without runs used to write an empty table without a word."""
    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    fair = load_script("fair_table")
    monkeypatch.setattr(sys, "argv", ["fair_table.py", "all", "--jobs", "0", "--out", str(tmp_path / "out")])
    with pytest.raises(SystemExit, match="no evaluations under .*runs; train first"):
        fair.main()
    assert not (tmp_path / "out").exists()
