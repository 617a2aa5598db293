"""Statistical power of a study's primary comparisons: the smallest difference a table could detect at its seeds,
and the seeds a difference of a given size would need.

Every test of a study table is Welch's two-sided unequal-variance t-test of an arm against the control
(:func:`ganlab.stats.compare`). Its power against a true difference ``delta`` follows the noncentral t
distribution (Welch 1947 for the degrees of freedom; the noncentral-t power of the two-sample test, e.g. Cohen
1988, ch. 2): with standard error ``se = sqrt(s_a^2 / n_a + s_b^2 / n_b)``, Welch-Satterthwaite degrees of freedom
``df = se^4 / ((s_a^2 / n_a)^2 / (n_a - 1) + (s_b^2 / n_b)^2 / (n_b - 1))``, critical value
``t* = t_{1 - alpha / 2, df}`` and noncentrality ``delta / se``,

    power = P(T' > t*) + P(T' < -t*),   T' ~ noncentral t(df, delta / se).

The standard deviations are the table's own sample standard deviations (an estimate from a few seeds: the
answer is as uncertain as they are). Under Holm's correction over m tests the first (smallest) p value is held to
alpha / m and the last to alpha: :func:`power_table` states the detectable difference at alpha / m, the bar every
difference must clear when the others are null.
"""

from __future__ import annotations

import math
import statistics

from ganlab.stats import welch_df

#: the power a "detectable" difference is detected with
POWER = 0.8


def two_sided_power(crit: float, df: float, nc: float) -> float:
    """P(|T'| > crit) for a noncentral t variable T' = (Z + nc) / sqrt(V / df), Z standard normal and V chi-square
    with ``df`` degrees of freedom: the integral over V's quantiles u in (0, 1) of
    P(Z > crit s - nc) + P(Z < -crit s - nc), s = sqrt(V_u / df) (the definition of the noncentral t, e.g.
    Johnson, Kotz & Balakrishnan 1995, ch. 31). Computed by quadrature because scipy's ``nct`` returns NaN for
    the few degrees of freedom and large noncentralities a study's table meets (df 2, noncentrality 8).

    Returns:
        A probability in [0, 1].
    """
    from scipy import integrate, special

    def tails(u: float) -> float:  # scipy.special's scalar ufuncs: chdtri(df, 1 - u) is chi2's u-quantile
        scale = crit * math.sqrt(special.chdtri(df, 1.0 - u) / df)
        return special.ndtr(nc - scale) + special.ndtr(-scale - nc)

    return min(1.0, max(0.0, integrate.quad(tails, 0.0, 1.0, epsabs=1e-12, epsrel=1e-10, limit=200)[0]))


def welch_power(delta: float, sd_a: float, sd_b: float, n_a: int, n_b: int, alpha: float) -> float:
    """The probability that Welch's two-sided test at level ``alpha`` rejects when the true difference of means is
    ``delta`` (same units as the standard deviations) and the true standard deviations are ``sd_a``, ``sd_b``:
    :func:`two_sided_power` at Welch's degrees of freedom, ``t_{1 - alpha / 2, df}`` and ``|delta| / se``.

    Returns:
        Power in [alpha, 1] (alpha at ``delta = 0``).

    Raises:
        ValueError: see :func:`ganlab.stats.welch_df`; ``alpha`` outside (0, 1).
    """
    from scipy import stats

    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
    df = welch_df(sd_a, sd_b, n_a, n_b)
    se = math.sqrt(sd_a ** 2 / n_a + sd_b ** 2 / n_b)
    return two_sided_power(float(stats.t.ppf(1 - alpha / 2, df)), df, abs(delta) / se)


def min_detectable(sd_a: float, sd_b: float, n_a: int, n_b: int, alpha: float, power: float = POWER) -> float:
    """The smallest true difference of means (> 0, the standard deviations' units) that Welch's two-sided test at
    level ``alpha`` detects with probability ``power`` at these sample sizes: the root of
    :func:`welch_power` ``= power`` (Brent's method).

    Raises:
        ValueError: see :func:`welch_power`; ``power`` outside (alpha, 1).
    """
    from scipy import optimize

    if not alpha < power < 1:
        raise ValueError(f"power must lie in (alpha, 1) = ({alpha}, 1), got {power}")
    se = math.sqrt(sd_a ** 2 / n_a + sd_b ** 2 / n_b)
    welch_df(sd_a, sd_b, n_a, n_b)  # raises on a sample too small or two constant ones
    hi = se
    while welch_power(hi, sd_a, sd_b, n_a, n_b, alpha) < power:
        hi *= 2
    return float(optimize.brentq(lambda d: welch_power(d, sd_a, sd_b, n_a, n_b, alpha) - power, 0.0, hi,
                                 xtol=1e-10 * se, rtol=1e-12))


def seeds_needed(delta: float, sd_a: float, sd_b: float, alpha: float, power: float = POWER,
                 most: int = 10_000) -> int | None:
    """The fewest seeds per arm (the same n for both) with which Welch's two-sided test at level ``alpha`` detects a
    true difference ``delta`` with probability ``power``, given true standard deviations ``sd_a``, ``sd_b``.

    Returns:
        n >= 2, or None when even ``most`` seeds a side are not enough (or ``delta`` is 0).

    Raises:
        ValueError: see :func:`welch_power`.
    """
    if delta == 0:
        return None
    reaches = lambda n: welch_power(delta, sd_a, sd_b, n, n, alpha) >= power  # noqa: E731
    hi = 2  # power rises with n: double until it reaches ``power``, then bisect for the first n that does
    while not reaches(hi):
        if hi >= most:
            return None
        hi = min(2 * hi, most)
    lo = hi // 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if reaches(mid):
            hi = mid
        else:
            lo = mid
    return hi


def power_table(study, rows, chosen, family: int) -> str:
    """Markdown under a study's table (its ``power`` node set): per data set and arm, the seeds and sample standard
    deviations of the primary endpoint (arm, control), the observed difference, the smallest difference detectable
    with probability ``power.level`` at Holm's first threshold alpha / m and at alpha, and, where ``power.published``
    gives a paper's difference for the data set, the seeds per arm it would need at alpha / m. ``-`` where an arm
    or the control has fewer than two seeds, or both are constant; one sentence instead of the table while no arm
    other than the control has reporting runs (a study part-way through its tuning stage).

    ``family``: the number of the table's tests with a p value, Holm's m (``MainTable.family`` of
    :func:`ganlab.study.report.main_table`, which counts them); m = 1 without Holm's correction."""
    from ganlab.io import md_row, md_rule
    from ganlab.study.plan import arm_of
    from ganlab.study.report import column_values, final_runs
    from ganlab.study.schema import arm_score

    ep, pw, alpha = study.endpoint, study.power, study.tests.alpha
    m = family if study.tests.correction == "holm" else 1
    first = alpha / max(m, 1)
    fmt = lambda v: format(ep.scale * v, ep.fmt)  # noqa: E731
    head = ["data", "arm", "seeds (arm, control)", "std (arm, control)", "observed diff",
            f"detectable at alpha / m = {first:.2g}", f"detectable at alpha = {alpha:g}"]
    if pw.published:
        head.append("published diff: seeds per arm needed (alpha / m)")
    lines = [md_row(head), md_rule(len(head))]
    for d in study.datasets:
        control = final_runs(study, rows, study.control, d, chosen)
        y = list(column_values(control, arm_score(arm_of(study, study.control), ep.score), ep).values())
        for a in (a for a in study.arms if a.name != study.control):
            x = list(column_values(final_runs(study, rows, a.name, d, chosen), arm_score(a, ep.score), ep).values())
            if not x:
                continue
            row = [d, a.name, f"{len(x)}, {len(y)}"]
            sds = [statistics.stdev(v) if len(v) > 1 else math.nan for v in (x, y)]
            if min(len(x), len(y)) < 2 or sds == [0.0, 0.0]:
                lines.append(md_row(row + ["-"] * (len(head) - 3)))
                continue
            row += [f"{fmt(sds[0])}, {fmt(sds[1])}", format(ep.scale * (statistics.fmean(x) - statistics.fmean(y)),
                                                            "+" + ep.fmt)]
            row += [fmt(min_detectable(sds[0], sds[1], len(x), len(y), lvl, pw.level)) for lvl in (first, alpha)]
            if pw.published:
                delta = pw.published.get(d)
                need = seeds_needed(delta, sds[0], sds[1], first, pw.level) if delta is not None else None
                row.append("-" if delta is None else f"{fmt(delta)}: {need if need is not None else '> 10,000'}")
            lines.append(md_row(row))
    if len(lines) == 2:  # no arm beside the control has reporting runs: no test, so no power to state
        return ("Power: not stated yet: no arm other than the control has finished reporting runs, so the table "
                "has no test.\n")
    source = f" Published differences: {pw.source}." if pw.published and pw.source else ""
    return ("\n".join(lines) + "\n\n" + f"Power: the smallest true difference of {ep.label or ep.score} that Welch's "
            f"two-sided test detects with probability {pw.level:g}, from each row's sample standard deviations and "
            f"seeds (estimates from few seeds: read them as an order of magnitude), at Holm's first threshold "
            f"alpha / m = {alpha:g} / {m} (the bar a difference clears when every other test is null) and at alpha "
            f"(Holm's last step). Noncentral-t power of Welch's test; ganlab.study.power.{source}\n")
