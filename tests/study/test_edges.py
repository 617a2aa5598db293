"""Tuning choices at the edge of the grid: found, the value past each edge, and the reporting stage refused while
``tuning.edge`` is ``stop`` (fair_table_v2's declared lr rule)."""

from __future__ import annotations

import shlex
from types import SimpleNamespace

import pytest
from omegaconf import OmegaConf

from ganlab.study.edges import beyond, check_edges, edge_choices
from ganlab.study.schema import StudyError
from ganlab.study.status import compose_study

GRID = "study.tuning.axis.values=[0.0001,0.0003,0.001,0.003,0.01]"  # fair_table_v2 as declared, before amendments
DAMPING, GAN, MD = "D lr damping (x0.5)", "GAN (no strategy)", "minibatch discrimination (B=8)"


@pytest.mark.parametrize("values, side, want", [
    ([1e-4, 3e-4, 1e-3, 3e-3, 1e-2], "top", 0.03),       # 3e-3 x 1e-2 / 1e-3: the 1-3-10 series goes on
    ([1e-4, 3e-4, 1e-3, 3e-3, 1e-2], "bottom", 3e-5),    # 3e-4 x 1e-4 / 1e-3
    ([3e-3, 1e-2, 3e-2], "top", 0.1),
    ([3e-5, 1e-4, 3e-4], "bottom", 1e-5),
    ([1, 2, 4], "top", 8.0), ([1, 2, 4], "bottom", 0.5),  # a geometric grid: its one ratio
    ([0.3, 0.1], "top", 0.9),                             # two values, any order: their ratio
])
def test_the_value_past_an_edge_continues_the_grids_last_two_steps(values, side, want):
    assert beyond(values, side) == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("values", [[1e-3], [0.0, 1e-3, 1e-2], [-1e-3, 1e-3]])
def test_no_value_past_a_grid_without_a_positive_step(values):
    with pytest.raises(ValueError, match="two or more positive values"):
        beyond(values, "top")


def test_edge_choices_are_the_first_and_last_values_only():
    study = compose_study("fair_table_v2", [GRID])
    chosen = {(GAN, "ring8"): 0.003, (DAMPING, "grid25"): 0.01, (MD, "grid25"): 0.0001, (GAN, "grid25"): None}
    assert edge_choices(study, chosen) == [(DAMPING, "grid25", 0.01, "top"), (MD, "grid25", 0.0001, "bottom")]
    one = compose_study("fair_table_v2", ["study.tuning.axis.values=[0.001]"])
    assert edge_choices(one, {(GAN, "ring8"): 0.001}) == []  # one value: nothing to extend


def test_the_refusal_names_each_edge_choice_and_an_override_that_adds_the_values_past_them():
    study = compose_study("fair_table_v2", [GRID])
    assert study.tuning.edge == "stop"  # declared in the study file
    chosen = {(GAN, "ring8"): 0.003, (DAMPING, "grid25"): 0.01, (MD, "grid25"): 0.0001}
    with pytest.raises(StudyError) as err:
        check_edges(study, chosen)
    msg = str(err.value)
    assert f"{DAMPING} on grid25 chose lr 0.01, the top" in msg and f"{MD} on grid25 chose lr 0.0001, the bottom" in msg
    assert f"{GAN} on ring8" not in msg  # interior: not named
    override = next(w for w in shlex.split(msg.split("for this run ")[1]) if w.startswith("study.tuning"))
    amended = compose_study("fair_table_v2", [override.rstrip(";")])  # the advice composes, as a shell passes it
    assert list(amended.tuning.axis.values) == [3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2]
    check_edges(amended, chosen)  # the same choices are interior on the amended grid
    check_edges(compose_study("fair_table_v2", [GRID, "study.tuning.edge=allow"]), chosen)  # allow: no refusal


def test_an_unknown_edge_rule_is_refused_by_the_studys_checks():
    from ganlab.study.schema import check_study

    check_study(compose_study("fair_table_v2"))
    with pytest.raises(StudyError, match="tuning.edge must be allow or stop .got 'warn'."):
        check_study(compose_study("fair_table_v2", ["study.tuning.edge=warn"]))


def test_the_reporting_stage_launches_nothing_while_a_choice_sits_at_an_edge(monkeypatch):
    from hydra.core.hydra_config import HydraConfig

    from ganlab.cli import study as cli
    from ganlab.study import collect, runner, stats

    launched: list = []
    monkeypatch.setattr("ganlab.study.check.check_jobs", lambda study: 0)
    monkeypatch.setattr(HydraConfig, "get", staticmethod(lambda: SimpleNamespace(launcher=None)))
    monkeypatch.setattr(runner, "launch", lambda study, jobs, launcher, recorded: launched.append(list(jobs)) or [])
    monkeypatch.setattr(cli, "recorded_for", lambda study: {})
    monkeypatch.setattr(collect, "collect", lambda *a: [])
    monkeypatch.setattr(collect, "to_train", lambda study, jobs, recorded: jobs)
    monkeypatch.setattr(stats, "choices", lambda study, rows: {(GAN, "ring8"): 0.003, (DAMPING, "grid25"): 0.01})
    study = compose_study("fair_table_v2", [GRID])
    with pytest.raises(StudyError, match="the reporting stage is not run"):
        cli._run_stages(study, OmegaConf.create({"stage": "final", "arms": None}))
    assert launched == []
    # the arms asked for decide: the plain GAN alone has an interior choice, so its reporting runs launch
    cli._run_stages(study, OmegaConf.create({"stage": "final", "arms": [GAN]}))
    assert [(j.arm, j.dataset, j.value) for j in launched[0]] == [(GAN, "ring8", 0.003)] * 5


def test_the_table_says_which_choices_sit_at_an_edge_or_that_all_are_interior():
    from ganlab.study.report import edge_note

    study = compose_study("fair_table_v2", [GRID])
    assert edge_note(study, {(GAN, "ring8"): 0.003, (DAMPING, "grid25"): 0.01}) == (
        "\nChosen at an edge of the grid (lr 0.0001 to 0.01), so the best value may lie beyond it: 1 of 2 choices, "
        f"{DAMPING} on grid25 (lr 0.01, the top).\n")
    assert edge_note(study, {(GAN, "ring8"): 0.003}) == "\nEvery choice is interior to the grid (lr 0.0001 to 0.01).\n"
    assert edge_note(study, {}) == ""
