"""Benchmark ganlab's metric kernels against scikit-learn/NumPy and across sample sizes.

Usage::

    python tests/benchmarks/bench_metrics.py [--quick] [--device auto|cpu|cuda] [--out FILE]

Measures, in one run:

1. ``kmeans`` vs ``sklearn.cluster.KMeans`` (N=50,000, D=64, K=100, float32, same
   ``n_init=3``, ``max_iter=100`` and ``tol=1e-4``, each with its own k-means++ seeding;
   then both from the same random initial centres with ``n_init=1``, so that both run the
   same Lloyd iterations): best-of-``--repeats`` wall times, their ratio, both inertias and
   iteration counts.
2. ``similarity_histogram`` vs ``sklearn.metrics.pairwise.cosine_similarity`` +
   ``numpy.histogram`` of the full matrix (N=20,000, D=512): times, ratio and the extra
   peak memory of each (CPU: peak-RSS growth, reset through ``/proc/self/clear_refs``;
   CUDA: ``torch.cuda.max_memory_allocated``), plus our theoretical block memory.
3. Scaling of every metric over N = 1,000, 10,000, 100,000 (``--quick`` stops at 10,000),
   best of ``--repeats`` runs, with the growth exponent ``log(t2/t1) / log(N2/N1)``.

Prints a table and, with ``--out``, writes the numbers as JSON. Not a test (no ``test_``
prefix): timings depend on the machine and its load, which is recorded alongside.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from ganlab.metrics.clusters import cluster_scores, ndb  # noqa: E402
from ganlab.metrics.duplicates import duplicate_fraction, memorization_fraction  # noqa: E402
from ganlab.metrics.frechet import frechet_distance  # noqa: E402
from ganlab.metrics.numeric.blocks import DEFAULT_BLOCK_SIZE  # noqa: E402
from ganlab.metrics.numeric.kmeans import kmeans  # noqa: E402
from ganlab.metrics.prdc import prdc  # noqa: E402
from ganlab.metrics.similarity import similarity_histogram  # noqa: E402
from ganlab.metrics.vendi import vendi_score  # noqa: E402


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _fix_malloc_threshold() -> bool:
    """Make glibc mmap (and on free, unmap) every block >= 1 MiB, so RSS tracks live memory.

    Otherwise freed blocks stay in the heap and the peak-RSS growth of a later step reflects
    fragmentation left by earlier ones.
    """
    try:
        import ctypes

        return bool(ctypes.CDLL("libc.so.6").mallopt(-3, 1 << 20))  # M_MMAP_THRESHOLD = -3
    except (OSError, AttributeError):
        return False


def _rss(field: str) -> int:
    """A ``/proc/self/status`` memory field in bytes (0 where unavailable)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def measure(fn, device: torch.device) -> tuple[float, object, int | None]:
    """Run ``fn()`` once; return (seconds, result, extra peak bytes or None if unmeasurable)."""
    _sync(device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)
    else:
        try:
            Path("/proc/self/clear_refs").write_text("5")  # reset the peak-RSS mark
            base = _rss("VmRSS")
        except OSError:
            base = None
    t0 = time.perf_counter()
    out = fn()
    _sync(device)
    seconds = time.perf_counter() - t0
    if device.type == "cuda":
        extra = torch.cuda.max_memory_allocated(device) - base
    else:
        extra = None if base is None or not _rss("VmHWM") else max(0, _rss("VmHWM") - base)
    return seconds, out, extra


def blobs(n: int, d: int, centers: int, seed: int, device: torch.device) -> torch.Tensor:
    """A Gaussian mixture: ``centers`` random means (std 4) plus unit noise, float32."""
    g = torch.Generator().manual_seed(seed)
    means = torch.randn(centers, d, generator=g) * 4.0
    x = means[torch.randint(centers, (n,), generator=g)] + torch.randn(n, d, generator=g)
    return x.to(device)


def bench_kmeans(args, device: torch.device, same_init: bool) -> dict:
    """Best of ``args.repeats`` alternating runs of ours and scikit-learn's, same data and settings.

    With ``same_init`` both start (``n_init=1``) from the same random centres, so both run
    the same Lloyd iterations; otherwise each seeds ``n_init`` runs with its own k-means++.
    """
    from sklearn.cluster import KMeans

    x = blobs(args.kmeans_n, 64, args.kmeans_k, 0, device)
    xn = x.cpu().numpy()
    kmeans(x[:2000], 10, n_init=1, max_iter=5, generator=torch.Generator(device).manual_seed(0))  # warm-up
    KMeans(10, n_init=1, max_iter=5, random_state=0).fit(xn[:2000])
    t_ours = t_sk = math.inf
    n_init = 1 if same_init else args.n_init
    for rep in range(args.repeats):
        start = x[torch.randperm(len(x), generator=torch.Generator().manual_seed(rep))[: args.kmeans_k].to(device)]
        t, ours, _ = measure(lambda: kmeans(x, args.kmeans_k, n_init=n_init, max_iter=args.max_iter,
                                            generator=torch.Generator(device).manual_seed(rep),
                                            init=start if same_init else None), device)
        t_ours = min(t_ours, t)
        t, sk, _ = measure(lambda: KMeans(args.kmeans_k, n_init=n_init, max_iter=args.max_iter, random_state=rep,
                                          init=start.cpu().numpy() if same_init else "k-means++").fit(xn),
                           torch.device("cpu"))
        t_sk = min(t_sk, t)
    return {"n": args.kmeans_n, "d": 64, "k": args.kmeans_k, "n_init": n_init, "max_iter": args.max_iter,
            "tol": 1e-4, "init": "same random centres" if same_init else "own k-means++", "repeats": args.repeats,
            "ours_s": t_ours, "sklearn_s": t_sk, "time_ratio": t_ours / t_sk,
            "ours_inertia": ours.inertia, "sklearn_inertia": float(sk.inertia_),
            "inertia_ratio": ours.inertia / float(sk.inertia_), "ours_n_iter": ours.n_iter,
            "sklearn_n_iter": int(sk.n_iter_)}


def bench_similarity(args, device: torch.device) -> dict:
    from sklearn.metrics.pairwise import cosine_similarity

    n, d = args.sim_n, 512
    x = torch.randn(n, d, generator=torch.Generator().manual_seed(1)).to(device)
    t_ours, res, mem_ours = measure(lambda: similarity_histogram(x, bins=100), device)
    xn = x.cpu().numpy()

    def baseline():
        s = cosine_similarity(xn)
        return np.histogram(s, bins=100, range=(-1.0, 1.0))[0]

    t_sk, _, mem_sk = measure(baseline, torch.device("cpu"))
    rows = max(1, DEFAULT_BLOCK_SIZE // n)
    workers = torch.get_num_threads() if device.type == "cpu" else 1
    # Per worker: float32 similarities + int32 bin indices + bool mask per block entry, plus the
    # r x r triangle mask; once: the row-normalised copy of x.
    theory = workers * (DEFAULT_BLOCK_SIZE * (4 + 4 + 1) + rows * rows) + n * d * 4
    return {"n": n, "d": d, "ours_s": t_ours, "sklearn_numpy_s": t_sk, "time_ratio": t_ours / t_sk,
            "ours_peak_extra_bytes": mem_ours, "sklearn_numpy_peak_extra_bytes": mem_sk,
            "ours_theoretical_bytes": theory, "high_similarity_fraction": res.high_similarity_fraction}


def bench_scaling(args, device: torch.device) -> dict:
    sizes = [1_000, 10_000] if args.quick else [1_000, 10_000, 100_000]
    d = 64
    out: dict[str, dict[int, float]] = {}
    for n in sizes:
        real, fake = blobs(n, d, 50, 2, device), blobs(n, d, 50, 3, device)
        k = min(100, n // 10)
        gen = torch.Generator(device).manual_seed(0)
        fit = kmeans(real, k, n_init=1, max_iter=20, generator=gen)
        jobs = {
            f"kmeans(k={k},n_init=1,max_iter=20)": lambda: kmeans(real, k, n_init=1, max_iter=20, generator=gen),
            "similarity_histogram": lambda: similarity_histogram(fake),
            "prdc": lambda: prdc(real, fake),
            "vendi_cosine": lambda: vendi_score(fake),
            "frechet": lambda: frechet_distance(real, fake),
            "cluster_scores(fit given)": lambda: cluster_scores(real, fake, k, fit=fit),
            "ndb(fit given)": lambda: ndb(real, fake, k, fit=fit),
            "duplicate_fraction": lambda: duplicate_fraction(fake),
            "memorization_fraction": lambda: memorization_fraction(fake, real),
        }
        for name, fn in jobs.items():
            seconds = min(measure(fn, device)[0] for _ in range(args.repeats))
            out.setdefault(name, {})[n] = seconds
            print(f"  N={n:>7,d}  {name:<36s} {seconds:9.3f} s", flush=True)
    exponents = {}
    for name, times in out.items():
        ns = sorted(times)
        exponents[name] = [math.log(times[b] / times[a]) / math.log(b / a) for a, b in zip(ns, ns[1:])]
    return {"d": d, "seconds": {k: {str(n): t for n, t in v.items()} for k, v in out.items()},
            "growth_exponents": exponents}


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="scaling stops at N=10,000")
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument("--out", type=Path, default=None, help="write the results as JSON here")
    p.add_argument("--kmeans-n", type=int, default=50_000)
    p.add_argument("--kmeans-k", type=int, default=100)
    p.add_argument("--n-init", type=int, default=3)
    p.add_argument("--max-iter", type=int, default=100)
    p.add_argument("--repeats", type=int, default=2, help="k-means and scaling timings: best of this many runs")
    p.add_argument("--sim-n", type=int, default=20_000)
    p.add_argument("--skip", nargs="*", default=[], choices=["kmeans", "similarity", "scaling"])
    p.add_argument("--threads", type=int, default=None,
                   help="limit torch and scikit-learn/NumPy (threadpoolctl) to this many threads")
    args = p.parse_args(argv)
    if args.threads is not None:
        from threadpoolctl import threadpool_limits

        torch.set_num_threads(args.threads)
        _limits = threadpool_limits(args.threads)  # noqa: F841  (kept alive for the whole run)
    if args.device == "auto":
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(args.device)
    report: dict = {"env": {"torch": torch.__version__, "device": str(device), "threads": torch.get_num_threads(),
                            "cpu_count": os.cpu_count(), "load_average_before": os.getloadavg(),
                            "malloc_threshold_fixed": _fix_malloc_threshold()}}
    if "kmeans" not in args.skip:
        for key, same_init in (("kmeans", False), ("kmeans_same_init", True)):
            r = report[key] = bench_kmeans(args, device, same_init)
            print(f"{key:<16s} N={r['n']:,} D=64 K={r['k']} n_init={r['n_init']} ({r['init']}): "
                  f"ours {r['ours_s']:.2f}s ({r['ours_n_iter']} it, inertia {r['ours_inertia']:.6g}) | "
                  f"sklearn {r['sklearn_s']:.2f}s ({r['sklearn_n_iter']} it, inertia {r['sklearn_inertia']:.6g}) | "
                  f"time ratio {r['time_ratio']:.2f}", flush=True)
    if "similarity" not in args.skip:
        r = report["similarity"] = bench_similarity(args, device)
        mb = lambda b: "n/a" if b is None else f"{b / 2**20:.0f} MiB"  # noqa: E731
        print(f"similarity N={r['n']:,} D=512: ours {r['ours_s']:.2f}s (peak +{mb(r['ours_peak_extra_bytes'])}, "
              f"theory {mb(r['ours_theoretical_bytes'])}) | sklearn+numpy {r['sklearn_numpy_s']:.2f}s "
              f"(peak +{mb(r['sklearn_numpy_peak_extra_bytes'])}) | time ratio {r['time_ratio']:.2f}", flush=True)
    if "scaling" not in args.skip:
        print("scaling (D=64, seconds):", flush=True)
        report["scaling"] = bench_scaling(args, device)
        for name, exps in report["scaling"]["growth_exponents"].items():
            print(f"  {name:<36s} growth exponent(s) {', '.join(f'{e:.2f}' for e in exps)}")
    report["env"]["load_average_after"] = os.getloadavg()
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2))
    return report


if __name__ == "__main__":
    main()
