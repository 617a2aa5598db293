"""Steps/s of ganlab's training loop against a minimal plain-PyTorch GAN loop with the same networks.

Usage::

    python tests/benchmarks/bench_loop.py [--device cpu|cuda] [--models mlp dcgan] [--dataset auto|fashion_mnist|digits]
                                          [--repeats 40] [--threads 1] [--profile] [--out DIR]

Two setups, each built the normal way (``conf/train.yaml`` composed with overrides, then
``ganlab.run.build.build_trainer``):

* ``mlp``: the MLP pair (``model=mlp``) on ``dataset=ring8``, batch 256 (``conf/trainer/default.yaml``);
* ``dcgan``: the DCGAN pair at 32x32, widths 32, batch 64 (``experiment=fashion_mnist_dcgan``'s sizes) on
  Fashion-MNIST, or on scikit-learn's digits resized to 32x32 (``--dataset digits``; the default ``auto``
  falls back to it when the Fashion-MNIST files are absent). Same FLOPs either way.

Both sides use the same loss (non-saturating, ``loss=ns``), the same Adam settings (read from the composed
``optim`` config: lr 2e-4, betas (0.5, 0.999)), the same batch, the same device, and start from the same
weights (the plain loop trains deep copies of ganlab's freshly built G and D). These are timed, in blocks
of ``--block`` iterations, interleaved (rotating order) over ``--repeats`` rounds after one warm-up round;
the device is synchronised at block ends:

* ``plain``: the loop below (``PlainGAN.step``): index the device tensor with a slice of a device
  ``randperm``, sample z, D step (fakes from a no-grad G forward), G step on fresh z with D frozen;
* ``plain again (A/A control)``: the same plain loop timed as a second variant; its "overhead" is the
  measurement's noise floor (what two identical loops differ by in this session), against which the other
  rows' overheads are read;
* ``plain, second copy (B/B control)``: a second, independent plain loop (its own copies of the networks,
  optimisers and data tensor): what merely being other objects in memory costs, the control for ganlab's rows,
  whose networks are other objects too;
* ``ganlab steps``: ``trainer.train_step()`` (what ``Trainer.fit`` calls per step: n_critic D steps, one
  G step, the training-health checks); ``d_step()``/``g_step(real)`` on a loop without ``train_step``;
* ``ganlab fit()``: ``trainer.fit()`` for one block of steps, with ``trainer.evaluate`` replaced by a no-op
  and checkpoints off; the time is fit's own loop timer (``metrics["steps_per_s"]``, which leaves out the
  end-of-run files). Its logging is on at ``--fit-log-every`` (default 50, the conf default; NullLogger),
  plus the log fit always writes at its last step, i.e. once per block;
* where the loop has the training-health monitor (``ganlab/health``): ``ganlab steps, health.update ->
  backward+step`` (ablation: the loop's update with the monitor's per-update reads, ``Trainer._update``,
  replaced, in this process only, by ``zero_grad(); backward(); step()``), ``ganlab steps,
  monitor.nan_guard=false`` (the guard off: only monitored steps read gradient norms), and ``ganlab steps,
  monitor.every=1e9`` (a second trainer whose periodic per-layer norms and update ratios never fall due);
* where the loop has the early-warning risk (``ganlab/callbacks/risk.py``): ``ganlab steps + after_step``
  with ``callbacks.collapse_risk.enabled=false`` and ``+ risk`` (fit()'s per-step health bookkeeping without and with
  ``CollapseRisk.observe`` on monitored steps), and ``risk_cost``: the median CPU time of one
  ``risk.observe`` call over ``monitor.every`` times the CPU time of one ganlab step, in percent.

Overhead = median over rounds of (ganlab time / plain time) - 1, from the same round (short blocks, many
rounds: adjacent blocks see the same machine load), with a 95 % percentile-bootstrap interval of that median
(rounds resampled with replacement, Efron & Tibshirani 1993, ch. 13); also the ratio of the two medians. On CPU
the times compared are the CPU time of this (single-threaded) process, which other users' load on a shared machine
disturbs far less than wall time (``--clock wall`` to change; for ``fit()`` the CPU time of a zero-step
fit() call, i.e. its start and end-of-run files, is taken off); on CUDA wall time. steps/s are always
wall-clock. With ``--profile``, or when an overhead exceeds ``--threshold`` (5%), cProfile (ganlab vs
plain) and a per-line timer of ganlab/trainer/loop.py, ganlab/health/monitor.py and the plain loop show
where ganlab's extra time goes. Prints tables; ``--out DIR`` writes ``DIR/bench_loop.json``.
Not a test: timings depend on the machine and its load, which is recorded alongside.
"""

from __future__ import annotations

import argparse
import copy
import cProfile
import inspect
import io
import pstats
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from _common import (
    QUIET,
    REPO,
    compose,
    env_info,
    fashion_mnist_available,
    finish,
    median,
    resolve_device,
    set_threads,
    sync,
    table,
)

import ganlab  # noqa: E402

GANLAB_DIR = Path(ganlab.__file__).resolve().parent
if (GANLAB_DIR / "stats.py").is_file():
    from ganlab.run.build import build_trainer
    from ganlab.stats import bootstrap_ci
elif (GANLAB_DIR / "run" / "build.py").is_file():  # a tree from before ganlab/stats.py
    from ganlab.analysis.stats import bootstrap_ci  # type: ignore[no-redef]

    from ganlab.run.build import build_trainer  # type: ignore[no-redef]
else:  # a tree from before ganlab/run/ (before/after counts: bench_instructions.py --tree)
    from ganlab.build import build_trainer  # type: ignore[no-redef]
    from ganlab.compare_stats import bootstrap_ci  # type: ignore[no-redef]

AA = "plain again (A/A control)"  # the plain loop timed as a second variant: the noise floor of the overheads
BB = "plain, second copy (B/B control)"  # a second PlainGAN with its own networks, optimisers and data copy
LOOP_FILE = str(GANLAB_DIR / "trainer" / "loop.py")
HEALTH_DIR = str(GANLAB_DIR / "health")


class PlainGAN:
    """The minimal loop a researcher writes by hand: same networks, loss, optimiser settings and data tensor."""

    def __init__(self, G: torch.nn.Module, D: torch.nn.Module, x: torch.Tensor, batch: int, lr_g: float,
                 betas_g: tuple[float, float], lr_d: float, betas_d: tuple[float, float], z_dim: int) -> None:
        self.G, self.D, self.x, self.batch, self.z_dim = G, D, x, batch, z_dim
        self.opt_g = torch.optim.Adam(G.parameters(), lr=lr_g, betas=betas_g)
        self.opt_d = torch.optim.Adam(D.parameters(), lr=lr_d, betas=betas_d)
        self.perm, self.pos = torch.randperm(len(x), device=x.device), 0

    def step(self) -> None:
        G, D, x, B, dev = self.G, self.D, self.x, self.batch, self.x.device
        if self.pos + B > len(x):  # new epoch; the partial last batch is dropped
            self.perm, self.pos = torch.randperm(len(x), device=dev), 0
        real = x[self.perm[self.pos:self.pos + B]]
        self.pos += B
        # D step: non-saturating loss on logits
        with torch.no_grad():
            fake = G(torch.randn(B, self.z_dim, device=dev))
        loss_d = F.softplus(-D(real)).mean() + F.softplus(D(fake)).mean()
        self.opt_d.zero_grad(set_to_none=True)
        loss_d.backward()
        self.opt_d.step()
        # G step on fresh z, D's parameters frozen
        D.requires_grad_(False)
        loss_g = F.softplus(-D(G(torch.randn(B, self.z_dim, device=dev)))).mean()
        self.opt_g.zero_grad(set_to_none=True)
        loss_g.backward()
        D.requires_grad_(True)
        self.opt_g.step()


def overrides(kind: str, args: argparse.Namespace, device: torch.device) -> list[str]:
    big = 10**9  # eval, checkpoints and logging never fall due inside the timed steps
    common = ["loss=ns", "optim=adam", f"device={device}", f"trainer.steps={big}", f"trainer.eval_every={big}",
              f"trainer.ckpt_every={big}", f"trainer.log_every={big}", "seed=0", *QUIET, *args.set]
    if kind == "mlp":
        return ["dataset=ring8", "model=mlp", f"trainer.batch_size={args.mlp_batch}", *common]
    return [f"dataset={args.dataset}", "model=dcgan", f"dataset.image_size={args.image_size}",
            f"model.generator.width={args.dcgan_width}", f"model.discriminator.width={args.dcgan_width}",
            f"trainer.batch_size={args.dcgan_batch}", "metrics/embedder=pixels", *common]


def bootstrap_median_ci(xs: list[float], level: float = 0.95, resamples: int = 4000, seed: int = 0) -> list[float]:
    """Percentile-bootstrap interval [lo, hi] of the median of ``xs``
    (:func:`ganlab.stats.bootstrap_ci` with ``statistic=np.median``; fixed ``seed``: the same data give the
    same interval). NaNs for fewer than 2 values."""
    if len(xs) < 2:
        return [float("nan"), float("nan")]
    return list(bootstrap_ci(xs, level, resamples, seed, statistic=np.median))


def quartiles(xs: list[float]) -> list[float]:
    xs = sorted(xs)
    pick = lambda q: xs[min(len(xs) - 1, round(q * (len(xs) - 1)))]  # noqa: E731
    return [pick(0.25), pick(0.75)]


def ganlab_steps(trainer: Any, k: int) -> None:
    """What fit() runs per generator step, minus its logging/eval bookkeeping: ``trainer.train_step()`` where
    the loop has it (n_critic D steps and one G step with the health checks), else d_step()/g_step(real)."""
    train_step = getattr(trainer, "train_step", None)
    for _ in range(k):
        if train_step is not None:
            train_step()
        else:
            for _ in range(trainer.cfg.n_critic):
                _, real, _, _ = trainer.d_step()
            trainer.g_step(real)
        trainer.state.step += 1


def risk_of(trainer: Any) -> Any:
    """The trainer's early-warning risk (:class:`ganlab.callbacks.risk.CollapseRisk`), or None when it is off; also
    on trees from before callbacks, whose trainer held it as ``trainer.risk``."""
    if not hasattr(trainer, "callbacks"):
        return getattr(trainer, "risk", None)
    trainer.start()
    return next((c.risk for c in trainer.callbacks if c.name == "collapse_risk"), None)


def ganlab_steps_after(trainer: Any, k: int, risk: bool) -> None:
    """ganlab_steps plus fit()'s per-step health bookkeeping: ``health.after_step`` and, on its monitored
    steps when ``risk``, the early-warning risk (``CollapseRisk.observe``: two small forwards, one sync)."""
    for _ in range(k):
        out = trainer.train_step()
        trainer.state.step += 1
        monitored = trainer.health.after_step(trainer.state.step)
        if risk and monitored:
            risk_of(trainer).observe(trainer.state.step, trainer.G, trainer.D, out.d_real, out.d_fake, monitored,
                                     trainer.health.last)


def risk_cost(trainer: Any, step_cpu_s: float, calls: int = 200) -> dict[str, float]:
    """CPU seconds of one ``CollapseRisk.observe`` call (median of ``calls``, on the trainer's latest batch),
    and that cost spread over the ``monitor.every`` steps between calls, as a percentage of one ganlab step."""
    out = trainer.train_step()
    trainer.state.step += 1
    monitored = trainer.health.after_step(trainer.state.step) or {"update_ratio/G/group0": 1.0}
    risk = risk_of(trainer)
    state = risk.state_dict()
    times = []
    for _ in range(calls):
        c0 = time.process_time()
        risk.observe(trainer.state.step, trainer.G, trainer.D, out.d_real, out.d_fake, monitored, trainer.health.last)
        times.append(time.process_time() - c0)
    risk.load_state_dict(state)
    per_call, every = median(times), trainer.health.cfg.every
    return {"observe_cpu_ms": 1e3 * per_call, "monitor_every": every, "step_cpu_ms": 1e3 * step_cpu_s,
            "percent_of_a_step": 100 * per_call / every / step_cpu_s}


def ganlab_steps_plain_update(trainer: Any, k: int) -> None:
    """Ablation: ganlab_steps with ``trainer._update`` (backward and step with the training-health monitor's
    per-update reads: grad norms, one host sync, update ratios; ``trainer.health.update`` in older loops)
    replaced by plain ``zero_grad(); backward(); step()``."""
    def plain(opt: Any, loss: Any) -> None:
        opt.zero_grad(set_to_none=True)
        (loss(0) if callable(loss) else loss).backward()  # the loop's _update takes micro_loss(i) (accumulation)
        opt.step()

    if hasattr(trainer.health, "update"):  # older loops: the monitor stepped the optimisers
        target, name = trainer.health, "update"
        update: Any = lambda net, module, opt, loss, step: plain(opt, loss)  # noqa: E731
    else:
        from ganlab.health import UpdateFindings
        target, name = trainer, "_update"
        update = lambda net, module, opt, loss: (plain(opt, loss), UpdateFindings(net))[1]  # noqa: E731
    setattr(target, name, update)
    try:
        ganlab_steps(trainer, k)
    finally:
        delattr(target, name)


def ganlab_fit(trainer: Any, k: int, log_every: int) -> float:
    """Seconds of k steps of trainer.fit() (its own loop timer); evaluation is a no-op."""
    trainer.cfg.steps = trainer.state.step + k
    trainer.cfg.log_every = log_every
    metrics = trainer.fit()
    return k / metrics["steps_per_s"]


def line_times(fn: Any, prefixes: tuple[str, ...]) -> dict[tuple[str, int], float]:
    """Wall time between consecutive line events of frames whose file starts with one of ``prefixes``
    (inclusive: a line's time contains its callees'; tracing overhead is spread over every line):
    {(file, line): seconds}. A guide to where the time goes, not a precise measurement."""
    acc: dict[tuple[str, int], float] = {}
    last: dict[int, tuple[tuple[str, int], float]] = {}

    def local(frame: Any, event: str, arg: Any) -> Any:
        now = time.perf_counter()
        key = id(frame)
        if key in last:
            where, t = last[key]
            acc[where] = acc.get(where, 0.0) + now - t
        if event == "return":
            last.pop(key, None)
        else:
            last[key] = ((frame.f_code.co_filename, frame.f_lineno), time.perf_counter())
        return local

    def glob(frame: Any, event: str, arg: Any) -> Any:
        return local if frame.f_code.co_filename.startswith(prefixes) else None

    sys.settrace(glob)
    try:
        fn()
    finally:
        sys.settrace(None)
    return acc


def profile(name: str, trainer: Any, plain: PlainGAN, k: int, device: torch.device) -> dict[str, Any]:
    """cProfile of k ganlab steps and k plain steps; then the per-line (inclusive) time of ganlab/trainer/loop.py,
    of ganlab/health/monitor.py (where present) and of PlainGAN.step, each file traced on its own."""
    out: dict[str, Any] = {}
    jobs = {"ganlab": lambda: ganlab_steps(trainer, k), "plain": lambda: [plain.step() for _ in range(k)]}
    for label, fn in jobs.items():
        prof = cProfile.Profile()
        prof.runcall(fn)
        sync(device)
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(15)
        out[f"cprofile_{label}"] = buf.getvalue()
        print(f"--- cProfile, {name}, {label}, {k} steps (sorted by own time) ---")
        print("\n".join(ln for ln in buf.getvalue().splitlines()[6:] if ln.strip()))
    files = [("ganlab", LOOP_FILE), ("ganlab", str(Path(HEALTH_DIR) / "monitor.py")), ("plain", __file__)]
    for label, file in files:
        if not Path(file).exists():
            continue
        fn = jobs[label]
        t0 = time.perf_counter()
        lines = line_times(lambda: (fn(), sync(device)), (file,))
        total = time.perf_counter() - t0
        src = Path(file).read_text().splitlines()
        rel = str(Path(file).resolve().relative_to(REPO))
        if label == "plain":  # only PlainGAN.step's own lines (this file also holds the benchmark's code)
            src_lines, first = inspect.getsourcelines(PlainGAN.step)
            lines = {w: t for w, t in lines.items() if first <= w[1] < first + len(src_lines)}
        keep = sorted(lines.items(), key=lambda kv: -kv[1])[:12]
        rows = [[f"{Path(rel).name}:{ln}", 1e3 * t / k, src[ln - 1].strip()[:90]] for (_, ln), t in keep]
        print(f"--- {rel}: time per line (inclusive of callees), {name}, {label} loop, {k} steps under tracing "
              f"({1e3 * total / k:.3f} ms/step in all) ---")
        print(table(["line", "ms/step", "code"], rows))
        out[f"lines_{rel}"] = {"traced_ms_per_step": 1e3 * total / k, "ms_per_step": {r[0]: r[1] for r in rows}}
    return out


def bench(kind: str, args: argparse.Namespace, device: torch.device) -> dict[str, Any]:
    run_dir = Path(tempfile.mkdtemp(prefix=f"bench_loop_{kind}_"))
    cfg = compose(overrides(kind, args, device))
    trainer = build_trainer(cfg, run_dir)
    trainer.evaluate = lambda: {}  # fit() calls self.evaluate() at its last step: keep it out of the timing
    og, od = cfg.optim.generator, cfg.optim.discriminator
    plain = PlainGAN(copy.deepcopy(trainer.G), copy.deepcopy(trainer.D), trainer.data.x, int(cfg.trainer.batch_size),
                     float(og.lr), tuple(og.betas), float(od.lr), tuple(od.betas), trainer.G.z_dim)
    plain2 = PlainGAN(copy.deepcopy(trainer.G), copy.deepcopy(trainer.D), trainer.data.x.clone(),
                      int(cfg.trainer.batch_size), float(og.lr), tuple(og.betas), float(od.lr), tuple(od.betas),
                      trainer.G.z_dim)
    assert trainer.cfg.n_critic == 1 and not trainer.strategies
    default_block = {"mlp": (25, 200), "dcgan": (2, 50)}[kind][device.type == "cuda"]
    k = args.block or default_block
    jobs = {
        "plain": lambda: [plain.step() for _ in range(k)],
        AA: lambda: [plain.step() for _ in range(k)],
        BB: lambda: [plain2.step() for _ in range(k)],
        "ganlab steps": lambda: ganlab_steps(trainer, k),
        "ganlab fit()": lambda: ganlab_fit(trainer, k, args.fit_log_every),
    }
    if args.ablation and hasattr(trainer, "health"):
        jobs["ganlab steps, health.update -> backward+step (ablation)"] = lambda: ganlab_steps_plain_update(trainer, k)
    if risk_of(trainer) is not None:  # callbacks.collapse_risk.enabled=false vs true, on the same trainer
        jobs["ganlab steps + after_step (monitor.risk.enabled=false)"] = lambda: ganlab_steps_after(trainer, k, False)
        jobs["ganlab steps + after_step + risk"] = lambda: ganlab_steps_after(trainer, k, True)
    if args.monitor_variant and "monitor" in cfg:  # the training-health monitor's periodic part pushed out
        light = build_trainer(compose(overrides(kind, args, device) + ["monitor.every=1000000000"]),
                              Path(tempfile.mkdtemp(prefix=f"bench_loop_{kind}_light_")))
        light.G.load_state_dict(trainer.G.state_dict())
        light.D.load_state_dict(trainer.D.state_dict())
        jobs["ganlab steps, monitor.every=1e9"] = lambda: ganlab_steps(light, k)
        unguarded = build_trainer(compose(overrides(kind, args, device) + ["monitor.nan_guard=false"]),
                                  Path(tempfile.mkdtemp(prefix=f"bench_loop_{kind}_unguarded_")))
        unguarded.G.load_state_dict(trainer.G.state_dict())
        unguarded.D.load_state_dict(trainer.D.state_dict())
        jobs["ganlab steps, monitor.nan_guard=false"] = lambda: ganlab_steps(unguarded, k)

    def fit_fixed_cpu() -> float:
        """CPU seconds of a fit() call that runs no step (its start and its end-of-run files)."""
        trainer.cfg.steps = trainer.state.step
        c0 = time.process_time()
        trainer.fit()
        return time.process_time() - c0

    def run(name: str) -> tuple[float, float]:
        """(wall seconds, CPU seconds of this process) of one block."""
        sync(device)
        t0, c0 = time.perf_counter(), time.process_time()
        own = jobs[name]()
        sync(device)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        if name == "ganlab fit()":  # fit's own loop timer; its fixed start/end cost taken off the CPU time
            wall, cpu = own, cpu - fixed
        return wall, cpu

    fixed = 0.0
    for name in jobs:  # warm-up round (allocator, autotuning, first-call costs), not recorded
        run(name)
    fixed = median([fit_fixed_cpu() for _ in range(3)])
    names = list(jobs)
    walls: dict[str, list[float]] = {n: [] for n in names}
    cpus: dict[str, list[float]] = {n: [] for n in names}
    for r in range(args.repeats):
        for name in names[r % len(names):] + names[:r % len(names)]:  # rotate the order every round
            w, c = run(name)
            walls[name].append(w)
            cpus[name].append(c)
    clock = args.clock if args.clock != "auto" else ("cpu" if device.type == "cpu" else "wall")
    times = cpus if clock == "cpu" else walls
    ratios = {n: [t / p for t, p in zip(times[n], times["plain"])] for n in names[1:]}
    res: dict[str, Any] = {
        "setup": {"model": kind, "dataset": trainer.data.name, "sample_shape": list(trainer.data.sample_shape),
                  "batch_size": int(cfg.trainer.batch_size), "loss": "non-saturating",
                  "adam": {"lr_g": float(og.lr), "betas_g": list(og.betas), "lr_d": float(od.lr),
                           "betas_d": list(od.betas)},
                  "params_G": sum(p.numel() for p in trainer.G.parameters()),
                  "params_D": sum(p.numel() for p in trainer.D.parameters()),
                  "steps_per_block": k, "repeats": args.repeats, "fit_log_every": args.fit_log_every,
                  "clock": clock, "fit_fixed_cpu_s": fixed},
        "block_wall_s": walls,
        "block_cpu_s": cpus,
        "steps_per_s": {n: k / median(walls[n]) for n in names},
        "steps_per_cpu_s": {n: k / median(cpus[n]) for n in names},
        "time_ratio_vs_plain": {n: median(v) for n, v in ratios.items()},
        "time_ratio_quartiles": {n: quartiles(v) for n, v in ratios.items()},
        "overhead_percent": {n: 100 * (median(v) - 1) for n, v in ratios.items()},
        "overhead_ci95_percent": {n: [100 * (b - 1) for b in bootstrap_median_ci(v)] for n, v in ratios.items()},
        "overhead_percent_of_medians": {n: 100 * (median(times[n]) / median(times["plain"]) - 1) for n in names[1:]},
    }
    if getattr(trainer, "risk", None) is not None:
        res["risk_cost"] = risk_cost(trainer, median(cpus["ganlab steps"]) / k)
        print(f"{kind}: risk.observe {res['risk_cost']['observe_cpu_ms']:.3f} ms CPU per call, every "
              f"{res['risk_cost']['monitor_every']} steps of {res['risk_cost']['step_cpu_ms']:.3f} ms: "
              f"{res['risk_cost']['percent_of_a_step']:.2f} % of a step", flush=True)
    over = max(v for n, v in res["overhead_percent"].items() if n not in (AA, BB))
    if args.profile or over > args.threshold:
        print(f"{kind}: overhead {over:.1f}% > {args.threshold}% (or --profile): profiling")
        res["profile"] = profile(kind, trainer, plain, max(k, {"mlp": 200, "dcgan": 10}[kind]), device)
    return res


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cpu", help="cpu | cuda | auto")
    p.add_argument("--models", nargs="+", default=["mlp", "dcgan"], choices=["mlp", "dcgan"])
    p.add_argument("--dataset", default="auto", choices=["auto", "fashion_mnist", "digits"],
                   help="data of the DCGAN setup (auto: fashion_mnist when its files are found, else digits)")
    p.add_argument("--image-size", type=int, default=32)
    p.add_argument("--dcgan-width", type=int, default=32)
    p.add_argument("--dcgan-batch", type=int, default=64)
    p.add_argument("--mlp-batch", type=int, default=256)
    p.add_argument("--block", type=int, default=None,
                   help="steps per timed block (default: mlp 25, dcgan 2 on CPU; 200, 50 on CUDA)")
    p.add_argument("--repeats", type=int, default=40, help="timed rounds (each: one block of every variant)")
    p.add_argument("--clock", default="auto", choices=["auto", "wall", "cpu"],
                   help="what the overheads are computed from (auto: CPU time of this process on CPU, which "
                        "other users' load disturbs far less than wall time; wall time on CUDA)")
    p.add_argument("--fit-log-every", type=int, default=50)
    p.add_argument("--threads", type=int, default=None, help="CPU threads (default: 1 on CPU, torch's on CUDA)")
    p.add_argument("--threshold", type=float, default=5.0, help="profile when an overhead exceeds this (%%)")
    p.add_argument("--profile", action="store_true")
    p.add_argument("--no-ablation", dest="ablation", action="store_false",
                   help="skip the variant with the health monitor's update replaced by backward+step")
    p.add_argument("--no-monitor-variant", dest="monitor_variant", action="store_false",
                   help="skip the extra trainer with monitor.every=1e9 (only where the config has a monitor group)")
    p.add_argument("--out", type=Path, default=None, help="folder for bench_loop.json")
    p.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                   help="config overrides for ganlab's side, e.g. callbacks.collapse_risk.enabled=false")
    args = p.parse_args(argv)
    device = resolve_device(args.device)
    set_threads(args.threads if args.threads is not None else (1 if device.type == "cpu" else None))
    if args.dataset == "auto":
        args.dataset = "fashion_mnist" if fashion_mnist_available() else "digits"
    report: dict[str, Any] = {"env": env_info(device), "results": {}}
    for kind in args.models:
        print(f"== {kind} on {device} ==", flush=True)
        report["results"][kind] = bench(kind, args, device)
    rows = []
    for kind, r in report["results"].items():
        s = r["setup"]
        label = f"{kind}, {s['dataset']} {'x'.join(map(str, s['sample_shape']))}, batch {s['batch_size']}"
        for n, sps in r["steps_per_s"].items():
            q, ci = r["time_ratio_quartiles"].get(n), r["overhead_ci95_percent"].get(n)
            rows.append([label, n, sps, r["overhead_percent"].get(n, 0.0),
                         f"{ci[0]:+.1f} / {ci[1]:+.1f}" if ci else "",
                         f"{100 * (q[0] - 1):+.1f} / {100 * (q[1] - 1):+.1f}" if q else "",
                         r["overhead_percent_of_medians"].get(n, 0.0)])
    clock = next(iter(report["results"].values()))["setup"]["clock"] if report["results"] else "wall"
    print(f"\nsteps/s (wall clock) on {device} ({torch.get_num_threads()} thread(s)); overhead = ganlab {clock} time / "
          f"plain {clock} time - 1: median over {args.repeats} interleaved rounds of the same-round ratio (its "
          "bootstrap 95 % interval and quartiles), and the ratio of the two medians; the A/A row is the noise floor:")
    print(table(["setup", "loop", "steps/s (median)", "overhead %", "95 % CI %", "quartiles %",
                 "overhead % (of medians)"], rows))
    finish(report, args.out, "bench_loop")
    return report


if __name__ == "__main__":
    main()
