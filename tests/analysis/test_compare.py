"""``ganlab.analysis.table`` and ``ganlab-compare`` on hand-made job folders: grouping, mean ± std over distinct seeds,
best marks by direction and Welch's t-test, bootstrap intervals, headline keys, one table file per key set, CSV, plots,
failures, empty folders."""

from __future__ import annotations

import csv
import io
import json
import logging
import math
import shutil
import statistics
import sys
from pathlib import Path

import pytest
from matplotlib.image import imread

from ganlab.analysis.plots import one_run_per_seed, plot_scores, score_curves
from ganlab.analysis.table import (
    best_rows,
    collect_runs,
    csv_table,
    headline_keys,
    intervals,
    markdown_table,
    summarise,
    table_keys,
    terminal_table,
)
from ganlab.cli.compare import main
from ganlab.stats import bootstrap_ci

#: (strategies, seed) -> final scores, 3 seeds a row. modes_covered: plain [1, 2, 3] against wgan_gp [4, 5, 6]
#: (means 2 and 5, std 1 each: Welch t = -3.674, df = 4, p = 0.021, so wgan_gp is marked); reverse_kl: plain
#: [0.4, 0.3, 0.2] against wgan_gp [0.1, 0.3, 0.2] (means 0.3 and 0.2, std 0.1 each: t = 1.225, p = 0.29, so
#: the lower mean of wgan_gp is not marked); vendi has no better direction.
FINAL = {((), 0): {"modes_covered": 1.0, "reverse_kl": 0.4, "vendi": 2.5},
         ((), 1): {"modes_covered": 2.0, "reverse_kl": 0.3, "vendi": 3.5},
         ((), 2): {"modes_covered": 3.0, "reverse_kl": 0.2, "vendi": 3.0},
         (("wgan_gp",), 0): {"modes_covered": 4.0, "reverse_kl": 0.1, "vendi": 7.0},
         (("wgan_gp",), 1): {"modes_covered": 5.0, "reverse_kl": 0.3, "vendi": 7.0},
         (("wgan_gp",), 2): {"modes_covered": 6.0, "reverse_kl": 0.2, "vendi": 7.0}}


def make_job(root: Path, name: str, strategies: tuple[str, ...], seed: int, scores: dict[str, float],
             steps: tuple[int, ...] = (10, 20), extra: str = "") -> Path:
    """A job folder as ganlab-train leaves it: .hydra/overrides.yaml, metrics.jsonl (one line per step in
    ``steps``: the final scores at the last, half of them before), metrics.json."""
    job = root / name
    (job / ".hydra").mkdir(parents=True)
    (job / ".hydra" / "overrides.yaml").write_text(f"- strategy=[{','.join(strategies)}]\n- seed={seed}\n"
                                                    "- trainer.steps=20\n" + extra)
    lines = [{"step": s, "scores": {k: v / 2 for k, v in scores.items()}} for s in steps[:-1]]
    lines.append({"step": steps[-1], "scores": scores})
    (job / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    (job / "metrics.json").write_text(json.dumps({"step": steps[-1], "dataset": "ring8", "seed": seed,
                                                  "scores": {**scores, "data/modes_covered": 8.0},
                                                  "strategies": list(strategies)}))
    return job


@pytest.fixture
def sweep(tmp_path: Path) -> Path:
    for i, ((strategies, seed), scores) in enumerate(FINAL.items()):
        make_job(tmp_path, f"{i}_job", strategies, seed, scores)
    failed = tmp_path / "6_failed"
    (failed / ".hydra").mkdir(parents=True)
    (failed / "failure.json").write_text(json.dumps({"type": "RuntimeError", "message": "loss is NaN",
                                                     "log": str(failed / "train.log")}))
    (tmp_path / "7_killed" / "checkpoints").mkdir(parents=True)  # never wrote metrics.json
    return tmp_path


def test_table_and_its_plots_import_each_other_in_one_direction_only() -> None:
    import ast
    import inspect

    import ganlab.analysis.plots

    tree = ast.parse(inspect.getsource(ganlab.analysis.plots))
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert "ganlab.analysis.table" not in imported  # the table imports the plots, never the other way round


def test_collect_groups_seeds_and_lists_failures(sweep: Path) -> None:
    runs, failed = collect_runs(sweep)
    assert sorted(r["label"] for r in runs) == ["ring8 [plain]"] * 3 + ["ring8 [wgan_gp]"] * 3
    assert [(f.run_dir.name, f.error) for f in failed] == [
        ("6_failed", "RuntimeError: loss is NaN"),
        ("7_killed", "no metrics.json (killed, or still running)")]
    assert failed[0].log == sweep / "6_failed" / "train.log"


def test_summary_is_mean_and_sample_std_over_seeds(sweep: Path) -> None:
    summary = summarise(collect_runs(sweep)[0])
    mean, std, n = summary["ring8 [plain]"]["reverse_kl"]
    assert (mean, n) == (pytest.approx(0.3), 3) and std == pytest.approx(statistics.stdev([0.4, 0.3, 0.2]))
    assert summary["ring8 [wgan_gp]"]["vendi"] == (7.0, 0.0, 3)


def test_a_seed_counts_once(sweep: Path) -> None:
    # a resumed copy of plain's seed 0 in a folder of its own: its trainer.resume override is not part of the
    # row label, so it lands in the same row, and it must not count as a fourth seed
    make_job(sweep, "8_resumed", (), 0, FINAL[((), 0)], extra=f"- trainer.resume={sweep / '0_job'}\n")
    runs, _ = collect_runs(sweep)
    assert len(runs) == 7 and {r["label"] for r in runs} == {"ring8 [plain]", "ring8 [wgan_gp]"}
    summary = summarise(runs)
    assert summary["ring8 [plain]"]["modes_covered"] == (2.0, 1.0, 3)  # [1, 2, 3], not [1, 1, 2, 3]
    assert "| ring8 [plain] | 3 |" in markdown_table(summary)
    assert score_curves(runs, "modes_covered")["ring8 [plain]"][1] == pytest.approx([1.0, 2.0])


def test_of_two_runs_of_one_seed_the_one_trained_furthest_is_kept() -> None:
    a = {"label": "x", "seed": 0, "step": 30, "run_dir": "a"}
    b = {"label": "x", "seed": 0, "step": 20, "run_dir": "b"}
    c = {"label": "x", "seed": 0, "step": 30, "run_dir": "c"}
    other = {"label": "y", "seed": 0, "step": 1, "run_dir": "d"}
    no_seed = [{"label": "x", "step": 5, "run_dir": f"e{i}"} for i in range(2)]  # each its own seed
    assert one_run_per_seed([a, b, c, other, *no_seed]) == ([c, other, *no_seed], [a, b])


def test_welch_decides_the_best_mark(sweep: Path) -> None:
    summary = summarise(collect_runs(sweep)[0])
    # modes_covered: p = 0.021 < 0.05, marked; reverse_kl: wgan_gp's mean is lower but p = 0.29; vendi: no direction
    assert best_rows(summary, ["modes_covered", "reverse_kl", "vendi"]) == {"modes_covered": {"ring8 [wgan_gp]"}}
    summary["ring8 [plain]"]["reverse_kl"] = (0.05, 0.01, 3)  # now plain is lower, but within wgan_gp's spread
    assert best_rows(summary, ["reverse_kl"]) == {}                # (t = -2.59, df = 2.04, p = 0.12)
    summary["ring8 [wgan_gp]"]["reverse_kl"] = (0.2, 0.01, 3)    # a narrow spread: t = -18.4, p < 0.001
    assert best_rows(summary, ["reverse_kl"]) == {"reverse_kl": {"ring8 [plain]"}}
    summary["ring8 [plain]"]["modes_covered"] = (2.0, 1.0, 3)
    summary["ring8 [wgan_gp]"]["modes_covered"] = (math.nan, math.nan, 3)
    assert best_rows(summary, ["modes_covered"]) == {}  # NaN never wins, and one row left has no runner-up


def test_no_mark_when_the_best_or_the_runner_up_has_one_seed() -> None:
    summary = {"a": {"modes_covered": (8.0, 0.0, 1)},   # one seed, far ahead: not marked
               "b": {"modes_covered": (5.0, 1.0, 3)},
               "c": {"modes_covered": (2.0, 1.0, 3)}}
    assert best_rows(summary, ["modes_covered"]) == {}
    summary["a"]["modes_covered"] = (1.0, 0.0, 1)  # now b is best (p = 0.021 against c) and a is last
    assert best_rows(summary, ["modes_covered"]) == {"modes_covered": {"b"}}
    summary["c"]["modes_covered"] = (2.0, 0.0, 1)  # the runner-up has one seed: no mark
    assert best_rows(summary, ["modes_covered"]) == {}


def test_tables_mark_the_best_cell_and_say_why(sweep: Path) -> None:
    summary = summarise(collect_runs(sweep)[0])
    md = markdown_table(summary).splitlines()
    assert md[0] == "| run | seeds | modes_covered ↑ | reverse_kl ↓ |"  # headline keys; data/ baseline left out
    assert md[2] == "| ring8 [plain] | 3 | 2 ± 1 | 0.3 ± 0.1 |"
    assert md[3] == "| ring8 [wgan_gp] | 3 | **5 ± 1** | 0.2 ± 0.1 |"
    assert md[4] == "" and "Welch's t-test, two-sided p < 0.05" in md[5] and "fewer than 2 seeds" in md[5]
    term = terminal_table(summary, ["modes_covered", "reverse_kl", "vendi"]).splitlines()
    assert term[3].split() == ["ring8", "[wgan_gp]", "3", "5", "±", "1", "*", "0.2", "±", "0.1", "7", "±", "0"]
    assert term[-1].startswith("mean ± std over distinct seeds") and "*: the best mean" in term[-1]
    rows = list(csv.DictReader(io.StringIO(csv_table(summary))))
    assert [r["run"] for r in rows] == ["ring8 [plain]", "ring8 [wgan_gp]"]
    assert float(rows[1]["reverse_kl_mean"]) == pytest.approx(0.2) and rows[1]["reverse_kl_best"] == "0"
    assert rows[1]["modes_covered_best"] == "1" and rows[0]["modes_covered_best"] == "0" and rows[0]["seeds"] == "3"


def test_bootstrap_intervals_in_the_tables(sweep: Path) -> None:
    runs, _ = collect_runs(sweep)
    summary, ci = summarise(runs), intervals(runs, ["modes_covered", "reverse_kl"])
    assert ci == intervals(runs, ["modes_covered", "reverse_kl"])  # deterministic
    low, high = ci["ring8 [plain]"]["modes_covered"]
    assert (low, high) == bootstrap_ci([1.0, 2.0, 3.0]) and 1.0 <= low < 2.0 < high <= 3.0
    for label, scores in ci.items():
        for key, (low, high) in scores.items():
            assert low <= summary[label][key][0] <= high
    md = markdown_table(summary, None, ci).splitlines()
    assert md[3].startswith(f"| ring8 [wgan_gp] | 3 | **5 ± 1 [{ci['ring8 [wgan_gp]']['modes_covered'][0]:.3g}, ")
    assert ("95% percentile bootstrap interval of the mean (10,000 resamples, seed 0; none for a row of one seed)"
            in md[-1])
    rows = list(csv.DictReader(io.StringIO(csv_table(summary, None, ci))))
    assert float(rows[0]["modes_covered_ci_low"]) == ci["ring8 [plain]"]["modes_covered"][0]


def test_headline_keys_per_kind_of_data() -> None:
    mixture = ["modes_covered", "hq_fraction", "reverse_kl", "reverse_kl_hq", "clusters_covered", "cluster_kl",
               "precision", "recall", "density", "coverage", "high_similarity_fraction", "high_similarity_flag", "ndb",
               "ndb_fraction", "fd", "vendi"]
    image = ["modes_covered", "kl_uniform", "clusters_covered", "cluster_jsd", "precision", "recall", "density",
             "coverage", "high_similarity_fraction", "ndb_fraction", "fd", "vendi", "duplicate_fraction"]
    summary = {"a": {k: (1.0, 0.0, 1) for k in mixture} | {"data/modes_covered": (8.0, 0.0, 1)}}
    assert headline_keys(summary) == ["modes_covered", "hq_fraction", "reverse_kl", "clusters_covered", "recall",
                                      "coverage", "high_similarity_fraction", "ndb_fraction"]
    assert table_keys(summary)[-1] == "vendi" and len(table_keys(summary)) == len(mixture)  # --keys all
    summary = {"a": {k: (1.0, 0.0, 1) for k in image}}
    assert headline_keys(summary) == ["fd", "modes_covered", "clusters_covered", "precision", "recall", "coverage",
                                      "high_similarity_fraction", "ndb_fraction"]
    assert headline_keys({"a": {"vendi": (1.0, 0.0, 1)}}) == ["vendi"]  # none of the headline: every score
    per_class = ["class/0/clusters_covered", "class/mean/clusters_covered", "class/worst/clusters_covered",
                 "class/mean/class_accuracy", "pred_class/worst/clusters_covered", "pred_class/3/recall"]
    summary = {"cond": {k: (1.0, 0.0, 1) for k in ["fd", "modes_covered", *per_class]}}
    assert headline_keys(summary) == ["fd", "modes_covered", "class/worst/clusters_covered",
                                      "class/mean/class_accuracy", "pred_class/worst/clusters_covered"]


def test_an_override_that_varies_makes_its_own_row(tmp_path: Path) -> None:
    for i, lr in enumerate(("1e-4", "2e-4")):
        job = make_job(tmp_path, f"{i}_job", (), 0, {"modes_covered": float(i)})
        (job / ".hydra" / "overrides.yaml").write_text(f"- seed=0\n- optim.discriminator.lr={lr}\n")
    labels = set(summarise(collect_runs(tmp_path)[0]))
    assert labels == {"ring8 [plain] optim.discriminator.lr=1e-4", "ring8 [plain] optim.discriminator.lr=2e-4"}


def test_curves_and_plots(sweep: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    runs, _ = collect_runs(sweep)
    steps, means = score_curves(runs, "modes_covered")["ring8 [wgan_gp]"]
    assert steps == [10, 20] and means == pytest.approx([2.5, 5.0])  # mean over the three seeds at each step
    with caplog.at_level(logging.WARNING):
        paths = plot_scores(runs, tmp_path / "plots")
    assert [p.name for p in paths] == ["modes_covered.png", "reverse_kl.png", "vendi.png"]
    assert "single point" not in caplog.text
    image = imread(paths[0])
    assert image.shape[0] > 300 and image.shape[1] > 500 and image[..., :3].std() > 0.05  # not a blank page


def test_warns_when_every_curve_has_a_single_point(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    for seed in (0, 1):  # evaluated once each, at the end
        make_job(tmp_path / "sweep", f"{seed}_job", (), seed, {"modes_covered": 3.0, "reverse_kl": 0.5}, steps=(20,))
    with caplog.at_level(logging.WARNING):
        assert main([str(tmp_path / "sweep"), "--out", str(tmp_path / "out")]) == 0
    assert "every curve has a single point" in caplog.text and str(tmp_path / "out") in caplog.text


def test_cli_writes_table_csv_plots_and_reports_failures(sweep: Path, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(sweep), "--format", "terminal", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "ring8 [wgan_gp]" in out and "FAILED" in out and str(sweep / "6_failed" / "train.log") in out
    assert "6 jobs finished, 2 failed or unfinished, 0 interrupted" in out and "UNFINISHED" in out
    assert "Welch's t-test" in out
    assert (tmp_path / "table.md").read_text().startswith("| run | seeds |")
    assert sorted(p.name for p in tmp_path.glob("*.png")) == ["modes_covered.png", "reverse_kl.png"]
    assert main([str(tmp_path / "missing")]) == 2


def test_each_key_set_writes_its_own_table(sweep: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "cmp"
    assert main([str(sweep), "--out", str(out)]) == 0                        # headline keys
    assert main([str(sweep), "--out", str(out), "--keys", "all"]) == 0      # every model score
    assert main([str(sweep), "--out", str(out), "--keys", "vendi,modes_covered"]) == 0
    assert main([str(sweep), "--out", str(out), "--keys", "vendi", "modes_covered"]) == 0  # the same set
    tables = {p.name for p in out.glob("table*.md")}
    (custom,) = tables - {"table.md", "table_all.md"}
    assert len(tables) == 3 and custom.startswith("table_") and len(custom) == len("table_12345678.md")
    assert {p.name for p in out.glob("table*.csv")} == {t.replace(".md", ".csv") for t in tables}
    assert (out / "table.md").read_text().startswith("| run | seeds | modes_covered ↑ | reverse_kl ↓ |\n")
    assert (out / "table_all.md").read_text().startswith("| run | seeds | modes_covered ↑ | reverse_kl ↓ | vendi |")
    assert (out / custom).read_text().startswith("| run | seeds | vendi | modes_covered ↑ |\n")
    assert f"wrote {out / custom}" in capsys.readouterr().out
    assert main([str(sweep), "--out", str(out), "--keys", "modes_covered,reverse_kl", "--ci"]) == 0
    assert "[" in (out / "table.md").read_text().splitlines()[2]  # the headline set named: table.md again


def test_an_empty_folder_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty" / "notes").mkdir(parents=True)
    assert main([str(tmp_path / "empty")]) == 1
    err = capsys.readouterr().err
    assert f"no runs found in {tmp_path / 'empty'}" in err and ".hydra/" in err and "metrics.json" in err
    assert not (tmp_path / "empty" / "comparison").exists()


def test_row_labels_leave_out_overrides_that_do_not_change_results() -> None:
    from ganlab.analysis.table import _tells_apart

    assert not any(map(_tells_apart, ["seed=1", "trainer.progress=false", "logger=none", "threads=1",
                                      "hydra.launcher.n_jobs=2", "+logger.flush_secs=5", "trainer.resume=runs/a"]))
    assert all(map(_tells_apart, ["optim.generator.lr=1e-3", "trainer.steps=100", "strategy.r1.gamma=10"]))


def test_strict_exit_status_for_scripts(sweep: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(sweep), "--no-files"]) == 0  # a table: some jobs finished
    assert main([str(sweep), "--no-files", "--strict"]) == 1  # ... but one failed and one never finished
    for name in ("6_failed", "7_killed"):
        shutil.rmtree(sweep / name)
    assert main([str(sweep), "--no-files", "--strict"]) == 0


def test_p_values_behind_the_marks(sweep: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(sweep), "--no-files", "--p-values", "--keys", "modes_covered,reverse_kl,vendi"]) == 0
    out = capsys.readouterr().out  # the p-values of test_welch_decides_the_best_mark
    assert ("Welch's t-test of the best row against the runner-up (two-sided; marked where p < 0.05):\n"
            "  modes_covered: ring8 [wgan_gp] vs ring8 [plain]: p = 0.0213 (marked)\n"
            "  reverse_kl: ring8 [wgan_gp] vs ring8 [plain]: p = 0.288\n"
            "  vendi: no test (the score has no better direction)\n") in out


def test_a_terminal_gets_aligned_columns_and_a_pipe_markdown(sweep: Path, capsys: pytest.CaptureFixture[str],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    assert main([str(sweep), "--no-files"]) == 0
    assert capsys.readouterr().out.startswith("| run | seeds | modes_covered ↑ | reverse_kl ↓ |\n")  # piped
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    assert main([str(sweep), "--no-files"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["run", "seeds", "modes_covered", "↑", "reverse_kl", "↓"] and set(lines[1]) == {"-", " "}
    assert main([str(sweep), "--no-files", "--format", "markdown"]) == 0  # asked for
    assert capsys.readouterr().out.startswith("| run | seeds |")


def test_runs_written_before_a_score_was_renamed_share_its_column(tmp_path: Path) -> None:
    old = make_job(tmp_path, "0_old", (), 0, {"collapsed": 1.0, "modes_covered": 1.0})
    make_job(tmp_path, "1_new", (), 1, {"high_similarity_flag": 0.0, "modes_covered": 3.0})
    runs, _ = collect_runs(tmp_path)
    assert sorted(r["scores"]["high_similarity_flag"] for r in runs) == [0.0, 1.0]
    assert summarise(runs)["ring8 [plain]"]["high_similarity_flag"] == (0.5, pytest.approx(0.5**0.5), 2)
    assert [s["high_similarity_flag"] for _, s in score_curves_of(old)] == [0.5, 1.0]  # metrics.jsonl too


def score_curves_of(run_dir: Path) -> list[tuple[int, dict[str, float]]]:
    from ganlab.analysis.plots import read_curve

    return read_curve(run_dir)


def test_a_row_of_one_seed_shows_its_value_without_a_spread(tmp_path: Path) -> None:
    """One seed has no spread: its value alone (not '± 0'), an empty std in CSV, no bootstrap interval (not
    '[3, 3]'); a real zero spread over 3 seeds (every seed 7) still prints '± 0'."""
    make_job(tmp_path, "0_job", (), 0, {"modes_covered": 3.0, "vendi": 7.0})
    for seed in (0, 1, 2):
        make_job(tmp_path, f"{seed + 1}_job", ("wgan_gp",), seed, {"modes_covered": 4.0 + seed, "vendi": 7.0})
    summary = summarise(collect_runs(tmp_path)[0])
    assert summary["ring8 [plain]"]["modes_covered"] == (3.0, 0.0, 1)
    md = markdown_table(summary, ["modes_covered", "vendi"]).splitlines()
    assert md[2] == "| ring8 [plain] | 1 | 3 | 7 |"
    assert md[3] == "| ring8 [wgan_gp] | 3 | 5 ± 1 | 7 ± 0 |"
    assert "a row of one seed: its value, no spread" in md[-1]
    assert terminal_table(summary, ["modes_covered"]).splitlines()[2].split() == ["ring8", "[plain]", "1", "3"]
    rows = list(csv.DictReader(io.StringIO(csv_table(summary, ["modes_covered"]))))
    assert (rows[0]["modes_covered_mean"], rows[0]["modes_covered_std"]) == ("3.0", "")
    assert (rows[1]["modes_covered_mean"], rows[1]["modes_covered_std"]) == ("5.0", "1.0")
    ci = intervals(collect_runs(tmp_path)[0], ["modes_covered"])
    assert ci["ring8 [plain]"] == {} and ci["ring8 [wgan_gp]"]["modes_covered"] == bootstrap_ci([4.0, 5.0, 6.0])
    md = markdown_table(summary, ["modes_covered"], ci).splitlines()
    assert md[2] == "| ring8 [plain] | 1 | 3 |" and md[3].startswith("| ring8 [wgan_gp] | 3 | 5 ± 1 [")
    rows = list(csv.DictReader(io.StringIO(csv_table(summary, ["modes_covered"], ci))))
    assert (rows[0]["modes_covered_ci_low"], rows[0]["modes_covered_ci_high"]) == ("", "")
    assert float(rows[1]["modes_covered_ci_low"]) == ci["ring8 [wgan_gp]"]["modes_covered"][0]


#: The shipped smoke study (conf/study/smoke.yaml): lrs 1e-3 and 3e-3 tuned on seed 100, reporting seeds 0 and 1,
#: arms 'GAN (no strategy)' and 'D lr damping (x0.5)'. Folder -> (seed, modes_covered) of hand-made runs.
SMOKE_LR = "- optim.generator.lr={v}\n- optim.discriminator.lr={v}\n"
SMOKE_RUNS = {"lr0.001_s100": (100, 2.0), "lr0.003_s100": (100, 5.0), "lr0.001_s0": (0, 6.0),
              "lr0.001_s1": (1, 8.0), "lr0.01_s7": (7, 1.0)}  # the last is none of the study's jobs


def smoke_study_folder(root: Path) -> Path:
    study = root / "study" / "smoke"
    for leaf, (seed, modes) in SMOKE_RUNS.items():
        lr = leaf[2:leaf.index("_")]
        make_job(study, f"ring8/GAN__no_strategy/{leaf}", (), seed, {"modes_covered": modes},
                 extra=SMOKE_LR.format(v=lr))
    return study


def test_a_study_folder_keeps_tuning_and_reporting_seeds_in_separate_rows(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """At lr 1e-3 the tuning seed (100: 2 modes) and the reporting seeds (0, 1: 6 and 8 modes) share every
    override but the seed: without the stage they would form one row of 3 seeds, 5.33 ± 3.1. With it: the tuning
    row holds seed 100 alone (2), the final row seeds 0 and 1 (7 ± 1.4); the run at lr 0.01, which the study never
    plans, gets no stage."""
    from ganlab.study.stages import label_stages, stages_of

    study = smoke_study_folder(tmp_path)
    found = stages_of(sorted(study.glob("ring8/*/*")))
    assert {p.name: stage for p, (_, stage) in found.items()} == {"lr0.001_s100": "tune", "lr0.003_s100": "tune",
                                                                  "lr0.001_s0": "final", "lr0.001_s1": "final"}
    runs, _ = collect_runs(study)
    assert [s.name for s in label_stages(runs)] == ["smoke"]
    summary = summarise(runs)
    lr = "optim.discriminator.lr={v} optim.generator.lr={v}"
    assert summary[f"ring8 [plain] {lr.format(v=0.001)} stage=tune"]["modes_covered"] == (2.0, 0.0, 1)
    assert summary[f"ring8 [plain] {lr.format(v=0.003)} stage=tune"]["modes_covered"] == (5.0, 0.0, 1)
    mean, std, n = summary[f"ring8 [plain] {lr.format(v=0.001)} stage=final"]["modes_covered"]
    assert (mean, n) == (7.0, 2) and std == pytest.approx(math.sqrt(2))
    assert summary[f"ring8 [plain] {lr.format(v=0.01)}"]["modes_covered"] == (1.0, 0.0, 1)
    assert main([str(study), "--format", "markdown", "--no-files"]) == 0
    out, err = capsys.readouterr()
    assert f"| ring8 [plain] {lr.format(v=0.001)} stage=final | 2 | 7 ± 1.4 |" in out
    assert f"| ring8 [plain] {lr.format(v=0.001)} stage=tune | 1 | 2 |" in out
    assert "runs of study smoke" in err and "tuning seeds [100]" in err and "reporting seeds [0, 1]" in err


def test_a_folder_named_after_a_study_but_laid_out_otherwise_gets_no_stage(tmp_path: Path) -> None:
    """Only a folder <study>/<data set>/<arm>/<leaf> that the study plans gets a stage: a sweep that happens to
    sit in a folder called 'smoke' is left as it is."""
    from ganlab.study.stages import stages_of

    job = make_job(tmp_path / "smoke", "lr0.001_s100", (), 100, {"modes_covered": 2.0})
    other = make_job(tmp_path / "smoke" / "ring8" / "GAN__no_strategy", "lr0.001_s100_b", (), 100,
                     {"modes_covered": 2.0})
    assert stages_of([job, other]) == {}


def test_no_test_reason_names_the_row_of_one_seed() -> None:
    """modes_covered (higher is better): best A (8, 2 seeds), runner-up B (7, 1 seed) -> B named; one row -> "1 row
    with a value"; vendi has no direction."""
    from ganlab.analysis.table import no_test_reason

    summary = {"A": {"modes_covered": (8.0, 0.0, 2)}, "B": {"modes_covered": (7.0, 0.0, 1)},
               "C": {"modes_covered": (6.0, 1.0, 3)}}
    assert no_test_reason(summary, "modes_covered") == "B: one seed, no spread to test against (train more seeds)"
    assert no_test_reason({"A": summary["A"]}, "modes_covered") == "1 row with a value; a test needs two"
    assert no_test_reason(summary, "vendi") == "the score has no better direction"
    assert no_test_reason({"A": summary["A"], "C": summary["C"]}, "modes_covered") is None  # A vs C is tested


def test_p_values_say_a_tie_is_a_tie() -> None:
    """Two rows of equal means (0.5 over 2 seeds each): no best row is named and no p-value printed."""
    from ganlab.analysis.table import p_value_lines

    summary = {"ring8 [plain]": {"modes_covered": (0.5, 0.71, 2)}, "ring8 [pacgan]": {"modes_covered": (0.5, 0.71, 2)}}
    line = p_value_lines(summary, ["modes_covered"]).splitlines()[1]
    assert line == "  modes_covered: ring8 [plain] and ring8 [pacgan] tie (equal means): no best row, no mark"


def test_job_counts_tell_interrupted_jobs_from_failed_ones(tmp_path: Path) -> None:
    from ganlab.analysis.table import job_counts
    from ganlab.layout import FailedJob

    failed = [FailedJob(tmp_path / "a", tmp_path / "a.log", "boom"),
              FailedJob(tmp_path / "b", tmp_path / "b.log", "killed", status="unfinished"),
              FailedJob(tmp_path / "c", tmp_path / "c.log", "SIGINT", status="interrupted", resume="ganlab-train")]
    assert job_counts([{}, {}], failed, 3) == "2 jobs finished, 2 failed or unfinished, 1 interrupted, 3 not run"
    assert job_counts([], failed[2:]) == "0 jobs finished, 0 failed or unfinished, 1 interrupted"
    assert job_counts([{}], []) == "1 job finished, 0 failed or unfinished, 0 interrupted"
