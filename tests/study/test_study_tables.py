"""ganlab-study's statistics and tables worked by hand, its refusals before any run, and the generated blocks."""

from __future__ import annotations

import math
import statistics
import typing
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf

import ganlab
from ganlab.stats import compare
from ganlab.study import collect as collect_mod
from ganlab.study import stats
from ganlab.study.blocks import find_blocks, stale_blocks, update_blocks
from ganlab.study.check import check_jobs
from ganlab.study.report import main_table, tuning_table
from ganlab.study.schema import ArmSchema, StudyError, StudySchema, arm_score, check_study, register

ROOT = Path(__file__).resolve().parents[2]


def study(*overrides: str) -> StudySchema:
    """The shipped smoke study composed with ``overrides`` (keys of the study command, e.g. ``study.seeds=[1]``)."""
    register()
    with initialize_config_dir(config_dir=str(ganlab.CONFIG_DIR), version_base="1.3"):
        cfg = compose("ganlab_study", overrides=["study=smoke", *overrides])
    return OmegaConf.to_object(cfg.study)


def tuning_rows(modes: dict[float, tuple[int, int]], hq: dict[float, float], steps: int = 40) -> list[dict]:
    """Two tuning seeds (100, 101) at each lr: 20 modes at step 20, the given final modes at ``steps``."""
    return [{"arm": "GAN (no strategy)", "dataset": "ring8", "stage": "tune", "lr": lr, "seed": s, "step": step,
             "modes_covered": m if step == steps else 20, "hq_fraction": hq[lr]}
            for lr, ms in modes.items() for s, m in zip((100, 101), ms) for step in (20, steps)]


def test_selection_rule_by_hand():
    """Final modes (endpoint last=1): 1e-3 -> mean 7.5, 3e-3 -> 8 wins; tied at 8 the higher mean HQ wins, then
    the lower lr; an unfinished tuning run leaves the pair without a choice."""
    s = study("study.tuning.seeds=[100,101]", "study.endpoint.last=1")
    arm = "GAN (no strategy)"
    rows = tuning_rows({1e-3: (8, 7), 3e-3: (8, 8)}, {1e-3: 0.9, 3e-3: 0.5})
    assert stats.select(s, rows, arm, "ring8") == 3e-3
    rows = tuning_rows({1e-3: (8, 8), 3e-3: (8, 8)}, {1e-3: 0.5, 3e-3: 0.6})
    assert stats.select(s, rows, arm, "ring8") == 3e-3  # HQ 0.6 > 0.5
    rows = tuning_rows({1e-3: (8, 8), 3e-3: (8, 8)}, {1e-3: 0.6, 3e-3: 0.6})
    assert stats.select(s, rows, arm, "ring8") == 1e-3  # all tied: the lower lr
    # with the endpoint the mean of the last 2 evaluations, 20 at step 20 counts: (20 + 8) / 2 both, still tied
    assert stats.select(study("study.tuning.seeds=[100,101]"), rows, arm, "ring8") == 1e-3
    assert stats.select(s, [r for r in rows if not (r["seed"] == 101 and r["step"] == 40)], arm, "ring8") is None
    assert stats.choices(s, rows) == {(arm, "ring8"): 1e-3}  # the other arm ran nothing: no choice


def test_tuning_table_cells_by_hand():
    """Final modes (endpoint last=1) at lr 1e-3: seeds 100, 101 -> 8, 7, mean 7.5, HQ 90 %; at 3e-3 only seed 100
    finished (8, HQ 50 %): '(1 seed)', not '(1 seeds)'; the arm that ran nothing has no row."""
    s = study("study.tuning.seeds=[100,101]", "study.endpoint.last=1")
    rows = tuning_rows({1e-3: (8, 7), 3e-3: (8, 8)}, {1e-3: 0.9, 3e-3: 0.5})
    rows = [r for r in rows if not (r["lr"] == 3e-3 and r["seed"] == 101)]
    lines = tuning_table(s, rows).splitlines()
    assert lines[0] == "| data | arm | lr 0.001: modes_covered, HQ % | lr 0.003: modes_covered, HQ % |"
    assert lines[2:] == ["| ring8 | GAN (no strategy) | 7.5, 90.0 (2 seeds) | 8.0, 50.0 (1 seed) |"]


def test_table_row_by_hand():
    """Final modes over seeds 0, 1: control [8, 6] (mean 7, var 2), arm B [8, 8], arm C [4, 6] (var 2).
    B: t = 1 / sqrt(2/2 + 0) = 1 on 1 df, p = 0.5. C: t = -2 / sqrt(2/2 + 2/2) = -sqrt(2); Welch df = (1 + 1)^2 /
    (1 + 1) = 2, p = 1 - sqrt(2)/sqrt(2 + 2) = 0.2929. Holm over the 2 tests: 2 x 0.2929 = 0.586, then
    max(0.586, 0.5) = 0.586. HQ % (tested too? no: test false) is 50 for all; seeds with all 8 modes: 1/2, 2/2, 0/2."""
    s = study("study.endpoint.last=1", "study.columns=[{score: hq_fraction, label: HQ %, scale: 100}]",
              "study.arms=[{name: ctrl}, {name: B}, {name: C}]", "study.control=ctrl")
    rows = []
    for arm, finals in (("ctrl", [8, 6]), ("B", [8, 8]), ("C", [4, 6])):
        for seed, final in enumerate(finals):
            rows += [{"arm": arm, "dataset": "ring8", "stage": "final", "lr": 1e-3, "seed": seed, "step": step,
                      "modes_covered": final if step == 40 else 1, "hq_fraction": 0.5, "data/modes_covered": 8.0}
                     for step in (20, 40)]
    rows.append({**rows[-1], "seed": 7})  # not a reporting seed: left out
    chosen = {(a, "ring8"): 1e-3 for a in ("ctrl", "B", "C")}
    table = main_table(s, rows, chosen)
    lines = table.text.splitlines()
    assert lines[2] == "| ring8 | ctrl | 0.001 | 2 | 7.0 ± 1.4 | - | 1/2 | 50.0 ± 0.0 |"
    assert lines[3] == "| ring8 | B | 0.001 | 2 | 8.0 ± 0.0 | +1.0, p = 0.5 (Holm 0.59) | 2/2 | 50.0 ± 0.0 |"
    assert lines[4] == "| ring8 | C | 0.001 | 2 | 5.0 ± 1.4 | -2.0, p = 0.29 (Holm 0.59) | 0/2 | 50.0 ± 0.0 |"
    assert "Holm's step-down correction over the 2 tests of this table" in lines[6] and table.family == 2
    assert compare([4, 6], [8, 6], "welch")[1] == pytest.approx(1 - 2 ** 0.5 / 2, abs=1e-12)


def test_trials_csv_keeps_the_last_evaluation_of_each_finished_run_by_hand():
    """Four runs: tuning lr 1e-3 seed 100 finished (steps 20, 40 -> the step-40 row; its step-80 row, the run
    extended past the budget of 40, is not this study's reading), the same seed at lr 3e-3 (another run: its own
    row), seed 101 unfinished (left out), a failed run (left out); header as evaluations.csv's less ``finished``,
    empty cells empty."""
    from ganlab.study.collect import columns
    from ganlab.study.report import trials_csv

    s = study()
    base = {"study": "smoke", "arm": "GAN (no strategy)", "dataset": "ring8", "stage": "tune", "commit": "abc"}
    rows = [{**base, "lr": lr, "seed": seed, "step": step, "finished": done, "modes_covered": m, "wall_s": w}
            for lr, seed, step, done, m, w in [(1e-3, 100, 20, True, 3.0, 1.5), (1e-3, 100, 40, True, 8.0, 2.5),
                                               (1e-3, 100, 80, True, 6.0, 9.0),
                                               (3e-3, 100, 40, True, 7.0, 4.0), (1e-3, 101, 20, False, 5.0, 1.0),
                                               (1e-3, 102, 20, "failed", None, 0.5)]]
    lines = trials_csv(s, rows).splitlines()
    head = [c for c in columns(s) if c != "finished"]
    assert lines[0] == ",".join(head)
    cells = [dict(zip(head, line.split(","))) for line in lines[1:]]
    assert [(c["lr"], c["seed"], c["step"], c["modes_covered"], c["wall_s"]) for c in cells] == [
        ("0.001", "100", "40", "8.0", "2.5"), ("0.003", "100", "40", "7.0", "4.0")]
    assert cells[0]["hq_fraction"] == "" and cells[0]["commit"] == "abc"


def test_excluded_seeds_leave_the_row_tests_and_note_by_hand():
    """Final modes over seeds 0, 1, 2: control [8, 6, 1] with seed 2 left out -> [8, 6] (mean 7, sd 1.41); arm B
    [8, 8, 8]: t = 1 / sqrt(2/2 + 0) = 1 on Welch df 1 (B's variance is 0), p = 0.5, the one test (Holm 0.5). With
    every seed the control is [8, 6, 1] (mean 5, sd 3.61): t = 3 / sqrt(13/3) = 1.441 on 2 df,
    p = 1 - t / sqrt(t^2 + 2) = 0.2863. Seeds with all 8 modes: 1/2 (1/3 with seed 2)."""
    base = ("study.seeds=[0,1,2]", "study.endpoint.last=1", "study.columns=[]", "study.arms=[{name: ctrl}, {name: B}]",
            "study.control=ctrl")
    rows = [{"arm": arm, "dataset": "ring8", "stage": "final", "lr": 1e-3, "seed": seed, "step": step,
             "modes_covered": final if step == 40 else 1, "data/modes_covered": 8.0}
            for arm, finals in (("ctrl", [8, 6, 1]), ("B", [8, 8, 8])) for seed, final in enumerate(finals)
            for step in (20, 40)]
    chosen = {(a, "ring8"): 1e-3 for a in ("ctrl", "B")}
    lines = main_table(study(*base, "++study.exclude_seeds={ctrl: [2]}"), rows, chosen).text.splitlines()
    assert lines[2] == "| ring8 | ctrl | 0.001 | 2 | 7.0 ± 1.4 | - | 1/2 |"
    assert lines[3] == "| ring8 | B | 0.001 | 3 | 8.0 ± 0.0 | +1.0, p = 0.5 (Holm 0.5) | 3/3 |"
    assert "(seeds 0, 1, 2; ctrl without seeds 2)" in lines[5]
    lines = main_table(study(*base), rows, chosen).text.splitlines()
    assert lines[2] == "| ring8 | ctrl | 0.001 | 3 | 5.0 ± 3.6 | - | 1/3 |"
    assert lines[3] == "| ring8 | B | 0.001 | 3 | 8.0 ± 0.0 | +3.0, p = 0.29 (Holm 0.29) | 3/3 |"
    assert "(seeds 0, 1, 2)." in lines[5]


def test_a_table_with_one_seed_an_arm_says_no_test_could_be_computed():
    """One seed an arm (as the smoke study runs): no Welch test exists (a variance needs two values), so the note
    says none could be computed instead of counting "0 tests" under a correction."""
    s = study("study.seeds=[0]", "study.endpoint.last=1", "study.columns=[]", "study.arms=[{name: ctrl}, {name: B}]",
              "study.control=ctrl")
    rows = [{"arm": arm, "dataset": "ring8", "stage": "final", "lr": 1e-3, "seed": 0, "step": 40,
             "modes_covered": m, "data/modes_covered": 8.0} for arm, m in (("ctrl", 6), ("B", 8))]
    lines = main_table(s, rows, {(a, "ring8"): 1e-3 for a in ("ctrl", "B")}).text.splitlines()
    assert lines[3].startswith("| ring8 | B | 0.001 | 1 | 8.0 (1 seed) |")
    assert "none could be computed" in lines[5] and "0 tests" not in lines[5]


def test_read_as_baseline_rows_and_no_tests_by_hand():
    """Arm U reads ``class/acc`` as ``pred_class/acc`` (read_as), which it lacks: its cell is ``-``, not its 0.1; each
    arm's row is followed by its data baseline (``data/<score>``, read the same way); ``test: none`` adds no test
    column. Seeds 0, 1: C's acc [0.4, 0.6] -> 0.5 ± 0.1414 -> 0.5 ± 0.1; data [0.9, 0.9]; U's pred-class data [0.8,
    1.0] -> 0.9 ± 0.1."""
    s = study("study.endpoint={score: class/acc, last: 1, label: acc}", "study.columns=[]", "study.reach=null",
              "study.control=U", "study.arms=[{name: U}, {name: C}]", "study.tests.test=none",
              "study.baseline_rows=true", "study.tuning=null", "study.scores=[class/acc, pred_class/acc]",
              "study.data_scores=[class/acc, pred_class/acc]")
    s.arms[0].read_as = {"class/": "pred_class/"}
    check_study(s)
    rows = [{"arm": arm, "dataset": "ring8", "stage": "final", "seed": seed, "step": 40, **scores}
            for arm, seed, scores in (
                ("U", 0, {"class/acc": 0.1, "pred_class/acc": None, "data/pred_class/acc": 0.8}),
                ("U", 1, {"class/acc": 0.1, "pred_class/acc": None, "data/pred_class/acc": 1.0}),
                ("C", 0, {"class/acc": 0.4, "data/class/acc": 0.9}),
                ("C", 1, {"class/acc": 0.6, "data/class/acc": 0.9}))]
    lines = main_table(s, rows, {}).text.splitlines()
    assert lines[:6] == ["| data | arm | seeds | acc |", "|---|---|---|---|", "| ring8 | U | 2 | - |",
                         "| ring8 | data baseline | 2 | 0.9 ± 0.1 |", "| ring8 | C | 2 | 0.5 ± 0.1 |",
                         "| ring8 | data baseline | 2 | 0.9 ± 0.0 |"]
    assert "No tests: the arms are shown side by side" in lines[7]
    s.data_scores = ["class/acc"]
    with pytest.raises(StudyError, match="table score 'data/pred_class/acc' is not collected"):
        check_study(s)


def test_arm_score_replaces_the_longest_prefix_also_after_data():
    arm = ArmSchema(name="U", read_as={"class/": "pred_class/", "class/mean/": "other/"})
    assert arm_score(arm, "class/worst/recall") == "pred_class/worst/recall"
    assert arm_score(arm, "data/class/mean/recall") == "data/other/recall"
    assert arm_score(arm, "fd") == "fd" and arm_score(ArmSchema(name="C"), "class/mean/recall") == "class/mean/recall"


@pytest.mark.parametrize("values", ["[0.001,0.003]", "[0.003,0.001]"])
def test_selection_never_falls_on_a_failed_or_non_finite_value(values):
    """Final modes 8 at 3e-3 beat 7.5 at 1e-3, but not when a 3e-3 run holds a NaN or infinite score at any
    evaluation, or failed (it stopped before the budget): then 1e-3 is chosen, whichever order the axis lists;
    with both values unsound there is no choice."""
    s = study("study.tuning.seeds=[100,101]", "study.endpoint.last=1", f"study.tuning.axis.values={values}")
    arm = "GAN (no strategy)"
    good = tuning_rows({1e-3: (8, 7), 3e-3: (8, 8)}, {1e-3: 0.5, 3e-3: 0.5})
    assert stats.select(s, good, arm, "ring8") == 3e-3
    for score, bad in [("modes_covered", math.nan), ("hq_fraction", math.nan), ("hq_fraction", math.inf),
                       ("hq_fraction", None)]:
        rows = [dict(r) for r in good]
        hit = next(r for r in rows if r["lr"] == 3e-3 and r["seed"] == 101 and r["step"] == 20)
        hit[score] = bad  # an earlier evaluation: the final endpoint alone would not see it
        assert stats.select(s, rows, arm, "ring8") == 1e-3, (score, bad)
    # a 3e-3 run failed at step 20 (no row at the budget): 1e-3 is chosen at once, not waited for
    failed = [r for r in good if not (r["lr"] == 3e-3 and r["seed"] == 101 and r["step"] == 40)]
    next(r for r in failed if r["lr"] == 3e-3 and r["seed"] == 101)["finished"] = stats.FAILED
    assert stats.select(s, failed, arm, "ring8") == 1e-3
    assert stats.failed_seeds(failed, lr=3e-3) == [101]
    both = [dict(r, modes_covered=math.nan) if r["lr"] == 1e-3 else r for r in failed]
    assert stats.select(s, both, arm, "ring8") is None


@pytest.mark.parametrize("overrides,message", [
    (["study.arms=[{name: ctrl}, {name: 'D lr (x0.5)'}, {name: 'D lr [x0.5]'}]", "study.control=ctrl"],
     r"arms 'D lr \(x0.5\)' and 'D lr \[x0.5\]' both write their runs to .*ring8/D_lr__x0_5/lr0.001_s100"),
    (["study.tuning.axis.values=[0.001,0.0010000001]"],
     r"tuning.axis.values 0.001 and 0.0010000001 both write lr0.001 .*lr0.001_s100"),
])
def test_two_jobs_that_share_a_run_folder_are_refused_before_any_run(overrides, message, tmp_path):
    s = study(*overrides, f"study.runs={tmp_path / 'runs'}")
    with pytest.raises(StudyError, match=message):
        check_jobs(s)
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("overrides,message", [
    (["study.seeds=[100,1]"], r"tuning seeds \[100\] and reporting seeds \[100, 1\] overlap in \[100\]"),
    (["study.control=nobody"], "control arm 'nobody' is not an arm"),
    (["study.budget.steps=50"], r"budget.steps \(50\) must be a positive multiple of budget.eval_every \(20\)"),
    (["study.arms.1.overrides=['trainer.stepz=3']"],
     r"arm 'D lr damping \(x0.5\)' on ring8 at lr 0.001 fails ganlab-train's config check: .*stepz"),
    (["study.arms.1.overrides=['strategy=[no_such]']"], "fails ganlab-train's config check: .*no_such"),
    (["study.tuning.axis.overrides=['optim.generator.lr=0.1']"], r"every axis override must contain \{value\}"),
    (["++study.exclude_seeds={nobody: [0]}"], r"exclude_seeds names arm 'nobody' with seeds \[0\]; its keys"),
    (["study.arms=[{name: ctrl}]", "study.control=ctrl", "++study.exclude_seeds={ctrl: [5]}"],
     r"exclude_seeds names arm 'ctrl' with seeds \[5\]; .* reporting seeds \[0, 1\]"),
])
def test_a_study_that_cannot_run_is_refused_before_any_run(overrides, message, tmp_path):
    s = study(*overrides, f"study.runs={tmp_path / 'runs'}")
    with pytest.raises(StudyError, match=message):
        check_jobs(s)
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("overrides,message", [
    (["study.arms.1.overrides=['dataset.seed=100']"],
     r"arm 'D lr damping \(x0.5\)' overrides: 'dataset.seed=100' sets a seed key \(dataset.seed\)"),
    (["study.common=['model=mlp','+metrics.scorers.kid.seed=3']"],
     r"common: '\+metrics.scorers.kid.seed=3' sets a seed key \(metrics.scorers.kid.seed\)"),
    (["study.arms.0.overrides=['seed=100']"], r"arm 'GAN \(no strategy\)' overrides: 'seed=100' sets a seed key"),
    (["study.tuning.axis.overrides=['optim.generator.lr={value}','strategy.ema.bn_seed={value}']"],
     r"tuning.axis.overrides: 'strategy.ema.bn_seed=\{value\}' sets a seed key"),
    (["study.arms.1.axis_overrides=['optim.generator.lr={value}','dataset.seed=100']"],
     r"arm 'D lr damping \(x0.5\)' axis_overrides: 'dataset.seed=100'"),
    (["++study.dataset_overrides={ring8: ['dataset=ring8', 'dataset.seed=101']}"],
     r"dataset_overrides.ring8: 'dataset.seed=101'"),
    (["study.arms.1.overrides=['trainer.ensemble=2']"],
     r"'trainer.ensemble=2': an ensemble trains seeds seed, seed\+1"),
])
def test_a_study_whose_runs_would_reuse_another_jobs_seeds_is_refused(overrides, message, tmp_path):
    """Tuning seed 100, reporting seeds 0, 1 (disjoint): an arm pinning dataset.seed=100 would train its reporting
    runs on the tuning runs' data; every route (common, the arm's overrides or axis overrides, the axis, a data
    set's overrides, an ensemble) is refused before any run, naming the route and the key."""
    s = study(*overrides, f"study.runs={tmp_path / 'runs'}")
    with pytest.raises(StudyError, match=message):
        check_jobs(s)
    assert not (tmp_path / "runs").exists()


def test_a_seed_key_derived_from_the_jobs_seed_passes(tmp_path):
    """The advice of the refusal works: ``dataset.seed=\\${seed}`` in the study (escaped, so the study leaves it to
    ganlab-train) passes the study's checks and every job's composition."""
    s = study("study.arms.1.overrides=['dataset.seed=\\${seed}']", f"study.runs={tmp_path / 'runs'}")
    assert s.arms[1].overrides == ["dataset.seed=${seed}"]
    check_jobs(s)


@pytest.mark.parametrize("name", sorted(p.stem for p in (Path(ganlab.CONFIG_DIR) / "study").glob("*.yaml")))
def test_every_shipped_study_passes_its_own_checks(name):
    check_study(study(f"study={name}"))


def test_an_unknown_study_key_is_refused(tmp_path):
    """A key the schema lacks, in a study file or on the command line, stops the composition naming the key."""
    (tmp_path / "study").mkdir()
    text = (ganlab.CONFIG_DIR / "study" / "smoke.yaml").read_text().replace("seeds: [0, 1]", "seed: [0, 1]")
    (tmp_path / "study" / "typo.yaml").write_text(text)
    with pytest.raises(ConfigCompositionException, match="Key 'seed' not in 'StudySchema'"):
        study("study=typo", f"hydra.searchpath=[file://{tmp_path}]")
    with pytest.raises(ConfigCompositionException, match="colour"):
        study("study.colour=red")
    with pytest.raises(ConfigCompositionException, match="seeds"):
        study("study.seeds=[a]")


def test_generated_blocks_are_found_refreshed_and_checked(tmp_path):
    (tmp_path / "docs" / "results").mkdir(parents=True)
    (tmp_path / "docs" / "results" / "t.md").write_text("| a |\n|---|\n")
    doc = tmp_path / "docs" / "page.md"
    doc.write_text("intro\n<!-- generated:docs/results/t.md -->\nold\n<!-- /generated:docs/results/t.md -->\nend\n")
    assert [b.text for b in find_blocks(tmp_path)] == ["old\n"]
    assert stale_blocks(tmp_path) == [f"{doc}: generated block of docs/results/t.md differs from the file"]
    assert update_blocks(tmp_path) == [doc]
    assert doc.read_text() == ("intro\n<!-- generated:docs/results/t.md -->\n| a |\n|---|\n"
                               "<!-- /generated:docs/results/t.md -->\nend\n")
    assert stale_blocks(tmp_path) == [] and update_blocks(tmp_path) == []
    doc.write_text("<!-- generated:docs/results/t.md -->\nno end\n")
    with pytest.raises(ValueError, match="has no closing line"):
        find_blocks(tmp_path)


def test_every_generated_block_of_the_docs_equals_its_file():
    """README.md and docs/**/*.md: each <!-- generated:PATH --> block is PATH's text; fix drift with
    ``ganlab-study blocks`` (or ``ganlab-study report <study>`` after regenerating a study)."""
    assert stale_blocks(ROOT) == []


@pytest.mark.parametrize("name,suffix", [("fair_table", ""), ("fair_table_3lrs", "_3lrs"), ("rollback_study", ""),
                                         ("rollback_study_clusters", "_clusters"), ("pacgan_table", ""),
                                         ("rollback_study_reread", "_reread"), ("rollback_study_last5", "_last5"),
                                         ("rollback_study_reread_heldout", "_reread_heldout"),
                                         ("fair_table_last5", "_last5"),
                                         ("fair_table_v2", ""),
                                         ("fair_table_v2_confirm", ""),
                                         ("stacked_table", ""), ("conditional_table", ""),
                                         ("update_scheme", ""), ("strategy_table", "")])
def test_report_regenerates_the_committed_table_from_the_committed_evaluations(name, suffix):
    """``ganlab-study report <name>`` from ``evaluations.csv`` alone gives the committed table.md, choices.csv and
    (the folder's own study) trials.csv."""
    from ganlab.study.collect import read_table
    from ganlab.study.report import table_text, trials_csv

    s = study(f"study={name}")
    folder = ROOT / s.results
    rows = read_table(folder / "evaluations.csv")
    text, chosen = table_text(s, rows)
    assert text == (folder / f"table{suffix}.md").read_text()
    if not suffix:
        assert trials_csv(s, rows) == (folder / "trials.csv").read_text()
    if s.tuning is None:
        return
    committed = (folder / f"choices{suffix}.csv").read_text().splitlines()[1:]
    assert sorted(f"{a},{d},{v:g}" for (a, d), v in chosen.items()) == sorted(committed)


def test_the_fair_table_keeps_the_published_numbers():
    """Cells of the table before the port (fair_table.py's), by value: the plain GAN's ring8 row and D lr damping's
    grid25 row at three lrs, with the Welch p values the old table printed."""
    fair = (ROOT / "docs/results/fair_table/table.md").read_text()
    assert "| ring8 | GAN (no strategy) | 0.003 | 5 | 7.4 ± 0.5 | - | 2/5 | 91.1 ± 7.5 | - | 0.199 ± 0.079 |" in fair
    assert "| ring8 | D lr damping (x0.5) | 0.001 | 5 | 7.8 ± 0.4 | +0.4, p = 0.24 (Holm 1) | 4/5 | 86.6 ± 6.8" in fair
    three = (ROOT / "docs/results/fair_table/table_3lrs.md").read_text()
    assert "| grid25 | D lr damping (x0.5) | 0.0003 | 5 | 1.0 ± 0.0 | -22.6, p = 4.8e-06 (Holm 6.8e-05) |" in three
    rollback = (ROOT / "docs/results/rollback_study/table.md").read_text()  # study.md's cells before the port
    assert "| periodic rollback | 10 | 9.90 [6.23, 13.57] | -1.70, p = 0.519 (Holm 0.955) | 0/10 | 19.40 |" in rollback
    assert "| D lr halved (halved - as is) | +3.45 [-0.24, +7.14] | 0.0663 |" in rollback
    # the script's table.md before the port (4 ring trials; the fifth came later): its PacGAN2 ring cells from the
    # committed rows of seeds 0-3, mean ± standard error
    rows = [r for r in collect_mod.read_table(ROOT / "docs/results/pacgan_table/evaluations.csv")
            if (r["dataset"], r["arm"], r["step"]) == ("ring", "PacGAN2", 20000) and r["seed"] <= 3]
    cells = {k: (statistics.fmean([r[k] for r in rows]), statistics.stdev([r[k] for r in rows]) / 2)  # se: sd / 2
             for k in ("modes_covered", "hq_fraction", "reverse_kl_hq", "reverse_kl")}
    assert len(rows) == 4 and cells["modes_covered"] == (8.0, 0.0)
    assert (f"{100 * cells['hq_fraction'][0]:.3g} ± {100 * cells['hq_fraction'][1]:.2g}",
            f"{cells['reverse_kl_hq'][0]:.3g} ± {cells['reverse_kl_hq'][1]:.2g}",
            f"{cells['reverse_kl'][0]:.3g} ± {cells['reverse_kl'][1]:.2g}") == ("85 ± 2.7", "0.0593 ± 0.019",
                                                                                "0.0289 ± 0.00082")
    stacked = (ROOT / "docs/results/stacked_table/table.md").read_text()
    assert "| PacDCGAN2 | 3 | 998 ± 0.88 | +1.67, p = 0.52 (Holm 0.52) | 0.247 ± 0.029 |" in stacked
    conditional = (ROOT / "docs/results/conditional_table/table.md").read_text()  # the script's cells, reordered
    assert ("| conditional, AC-GAN D | 3 | 5.5 ± 0.21 | 3.33 ± 0.33 | 0.0428 ± 0.0016 | 0.0506 ± 0.0018 "
            "| 0.525 ± 0.022 | 0.186 ± 0.045 | 0.295 ± 0.0047 | 0.14 ± 0.0036 | 0.0653 ± 0.011 | 181 ± 6.8 | 10 ± 0 |"
            ) in conditional
    assert "| data baseline | 3 | 9.9 ± 0 | 9 ± 0 | 0.437 ± 0 | 0.756 ± 0 | 0.861 ± 0.0027 |" in conditional
    # the retired script's cells in rows no code change touched (its MBD and PacGAN rows moved, see the page)
    survey = (ROOT / "docs/results/strategy_table/table.md").read_text()
    assert "| ring8 | GAN (no strategy) | 3 | 0.0 ± 0.0 | 0/3 | 0.0 ± 0.0 | 1.979 ± 0.101 |" in survey
    assert "| grid25 | ema | 3 | 2.3 ± 2.3 | 0/3 | 53.3 ± 49.7 | 2.563 ± 1.137 |" in survey
    assert "| grid25 | r1 | 3 | 22.7 ± 2.1 | 1/3 | 3.2 ± 0.3 | 0.043 ± 0.007 |" in survey


def test_report_without_evaluations_says_how_to_make_them(tmp_path, monkeypatch, capsys):
    from ganlab.cli import study as cli

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.argv", ["ganlab-study", "report", "smoke", f"study.results={tmp_path}/res",
                                     f"study.runs={tmp_path}/runs"])
    with pytest.raises(SystemExit) as exc:
        cli.main()
    assert exc.value.code == 1
    assert "no table of evaluations at" in capsys.readouterr().err
    assert not (tmp_path / "res").exists()


def test_ci95_and_se_cells_by_hand():
    """Seeds [8, 10]: mean 9, sd sqrt(2), t(0.975, 1 df) = 12.706 from a printed t-table, so 9 ± 12.706 x sqrt(2) /
    sqrt(2); standard error sqrt(2) / sqrt(2) = 1."""
    h = 12.706
    assert stats.summary([8, 10], ".2f", spread="ci95") == f"9.00 [{9 - h:.2f}, {9 + h:.2f}]"
    assert stats.summary([8], ".2f", spread="ci95") == "8.00 (1 seed)" == stats.summary([8], ".2f")
    assert stats.summary([8, 10], ".2f", spread="se") == "9.00 ± 1.00"


def test_help_prints_the_usage_and_every_shipped_study(monkeypatch, capsys):
    from ganlab.cli import study as cli

    monkeypatch.setattr("sys.argv", ["ganlab-study", "--help"])
    with pytest.raises(SystemExit) as exit_info:
        cli.main()
    out = capsys.readouterr().out
    assert exit_info.value.code == 0
    assert out.startswith("usage: ganlab-study [ACTION] STUDY")
    shipped = sorted(p.stem for p in (Path(ganlab.CONFIG_DIR) / "study").glob("*.yaml"))
    listed = out.split("studies (conf/study/):", 1)[1].split("\n\n", 1)[0]
    assert [n.strip() for n in listed.replace("\n", " ").split(",")] == shipped
    assert "smoke" in shipped and "fair_table" in shipped


def test_an_unknown_study_name_is_refused_with_the_shipped_studies(monkeypatch, capsys):
    from ganlab.cli import study as cli

    monkeypatch.delenv("HYDRA_FULL_ERROR", raising=False)
    monkeypatch.setattr("sys.argv", ["ganlab-study", "report", "nosuchstudy"])
    with pytest.raises(SystemExit) as exit_info:
        cli.main()
    err = capsys.readouterr().err
    assert exit_info.value.code == 1
    assert "no study 'nosuchstudy' (conf/study/nosuchstudy.yaml); the studies: " in err
    assert "fair_table" in err and "smoke" in err
    monkeypatch.setattr("sys.argv", ["ganlab-study", "check", "fair_tabel"])
    with pytest.raises(SystemExit):
        cli.main()
    assert "no study 'fair_tabel' (conf/study/fair_tabel.yaml); did you mean fair_table? the studies: " \
        in capsys.readouterr().err


def cli_refusal(monkeypatch, capsys, *argv: str) -> str:
    """``ganlab-study argv`` run in this process: assert it exits 1, return what it printed to stderr."""
    from ganlab.cli import study as cli

    monkeypatch.delenv("HYDRA_FULL_ERROR", raising=False)
    monkeypatch.setattr("sys.argv", ["ganlab-study", *argv])
    with pytest.raises(SystemExit) as exit_info:
        cli.main()
    assert exit_info.value.code == 1
    return capsys.readouterr().err


@pytest.mark.parametrize("key,message", [
    ("study.budget.stepz=10", "study.budget.stepz is not a key of the study; did you mean study.budget.steps? "
                              "study.budget takes: steps, eval_every, chunk"),
    ("study.tuning.axs.values=[1]", "study.tuning.axs is not a key of the study; did you mean study.tuning.axis? "
                                    "study.tuning takes: axis, seeds, tie_break, edge"),
    ("datasets=[ring]", "datasets is a key of the study: write study.datasets=[ring]"),
    ("+seeds=[0]", "seeds is a key of the study: write study.seeds=[0]"),
    ("~dataset_overrides.grid", "dataset_overrides is a key of the study: write ~study.dataset_overrides.grid"),
    ("bogus=1", "bogus is no key of ganlab-study; it takes action, arms, logdir, stage, hydra.* and the study's keys "
                "as study.<key>: " + ", ".join(typing.get_type_hints(StudySchema))),
])
def test_a_key_the_study_lacks_is_refused_naming_the_override_to_write(key, message, monkeypatch, capsys):
    """Before anything is composed: a typo in a study key is named with the key it resembles, and a key outside
    the study with the override to write (a study key without its ``study.`` prefix: with it, never with ``+``, since
    a study's keys always exist). Hydra's own messages advised ``+key=...``, which the schema refuses under
    ``study`` and which outside it composes and is read by nothing (the command runs as if it had not been given)."""
    from ganlab.cli import study as cli

    assert cli_refusal(monkeypatch, capsys, "check", "smoke", key) == f"ganlab-study: {key}: {message}\n"
    cli.check_study_keys(["study.budget.steps=10", "study.tuning.axis.values=[1]", "study.seeds=[1]", "stage=tune",
                          "study.arms.1.overrides=[]", "study.dataset_overrides.ring=[]", "study=smoke",
                          "action=check", "hydra.launcher.n_jobs=1", "hydra/launcher=basic", "logdir=/tmp/x",
                          "arms=[a]", "~study.dataset_overrides.ring", "-m"])


def test_check_leaves_no_folder_behind(tmp_path, monkeypatch, capsys):
    """Hydra makes the study's run folder as the command's own; ``check`` trains nothing, so it removes it again
    (only when empty: rmdir)."""
    from ganlab.cli import study as cli

    runs = tmp_path / "runs" / "smoke"
    monkeypatch.setattr("sys.argv", ["ganlab-study", "check", "smoke", f"study.runs={runs}"])
    cli.main()
    assert "override variants pass ganlab-train's checks" in capsys.readouterr().out
    assert not runs.exists() and (tmp_path / "runs").is_dir()


def test_a_study_s_old_collapse_alarm_key_reaches_its_jobs_as_the_new_one():
    """``monitor.collapse_z`` moved to ``callbacks.collapse_alarm.n_z`` (:mod:`ganlab.config.legacy`): a study that
    still writes the old key gives its jobs the new one."""
    from ganlab.study.plan import all_jobs, overrides

    s = study("study.common=['monitor.collapse_z=0']")
    job_overrides = overrides(s, all_jobs(s)[0])
    assert "callbacks.collapse_alarm.n_z=0" in job_overrides and "monitor.collapse_z=0" not in job_overrides


def test_the_note_names_the_primary_endpoint_as_it_is_computed():
    from ganlab.study.report import tests_note

    assert ("Primary endpoint: the mean of modes_covered over each seed's last 2 evaluations. "
            in tests_note(study(), 1))
    assert "Primary endpoint: modes_covered at the final evaluation of each seed. " in tests_note(
        study("study.endpoint.last=1"), 1)


def test_a_data_set_left_out_on_the_command_line_names_the_override_that_drops_its_settings(monkeypatch, capsys):
    """``study.datasets=[ring]`` on a study with settings for the grid too is refused naming
    ``~study.dataset_overrides.grid``, and with that override the study checks (its 4 ring variants)."""
    from ganlab.cli import study as cli

    err = cli_refusal(monkeypatch, capsys, "check", "pacgan_table", "study.datasets=[ring]")
    assert err.endswith("then leave their overrides out too, ~study.dataset_overrides.grid)\n")
    monkeypatch.setattr("sys.argv", ["ganlab-study", "check", "pacgan_table", "study.datasets=[ring]",
                                     "~study.dataset_overrides.grid"])
    cli.main()
    assert "pacgan_table: all 4 override variants pass ganlab-train's checks" in capsys.readouterr().out


def test_collect_and_report_refuse_a_study_with_no_run_and_write_nothing(tmp_path, monkeypatch, capsys):
    """A fresh clone of a study whose runs were never collected: collect finds no run folder and no recorded row, so
    it refuses instead of writing a header-only table; a header-only table is refused by report (no empty table, no
    blank curves)."""
    from ganlab.cli import study as cli

    monkeypatch.chdir(tmp_path)
    res = tmp_path / "res"

    def run(action: str) -> str:
        monkeypatch.setattr("sys.argv", ["ganlab-study", action, "smoke", f"study.results={res}",
                                         f"study.runs={tmp_path}/runs"])
        with pytest.raises(SystemExit) as exc:
            cli.main()
        assert exc.value.code == 1
        return capsys.readouterr().err

    err = run("collect")
    assert "smoke: no run to collect" in err and "ganlab-study run smoke" in err and "nothing was written" in err
    assert not (res / "evaluations.csv").exists()
    res.mkdir()
    (res / "evaluations.csv").write_text("study,arm,dataset,stage,seed,step,finished\n")
    err = run("report")
    assert "holds no evaluation" in err and "ganlab-study run smoke" in err
    assert sorted(p.name for p in res.iterdir()) == ["evaluations.csv"]
