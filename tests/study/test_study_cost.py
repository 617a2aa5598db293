"""A study's cost page (issue 46): the wall run-hours its runs spent per arm and stage beside the benchmark's
prediction; from hand-made folders, rows and prediction, and the shipped page from its committed table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_status import DAMP, GAN, interrupted  # noqa: F401 - the fixture

from ganlab.study import collect as collect_mod
from ganlab.study.cost import PREDICTED, predicted_hours, spent_markdown, spent_rows, write_spent
from ganlab.study.status import states

ROOT = Path(__file__).resolve().parents[2]


def predict(root: Path, name: str, run_min: dict[tuple[str, str], float]) -> None:
    """bench_study_cost.py's JSON under ``root``: one row per (arm, data set) with its minutes a run."""
    path = root / PREDICTED.format(name=name)
    path.parent.mkdir(parents=True)
    rows = [{"arm": a, "dataset": d, "run_min": m, "runs": 4} for (a, d), m in run_min.items()]
    path.write_text(json.dumps({"study": name, "unit": "CPU", "rows": rows}))


def test_spent_beside_predicted_per_arm_and_stage(interrupted, tmp_path):  # noqa: F811
    """The status fixture's folders and rows: GAN tune 2 finished (1 h + 2 h), final 1 finished (1.5 h, committed);
    damping: tune 1 failed, 1 running, nothing finished. Predicted 60 CPU-min a GAN run: 2 h for its 2 tuning runs
    (spent 3 h: 1.5 x), 1 h for its reporting run (1.5 x); damping not predicted."""
    predict(tmp_path, "smoke", {(GAN, "ring8"): 60.0})
    rows = spent_rows(interrupted, states(interrupted, collect_mod.recorded_rows(interrupted)),
                      predicted_hours(interrupted, tmp_path))
    assert [(r["arm"], r["stage"], r["finished"], r["planned"]) for r in rows] == [
        (GAN, "tune", 2, 2), (GAN, "final", 1, 2), (DAMP, "tune", 0, 2), (DAMP, "final", 0, 2)]
    assert [r["spent_h"] for r in rows] == pytest.approx([3.0, 1.5, 0.0, 0.0])
    assert rows[0]["predicted_h"] == pytest.approx(2.0) and rows[1]["predicted_h"] == pytest.approx(1.0)
    lines = spent_markdown(interrupted, rows, "CPU").splitlines()
    assert lines[2] == f"| {GAN} | tune | 2 / 2 | 3.00 | 90 | 60 | 2.00 | 1.50 |"
    assert lines[3] == f"| {GAN} | final | 1 / 2 | 1.50 | 90 | 60 | 1.00 | 1.50 |"
    assert lines[4] == f"| {DAMP} | tune | 0 / 2 | 0.00 | - | - | - | - |"
    assert "3 of 8 runs finished" in lines[-1] and "4.50 wall run-hours spent" in lines[-1]


def test_the_page_counts_the_committed_rows_alone(interrupted, tmp_path):  # noqa: F811
    """What a fresh clone has: the fixture's folders are left out, only the committed reporting run counts."""
    path = write_spent(interrupted, tmp_path)
    assert path == Path(interrupted.results) / "cost_spent.md"
    lines = path.read_text().splitlines()
    assert lines[2] == f"| {GAN} | tune | 0 / 2 | 0.00 | - | - | - | - |"
    assert lines[3] == f"| {GAN} | final | 1 / 2 | 1.50 | 90 | - | - | - |"
    assert "wall time" in lines[-1] and "no CPU time" in lines[-1] and "ganlab-study cost smoke" in lines[-1]


def test_a_prediction_that_is_not_the_benchmarks_is_named(interrupted, tmp_path):  # noqa: F811
    path = tmp_path / PREDICTED.format(name="smoke")
    path.parent.mkdir(parents=True)
    path.write_text('{"rows": [{"arm": "x"}]}')
    with pytest.raises(ValueError, match=r"bench_study_cost_smoke.json is not bench_study_cost.py's JSON .*"
                                         r"python tests/benchmarks/bench_study_cost.py smoke --out "):
        predicted_hours(interrupted, tmp_path)


def test_the_shipped_page_is_what_its_committed_table_gives():
    """docs/results/fair_table_v2/cost_spent.md equals the page written from the committed evaluations.csv (after a
    new table: ganlab-study cost fair_table_v2)."""
    from ganlab.study.cost import SPENT_FILE, spent_text
    from ganlab.study.status import compose_study

    study = compose_study("fair_table_v2")
    committed = (ROOT / study.results / SPENT_FILE.format(suffix=study.suffix)).read_text()
    assert spent_text(study, ROOT) == committed
