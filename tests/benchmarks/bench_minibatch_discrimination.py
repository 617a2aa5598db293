"""Minibatch discrimination's o(x) (Salimans et al. 2016, Sec. 3.2), forward + backward: ganlab's hand-written
backward (:func:`ganlab.strategies.minibatch_discrimination.minibatch_features`) against the earlier
implementation, kept below as the baseline (``torch.cdist(p=1)`` and autograd through it).

Both are timed in one process, interleaved (baseline, new, baseline, new, ...), one thread by default; the best
of the repeats is the time of each (the least disturbed by other load), and the ratio baseline / new is printed,
with the median of each round's ratio (baseline and new timed back to back) and the load average: on a busy
machine the baseline, whose intermediates do not fit in cache, slows down more than the blocked code.
Before timing, the values and gradients of the two are compared (float32: within float32 rounding; float64:
1e-6 relative).

    python tests/benchmarks/bench_minibatch_discrimination.py                  # N=256, B=100, C=5
    python tests/benchmarks/bench_minibatch_discrimination.py --n 64 --repeats 30 --out results/
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

import torch
from _common import env_info, finish, set_threads, table, timed  # also puts the repository on sys.path
from torch import Tensor
from torch.utils.checkpoint import checkpoint

from ganlab.strategies.minibatch_discrimination import minibatch_features


def _baseline_row_block(rows: Tensor, m: Tensor) -> Tensor:
    dist = torch.cdist(rows.transpose(0, 1), m.transpose(0, 1), p=1.0)  # (B, b, N) L1 distances per kernel
    return (torch.exp(-dist).sum(-1) - 1.0).t()  # (b, B)


def baseline_features(m: Tensor, max_elements: int = 2**24) -> Tensor:
    """The earlier ``minibatch_features``: cdist per row block, blocks checkpointed when memory demands it."""
    n = m.shape[0]
    rows = max(1, max_elements // max(1, n * m.shape[1]))
    if rows >= n:
        return _baseline_row_block(m, m)
    blocks = []
    for i in range(0, n, rows):
        if torch.is_grad_enabled() and m.requires_grad:
            blocks.append(checkpoint(_baseline_row_block, m[i:i + rows], m, use_reentrant=False))
        else:
            blocks.append(_baseline_row_block(m[i:i + rows], m))
    return torch.cat(blocks)


def forward_backward(fn: Callable[[Tensor], Tensor], m0: Tensor, g: Tensor) -> tuple[Tensor, Tensor]:
    """o = fn(M) and dL/dM for L = sum(o * g)."""
    m = m0.clone().requires_grad_(True)
    o = fn(m)
    o.backward(g)
    assert m.grad is not None
    return o.detach(), m.grad


def agreement(n: int, kernels: int, dims: int, dtype: torch.dtype) -> dict[str, float]:
    """Largest differences between the two implementations, relative to the largest value / gradient."""
    gen = torch.Generator().manual_seed(1)
    m0 = (0.3 * torch.randn(n, kernels, dims, generator=gen)).to(dtype)
    g = torch.randn(n, kernels, generator=gen).to(dtype)
    o_ref, grad_ref = forward_backward(baseline_features, m0, g)
    o_new, grad_new = forward_backward(minibatch_features, m0, g)
    return {"value_rel": float((o_new - o_ref).abs().max() / o_ref.abs().max()),
            "grad_rel": float((grad_new - grad_ref).abs().max() / grad_ref.abs().max())}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=256, help="batch size N (samples scored together)")
    p.add_argument("--kernels", type=int, default=100, help="B, the number of kernels")
    p.add_argument("--dims", type=int, default=5, help="C, the dimension of each kernel")
    p.add_argument("--repeats", type=int, default=15, help="timed calls of each implementation (best is kept)")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    p.add_argument("--out", type=Path, default=None, help="folder for bench_minibatch_discrimination.json")
    args = p.parse_args()
    set_threads(args.threads)
    device = torch.device("cpu")
    report = {"env": env_info(device), "args": {k: str(v) for k, v in vars(args).items()}}

    checks = {str(dt).removeprefix("torch."): agreement(args.n, args.kernels, args.dims, dt)
              for dt in (torch.float32, torch.float64)}
    report["agreement"] = checks
    print(table(["dtype", "max |new - baseline| / max |baseline|: values", "gradients"],
                [[k, v["value_rel"], v["grad_rel"]] for k, v in checks.items()]))
    if checks["float64"]["value_rel"] > 1e-6 or checks["float64"]["grad_rel"] > 1e-6:
        raise SystemExit("float64 results differ from the baseline by more than 1e-6 relative")

    gen = torch.Generator().manual_seed(0)
    m0 = 0.3 * torch.randn(args.n, args.kernels, args.dims, generator=gen)  # (N, B, C)
    g = torch.randn(args.n, args.kernels, generator=gen)  # (N, B) upstream gradient
    impls = {"baseline (cdist p=1 + autograd)": baseline_features, "ganlab (hand-written backward)": minibatch_features}
    times: dict[str, list[float]] = {k: [] for k in impls}
    for fn in impls.values():  # warm-up
        forward_backward(fn, m0, g)
    for _ in range(args.repeats):
        for name, fn in impls.items():  # interleaved
            times[name].append(timed(lambda fn=fn: forward_backward(fn, m0, g), device)[0])
    best = {k: min(v) for k, v in times.items()}
    base, new = best.values()
    paired = sorted(b / n for b, n in zip(*times.values()))  # each round's baseline / new, measured back to back
    report["times_s"], report["best_s"], report["ratio"] = times, best, base / new
    report["paired_ratio_median"] = paired[len(paired) // 2]
    print(f"\nN={args.n}, B={args.kernels}, C={args.dims}, forward + backward, float32, {args.threads} thread(s), "
          f"best of {args.repeats} interleaved")
    print(table(["implementation", "best ms", "median ms"],
                [[k, 1e3 * best[k], 1e3 * sorted(v)[len(v) // 2]] for k, v in times.items()]))
    print(f"\nratio baseline / ganlab (best): {base / new:.2f}x; median of the {len(paired)} rounds' ratios: "
          f"{paired[len(paired) // 2]:.2f}x; load average {report['env']['load_average_before'][0]:.1f} at the start "
          f"on {report['env']['cpu_count']} cores")
    finish(report, args.out, "bench_minibatch_discrimination")


if __name__ == "__main__":
    main()
