"""``ganlab.compare`` on hand-made job folders: grouping, mean ± std, best marks by direction, CSV, plots, failures."""

from __future__ import annotations

import csv
import io
import json
import math
import statistics
from pathlib import Path

import pytest
from matplotlib.image import imread

from ganlab.compare import best_rows, collect_runs, csv_table, main, markdown_table, summarise, terminal_table
from ganlab.compare_plots import plot_scores, score_curves

#: (strategies, seed) -> final scores; plain collapses (2 modes), wgan_gp covers more.
FINAL = {((), 0): {"modes_covered": 2.0, "reverse_kl": 1.2, "vendi": 2.5},
         ((), 1): {"modes_covered": 4.0, "reverse_kl": 0.8, "vendi": 3.5},
         (("wgan_gp",), 0): {"modes_covered": 8.0, "reverse_kl": 0.1, "vendi": 7.0},
         (("wgan_gp",), 1): {"modes_covered": 7.0, "reverse_kl": 0.3, "vendi": 7.0}}


def make_job(root: Path, name: str, strategies: tuple[str, ...], seed: int, scores: dict[str, float]) -> Path:
    """A job folder as ganlab-train leaves it: .hydra/overrides.yaml, metrics.jsonl (2 evals), metrics.json."""
    job = root / name
    (job / ".hydra").mkdir(parents=True)
    (job / ".hydra" / "overrides.yaml").write_text(f"- strategy=[{','.join(strategies)}]\n- seed={seed}\n"
                                                    "- trainer.steps=20\n")
    half = {k: v / 2 for k, v in scores.items()}
    (job / "metrics.jsonl").write_text(json.dumps({"step": 10, "scores": half}) + "\n"
                                       + json.dumps({"step": 20, "scores": scores}) + "\n")
    (job / "metrics.json").write_text(json.dumps({"step": 20, "scores": {**scores, "data/modes_covered": 8.0},
                                                  "dataset": "ring8", "strategies": list(strategies),
                                                  "seed": seed}))
    return job


@pytest.fixture
def sweep(tmp_path: Path) -> Path:
    for i, ((strategies, seed), scores) in enumerate(FINAL.items()):
        make_job(tmp_path, f"{i}_job", strategies, seed, scores)
    failed = tmp_path / "4_failed"
    (failed / ".hydra").mkdir(parents=True)
    (failed / "failure.json").write_text(json.dumps({"type": "RuntimeError", "message": "loss is NaN",
                                                     "log": str(failed / "train.log")}))
    (tmp_path / "5_killed" / "checkpoints").mkdir(parents=True)  # never wrote metrics.json
    return tmp_path


def test_compare_and_its_plots_import_each_other_in_one_direction_only() -> None:
    import ast
    import inspect

    import ganlab.compare_plots

    tree = ast.parse(inspect.getsource(ganlab.compare_plots))
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert "ganlab.compare" not in imported  # compare imports compare_plots, never the other way round


def test_collect_groups_seeds_and_lists_failures(sweep: Path) -> None:
    runs, failed = collect_runs(sweep)
    assert sorted(r["label"] for r in runs) == ["ring8 [plain]"] * 2 + ["ring8 [wgan_gp]"] * 2
    assert [(f.run_dir.name, f.error) for f in failed] == [
        ("4_failed", "RuntimeError: loss is NaN"),
        ("5_killed", "no metrics.json (killed, or still running)")]
    assert failed[0].log == sweep / "4_failed" / "train.log"


def test_summary_is_mean_and_sample_std_over_seeds(sweep: Path) -> None:
    summary = summarise(collect_runs(sweep)[0])
    mean, std, n = summary["ring8 [plain]"]["reverse_kl"]
    assert (mean, n) == (pytest.approx(1.0), 2) and std == pytest.approx(statistics.stdev([1.2, 0.8]))
    assert summary["ring8 [wgan_gp]"]["vendi"] == (7.0, 0.0, 2)


def test_best_value_follows_each_scores_direction(sweep: Path) -> None:
    summary = summarise(collect_runs(sweep)[0])
    best = best_rows(summary, ["modes_covered", "reverse_kl", "vendi"])
    assert best == {k: {"ring8 [wgan_gp]"} for k in ("modes_covered", "reverse_kl")}
    summary["ring8 [plain]"]["reverse_kl"] = (0.05, 0.0, 2)  # now plain has the lower (better) KL
    assert best_rows(summary, ["reverse_kl"]) == {"reverse_kl": {"ring8 [plain]"}}
    summary["ring8 [wgan_gp]"]["modes_covered"] = (math.nan, math.nan, 2)
    assert best_rows(summary, ["modes_covered"]) == {"modes_covered": {"ring8 [plain]"}}  # NaN never wins


def test_tables_mark_the_best_cell(sweep: Path) -> None:
    summary = summarise(collect_runs(sweep)[0])
    md = markdown_table(summary).splitlines()
    assert md[0] == "| run | seeds | modes_covered ↑ | reverse_kl ↓ | vendi |"  # data/ baseline left out
    assert md[2] == "| ring8 [plain] | 2 | 3 ± 1.4 | 1 ± 0.28 | 3 ± 0.71 |"
    assert md[3] == "| ring8 [wgan_gp] | 2 | **7.5 ± 0.71** | **0.2 ± 0.14** | 7 ± 0 |"
    term = terminal_table(summary).splitlines()
    assert term[3].split() == ["ring8", "[wgan_gp]", "2", "7.5", "±", "0.71", "*", "0.2", "±", "0.14", "*", "7",
                               "±", "0"]
    rows = list(csv.DictReader(io.StringIO(csv_table(summary))))
    assert [r["run"] for r in rows] == ["ring8 [plain]", "ring8 [wgan_gp]"]
    assert float(rows[1]["reverse_kl_mean"]) == pytest.approx(0.2) and rows[1]["reverse_kl_best"] == "1"
    assert rows[0]["reverse_kl_best"] == "0" and rows[0]["seeds"] == "2"


def test_an_override_that_varies_makes_its_own_row(tmp_path: Path) -> None:
    for i, lr in enumerate(("1e-4", "2e-4")):
        job = make_job(tmp_path, f"{i}_job", (), 0, {"modes_covered": float(i)})
        (job / ".hydra" / "overrides.yaml").write_text(f"- seed=0\n- optim.discriminator.lr={lr}\n")
    labels = set(summarise(collect_runs(tmp_path)[0]))
    assert labels == {"ring8 [plain] optim.discriminator.lr=1e-4", "ring8 [plain] optim.discriminator.lr=2e-4"}


def test_curves_and_plots(sweep: Path, tmp_path: Path) -> None:
    runs, _ = collect_runs(sweep)
    steps, means = score_curves(runs, "modes_covered")["ring8 [wgan_gp]"]
    assert steps == [10, 20] and means == pytest.approx([3.75, 7.5])  # mean over the two seeds at each step
    paths = plot_scores(runs, tmp_path / "plots")
    assert [p.name for p in paths] == ["modes_covered.png", "reverse_kl.png", "vendi.png"]
    image = imread(paths[0])
    assert image.shape[0] > 300 and image.shape[1] > 500 and image[..., :3].std() > 0.05  # not a blank page


def test_cli_writes_table_csv_plots_and_reports_failures(sweep: Path, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(sweep), "--format", "terminal", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "ring8 [wgan_gp]" in out and "FAILED" in out and str(sweep / "4_failed" / "train.log") in out
    assert "4 finished, 2 failed or unfinished" in out and "UNFINISHED" in out
    assert (tmp_path / "table.md").read_text().startswith("| run | seeds |")
    assert sorted(p.name for p in tmp_path.glob("*.png")) == ["modes_covered.png", "reverse_kl.png", "vendi.png"]
    assert main([str(tmp_path / "missing")]) == 2


def test_row_labels_leave_out_overrides_that_do_not_change_results() -> None:
    from ganlab.compare import _tells_apart

    assert not any(map(_tells_apart, ["seed=1", "trainer.progress=false", "logger=none", "threads=1",
                                      "hydra.launcher.n_jobs=2", "+logger.flush_secs=5"]))
    assert all(map(_tells_apart, ["optim.generator.lr=1e-3", "trainer.steps=100", "strategy.r1.gamma=10"]))
