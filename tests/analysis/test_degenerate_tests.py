"""``ganlab-compare`` and ``ganlab-study`` give one answer for the same numbers: two arms constant at one value get
no test in both (t = 0/0; out of the Holm family), and the study's note says that is the cause."""

from __future__ import annotations

import math

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

import ganlab
from ganlab import stats
from ganlab.analysis.table import best_tests, no_test_reason, p_value_lines
from ganlab.stats import ZERO_VARIANCE, no_t_test_reason
from ganlab.study.report import main_table
from ganlab.study.schema import StudySchema, register


def study(*overrides: str) -> StudySchema:
    register()
    with initialize_config_dir(config_dir=str(ganlab.CONFIG_DIR), version_base="1.3"):
        cfg = compose("ganlab_study", overrides=["study=smoke", "study.endpoint.last=1", "study.columns=[]",
                                                 "study.control=ctrl", *overrides])
    return OmegaConf.to_object(cfg.study)


@pytest.mark.parametrize("value", [8.0, 0.1])  # scipy alone: NaN for [8, 8, 8], p = 1 for [0.1, 0.1, 0.1]
def test_identical_constant_arms_get_no_test_in_both_tools(value):
    summary = {"A": {"modes_covered": (value, 0.0, 3)}, "B": {"modes_covered": (value, 0.0, 3)}}
    assert no_test_reason(summary, "modes_covered") == f"A and B are {ZERO_VARIANCE}"
    assert best_tests(summary, ["modes_covered"]) == {}  # was p = 1, a test
    line = p_value_lines(summary, ["modes_covered"]).splitlines()[1]
    assert line == f"  modes_covered: no test (A and B are {ZERO_VARIANCE})"
    diff, p = stats.compare([value] * 3, [value] * 3, "welch")
    assert diff == 0.0 and math.isnan(p)
    assert stats.no_test_reason([value] * 3, [value] * 3, "welch") == ZERO_VARIANCE


def test_constant_arms_at_different_values_are_a_test_with_p_zero_in_both():
    # t = ±inf: every seed of A above every seed of B with no spread at all
    summary = {"A": {"modes_covered": (8.0, 0.0, 3)}, "B": {"modes_covered": (7.0, 0.0, 3)}}
    assert no_test_reason(summary, "modes_covered") is None
    assert best_tests(summary, ["modes_covered"]) == {"modes_covered": ("A", "B", 0.0)}
    assert stats.compare([8.0] * 3, [7.0] * 3, "welch") == (1.0, 0.0)
    assert no_t_test_reason(8.0, 0.0, 3, 7.0, 0.0, 3) is None


def test_equal_means_with_a_spread_are_a_test_with_p_one():
    # [7, 9] vs [9, 7]: t = 0, Welch p = 1 in both tools
    summary = {"A": {"modes_covered": (8.0, 2 ** 0.5, 2)}, "B": {"modes_covered": (8.0, 2 ** 0.5, 2)}}
    assert best_tests(summary, ["modes_covered"])["modes_covered"][2] == pytest.approx(1.0, abs=1e-12)
    assert stats.compare([7.0, 9.0], [9.0, 7.0], "welch")[1] == pytest.approx(1.0, abs=1e-12)


def test_paired_test_of_equal_pairs_says_so():
    assert stats.no_test_reason([8.0, 6.0], [8.0, 6.0], "paired") == stats.PAIRS_EQUAL
    assert math.isnan(stats.compare([8.0, 6.0], [8.0, 6.0], "paired")[1])
    assert stats.no_test_reason([8.0, 6.0], [7.0, 5.0], "paired") is None  # differences 1, 1: t = inf, p = 0


def rows(finals: dict[str, list[int]]) -> list[dict]:
    return [{"arm": arm, "dataset": "ring8", "stage": "final", "lr": 1e-3, "seed": seed, "step": 40,
             "modes_covered": m, "data/modes_covered": 8.0} for arm, ms in finals.items() for seed, m in enumerate(ms)]


def test_study_table_states_the_zero_variance_cause_and_the_family_size():
    """ctrl [8, 8], B [8, 8] (both constant at 8: no test), C [4, 6]: Welch t = (5 - 8) / sqrt(2/2 + 0) = -3 on
    df = 1 (C's variance alone), p = 1 - 2 atan(3) / pi = 0.2048; Holm over a family of 1: 0.2048."""
    s = study("study.arms=[{name: ctrl}, {name: B}, {name: C}]")
    table = main_table(s, rows({"ctrl": [8, 8], "B": [8, 8], "C": [4, 6]}),
                       {(a, "ring8"): 1e-3 for a in ("ctrl", "B", "C")})
    assert table.family == 1  # B against ctrl has no p value, so it is not in Holm's family
    lines = table.text.splitlines()
    assert lines[3].startswith("| ring8 | B | 0.001 | 2 | 8.0 ± 0.0 | +0.0, p - |")
    assert lines[4].startswith("| ring8 | C | 0.001 | 2 | 5.0 ± 1.4 | -3.0, p = 0.2 (Holm 0.2) |")
    assert stats.compare([4, 6], [8, 8], "welch")[1] == pytest.approx(1 - 2 * math.atan(3) / math.pi, abs=1e-12)
    note = lines[6]
    assert "Holm's step-down correction over the 1 tests of this table" in note
    assert f"Not tested (p -, not in the correction's family): B on ring8, {ZERO_VARIANCE}." in note


def test_study_note_without_any_test_names_zero_variance_not_missing_seeds():
    s = study("study.arms=[{name: ctrl}, {name: B}]")
    chosen = {(a, "ring8"): 1e-3 for a in ("ctrl", "B")}
    note = main_table(s, rows({"ctrl": [8, 8], "B": [8, 8]}), chosen).text.splitlines()[5]
    assert "none could be computed" in note and "fewer than two" not in note and ZERO_VARIANCE in note


def test_factorial_of_constant_cells_names_zero_variance():
    """Cells [8, 8], [8, 8], [6, 6], [7, 7] (base, B on, A on, both): means 8, 8, 6, 7; A = (6 + 7 - 8 - 8) / 2 =
    -1.5, B = (8 + 7 - 8 - 6) / 2 = +0.5, AB = (7 - 6) - (8 - 8) = +1; pooled variance 0: no standard error."""
    from ganlab.study.report import factorial_table
    from ganlab.study.schema import FactorialSchema

    s = study("study.arms=[{name: ctrl}, {name: B}, {name: A}, {name: AB}]")
    s.factorial = FactorialSchema(cells=["ctrl", "B", "A", "AB"], a="A", b="B", interaction="AB")
    chosen = {(a, "ring8"): 1e-3 for a in ("ctrl", "B", "A", "AB")}
    text = factorial_table(s, rows({"ctrl": [8, 8], "B": [8, 8], "A": [6, 6], "AB": [7, 7]}), chosen, "ring8")
    assert text.endswith(": A -1.5, B +0.5, AB +1.0; every cell is constant over its seeds (zero within-cell "
                         "variance), so no standard error, interval or test.")
    assert "fewer than two" not in text and "nan" not in text
