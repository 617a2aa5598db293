"""The power of a study's tests (ganlab.study.power) against R's power.t.test, a Monte-Carlo run of scipy's Welch
test, and a table worked by hand."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps
from test_study_tables import study

from ganlab.study import power
from ganlab.study.report import table_text
from ganlab.study.schema import PowerSchema, StudyError, check_study


@pytest.mark.parametrize("df, nc, alpha", [(1, 4, 0.05), (2, 4, 0.05), (4.88, 8, 0.05), (38, 10 ** 0.5, 0.05),
                                           (1.2, 5, 0.025), (2, 0, 0.05)])
def test_two_sided_power_agrees_with_scipys_noncentral_t(df, nc, alpha):
    """Where scipy's nct is finite, the quadrature agrees with its two tails to 1e-9; at df 2, noncentrality 8
    and alpha 0.025 nct gives NaN and the quadrature a probability."""
    crit = sps.t.ppf(1 - alpha / 2, df)
    want = sps.nct.sf(crit, df, nc) + sps.nct.cdf(-crit, df, nc)
    assert power.two_sided_power(crit, df, nc) == pytest.approx(want, abs=1e-9)
    crit = sps.t.ppf(1 - 0.0125, 2)
    assert 0.5 < power.two_sided_power(crit, 2, 8.0) < 1


def test_power_agrees_with_r_power_t_test():
    """With equal sds and seeds Welch's df is Student's, so R's power.t.test applies: power.t.test(n = 20,
    delta = 1) gives power 0.8689528 (the opposite tail adds < 1e-7), and power.t.test(power = 0.9, delta = 1)
    gives n = 22.02110, so 23 seeds are the fewest that reach 0.9."""
    assert power.welch_power(1.0, 1.0, 1.0, 20, 20, 0.05) == pytest.approx(0.8689528, abs=1e-6)
    assert power.seeds_needed(1.0, 1.0, 1.0, 0.05, 0.9) == 23
    assert power.welch_power(0.0, 1.0, 2.0, 5, 7, 0.05) == pytest.approx(0.05)  # no difference: alpha


def test_power_agrees_with_simulated_welch_tests():
    """Unequal sds and seeds (sd 1 with 5 seeds against sd 2 with 7): the share of 40,000 simulated tables that
    scipy's Welch test rejects at 0.05 lies within 0.015 of the noncentral-t power (an approximation: the test
    uses sample sds; the binomial standard error is 0.0025)."""
    rng = np.random.default_rng(0)
    for delta in (1.0, 2.5):
        a = rng.normal(delta, 1.0, (40_000, 5))
        b = rng.normal(0.0, 2.0, (40_000, 7))
        rejected = float(np.mean(sps.ttest_ind(a, b, axis=1, equal_var=False).pvalue < 0.05))
        assert rejected == pytest.approx(power.welch_power(delta, 1.0, 2.0, 5, 7, 0.05), abs=0.015)


def test_min_detectable_is_the_difference_with_the_asked_power():
    """The smallest detectable difference has power exactly 0.8, rises as alpha falls, and falls as seeds rise;
    seeds_needed is the first n whose power reaches the level."""
    d = power.min_detectable(1.5, 0.5, 5, 5, 0.05)
    assert power.welch_power(d, 1.5, 0.5, 5, 5, 0.05) == pytest.approx(0.8, abs=1e-9)
    assert power.min_detectable(1.5, 0.5, 5, 5, 0.005) > d > power.min_detectable(1.5, 0.5, 10, 10, 0.05)
    n = power.seeds_needed(d, 1.5, 0.5, 0.05)
    assert n == 5 or (power.welch_power(d, 1.5, 0.5, n, n, 0.05) >= 0.8 > power.welch_power(d, 1.5, 0.5, n - 1,
                                                                                              n - 1, 0.05))
    assert power.seeds_needed(0.0, 1.0, 1.0, 0.05) is None
    with pytest.raises(ValueError, match="power must lie"):
        power.min_detectable(1.0, 1.0, 5, 5, 0.05, power=0.01)


def test_power_table_by_hand():
    """Final modes over seeds 0, 1: control [8, 6] (sd 1.41), B [8, 8] (sd 0), C [4, 6] (sd 1.41). Two tests, so
    Holm's first threshold is 0.05 / 2 = 0.025; each detectable difference is min_detectable at those sds, and
    the published ring difference of 1.6 modes needs seeds_needed(1.6, ...) seeds per arm."""
    s = study("study.endpoint.last=1", "study.columns=[]", "study.arms=[{name: ctrl}, {name: B}, {name: C}]",
              "study.control=ctrl")
    s.power, s.tuning = PowerSchema(published={"ring8": 1.6}, source="a paper"), None
    rows = [{"arm": arm, "dataset": "ring8", "stage": "final", "lr": 1e-3, "seed": seed, "step": 40,
             "modes_covered": final, "data/modes_covered": 8.0}
            for arm, finals in (("ctrl", [8, 6]), ("B", [8, 8]), ("C", [4, 6])) for seed, final in enumerate(finals)]
    text, _ = table_text(s, rows)
    sd = 2 ** 0.5
    fmt = lambda v: format(v, ".1f")  # noqa: E731
    b = [fmt(power.min_detectable(0.0, sd, 2, 2, lvl)) for lvl in (0.025, 0.05)]
    c = [fmt(power.min_detectable(sd, sd, 2, 2, lvl)) for lvl in (0.025, 0.05)]
    need = power.seeds_needed(1.6, sd, sd, 0.025)
    assert f"| ring8 | B | 2, 2 | 0.0, 1.4 | +1.0 | {b[0]} | {b[1]} | 1.6: {power.seeds_needed(1.6, 0, sd, 0.025)} |" \
        in text
    assert f"| ring8 | C | 2, 2 | 1.4, 1.4 | -2.0 | {c[0]} | {c[1]} | 1.6: {need} |" in text
    assert "alpha / m = 0.05 / 2" in text and "Published differences: a paper." in text
    assert float(c[0]) > float(c[1]) > 2.0  # two seeds a side cannot detect the 2-mode difference they show


def test_power_without_reporting_runs_is_one_sentence_not_an_empty_table():
    """Part-way through tuning (only the control's reporting runs, or none): no test, so no 'alpha / m = 0.05 / 0'
    and no table without rows."""
    s = study("study.endpoint.last=1", "study.columns=[]", "study.arms=[{name: ctrl}, {name: B}]",
              "study.control=ctrl")
    s.power, s.tuning = PowerSchema(), None
    rows = [{"arm": "ctrl", "dataset": "ring8", "stage": "final", "lr": 1e-3, "seed": seed, "step": 40,
             "modes_covered": 8.0, "data/modes_covered": 8.0} for seed in (0, 1)]
    text, _ = table_text(s, rows)
    assert "Power: not stated yet: no arm other than the control has finished reporting runs" in text
    assert "/ 0" not in text and "| data | arm | seeds (arm, control)" not in text


@pytest.mark.parametrize("node, test, message", [
    (PowerSchema(level=0.01), "welch", "power.level must lie between"),
    (PowerSchema(published={"grid25": 7.3}), "welch", "power.published names"),
    (PowerSchema(), "paired", "Welch's test only"),
])
def test_a_power_node_that_cannot_hold_is_refused(node, test, message):
    s = study(f"study.tests.test={test}")
    s.power = node
    with pytest.raises(StudyError, match=message):
        check_study(s)
