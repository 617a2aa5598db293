"""ganlab's diversity suite end to end against scikit-learn/NumPy and the reference formulas, and its growth.

Usage::

    python tests/benchmarks/bench_diversity.py [--device cpu|cuda] [--dataset auto|fashion_mnist|digits]
        [--n 10000] [--sizes 1000 3000 10000 30000 100000] [--max-size N] [--ref-max-size N]
        [--repeats 3] [--threads 1] [--skip growth] [--out DIR]

Complements ``bench_metrics.py`` (ganlab's metric kernels against scikit-learn on synthetic Gaussian blobs;
its ``measure`` is reused here): this script runs the suite the way an evaluation does, from images to
scores, and checks the numbers against independent implementations.

Samples. Real: the data set's training images (Fashion-MNIST 32x32, or scikit-learn's 8x8 digits with
``--dataset digits``/when the Fashion-MNIST files are absent), drawn without replacement while they last,
beyond that with replacement plus N(0, 0.01) pixel noise. Generated: a stand-in for a partially collapsed
generator, reproducible anywhere without training one: training images of 7 of the 10 classes, drawn with
replacement, plus N(0, 0.1) pixel noise (clamped to [-1, 1]). Both are embedded by ganlab's classifier
embedder (``metrics.embedder=classifier``: a small CNN trained once on the data set and cached, 128-d).

Steps, ours | reference (``--n`` real and ``--n`` generated samples):

1. embed: ``ClassifierEmbedder.__call__`` (its batches of 2,000) | the same CNN's ``embed`` in plain
   no-grad batches of ``--ref-embed-batch`` (256) (the same values up to summation order);
2. k-means on the real embeddings, K=``--k`` (100), ``n_init=3``, ``max_iter=100``, ``tol=1e-4``, each
   with its own k-means++ seeding: ``ganlab.metrics.numeric.kmeans.kmeans`` | ``sklearn.cluster.KMeans`` (inertia
   ratio); then both from the same random initial centres (``n_init=1``) for agreement (centres, labels);
3. similarity histogram of the generated embeddings (all N(N-1)/2 pairs, 100 bins, tau 0.9):
   ``similarity_histogram`` | ``sklearn.metrics.pairwise.cosine_similarity`` + ``numpy.histogram`` of the
   upper triangle (clipped to [-1, 1]);
4. precision/recall (k=3) and density/coverage (k=5): ``ganlab.metrics.prdc.prdc`` | Naeem et al. 2020's
   formulas as in their ``prdc`` package (``sklearn.metrics.pairwise_distances``, k-th neighbour by
   ``numpy.argpartition`` including the point itself at rank 0), with ganlab's default ``official`` boundary
   convention (``<=`` for P/R as Kynkaanniemi et al.'s code; ``<`` for D/C as the package, which uses ``<`` for
   all four) and ``n_jobs`` left at 1 (the package: 8).

The table's "max abs diff" column: embed: the embeddings; kmeans: the centres after one Lloyd iteration from
the same start; similarity: high_similarity_fraction; prdc: the largest of the four score differences.

The reference materialises whole N x N matrices while they fit in ``--ref-mem-gib`` (2 GiB) and otherwise
the same computation in row blocks of that size. It always runs on the CPU (NumPy/scikit-learn); ours runs
on ``--device``. Times are medians of ``--repeats`` interleaved runs (ours, reference, ours, ...); each step
also records its peak extra memory (``bench_metrics.measure``: CUDA peak allocation, or peak-RSS growth
on the CPU, where freed heap memory may be reused, so CPU figures are approximate; unlike bench_metrics,
glibc's mmap threshold is left alone because forcing it to 1 MiB slows large-tensor code here). Then the
growth of every step's time from 1,000 to 100,000 samples (``--sizes``; ours up to ``--max-size``, the
reference up to ``--ref-max-size``; on CPU both default to 30,000 so that the default run takes about 10
minutes on 2 cores), with the growth exponent log(t2/t1)/log(N2/N1). Prints tables; ``--out DIR`` writes
``DIR/bench_diversity.json``. Not a test.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

import numpy as np
import torch
from _common import env_info, fashion_mnist_available, finish, median, resolve_device, set_threads, table
from bench_metrics import measure

from ganlab.data.base import GANData  # noqa: E402
from ganlab.metrics.embedders import ClassifierEmbedder  # noqa: E402
from ganlab.metrics.numeric.kmeans import kmeans  # noqa: E402
from ganlab.metrics.prdc import prdc  # noqa: E402
from ganlab.metrics.similarity import similarity_histogram  # noqa: E402

CPU = torch.device("cpu")
STEPS = ("embed", "kmeans", "similarity", "prdc")


# ----------------------------------------------------------------------------------------- samples
def load_data(name: str) -> GANData:
    from ganlab.data.images import digits, fashion_mnist

    return fashion_mnist(image_size=32) if name == "fashion_mnist" else digits(image_size=8)


def draw(data: GANData, n: int, kind: str, seed: int) -> torch.Tensor:
    """``n`` real or stand-in generated images (see the module docstring), on the CPU."""
    g = torch.Generator().manual_seed(seed)
    x, y = data.x.cpu(), data.labels.cpu()
    if kind == "real":
        if n <= len(x):
            return x[torch.randperm(len(x), generator=g)[:n]].clone()
        idx = torch.randint(len(x), (n,), generator=g)
        return x[idx] + 0.01 * torch.randn(n, *x.shape[1:], generator=g)
    pool = torch.nonzero(y < 7).squeeze(1)  # a generator that lost 3 of the 10 classes
    idx = pool[torch.randint(len(pool), (n,), generator=g)]
    return (x[idx] + 0.1 * torch.randn(n, *x.shape[1:], generator=g)).clamp_(-1, 1)


# ----------------------------------------------------------------------------------------- reference
def plain_embed(model: torch.nn.Module, x: torch.Tensor, batch: int) -> torch.Tensor:
    with torch.no_grad():
        return torch.cat([model.embed(x[i:i + batch]) for i in range(0, len(x), batch)])


def block_rows(n_cols: int, mem_gib: float) -> int:
    """Rows of an (rows x n_cols) float32 block within ``mem_gib`` (all rows when the whole matrix fits)."""
    return max(1, int(mem_gib * 2**30 // (4 * max(n_cols, 1))))


def ref_similarity(x: np.ndarray, bins: int, tau: float, mem_gib: float) -> dict[str, Any]:
    """cosine_similarity + numpy.histogram over the pairs i < j (row blocks when N x N does not fit)."""
    from sklearn.metrics.pairwise import cosine_similarity

    n = len(x)
    rows = block_rows(n, mem_gib)
    counts = np.zeros(bins, dtype=np.int64)
    high = 0
    for s in range(0, n - 1, rows):
        e = min(s + rows, n)
        blk = np.clip(cosine_similarity(x[s:e], x[s:]), -1.0, 1.0)
        vals = blk[np.arange(blk.shape[1])[None, :] > np.arange(e - s)[:, None]]  # columns j > i only
        counts += np.histogram(vals, bins=bins, range=(-1.0, 1.0))[0]
        high += int((vals > tau).sum())
    return {"counts": counts, "high_similarity_fraction": high / (n * (n - 1) // 2)}


def get_kth_value(unsorted: np.ndarray, k: int, axis: int = -1) -> np.ndarray:
    """k-th smallest value along ``axis`` (Naeem et al.'s helper: max of the k smallest)."""
    indices = np.argpartition(unsorted, k, axis=axis)[..., :k]
    return np.take_along_axis(unsorted, indices, axis=axis).max(axis=axis)


def ref_nn_radii(x: np.ndarray, ks: list[int], mem_gib: float) -> dict[int, np.ndarray]:
    """Distance to the k-th nearest other point = (k+1)-th smallest distance including the point itself."""
    from sklearn.metrics import pairwise_distances

    n = len(x)
    rows = block_rows(n, mem_gib)
    out = {k: np.empty(n, dtype=np.float32) for k in ks}
    for s in range(0, n, rows):
        d = pairwise_distances(x[s:s + rows], x, metric="euclidean")
        for k in ks:
            out[k][s:s + rows] = get_kth_value(d, k + 1, axis=-1)
    return out


def ref_prdc(real: np.ndarray, fake: np.ndarray, k_pr: int, k_dc: int, mem_gib: float) -> dict[str, float]:
    """Naeem et al. 2020 (prdc package) formulas, ``<=`` for P/R and ``<`` for D/C (ganlab's ``official``), k_pr
    for P/R and k_dc for D/C."""
    from sklearn.metrics import pairwise_distances

    r_real = ref_nn_radii(real, sorted({k_pr, k_dc}), mem_gib)
    r_fake = ref_nn_radii(fake, [k_pr], mem_gib)[k_pr]
    n, m = len(real), len(fake)
    rows = block_rows(m, mem_gib)
    fake_in_real_ball = np.zeros(m, dtype=bool)
    ball_hits = np.zeros(m, dtype=np.int64)
    recalled = np.empty(n, dtype=bool)
    covered = np.empty(n, dtype=bool)
    for s in range(0, n, rows):
        e = min(s + rows, n)
        d = pairwise_distances(real[s:e], fake, metric="euclidean")  # distance_real_fake, rows s..e
        fake_in_real_ball |= (d <= r_real[k_pr][s:e, None]).any(axis=0)
        ball_hits += (d < r_real[k_dc][s:e, None]).sum(axis=0)
        recalled[s:e] = (d <= r_fake[None, :]).any(axis=1)
        covered[s:e] = d.min(axis=1) < r_real[k_dc][s:e]
    return {"precision": float(fake_in_real_ball.mean()), "recall": float(recalled.mean()),
            "density": float(ball_hits.mean() / k_dc), "coverage": float(covered.mean())}


# ----------------------------------------------------------------------------------------- one suite
def suite(data: GANData, emb: ClassifierEmbedder, n: int, args: argparse.Namespace, device: torch.device,
          ours: bool, ref: bool, seed: int = 0, agreement: bool = False) -> dict[str, Any]:
    """Run ours and/or the reference on n real + n generated samples: {step: {"ours"|"reference": ...}}."""
    real_x, fake_x = draw(data, n, "real", seed), draw(data, n, "fake", seed + 1)
    real_dev, fake_dev = real_x.to(device), fake_x.to(device)
    model = emb.model
    out: dict[str, Any] = {s: {} for s in STEPS}
    k = min(args.k, n - 1)

    def record(step: str, side: str, dev: torch.device, fn: Any) -> Any:
        seconds, value, mem = measure(fn, dev)
        out[step][side] = {"s": seconds, "peak_extra_bytes": mem}
        return value

    # 1. embed (both sides on the device, the reference's CNN forward written out)
    if ours:
        e_real, e_fake = record("embed", "ours", device, lambda: (emb(real_dev), emb(fake_dev)))
    if ref or not ours:
        r_real, r_fake = record("embed", "reference", device,
                                lambda: (plain_embed(model, real_dev, args.ref_embed_batch),
                                         plain_embed(model, fake_dev, args.ref_embed_batch)))
        if not ours:
            e_real, e_fake = r_real, r_fake
    real_np, fake_np = e_real.cpu().numpy(), e_fake.cpu().numpy()
    if ours and ref:
        out["embed"]["max_abs_diff"] = max(float((e_real - r_real).abs().max()), float((e_fake - r_fake).abs().max()))
    # 2. k-means, scorer settings, own seeding
    if ours:
        res = record("kmeans", "ours", device, lambda: kmeans(e_real, k, n_init=args.n_init, max_iter=100, tol=1e-4,
                                                              generator=torch.Generator(device).manual_seed(seed)))
        out["kmeans"]["ours"] |= {"inertia": res.inertia, "n_iter": res.n_iter}
    if ref:
        from sklearn.cluster import KMeans

        sk = record("kmeans", "reference", CPU, lambda: KMeans(k, n_init=args.n_init, max_iter=100, tol=1e-4,
                                                                random_state=seed).fit(real_np))
        out["kmeans"]["reference"] |= {"inertia": float(sk.inertia_), "n_iter": int(sk.n_iter_)}
    if ours and ref:
        out["kmeans"]["inertia_ratio"] = out["kmeans"]["ours"]["inertia"] / out["kmeans"]["reference"]["inertia"]
    if agreement and ours and ref:  # same start, one run each: the same Lloyd iterations
        from sklearn.cluster import KMeans

        start = e_real[torch.randperm(n, generator=torch.Generator().manual_seed(seed))[:k].to(device)]
        a = kmeans(e_real, k, n_init=1, max_iter=100, tol=1e-4, init=start)
        b = KMeans(k, n_init=1, max_iter=100, tol=1e-4, init=start.cpu().numpy()).fit(real_np)
        a1 = kmeans(e_real, k, n_init=1, max_iter=1, tol=1e-4, init=start)  # one Lloyd step: must agree closely
        b1 = KMeans(k, n_init=1, max_iter=1, tol=1e-4, init=start.cpu().numpy()).fit(real_np)
        out["kmeans"]["same_init"] = {
            "one_iteration_centers_max_abs_diff": float(np.abs(a1.centers.cpu().numpy() - b1.cluster_centers_).max()),
            "centers_max_abs_diff": float(np.abs(a.centers.cpu().numpy() - b.cluster_centers_).max()),
            "labels_agree_fraction": float((a.labels.cpu().numpy() == b.labels_).mean()),
            "inertia_rel_diff": abs(a.inertia - float(b.inertia_)) / float(b.inertia_),
            "n_iter": [a.n_iter, int(b.n_iter_)]}
        out["kmeans"]["max_abs_diff"] = out["kmeans"]["same_init"]["one_iteration_centers_max_abs_diff"]
    # 3. similarity histogram of the generated embeddings
    if ours:
        h = record("similarity", "ours", device, lambda: similarity_histogram(e_fake, bins=args.bins, tau=args.tau))
    if ref:
        rh = record("similarity", "reference", CPU,
                    lambda: ref_similarity(fake_np, args.bins, args.tau, args.ref_mem_gib))
    if ours and ref:
        pairs = n * (n - 1) // 2
        diff = np.abs(h.counts.cpu().numpy() - rh["counts"])
        out["similarity"] |= {"counts_max_abs_diff": int(diff.max()),
                              "counts_max_abs_diff_fraction": float(diff.max() / pairs),
                              "high_similarity_fraction": [h.high_similarity_fraction, rh["high_similarity_fraction"]],
                              "max_abs_diff": abs(h.high_similarity_fraction - rh["high_similarity_fraction"])}
    # 4. precision, recall, density, coverage
    if ours:
        p = record("prdc", "ours", device, lambda: prdc(e_real, e_fake, k_pr=args.k_pr, k_dc=args.k_dc))
    if ref:
        rp = record("prdc", "reference", CPU,
                    lambda: ref_prdc(real_np, fake_np, args.k_pr, args.k_dc, args.ref_mem_gib))
    if ours and ref:
        out["prdc"] |= {"ours_values": p, "reference_values": rp,
                        "max_abs_diff": max(abs(p[key] - rp[key]) for key in p)}
    return out


# ----------------------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cpu", help="cpu | cuda | auto (ganlab's side; the reference is CPU-only)")
    p.add_argument("--dataset", default="auto", choices=["auto", "fashion_mnist", "digits"])
    p.add_argument("--n", type=int, default=10_000, help="samples (real and generated each) of the comparison")
    p.add_argument("--sizes", type=int, nargs="+", default=[1_000, 3_000, 10_000, 30_000, 100_000])
    p.add_argument("--max-size", type=int, default=None, help="growth: ours up to this N (CPU default 30,000)")
    p.add_argument("--ref-max-size", type=int, default=None,
                   help="growth: the reference up to this N (default: --max-size)")
    p.add_argument("--repeats", type=int, default=3, help="interleaved runs of the comparison at --n")
    p.add_argument("--k", type=int, default=100)
    p.add_argument("--n-init", type=int, default=3)
    p.add_argument("--bins", type=int, default=100)
    p.add_argument("--tau", type=float, default=0.9)
    p.add_argument("--k-pr", type=int, default=3)
    p.add_argument("--k-dc", type=int, default=5)
    p.add_argument("--ref-embed-batch", type=int, default=256, help="the reference's embedding batch")
    p.add_argument("--ref-mem-gib", type=float, default=2.0, help="largest matrix the reference builds at once")
    p.add_argument("--threads", type=int, default=None,
                   help="torch and BLAS threads (default: 1 on CPU; unlimited with --device cuda)")
    p.add_argument("--skip", nargs="*", default=[], choices=["comparison", "growth"])
    p.add_argument("--out", type=Path, default=None, help="folder for bench_diversity.json")
    args = p.parse_args(argv)
    device = resolve_device(args.device)
    set_threads(args.threads if args.threads is not None else (1 if device.type == "cpu" else None))
    if args.max_size is None:
        args.max_size = 30_000 if device.type == "cpu" else max(args.sizes)
    args.ref_max_size = args.ref_max_size or args.max_size
    if args.dataset == "auto":
        args.dataset = "fashion_mnist" if fashion_mnist_available() else "digits"
    data = load_data(args.dataset)
    emb = ClassifierEmbedder()
    emb.prepare(data.to(device))  # loads the cached classifier or trains it (outside every timing)
    report: dict[str, Any] = {
        "env": env_info(device),
        "setup": {"dataset": args.dataset, "image_shape": list(data.sample_shape), "embedding_dim": 128,
                  "classifier_test_accuracy": emb.test_accuracy, "k": args.k, "n_init": args.n_init,
                  "bins": args.bins, "tau": args.tau, "k_pr": args.k_pr, "k_dc": args.k_dc,
                  "ref_mem_gib": args.ref_mem_gib, "reference_device": "cpu"}}
    suite(data, emb, 1000, args, device, ours=True, ref=True)  # warm-up (first-call costs, thread pools)
    if "comparison" not in args.skip:
        runs = [suite(data, emb, args.n, args, device, ours=True, ref=True, agreement=(r == 0))
                for r in range(args.repeats)]
        comp: dict[str, Any] = {"n": args.n, "repeats": args.repeats, "runs": runs, "steps": {}}
        rows = []
        totals = {"ours": 0.0, "reference": 0.0}
        for step in STEPS:
            t = {side: median([r[step][side]["s"] for r in runs]) for side in ("ours", "reference")}
            mem = {side: runs[0][step][side]["peak_extra_bytes"] for side in ("ours", "reference")}
            totals["ours"] += t["ours"]
            totals["reference"] += t["reference"]
            first = runs[0][step]
            agree = first.get("max_abs_diff", float("nan"))
            comp["steps"][step] = {"ours_s": t["ours"], "reference_s": t["reference"],
                                   "time_ratio": t["ours"] / t["reference"], "max_abs_diff": agree,
                                   "peak_extra_bytes": mem}
            rows.append([step, t["ours"], t["reference"], t["ours"] / t["reference"], agree,
                         *(("n/a" if mem[s] is None else f"{mem[s] / 2**20:.0f}") for s in ("ours", "reference"))])
        comp["total"] = {"ours_s": totals["ours"], "reference_s": totals["reference"],
                         "time_ratio": totals["ours"] / totals["reference"]}
        rows.append(["total", totals["ours"], totals["reference"], totals["ours"] / totals["reference"], "", "", ""])
        report["comparison"] = comp
        r0 = runs[0]
        print(f"\ndiversity suite on {args.n:,} real + {args.n:,} generated {args.dataset} samples "
              f"(128-d classifier embeddings); ours on {device}, reference on cpu; {torch.get_num_threads()} "
              f"thread(s); median of {args.repeats} interleaved runs:")
        print(table(["step", "ours s", "reference s", "time ratio", "max abs diff", "ours peak MiB",
                     "reference peak MiB"], rows))
        km, sim, pr = r0["kmeans"], r0["similarity"], r0["prdc"]
        print(f"k-means K={min(args.k, args.n - 1)}, n_init={args.n_init}, own seeding: inertia ours/sklearn = "
              f"{km['inertia_ratio']:.4f} ({km['ours']['n_iter']} vs {km['reference']['n_iter']} iterations); same "
              f"initial centres: after one iteration centres max abs diff "
              f"{km['same_init']['one_iteration_centers_max_abs_diff']:.2e}; at convergence centres max abs diff "
              f"{km['same_init']['centers_max_abs_diff']:.2e}, labels agree "
              f"{100 * km['same_init']['labels_agree_fraction']:.2f}%, inertia rel. diff "
              f"{km['same_init']['inertia_rel_diff']:.2e}, iterations {km['same_init']['n_iter']}")
        print(f"similarity: high_similarity_fraction ours {sim['high_similarity_fraction'][0]:.6f} vs "
              f"{sim['high_similarity_fraction'][1]:.6f}; histogram counts max abs diff {sim['counts_max_abs_diff']} "
              f"pairs of {args.n * (args.n - 1) // 2:,}")
        print("prdc: " + ", ".join(f"{key} {pr['ours_values'][key]:.4f} vs {pr['reference_values'][key]:.4f}"
                                   for key in pr["ours_values"]))
    if "growth" not in args.skip:
        sizes = sorted(s for s in args.sizes if s <= max(args.max_size, args.ref_max_size))
        growth: dict[str, dict[str, dict[int, float]]] = {s: {"ours": {}, "reference": {}} for s in STEPS}
        print(f"\ngrowth (ours up to N={args.max_size:,}, reference up to N={args.ref_max_size:,}):", flush=True)
        for n in sizes:
            res = suite(data, emb, n, args, device, ours=n <= args.max_size, ref=n <= args.ref_max_size)
            for step in STEPS:
                for side in ("ours", "reference"):
                    if side in res[step]:
                        growth[step][side][n] = res[step][side]["s"]
            print("  N=" + f"{n:>7,d}: " + "  ".join(
                f"{step} {res[step].get('ours', {}).get('s', math.nan):.3g}/"
                f"{res[step].get('reference', {}).get('s', math.nan):.3g} s" for step in STEPS), flush=True)
        exps: dict[str, dict[str, list[float]]] = {}
        rows = []
        for step in STEPS:
            for side in ("ours", "reference"):
                t = growth[step][side]
                ns = sorted(t)
                e = [math.log(t[b] / t[a]) / math.log(b / a) for a, b in zip(ns, ns[1:]) if t[a] > 0 and t[b] > 0]
                exps.setdefault(step, {})[side] = e
                rows.append([step, side, *[t.get(n, math.nan) for n in sizes], e[-1] if e else math.nan])
        report["growth"] = {"sizes": sizes, "max_size": args.max_size, "ref_max_size": args.ref_max_size,
                            "seconds": {s: {side: {str(n): v for n, v in t.items()} for side, t in g.items()}
                                        for s, g in growth.items()},
                            "growth_exponents": exps}
        print(table(["step", "impl", *[f"N={n:,} s" for n in sizes], "last exponent"], rows))
    finish(report, args.out, "bench_diversity")
    return report


if __name__ == "__main__":
    main()
