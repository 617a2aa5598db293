"""Every score of ganlab against the library a researcher would otherwise call, over a grid of sizes.

Usage::

    python tests/benchmarks/bench_scores.py [--quick] [--device auto|cpu|cuda] [--threads 1] [--repeats 3]
        [--only kmeans,prdc,...] [--skip 'd 2,048;1,000 classes'] [--out docs/results/bench/scores.json]

One process; each cell runs ganlab (A) and the reference (B) interleaved, A B A B ..., after one untimed call of
each whose outputs are compared (the agreement check). Reported: the best (smallest) of ``--repeats`` timed
calls per side (process CPU time on one CPU thread, so that other processes on a shared machine do not count;
wall time on a GPU, with several threads, or with ``--wall``), their ratio ganlab / reference (< 1: ganlab
faster), and the spread of each side (``max / min - 1`` over the timed calls). Inputs are float32; torch, NumPy
and scikit-learn run on ``--threads`` threads (default 1: torch.set_num_threads plus threadpoolctl).

References (agreement in brackets):

* k-means: ``sklearn.cluster.KMeans(algorithm="lloyd")`` from the same initial centres, ``n_init=1``
  (inertia within 1e-4 relative); and with ``n_init=10``, each with its own k-means++ seeding (timed only; the
  inertia ratio is printed, the two draw different seeds);
* PRDC: the ``prdc`` package's ``compute_prdc`` (ganlab with ``boundary="strict"``, ``k_pr = k_dc``; equal);
* Vendi: the ``vendi_score`` package (``vendi.score_dual`` for the cosine kernel; scikit-learn's ``rbf_kernel``
  + ``vendi.score_K`` for the RBF kernel) (relative 1e-4);
* Frechet distance: ``numpy.cov`` + ``scipy.linalg.sqrtm`` as in pytorch-fid's ``calculate_frechet_distance``
  (relative 1e-4);
* KID and IS: torchmetrics' ``KernelInceptionDistance`` and ``InceptionScore`` given an identity feature module
  (relative 1e-4);
* similarity histogram: ``sklearn.metrics.pairwise.cosine_similarity`` + ``numpy.histogram`` of the pairs
  ``i < j`` (counts within 1e-5 of the pairs, rounding at bin edges).

Writes JSON (``--out``); ``scores_table.py`` turns it into the Markdown table of docs/performance.md.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, env_info, resolve_device, set_threads, sync  # noqa: E402

Fns = tuple[Callable[[], Any], Callable[[], Any], Callable[[Any, Any], tuple[bool, str]]]


@dataclass
class Cell:
    """One row of the grid: a score, its sizes, and a builder of (ganlab, reference, check)."""

    score: str
    size: str
    build: Callable[[torch.device], Fns]
    quick: bool = False


def _rel(a: float, b: float) -> float:
    return abs(a - b) / max(abs(b), 1e-300)


def _close(a: float, b: float, rtol: float) -> tuple[bool, str]:
    return _rel(a, b) <= rtol, f"{a:.6g} vs {b:.6g} (rel {_rel(a, b):.1e})"


def _blobs(n: int, d: int, k: int, seed: int) -> np.ndarray:
    from sklearn.datasets import make_blobs

    x, _ = make_blobs(n_samples=n, centers=k, n_features=d, cluster_std=2.0, random_state=seed)
    return x.astype(np.float32)


def _normal(n: int, d: int, seed: int, shift: float = 0.0) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal((n, d)) + shift).astype(np.float32)


# ------------------------------------------------------------------------------------------------ k-means


def kmeans_same_init(n: int, d: int, k: int) -> Callable[[torch.device], Fns]:
    def build(dev: torch.device) -> Fns:
        from sklearn.cluster import KMeans

        from ganlab.metrics.numeric.kmeans import kmeans

        x = _blobs(n, d, k, seed=n + d + k)
        init = x[np.random.default_rng(0).choice(n, k, replace=False)]
        xt, it = torch.from_numpy(x).to(dev), torch.from_numpy(init).to(dev)
        ours = lambda: kmeans(xt, k, init=it, max_iter=300, tol=1e-4)  # noqa: E731
        ref = lambda: KMeans(k, init=init, n_init=1, max_iter=300, tol=1e-4, algorithm="lloyd").fit(x)  # noqa: E731
        return ours, ref, lambda a, b: _close(a.inertia, float(b.inertia_), 1e-4)
    return build


def kmeans_own_seeding(n: int, d: int, k: int, n_init: int = 10) -> Callable[[torch.device], Fns]:
    def build(dev: torch.device) -> Fns:
        from sklearn.cluster import KMeans

        from ganlab.metrics.numeric.kmeans import kmeans

        x = _blobs(n, d, k, seed=n + d + k)
        xt = torch.from_numpy(x).to(dev)
        gen = torch.Generator(device=dev)
        ours = lambda: kmeans(xt, k, n_init=n_init, max_iter=300, tol=1e-4, generator=gen.manual_seed(0))  # noqa: E731
        ref = lambda: KMeans(k, n_init=n_init, max_iter=300, tol=1e-4, random_state=0).fit(x)  # noqa: E731
        # Different seeds: only a sanity bound (the better of 10 k-means++ starts is within a few % of the other).
        return ours, ref, lambda a, b: _close(a.inertia, float(b.inertia_), 0.05)
    return build


# --------------------------------------------------------------------------------------------------- PRDC


def prdc_cell(n: int, d: int, k: int = 5) -> Callable[[torch.device], Fns]:
    def build(dev: torch.device) -> Fns:
        from prdc import compute_prdc

        from ganlab.metrics.prdc import prdc

        real, fake = _normal(n, d, 1), _normal(n, d, 2, shift=0.1)
        rt, ft = torch.from_numpy(real).to(dev), torch.from_numpy(fake).to(dev)
        ours = lambda: prdc(rt, ft, k_pr=k, k_dc=k, boundary="strict")  # noqa: E731

        def ref() -> dict[str, float]:
            with contextlib.redirect_stdout(io.StringIO()):  # compute_prdc prints the set sizes
                return compute_prdc(real, fake, nearest_k=k)

        def check(a: dict[str, float], b: dict[str, float]) -> tuple[bool, str]:
            diffs = {key: abs(a[key] - float(b[key])) for key in b}
            return max(diffs.values()) <= 2.0 / n, " ".join(f"{key} {a[key]:.4f}/{float(b[key]):.4f}" for key in b)
        return ours, ref, check
    return build


# -------------------------------------------------------------------------------------------------- Vendi


def vendi_cosine(n: int, d: int) -> Callable[[torch.device], Fns]:
    def build(dev: torch.device) -> Fns:
        from vendi_score import vendi

        from ganlab.metrics.vendi import vendi_score

        x = _blobs(n, d, 10, seed=3)
        xt = torch.from_numpy(x).to(dev)
        return (lambda: vendi_score(xt, "cosine"), lambda: float(vendi.score_dual(x)),
                lambda a, b: _close(a, b, 1e-4))
    return build


def vendi_rbf(n: int, d: int) -> Callable[[torch.device], Fns]:
    def build(dev: torch.device) -> Fns:
        from sklearn.metrics.pairwise import rbf_kernel
        from vendi_score import vendi

        from ganlab.metrics.vendi import vendi_score

        x = _normal(n, d, 4)
        bandwidth = math.sqrt(d) / 2  # the kernel links every pair: one dense eigendecomposition
        xt = torch.from_numpy(x).to(dev)
        ours = lambda: vendi_score(xt, "rbf", bandwidth=bandwidth, max_rbf_samples=n)  # noqa: E731
        ref = lambda: float(vendi.score_K(rbf_kernel(x, gamma=0.5 / bandwidth**2)))  # noqa: E731
        return ours, ref, lambda a, b: _close(a, b, 1e-4)
    return build


# ----------------------------------------------------------------------------------------------- Frechet


def _fd_reference(x1: np.ndarray, x2: np.ndarray) -> float:
    """pytorch-fid's ``calculate_frechet_distance`` on ``numpy.cov`` statistics."""
    from scipy import linalg

    mu1, mu2 = x1.mean(0, dtype=np.float64), x2.mean(0, dtype=np.float64)
    s1, s2 = np.cov(x1, rowvar=False), np.cov(x2, rowvar=False)
    covmean = linalg.sqrtm(s1.dot(s2))
    if not np.isfinite(covmean).all():
        offset = np.eye(s1.shape[0]) * 1e-6
        covmean = linalg.sqrtm((s1 + offset).dot(s2 + offset))
    covmean = covmean.real if np.iscomplexobj(covmean) else covmean
    diff = mu1 - mu2
    return float(diff.dot(diff) + np.trace(s1) + np.trace(s2) - 2 * np.trace(covmean))


def frechet_cell(n: int, d: int) -> Callable[[torch.device], Fns]:
    def build(dev: torch.device) -> Fns:
        from ganlab.metrics.frechet import frechet_distance

        x1, x2 = _normal(n, d, 5), _normal(n, d, 6, shift=0.2)
        t1, t2 = torch.from_numpy(x1).to(dev), torch.from_numpy(x2).to(dev)
        return (lambda: frechet_distance(t1, t2), lambda: _fd_reference(x1, x2),
                lambda a, b: _close(a, b, 1e-4))
    return build


# ------------------------------------------------------------------------------------------------ KID, IS


class _Identity(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x


def kid_cell(n: int, d: int, subsets: int, subset_size: int) -> Callable[[torch.device], Fns]:
    def build(dev: torch.device) -> Fns:
        import warnings

        from torchmetrics.image.kid import KernelInceptionDistance

        from ganlab.metrics.kid import kid

        warnings.filterwarnings("ignore", message=".*will save all extracted features.*")
        from ganlab.metrics.numeric.order import canonical_order

        real, fake = torch.from_numpy(_normal(n, d, 7)).to(dev), torch.from_numpy(_normal(n, d, 8, 0.1)).to(dev)
        metric = KernelInceptionDistance(feature=_Identity(), subsets=subsets, subset_size=subset_size).to(dev)
        # ganlab draws its subsets from the rows in their canonical order (order-free subsets): the reference is
        # given the rows in that order (untimed), so that the same seed draws the same subsets.
        real_c, fake_c = real[canonical_order(real)], fake[canonical_order(fake)]

        def ref() -> float:
            metric.reset()
            metric.update(real_c, real=True)
            metric.update(fake_c, real=False)
            torch.manual_seed(5)
            return float(metric.compute()[0])

        ours = lambda: kid(real, fake, subsets, subset_size, generator=torch.Generator().manual_seed(5))[0]  # noqa: E731
        return ours, ref, lambda a, b: _close(a, b, 1e-4)
    return build


def is_cell(n: int, classes: int, splits: int = 10) -> Callable[[torch.device], Fns]:
    def build(dev: torch.device) -> Fns:
        from torchmetrics.image.inception import InceptionScore

        from ganlab.metrics.inception_score import inception_score
        from ganlab.metrics.numeric.order import canonical_order

        logits = torch.from_numpy(_normal(n, classes, 9) * 3).to(dev)
        metric = InceptionScore(feature=_Identity(), splits=splits).to(dev)
        # ganlab cuts its splits from a seeded shuffle (seed 0) of the rows in their canonical order; torchmetrics
        # shuffles with the global RNG: given the rows in that canonical order (untimed) and the global seed 0, it
        # cuts the same splits.
        logits_c = logits[canonical_order(logits.softmax(dim=1).double())]

        def ref() -> float:
            metric.reset()
            metric.update(logits_c)
            torch.manual_seed(0)
            return float(metric.compute()[0])

        ours = lambda: inception_score(logits.softmax(dim=1), splits)[0]  # noqa: E731
        return ours, ref, lambda a, b: _close(a, b, 1e-4)
    return build


# ------------------------------------------------------------------------------------ similarity histogram


def similarity_cell(n: int, d: int, bins: int = 100) -> Callable[[torch.device], Fns]:
    def build(dev: torch.device) -> Fns:
        from sklearn.metrics.pairwise import cosine_similarity

        from ganlab.metrics.similarity import similarity_histogram

        x = _blobs(n, d, 10, seed=12)
        xt = torch.from_numpy(x).to(dev)

        def ref() -> np.ndarray:
            s = cosine_similarity(x)
            counts = np.histogram(s, bins, range=(-1.0, 1.0))[0]  # every ordered pair and the diagonal
            counts -= np.histogram(np.diagonal(s), bins, range=(-1.0, 1.0))[0]
            return counts // 2

        def check(a: Any, b: np.ndarray) -> tuple[bool, str]:
            off = int(np.abs(a.counts.cpu().numpy() - b).sum())
            return off <= 1e-5 * a.n_pairs + 2 * bins, f"{off} of {a.n_pairs:,} pairs in another bin"
        return lambda: similarity_histogram(xt, bins), ref, check
    return build


# -------------------------------------------------------------------------------------------------- grid


def grid() -> list[Cell]:
    """The sizes ganlab meets: 2-D mixtures (d 2), classifier embeddings (64-512), Inception features (2,048)."""
    c: list[Cell] = []
    for n, d, k, quick in [(1000, 2, 8, True), (5000, 8, 10, True), (5000, 8, 25, False), (10000, 2, 25, False),
                           (10000, 64, 100, True), (50000, 64, 100, False), (20000, 512, 100, False),
                           (20000, 64, 1000, False), (5000, 2048, 100, False)]:
        c.append(Cell("k-means, same init", f"n {n:,}, d {d:,}, K {k:,}", kmeans_same_init(n, d, k), quick))
    for n, d, k, quick in [(5000, 8, 10, True), (5000, 8, 25, False), (10000, 2, 25, False), (10000, 64, 100, False)]:
        c.append(Cell("k-means, n_init 10", f"n {n:,}, d {d:,}, K {k:,}", kmeans_own_seeding(n, d, k), quick))
    for n, d, quick in [(1000, 64, True), (5000, 128, False), (10000, 128, False), (2000, 2048, False)]:
        c.append(Cell("PRDC, k 5", f"n {n:,} + {n:,}, d {d:,}", prdc_cell(n, d), quick))
    for n, d, quick in [(1000, 2048, False), (10000, 64, True), (50000, 512, False)]:
        c.append(Cell("Vendi, cosine", f"n {n:,}, d {d:,}", vendi_cosine(n, d), quick))
    for n, d, quick in [(1000, 2, True), (2000, 64, False), (3000, 8, False)]:
        c.append(Cell("Vendi, RBF", f"n {n:,}, d {d:,}", vendi_rbf(n, d), quick))
    for n, d, quick in [(2000, 8, True), (10000, 64, False), (10000, 512, False), (10000, 2048, False)]:
        c.append(Cell("Frechet distance", f"n {n:,} + {n:,}, d {d:,}", frechet_cell(n, d), quick))
    for n, d, subsets, size, quick in [(2000, 64, 100, 1000, True), (10000, 2048, 10, 1000, False)]:
        c.append(Cell("KID", f"n {n:,} + {n:,}, d {d:,}, {subsets} x {size:,}", kid_cell(n, d, subsets, size),
                      quick))
    for n, classes, quick in [(5000, 10, True), (50000, 1000, False)]:
        c.append(Cell("Inception Score", f"n {n:,}, {classes:,} classes, 10 splits", is_cell(n, classes), quick))
    for n, d, quick in [(1000, 64, True), (10000, 512, False), (20000, 128, False)]:
        c.append(Cell("similarity histogram", f"n {n:,}, d {d:,}, 100 bins", similarity_cell(n, d), quick))
    return c


def timed(fn: Callable[[], Any], dev: torch.device, clock: Callable[[], float]) -> tuple[float, float, Any]:
    """(clock seconds, wall seconds, result) of one call, the device synchronised before and after."""
    sync(dev)
    c0, w0 = clock(), time.perf_counter()
    out = fn()
    sync(dev)
    return clock() - c0, time.perf_counter() - w0, out


def run_cell(cell: Cell, dev: torch.device, repeats: int, clock: Callable[[], float]) -> dict[str, Any]:
    ours, ref, check = cell.build(dev)
    a = timed(ours, dev, clock)[2]  # untimed warm-up; its outputs are compared
    b = timed(ref, dev, clock)[2]
    ok, detail = check(a, b)
    ta, tb, wa, wb = [], [], [], []
    for _ in range(repeats):
        for times, walls, fn in ((ta, wa, ours), (tb, wb, ref)):
            t, w, _ = timed(fn, dev, clock)
            times.append(t)
            walls.append(w)
    best_a, best_b = min(ta), min(tb)
    return {"score": cell.score, "size": cell.size, "ganlab_s": best_a, "reference_s": best_b,
            "ratio": best_a / best_b, "ganlab_spread": max(ta) / best_a - 1, "reference_spread": max(tb) / best_b - 1,
            "ganlab_all_s": ta, "reference_all_s": tb, "ganlab_wall_s": wa, "reference_wall_s": wb,
            "agrees": ok, "agreement": detail}


def _write_json(report: dict[str, Any], path: Path) -> None:
    """Write atomically: a temporary file in the same folder, then a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(report, indent=2, default=float))
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="a few small cells (under 2 minutes)")
    p.add_argument("--device", default="cpu", help="cpu, cuda or auto (cuda when present)")
    p.add_argument("--threads", type=int, default=1, help="torch / BLAS threads of both sides (default 1)")
    p.add_argument("--repeats", type=int, default=3, help="timed calls per side and cell; the best is kept")
    p.add_argument("--only", default="",
                   help="comma-separated prefixes of score names, e.g. 'k-means,Frechet'; separate them by ';' "
                        "instead when a prefix holds a comma, e.g. 'k-means, same init;Vendi, cosine'")
    p.add_argument("--skip", default="",
                   help="semicolon-separated parts of 'score, size' to leave out, e.g. 'd 2,048;1,000 classes' "
                        "(a cell whose 'score, size' contains one is skipped)")
    p.add_argument("--wall", action="store_true", help="time wall clock even on one CPU thread (default: CPU time)")
    p.add_argument("--out", type=Path, default=None, help="JSON file to write (default: none)")
    p.add_argument("--append", action="store_true",
                   help="add this run's cells to those already in --out (e.g. a rerun of some scores with --only)")
    args = p.parse_args(argv)
    set_threads(args.threads)
    dev = resolve_device(args.device)
    cells = [c for c in grid() if (c.quick or not args.quick)
             and (not args.only or any(c.score.lower().startswith(o.strip().lower())
                                       for o in args.only.split(";" if ";" in args.only else ",")))
             and not any(part.strip() and part.strip().lower() in f"{c.score}, {c.size}".lower()
                         for part in args.skip.split(";"))]
    # On one CPU thread the process's CPU time is what each side costs; wall time on a shared machine adds
    # whatever other processes take. On a GPU, or with several threads, wall time is the measure.
    cpu_clock = dev.type == "cpu" and args.threads == 1 and not args.wall
    clock = time.process_time if cpu_clock else time.perf_counter
    report: dict[str, Any] = {"env": {**env_info(dev), "dtype": "float32", "threads": args.threads,
                                      "repeats": args.repeats, "quick": args.quick,
                                      "clock": "process CPU time" if cpu_clock else "wall time"}, "cells": []}
    t0 = time.perf_counter()
    print(f"{'score':22} {'size':38} {'ganlab ms':>10} {'ref ms':>10} {'ratio':>6} {'spread':>11}  agreement")
    out = None if args.out is None else args.out if args.out.is_absolute() else REPO / args.out
    if args.append and out is not None and out.is_file():
        earlier = json.loads(out.read_text())
        report["cells"] = list(earlier["cells"])
        older = earlier["env"].pop("earlier_runs", [])
        report["env"]["earlier_runs"] = [earlier["env"], *older]
    for cell in cells:
        r = run_cell(cell, dev, args.repeats, clock)
        # An earlier run's cell is replaced only once it is measured again, so an interrupted run loses nothing.
        report["cells"] = [c for c in report["cells"] if (c["score"], c["size"]) != (r["score"], r["size"])]
        report["cells"].append(r)
        if out is not None:  # after every cell, so that an interrupted run keeps what it measured
            _write_json(report, out)
        flag = "" if r["agrees"] else "  DISAGREES"
        print(f"{r['score']:22} {r['size']:38} {1e3 * r['ganlab_s']:10.1f} {1e3 * r['reference_s']:10.1f} "
              f"{r['ratio']:6.2f} {100 * r['ganlab_spread']:4.0f}%/{100 * r['reference_spread']:3.0f}%  "
              f"{r['agreement']}{flag}", flush=True)
    report["env"]["wall_s"] = time.perf_counter() - t0
    report["env"]["load_average_after"] = os.getloadavg()
    if out is not None:
        _write_json(report, out)
        print(f"wrote {out}")
    bad = [c for c in report["cells"] if not c["agrees"]]
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
