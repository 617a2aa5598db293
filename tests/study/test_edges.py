"""Tuning choices at the edge of the grid: found (ties with the next value inward apart), the value past each edge,
and the reporting stage refused while ``tuning.edge`` is ``stop`` (fair_table_v2's declared lr rule)."""

from __future__ import annotations

import shlex
from types import SimpleNamespace

import pytest
from omegaconf import OmegaConf

from ganlab.study.edges import Edge, beyond, edge_choices, refusal
from ganlab.study.schema import StudyError, check_study
from ganlab.study.status import compose_study

#: fair_table_v2 as declared (before its amendments), one tuning seed.
GRID = ["study.tuning.axis.values=[0.0001,0.0003,0.001,0.003,0.01]", "study.tuning.seeds=[100]"]
DAMPING, GAN, MD = "D lr damping (x0.5)", "GAN (no strategy)", "minibatch discrimination (B=8)"


def tuning_rows(arm: str, dataset: str, modes: dict[float, float], hq: float = 0.5) -> list[dict]:
    """Seed 100's evaluations at steps 16,000-20,000 (the last-5 window at the 20,000-step budget) per lr, with
    ``modes`` covered at every evaluation."""
    return [{"arm": arm, "dataset": dataset, "stage": "tune", "seed": 100, "lr": lr, "step": step,
             "finished": True, "modes_covered": m, "hq_fraction": hq}
            for lr, m in modes.items() for step in range(16000, 20001, 1000)]


#: D lr damping on grid25 best at the top (1e-2, 20 modes), minibatch discrimination at the bottom (1e-4, 18),
#: the plain GAN on ring8 at 3e-3, interior; R1 on ring8 tied at 8 modes from 1e-3 up (the tie-break, -value).
ROWS = (tuning_rows(DAMPING, "grid25", {1e-4: 2, 3e-4: 5, 1e-3: 9, 3e-3: 15, 1e-2: 20})
        + tuning_rows(MD, "grid25", {1e-4: 18, 3e-4: 12, 1e-3: 9, 3e-3: 4, 1e-2: 1})
        + tuning_rows(GAN, "ring8", {1e-4: 3, 3e-4: 5, 1e-3: 6, 3e-3: 7, 1e-2: 6})
        + tuning_rows("R1 (positive control)", "ring8", {1e-4: 6, 3e-4: 7, 1e-3: 8, 3e-3: 8, 1e-2: 8}))


@pytest.mark.parametrize("values, side, want", [
    ([1e-4, 3e-4, 1e-3, 3e-3, 1e-2], "top", 0.03),       # 3e-3 x 1e-2 / 1e-3: the 1-3-10 series goes on
    ([1e-4, 3e-4, 1e-3, 3e-3, 1e-2], "bottom", 3e-5),    # 3e-4 x 1e-4 / 1e-3
    ([3e-3, 1e-2, 3e-2], "top", 0.1),
    ([3e-5, 1e-4, 3e-4], "bottom", 1e-5),
    ([32, 64, 128, 256], "top", 512.0), ([1, 2, 4], "bottom", 0.5),  # a geometric grid: its one ratio
    ([0.3, 0.1], "top", 0.9),                             # two values, any order: their ratio
    ([100, 101, 102], "top", 103.02),                     # 101 x 102 / 100, never a value already there
])
def test_the_value_past_an_edge_continues_the_grids_last_two_steps(values, side, want):
    assert beyond(values, side) == want


@pytest.mark.parametrize("values", [[1e-3], [0.0, 1e-3, 1e-2], [-1e-3, 1e-3]])
def test_no_value_past_a_grid_without_a_positive_step(values):
    with pytest.raises(ValueError, match="two or more positive values"):
        beyond(values, "top")


def test_edge_choices_are_the_smallest_and_largest_values_unless_the_tie_break_put_them_there():
    study = compose_study("fair_table_v2", GRID)
    chosen = {(GAN, "ring8"): 0.003, (DAMPING, "grid25"): 0.01, (MD, "grid25"): 0.0001, (GAN, "grid25"): None,
              ("R1 (positive control)", "ring8"): 0.001}
    assert edge_choices(study, chosen, ROWS) == [Edge(DAMPING, "grid25", 0.01, "top", False),
                                                 Edge(MD, "grid25", 0.0001, "bottom", False)]
    tied = {("R1 (positive control)", "ring8"): 0.01}  # 8 modes at 3e-3 and 1e-2: the tie-break's edge
    assert edge_choices(study, tied, ROWS) == [Edge("R1 (positive control)", "ring8", 0.01, "top", True)]
    assert refusal(study, tied, ROWS) is None  # a value past it would tie too: no refusal, no endless grid
    # equal modes but a higher HQ at the top: the HQ tie-break chose it, and HQ may rise past it: an edge
    hq = [{**r, "hq_fraction": 0.9} if r["lr"] == 1e-2 else r for r in ROWS]
    assert edge_choices(study, tied, hq) == [Edge("R1 (positive control)", "ring8", 0.01, "top", False)]
    one = compose_study("fair_table_v2", ["study.tuning.axis.values=[0.001]"])
    assert edge_choices(one, {(GAN, "ring8"): 0.001}, ROWS) == []  # one value: nothing to extend


def test_the_refusal_names_each_edge_choice_and_an_override_that_adds_the_values_past_them():
    study = compose_study("fair_table_v2", GRID)
    assert study.tuning.edge == "stop"  # declared in the study file
    chosen = {(GAN, "ring8"): 0.003, (DAMPING, "grid25"): 0.01, (MD, "grid25"): 0.0001}
    msg = refusal(study, chosen, ROWS)
    assert f"{DAMPING} on grid25 chose lr 0.01, the top; {MD} on grid25 chose lr 0.0001, the bottom" in msg
    assert f"{GAN} on ring8" not in msg and "Add 3e-05 and 0.03 for every arm" in msg
    assert "conf/study/fair_table_v2.yaml" in msg and "stage=all or stage=tune" in msg
    override = next(w for w in shlex.split(msg.split(" as ", 1)[1].split(". Then")[0]))  # as a shell passes it
    amended = compose_study("fair_table_v2", [override, GRID[1]])
    assert list(amended.tuning.axis.values) == [3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2]
    assert refusal(amended, chosen, ROWS) is None  # the same choices are interior on the amended grid
    assert refusal(compose_study("fair_table_v2", [*GRID, "study.tuning.edge=allow"]), chosen, ROWS) is None


def test_the_studys_checks_refuse_an_unknown_edge_rule_and_stop_on_a_grid_with_zero():
    check_study(compose_study("fair_table_v2"))
    with pytest.raises(StudyError, match="tuning.edge must be allow or stop .got 'warn'."):
        check_study(compose_study("fair_table_v2", ["study.tuning.edge=warn"]))
    with pytest.raises(StudyError, match="every tuning.axis.values entry must be positive .got .0.0, 0.001.."):
        check_study(compose_study("fair_table_v2", ["study.tuning.axis.values=[0.0,0.001]"]))
    check_study(compose_study("fair_table_v2", ["study.tuning.axis.values=[0.0,0.001]", "study.tuning.edge=allow"]))


def test_the_reporting_stage_launches_nothing_while_a_choice_sits_at_an_edge(monkeypatch):
    from hydra.core.hydra_config import HydraConfig

    from ganlab.cli import study as cli
    from ganlab.study import collect, runner

    launched: list = []
    monkeypatch.setattr("ganlab.study.check.check_jobs", lambda study: 0)
    monkeypatch.setattr(HydraConfig, "get", staticmethod(lambda: SimpleNamespace(launcher=None)))
    monkeypatch.setattr(runner, "launch", lambda study, jobs, launcher, recorded: launched.append(list(jobs)) or [])
    monkeypatch.setattr(cli, "recorded_for", lambda study: {})
    monkeypatch.setattr(collect, "collect", lambda *a: ROWS)
    monkeypatch.setattr(collect, "to_train", lambda study, jobs, recorded: jobs)
    study = compose_study("fair_table_v2", GRID)
    done, stopped, refused = cli._run_stages(study, OmegaConf.create({"stage": "final", "arms": None}))
    assert (done, stopped, launched) == ([], False, []) and refused == refusal(
        study, {(DAMPING, "grid25"): 0.01, (MD, "grid25"): 0.0001, (GAN, "ring8"): 0.003,
                ("R1 (positive control)", "ring8"): 0.001}, ROWS)
    # the arms asked for decide: the plain GAN alone has an interior choice, so its reporting runs launch
    assert cli._run_stages(study, OmegaConf.create({"stage": "final", "arms": [GAN]}))[2] is None
    assert [(j.arm, j.dataset, j.value) for j in launched[0]] == [(GAN, "ring8", 0.003)] * 5


def test_a_refused_study_writes_its_table_then_exits_1_with_the_reason(monkeypatch, capsys):
    from ganlab.cli import study as cli

    written = []
    monkeypatch.setattr(cli, "_run_stages", lambda study, cfg: ([], False, "study x: the reporting stage is not run"))
    monkeypatch.setattr(cli, "recorded_for", lambda study: {})
    monkeypatch.setattr(cli, "write_collected", lambda study, rec: written.append(study) or "/tmp/t/evaluations.csv")
    study = compose_study("fair_table_v2")
    with pytest.raises(SystemExit) as exit_info:
        cli.run_study(study, None)
    assert exit_info.value.code == 1 and written == [study]
    out, err = capsys.readouterr()
    assert "every evaluation in /tmp/t/evaluations.csv" in out
    assert err == "ganlab-study: study x: the reporting stage is not run\n"


def test_the_table_says_which_choices_sit_at_an_edge_or_that_all_are_interior():
    from ganlab.study.report import edge_note

    study = compose_study("fair_table_v2", [*GRID, "study.arms=[{name:'GAN (no strategy)'}]", "study.datasets=[ring8]"])
    assert edge_note(study, {(GAN, "ring8"): 0.01}, ROWS) == (
        "\nChosen at an edge of the grid (lr 0.0001 to 0.01), so the best value may lie beyond it: 1 of 1 choices, "
        f"{GAN} on ring8 (lr 0.01, the top).\n")
    assert edge_note(study, {(GAN, "ring8"): 0.003}, ROWS) == (
        "\nNo choice is at an edge of the grid (lr 0.0001 to 0.01); every choice is interior.\n")
    assert edge_note(study, {}, ROWS) == (  # no choice yet (a value added to the grid still running): said
        "\nNo (arm, data set) pair has a choice yet: each has tuning runs missing or unfinished somewhere on the grid "
        "(lr 0.0001 to 0.01), so no choice is read against its edges.\n")
    one = compose_study("fair_table_v2", ["study.tuning.axis.values=[0.001]", "study.datasets=[ring8]"])
    assert edge_note(one, {}, ROWS) == ""  # a grid of one value has no edges to read
    full = compose_study("fair_table_v2", GRID)  # 8 arms x 2 data sets: the pairs without a choice are counted
    assert edge_note(full, {("R1 (positive control)", "ring8"): 0.01}, ROWS) == (
        "\nNo choice is at an edge of the grid (lr 0.0001 to 0.01) but by the tie-break. At an edge by the value "
        "tie-break only (equal to the next value inward on every score the choice reads): R1 (positive control) on "
        "ring8 (lr 0.01, the top). 15 of the 16 (arm, data set) pairs have no choice (their tuning runs are missing "
        "or unfinished), so this reads the choices made so far.\n")
