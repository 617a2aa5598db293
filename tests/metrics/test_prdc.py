"""Tests for ganlab.metrics.prdc against a direct (full-matrix) reference implementation, and against the
official ``prdc`` package of Naeem et al. 2020 (a test dependency: ``pip install prdc``) for the strict ``<``
boundary convention, on random data and on exact duplicates."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch
from scipy.spatial.distance import cdist
from sklearn.metrics import pairwise_distances
from sklearn.neighbors import NearestNeighbors

from ganlab.metrics.prdc import BOUNDARIES, _work_dtype, ball_comparisons, knn_sq_radii, prdc
from ganlab.metrics.scorers import PRDCScorer

OPS = {"<=": np.less_equal, "<": np.less}


def reference_prdc(real: np.ndarray, fake: np.ndarray, k_pr: int, k_dc: int, dist=cdist, pr: str = "<=",
                   dc: str = "<") -> dict[str, float]:
    """Brute force on the full distance matrix: the formulas of the official ``prdc`` package, with ``pr``
    (``"<="`` or ``"<"``) deciding a boundary point for precision/recall and ``dc`` for density/coverage
    (default: ganlab's ``official`` convention); ``dist`` gives pairwise Euclidean distances (scipy's
    ``cdist``, computed as ``sqrt(sum((a - b)^2))``, by default)."""

    def radii(x: np.ndarray, k: int) -> np.ndarray:
        return np.partition(dist(x, x), k, axis=1)[:, k]  # (k+1)-th smallest including self (0)

    d = dist(real, fake)  # (N, M)
    r_pr, r_dc, f_pr = radii(real, k_pr), radii(real, k_dc), radii(fake, k_pr)
    pr_in, dc_in = OPS[pr], OPS[dc]
    return {
        "precision": float(pr_in(d, r_pr[:, None]).any(0).mean()),
        "recall": float(pr_in(d, f_pr[None, :]).any(1).mean()),
        "density": float(dc_in(d, r_dc[:, None]).sum(0).mean() / k_dc),
        "coverage": float(dc_in(d.min(1), r_dc).mean()),
    }


def reference_for(boundary: str, real: np.ndarray, fake: np.ndarray, k_pr: int, k_dc: int, dist=cdist):
    """:func:`reference_prdc` under a named convention, spelled out here rather than read from ganlab."""
    pr, dc = {"official": ("<=", "<"), "inclusive": ("<=", "<="), "strict": ("<", "<")}[boundary]
    return reference_prdc(real, fake, k_pr, k_dc, dist=dist, pr=pr, dc=dc)


def _sets(n: int = 300, m: int = 250, d: int = 8, shift: float = 0.5):
    rng = np.random.default_rng(0)
    return rng.standard_normal((n, d)), rng.standard_normal((m, d)) * 1.2 + shift


@pytest.mark.parametrize("block_size", [1, 100, 1 << 22])
def test_matches_reference_implementation(block_size):
    real, fake = _sets()
    got = prdc(torch.from_numpy(real), torch.from_numpy(fake), block_size=block_size)
    want = reference_prdc(real, fake, 3, 5)
    assert got.keys() == want.keys()
    for key in want:
        assert got[key] == pytest.approx(want[key], abs=1e-12), key
    assert 0 < got["precision"] < 1 and 0 < got["recall"] < 1


def test_matches_reference_with_other_k_and_float32():
    real, fake = (a.astype(np.float32) for a in _sets(200, 260, 4, 0.2))
    got = prdc(torch.from_numpy(real), torch.from_numpy(fake), k_pr=5, k_dc=2)
    want = reference_prdc(real.astype(np.float64), fake.astype(np.float64), 5, 2)
    for key in want:  # float32 input, float64 decisions
        assert got[key] == pytest.approx(want[key], abs=1e-12), key


def sklearn_prdc(real: np.ndarray, fake: np.ndarray, k_pr: int, k_dc: int, boundary: str = "official"):
    """Naeem et al.'s formulas as in their ``prdc`` package, on float64 ``sklearn`` ``pairwise_distances``."""
    return reference_for(boundary, real, fake, k_pr, k_dc,
                         dist=lambda a, b: pairwise_distances(a, b, metric="euclidean"))


def _assert_exact(got: dict[str, float], want: dict[str, float]) -> None:
    assert got.keys() == want.keys()
    for key in ("precision", "recall", "coverage"):
        assert got[key] == want[key], (key, got[key], want[key])
    assert got["density"] == pytest.approx(want["density"], abs=1e-12)


def _old_slack_pairs(real: np.ndarray, fake: np.ndarray, k: int) -> tuple[int, int]:
    """(pairs exactly on a real k-NN sphere, pairs outside it but within the float32 rounding
    slack that used to widen every radius: (D + 4) eps (|c|^2 + (|c| + r)^2), centred norms)."""
    mean = real.mean(0)
    c = np.linalg.norm(real - mean, axis=1)
    r2 = np.partition(cdist(real, real, "sqeuclidean"), k, axis=1)[:, k]
    slack = (real.shape[1] + 4) * np.finfo(np.float32).eps * (c**2 + (c + np.sqrt(r2)) ** 2)
    d2 = cdist(real, fake, "sqeuclidean")
    return int((d2 == r2[:, None]).sum()), int(((d2 > r2[:, None]) & (d2 <= (r2 + slack)[:, None])).sum())


def _lattice_sets(seed: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """Integer points around far-apart centres (|x| ~ 1600): every float64 distance is exact,
    ties are common, and many fakes lie on, or a squared unit or two outside, a k-NN sphere."""
    rng = np.random.default_rng(seed)
    centres = rng.integers(-1000, 1000, size=(5, 8))
    real = centres[rng.integers(0, 5, 300)] + rng.integers(-2, 3, size=(300, 8))
    fake = centres[rng.integers(0, 4, 240)] + rng.integers(-2, 3, size=(240, 8))
    fake[:40] = real[:40]  # exact duplicates across the sets
    return real.astype(np.float32), fake.astype(np.float32)


def _embedding_like_sets(n: int = 1500, m: int = 1200, d: int = 128, sigma: float = 0.3):
    """Ten tight clusters with centred norms ~36 in 128-d, like classifier embeddings (float32)."""
    rng = np.random.default_rng(4)
    centres = rng.standard_normal((10, d)) * 39 / np.sqrt(d)
    real = centres[rng.integers(0, 10, n)] + sigma * rng.standard_normal((n, d))
    fake = centres[rng.integers(0, 7, m)] + 1.1 * sigma * rng.standard_normal((m, d))
    return real.astype(np.float32), fake.astype(np.float32)


@pytest.mark.parametrize("boundary", list(BOUNDARIES))
@pytest.mark.parametrize("block_size", [1 << 22, 700])
def test_float32_lattice_matches_float64_reference_exactly(block_size, boundary):
    """Many pairs lie exactly on a k-NN sphere, many within float32 rounding of one: the float64 re-decision
    of the band pairs must apply ``<=`` or ``<`` to exact ties, under each convention."""
    real, fake = _lattice_sets()
    on_sphere, in_old_slack = _old_slack_pairs(real.astype(np.float64), fake.astype(np.float64), 5)
    assert on_sphere > 0 and in_old_slack > 50  # the decisions the rounding slack used to flip
    want = sklearn_prdc(real.astype(np.float64), fake.astype(np.float64), 3, 5, boundary)
    for dtype in (torch.float32, torch.float64):
        got = prdc(torch.from_numpy(real).to(dtype), torch.from_numpy(fake).to(dtype), block_size=block_size,
                   boundary=boundary)
        _assert_exact(got, want)


def test_float32_embeddings_match_float64_reference_exactly():
    real, fake = _embedding_like_sets()
    _, in_old_slack = _old_slack_pairs(real.astype(np.float64), fake.astype(np.float64), 5)
    assert in_old_slack > 0
    want = sklearn_prdc(real.astype(np.float64), fake.astype(np.float64), 3, 5)
    _assert_exact(prdc(torch.from_numpy(real), torch.from_numpy(fake)), want)
    _assert_exact(prdc(torch.from_numpy(real).double(), torch.from_numpy(fake).double()), want)
    swapped = prdc(torch.from_numpy(fake), torch.from_numpy(real), k_pr=3, k_dc=3)
    want_swapped = sklearn_prdc(fake.astype(np.float64), real.astype(np.float64), 3, 3)
    _assert_exact(swapped, want_swapped)


@pytest.mark.parametrize(("boundary", "density"), [("official", 1.0), ("strict", 1.0), ("inclusive", 6 / 5)])
def test_identical_float32_sets_keep_exact_ties(boundary, density):
    real, _ = _embedding_like_sets(800, 10)
    x = torch.from_numpy(real)
    got = prdc(x, x.clone(), boundary=boundary)
    assert got["precision"] == 1.0 and got["recall"] == 1.0 and got["coverage"] == 1.0
    assert got["density"] == pytest.approx(density, abs=1e-12)  # (k+1)/k with <=: the k-th neighbour is on the sphere


def test_reduced_precision_float32_matmuls_fall_back_to_float64():
    real, fake = _lattice_sets()
    want = sklearn_prdc(real.astype(np.float64), fake.astype(np.float64), 3, 5)
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("medium")  # TF32/bfloat16 GEMMs: the error bound would not hold
    try:
        assert _work_dtype(torch.device("cpu"), torch.float32) == torch.float64
        got = prdc(torch.from_numpy(real), torch.from_numpy(fake))
    finally:
        torch.set_float32_matmul_precision(before)
    assert _work_dtype(torch.device("cpu"), torch.float32) == torch.float32
    _assert_exact(got, want)


def test_knn_radii_are_exact_in_float32():
    real, _ = _lattice_sets()
    radii = knn_sq_radii(torch.from_numpy(real), [3, 5], block_size=500)
    d2 = cdist(real.astype(np.float64), real.astype(np.float64), "sqeuclidean")
    for k in (3, 5):
        assert radii[k].dtype == torch.float32
        np.testing.assert_array_equal(radii[k].numpy(), np.partition(d2, k, axis=1)[:, k])


def test_identical_sets_are_perfect():
    real, _ = _sets()
    x = torch.from_numpy(real)
    got = prdc(x, x.clone())
    assert got["precision"] == 1.0 and got["recall"] == 1.0 and got["coverage"] == 1.0
    assert got["density"] == pytest.approx(reference_prdc(real, real, 3, 5)["density"], abs=1e-12)


def test_swapping_arguments_swaps_precision_and_recall():
    real, fake = (torch.from_numpy(a) for a in _sets())
    ab, ba = prdc(real, fake, k_pr=3, k_dc=3), prdc(fake, real, k_pr=3, k_dc=3)
    assert ab["precision"] == ba["recall"] and ab["recall"] == ba["precision"]


def test_collapsed_fake_set_has_low_recall_and_coverage():
    real, _ = _sets()
    fake = np.repeat(real[:1], 50, axis=0) + 1e-3 * np.random.default_rng(1).standard_normal((50, 8))
    got = prdc(torch.from_numpy(real), torch.from_numpy(fake))
    want = reference_prdc(real, fake, 3, 5)
    assert got == pytest.approx(want, abs=1e-12)
    assert got["recall"] < 0.05 and got["coverage"] < 0.05 and got["precision"] == 1.0


def test_knn_radii_match_sklearn_and_handle_duplicates():
    x = np.random.default_rng(2).standard_normal((120, 3))
    x[5] = x[9]  # a duplicate pair: nearest other sample at distance 0
    radii = knn_sq_radii(torch.from_numpy(x), [1, 4], block_size=50)
    dist, _ = NearestNeighbors(n_neighbors=5).fit(x).kneighbors(x)  # column 0 is the point itself
    np.testing.assert_allclose(radii[1].sqrt().numpy(), dist[:, 1], atol=1e-7)
    np.testing.assert_allclose(radii[4].sqrt().numpy(), dist[:, 4], atol=1e-7)
    assert radii[1][5] == 0.0 and radii[1][9] == 0.0


@pytest.mark.parametrize(
    ("real", "fake", "kwargs", "match"),
    [
        (torch.randn(5, 3), torch.randn(10, 3), {}, "real needs more than"),
        (torch.randn(10, 3), torch.randn(3, 3), {}, "fake needs more than"),
        (torch.randn(10, 3), torch.randn(10, 4), {}, "D=3"),
        (torch.randn(10, 3), torch.randn(10, 3), {"k_pr": 0}, "k_pr"),
        (torch.randn(10, 3, 1), torch.randn(10, 3), {}, "2-d"),
    ],
)
def test_rejects_bad_input(real, fake, kwargs, match):
    with pytest.raises(ValueError, match=match):
        prdc(real, fake, **kwargs)


@pytest.mark.slow
def test_published_gaussian_check():
    """README check of the official package (k = 5 for all four; 10k vs 10k N(0, I), 1000-d).

    Published: precision 0.4772, recall 0.4705, density 1.0555, coverage 0.9735, from one
    unseeded draw. These statistics vary from draw to draw (in 1000-d, hubness makes density
    especially noisy: over three NumPy seeds we measured density 0.86-1.15 and precision
    0.46-0.49, identical to the reference implementation each time). With this fixed torch
    seed we get 0.4903 / 0.4830 / 1.0683 / 0.9777, so the tolerances are 0.02 (0.05 for
    density) around the published values.
    """
    g = torch.Generator().manual_seed(0)
    real = torch.randn(10_000, 1000, generator=g)
    fake = torch.randn(10_000, 1000, generator=g)
    got = prdc(real, fake, k_pr=5, k_dc=5)
    assert got["precision"] == pytest.approx(0.4772, abs=0.02)
    assert got["recall"] == pytest.approx(0.4705, abs=0.02)
    assert got["density"] == pytest.approx(1.0555, abs=0.05)
    assert got["coverage"] == pytest.approx(0.9735, abs=0.02)


# ------------------------------------------------------------------ boundary conventions and the prdc package
def package_prdc(real: np.ndarray, fake: np.ndarray, k: int) -> dict[str, float]:
    """Naeem et al.'s own ``prdc.compute_prdc`` (PyPI ``prdc``; ``<`` for all four scores, one k)."""
    package = pytest.importorskip("prdc", reason="needs the prdc package: pip install prdc (in the test extra)")
    compute_prdc = package.compute_prdc
    return {key: float(v) for key, v in compute_prdc(real, fake, nearest_k=k).items()}


def _integer_sets(collapse: bool, seed: int = 5, n: int = 400, sources: int = 8):
    """Integer points in [-40, 40)^6 (float64 distances exact in the package's sklearn expansion too, so exact
    duplicates have distance 0 there as well, and many distinct pairs tie). ``collapse``: the fake set repeats
    ``sources`` training points (memorisation) and ``sources`` new points, each about n / (2 sources) times;
    otherwise it is a fresh draw with its first 60 points copied from the real set."""
    rng = np.random.default_rng(seed)
    real = rng.integers(-40, 40, size=(n, 6)).astype(np.float64)
    if collapse:
        modes = np.concatenate([real[rng.choice(n, sources, replace=False)],
                                rng.integers(-40, 40, size=(sources, 6)).astype(np.float64)])
        return real, modes[rng.integers(0, 2 * sources, n)]
    fake = rng.integers(-40, 40, size=(n, 6)).astype(np.float64)
    fake[:60] = real[:60]
    return real, fake


@pytest.mark.parametrize("k", [3, 5])
def test_strict_matches_the_prdc_package_on_random_data(k):
    real, fake = _sets(300, 280, 8, 0.3)
    want = package_prdc(real, fake, k)
    assert 0 < want["precision"] < 1 and 0 < want["coverage"] < 1
    for dtype in (torch.float64, torch.float32):
        r, f = (torch.from_numpy(a).to(dtype) for a in (real, fake))
        if dtype == torch.float32:  # compare with the package on the same (rounded) values
            want = package_prdc(r.double().numpy(), f.double().numpy(), k)
        _assert_exact(prdc(r, f, k_pr=k, k_dc=k, boundary="strict", block_size=5000), want)
        official = prdc(r, f, k_pr=k, k_dc=k)  # density/coverage: the package's convention by default
        assert official["density"] == pytest.approx(want["density"], abs=1e-12)
        assert official["coverage"] == want["coverage"]


@pytest.mark.parametrize("case", ["identical", "memorised", "collapsed"])
def test_strict_matches_the_prdc_package_on_exact_duplicates(case):
    """Exact duplicates across and within the sets, where ``<`` and ``<=`` differ: identical sets, a fake set
    with 60 memorised training points, and a collapsed fake set (16 points, each repeated ~25 times: 8 of them
    training points). All four scores equal the package's under ``strict``, density and coverage also under the
    default ``official``; precision/recall under ``official`` equal a scipy brute force with ``<=``."""
    real, fake = _integer_sets(case == "collapsed")
    if case == "identical":
        fake = real.copy()
    k = 5
    want = package_prdc(real, fake, k)
    for dtype in (torch.float64, torch.float32):
        r, f = torch.from_numpy(real).to(dtype), torch.from_numpy(fake).to(dtype)
        _assert_exact(prdc(r, f, k_pr=k, k_dc=k, boundary="strict", block_size=3000), want)
        official = prdc(r, f, k_pr=k, k_dc=k, block_size=3000)
        assert official["density"] == pytest.approx(want["density"], abs=1e-12)
        assert official["coverage"] == want["coverage"]
        brute = reference_prdc(real, fake, k, k, pr="<=", dc="<=")
        assert official["precision"] == brute["precision"] and official["recall"] == brute["recall"]
        _assert_exact(prdc(r, f, k_pr=k, k_dc=k, boundary="inclusive", block_size=3000), brute)
    inclusive = reference_prdc(real, fake, k, k, pr="<=", dc="<=")
    assert inclusive["density"] > want["density"]  # the convention matters here
    if case == "collapsed":  # fake radii are 0 (each fake has more than k copies): empty balls under <
        assert want["recall"] == 0.0 and inclusive["recall"] == 8 / 400  # {the mode} with <=: 8 training points


def test_identical_sets_density_at_k5_is_6_5_inclusive_and_1_strict():
    """Two identical sets of distinct points, k = 5: each fake (= X_j) lies in its own ball (distance 0) and in
    the ball of every X_i that has X_j among its k nearest neighbours. Strictly inside: X_i itself and its k - 1
    nearest, k per ball, so density = N k / (k N) = 1 (the ``prdc`` package's value). With ``<=`` the k-th
    neighbour, on the boundary, counts too: (k + 1) / k = 1.2."""
    real, _ = _sets(400, 1, 8, 0.0)
    x = torch.from_numpy(real)
    assert prdc(x, x.clone(), k_dc=5, boundary="strict")["density"] == pytest.approx(1.0, abs=1e-12)
    assert prdc(x, x.clone(), k_dc=5)["density"] == pytest.approx(1.0, abs=1e-12)
    assert prdc(x, x.clone(), k_dc=5, boundary="inclusive")["density"] == pytest.approx(1.2, abs=1e-12)


HAND_REAL = [0.0, 1.0, 3.0, 6.0, 10.0]
HAND_FAKE = [0.0, 0.0, 0.0, 3.0]
#: boundary -> (precision, recall, density, coverage), worked out in the test's docstring
HAND_WORKED = {"inclusive": (1.0, 0.8, 14 / 8, 1.0), "strict": (1.0, 0.4, 1.0, 0.8), "official": (1.0, 0.8, 1.0, 0.8)}


@pytest.mark.parametrize("boundary", list(HAND_WORKED))
def test_hand_worked_collapsed_example(boundary):
    """1-d, k = 2 for all four. Real X = {0, 1, 3, 6, 10}; a collapsed fake set Y = {0, 0, 0, 3} (three copies
    of the training point 0, one of the training point 3).

    Real 2-NN radii (distance to the 2nd nearest other point): 0 -> 3 (1, 3), 1 -> 2 (1, 2), 3 -> 3 (2, 3),
    6 -> 4 (3, 4), 10 -> 7 (4, 7); real balls [-3, 3], [-1, 3], [0, 6], [2, 10], [3, 17].
    Fake 2-NN radii: each 0 -> 0 (its two other copies), 3 -> 3 (the zeros at 3).

    * precision: both fakes lie strictly inside their own real ball (distance 0 < 3): 1 under both.
    * recall: the zeros' balls have radius 0: {0} with <=, empty with <; the ball [0, 6] of fake 3 holds
      1 and 3 strictly and 0 and 6 on its boundary. <=: {0, 1, 3, 6} = 4/5; <: {1, 3} = 2/5.
    * density: fake 0 is in the balls of 0 (d 0), 1 (d 1 < 2) and on the boundary of 3's (d 3); fake 3 is in
      3's (d 0), 6's (d 3 < 4) and on the boundary of 0's (3), 1's (2) and 10's (7). <=: (3 * 3 + 5) / (2 * 4)
      = 1.75; <: (3 * 2 + 2) / 8 = 1.
    * coverage: nearest fake of 0, 1, 3, 6, 10 at 0, 1, 0, 3, 7 against radii 3, 2, 3, 4, 7: 10 is covered
      only with <= (5/5 against 4/5).

    ``official`` takes precision/recall from ``inclusive`` and density/coverage from ``strict``.
    """
    real, fake = torch.tensor(HAND_REAL)[:, None], torch.tensor(HAND_FAKE)[:, None]
    got = prdc(real, fake, k_pr=2, k_dc=2, boundary=boundary)
    want = dict(zip(("precision", "recall", "density", "coverage"), HAND_WORKED[boundary]))
    assert got == pytest.approx(want, abs=1e-12)
    pr, dc = {"official": ("<=", "<"), "inclusive": ("<=", "<="), "strict": ("<", "<")}[boundary]
    as_np = (np.array(HAND_REAL)[:, None], np.array(HAND_FAKE)[:, None])
    assert reference_prdc(*as_np, 2, 2, pr=pr, dc=dc) == pytest.approx(want, abs=1e-12)
    if boundary == "strict":
        assert package_prdc(*as_np, 2) == pytest.approx(want, abs=1e-12)


def test_conventions_and_their_errors():
    assert ball_comparisons("official") == {"precision": "<=", "recall": "<=", "density": "<", "coverage": "<"}
    assert set(ball_comparisons("inclusive").values()) == {"<="} and set(ball_comparisons("strict").values()) == {"<"}
    x = torch.randn(20, 3)
    with pytest.raises(ValueError, match=r"boundary must be one of 'official', 'inclusive', 'strict'.*'closed'"):
        prdc(x, x, boundary="closed")
    with pytest.raises(ValueError, match=r"metrics\.scorers\.prdc\.boundary must be one of 'official', 'inclusive'"):
        PRDCScorer(boundary="<=")


def test_scorer_passes_and_reports_its_convention():
    scorer = PRDCScorer(k_pr=2, k_dc=5, boundary="strict")
    assert scorer.settings() == {"boundary": "strict", "k_pr": 2, "k_dc": 5,
                                 "inside": {"precision": "<", "recall": "<", "density": "<", "coverage": "<"}}
    assert PRDCScorer().settings() == {"boundary": "official", "k_pr": 3, "k_dc": 5,
                                       "inside": {"precision": "<=", "recall": "<=", "density": "<", "coverage": "<"}}
    x = torch.from_numpy(_sets(200, 1, 8, 0.0)[0])
    batch = SimpleNamespace(real_embeddings=x, embeddings=x.clone())  # identical sets: density 1 with <, 6/5 with <=
    assert PRDCScorer()(batch)["density"] == pytest.approx(1.0, abs=1e-12)  # type: ignore[arg-type]
    assert PRDCScorer(boundary="inclusive")(batch)["density"] == pytest.approx(1.2, abs=1e-12)  # type: ignore[arg-type]


@pytest.mark.parametrize("dim", [2048, 100, 1])  # a power of two; zero padding to 128; one column
def test_exact_distances_on_the_cpu_are_the_tensor_routine_bit_for_bit(dim):
    """The NumPy route of the CPU (reused cache-sized buffer) sums the same float64 squares in the same pairwise
    halving as the tensor routine (used on other devices): equal bits, so ties stay ties across routes."""
    from ganlab.metrics.prdc import _exact_sq_dists, _exact_sq_dists_torch

    gen = torch.Generator().manual_seed(3)
    a, b = torch.randn(50, dim, generator=gen) * 30, torch.randn(40, dim, generator=gen).double()
    ia, ib = torch.randint(0, 50, (300,), generator=gen), torch.randint(0, 40, (300,), generator=gen)
    width = 1 << (dim - 1).bit_length()
    got = _exact_sq_dists(a, ia, b, ib, 1 << 22)
    assert torch.equal(got, _exact_sq_dists_torch(a, ia, b, ib, 1 << 22, width))
    assert torch.equal(got, _exact_sq_dists_torch(a, ia, b, ib, 1000, width))  # other batches, same bits
    assert torch.allclose(got, ((a.double()[ia] - b[ib]) ** 2).sum(1), rtol=1e-13)


def test_knn_radii_are_exact_at_high_dimension():
    """From d 1,024 the radii search keeps more neighbours beyond k (its rounding band is wider): still the float64
    radii, rounded to float32."""
    x = np.random.default_rng(8).standard_normal((150, 1100)).astype(np.float32)
    radii = knn_sq_radii(torch.from_numpy(x), [3, 5], block_size=20_000)
    d2 = cdist(x.astype(np.float64), x.astype(np.float64), "sqeuclidean")
    for k in (3, 5):
        np.testing.assert_array_equal(radii[k].numpy(), np.partition(d2, k, axis=1)[:, k].astype(np.float32))
