"""Images/s of a public reference DCGAN script (pytorch/examples ``dcgan/main.py``) against ganlab's DCGAN.

Usage::

    python tests/benchmarks/bench_reference_dcgan.py --reference /path/to/dcgan/main.py
        [--device cpu|cuda] [--data fake|fashion_mnist] [--width 64] [--batch-size 64]
        [--iters N] [--warmup N] [--repeats 2] [--workers 2] [--threads 1] [--out DIR]

The reference script is never part of this repository: pass its path (e.g. from a checkout of
github.com/pytorch/examples). It is run as a subprocess (``python -u``) through a small wrapper that
only (a) sets its argv and (b) for ``--data fake`` gives ``torchvision.datasets.FakeData`` enough images
for one epoch to hold every timed iteration (the script's FakeData has 1,000 images: an epoch of 16
batches, each followed by checkpoint writes and a DataLoader restart). The script prints one line per
iteration (``[epoch/niter][i/len] Loss_D ...``); the wrapper's parent stamps each line as it arrives, and
the subprocess is stopped once ``--warmup + --iters`` lines have come. Its start-up (imports, data set,
model building) and warm-up iterations (cuDNN autotuning) are therefore outside the timed window.

Setups compared (the architecture is the same: DCGAN of Radford et al. 2016 at 64x64, ngf = ndf = width,
nz = 100, Adam lr 2e-4, betas (0.5, 0.999), batch 64; ganlab's ``model=dcgan`` makes 64x64 with 1 or 3
channels, ``SUPPORTED_SIZES`` 8-64):

* ``--data fake`` (default; needs no files): the reference's ``--dataset fake`` (3x64x64 random PIL
  images through its DataLoader with ``--workers`` processes) against ganlab on an in-memory tensor of
  random 3x64x64 images (ganlab keeps the whole data set on the training device);
* ``--data fashion_mnist``: the reference's ``--dataset mnist`` pointed at a folder laid out as
  torchvision's MNIST (``<root>/MNIST/raw``) holding the decompressed Fashion-MNIST files (made in a temp
  folder from ganlab's data search path), resized by the script to 64x64 per batch, against ganlab's
  ``dataset=fashion_mnist dataset.image_size=64`` (resized once at load).

Known differences, printed with the table: the reference makes one G forward per iteration and reuses
its fakes for the G step, and its G step also computes D's weight gradients (D is not frozen); ganlab draws
fresh z for the G step (Goodfellow et al. 2014, Algorithm 1), one more no-grad G forward, and freezes D's
parameters in the G step. The two nearly cancel; both are counted with
``torch.utils.flop_counter.FlopCounterMode`` (ganlab: one real ``train_step``; the reference: the same
modules driven the reference's way) and the table shows achieved GFLOP/s beside images/s. The reference
applies Sigmoid + BCELoss (ganlab: softplus on logits, the same loss), sets ``cudnn.benchmark = True``,
calls ``.item()`` five times per iteration (a device sync) and prints every iteration. ganlab runs with
its default training-health monitor (one host sync per update, ``conf/monitor``) and, on CUDA, once with
``torch.backends.cudnn.benchmark = True`` as well.

ganlab's side is built the normal way (``conf/train.yaml`` composed, ``build_trainer``), evaluation and
logging out of the timed window; its iterations are timed one by one (device synchronised), ``--repeats``
times, alternating with the reference runs; medians are reported. ``--out DIR`` writes
``DIR/bench_reference_dcgan.json``. Not a test.
"""

from __future__ import annotations

import argparse
import copy
import gzip
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from _common import QUIET, compose, env_info, finish, median, resolve_device, set_threads, sync, table

from ganlab.data.base import GANData  # noqa: E402
from ganlab.run.build import build_trainer  # noqa: E402

LINE = re.compile(r"^\[(\d+)/(\d+)\]\[(\d+)/(\d+)\] Loss_D")

WRAPPER = r"""
import functools, runpy, sys
import torchvision.datasets as dset
path, size = sys.argv[1], int(sys.argv[2])
if size > 0:  # one epoch of FakeData holds every timed iteration
    dset.FakeData = functools.partial(dset.FakeData, size=size)
sys.argv = [path] + sys.argv[3:]
runpy.run_path(path, run_name="__main__")
"""


def mnist_layout_of_fashion_mnist(tmp: Path) -> Path:
    """A folder ``tmp`` with ``MNIST/raw/*-ubyte`` = the decompressed Fashion-MNIST files (torchvision's MNIST
    class then loads them without downloading). Returns ``tmp``."""
    from ganlab.data.images import _FMNIST_FILES, find_fashion_mnist

    src = find_fashion_mnist()
    raw = tmp / "MNIST" / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    for pair in _FMNIST_FILES.values():
        for name in pair:
            if (raw / name).exists():
                continue
            if (src / name).exists():
                shutil.copyfile(src / name, raw / name)
            else:
                with gzip.open(src / f"{name}.gz", "rb") as fin, open(raw / name, "wb") as fout:
                    shutil.copyfileobj(fin, fout)
    return tmp


def run_reference(args: argparse.Namespace, device: torch.device, dataroot: Path | None) -> dict[str, Any]:
    """One run of the reference script; per-iteration arrival times of its log lines."""
    n_lines = args.warmup + args.iters
    outf = Path(tempfile.mkdtemp(prefix="bench_ref_dcgan_out_"))
    ref_args = ["--batchSize", str(args.batch_size), "--imageSize", str(args.image_size), "--ngf", str(args.width),
                "--ndf", str(args.width), "--nz", "100", "--niter", "1", "--workers", str(args.workers),
                "--outf", str(outf), "--manualSeed", "0", "--lr", "0.0002", "--beta1", "0.5"]
    if args.data == "fake":
        ref_args += ["--dataset", "fake"]
        size = args.batch_size * (n_lines + 2)
    else:
        ref_args += ["--dataset", "mnist", "--dataroot", str(dataroot)]
        size = 0
    if device.type == "cuda":  # current script: --accel; older versions of it: --cuda
        ref_args += ["--accel" if "--accel" in args.reference.read_text() else "--cuda"]
    cmd = [sys.executable, "-u", "-c", WRAPPER, str(args.reference), str(size), *ref_args]
    t_start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
                            start_new_session=True, env=os.environ.copy())
    stamps: list[tuple[int, int, float]] = []  # (i, len, arrival time)
    tail: list[str] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            now = time.perf_counter()
            m = LINE.match(line)
            if m:
                stamps.append((int(m.group(3)), int(m.group(4)), now))
                if len(stamps) >= n_lines:
                    break
            else:
                tail = (tail + [line.rstrip()])[-20:]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)  # the subprocess we started and its DataLoader workers
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        shutil.rmtree(outf, ignore_errors=True)
    if len(stamps) < n_lines:
        raise RuntimeError(f"the reference printed {len(stamps)} iteration lines of {n_lines}; last output:\n"
                           + "\n".join(tail))
    # Interval i-1 -> i is iteration i's time (the line is printed right after each iteration); after an
    # i % 100 == 0 line the script also saves two image grids: those intervals are left out.
    intervals = [t - stamps[j - 1][2] for j, (i, _, t) in enumerate(stamps)
                 if j > args.warmup and stamps[j - 1][0] % 100 != 0]
    window = stamps[-1][2] - stamps[args.warmup][2]
    return {"iteration_s": intervals, "median_iteration_s": median(intervals),
            "window_images_per_s": args.batch_size * (len(stamps) - 1 - args.warmup) / window,
            "startup_to_first_line_s": stamps[0][2] - t_start, "iterations_per_epoch": stamps[0][1]}


def make_trainer(args: argparse.Namespace, device: torch.device) -> Any:
    big = 10**9
    over = ["model=dcgan", f"model.generator.width={args.width}", f"model.discriminator.width={args.width}",
            "model.generator.z_dim=100", "loss=ns", "optim=adam", f"device={device}",
            f"trainer.batch_size={args.batch_size}", f"trainer.steps={big}", f"trainer.eval_every={big}",
            f"trainer.ckpt_every={big}", f"trainer.log_every={big}", "metrics/embedder=pixels", "seed=0", *QUIET]
    run_dir = Path(tempfile.mkdtemp(prefix="bench_ref_dcgan_ganlab_"))
    if args.data == "fashion_mnist":
        cfg = compose(["dataset=fashion_mnist", f"dataset.image_size={args.image_size}", *over])
        trainer = build_trainer(cfg, run_dir)
    else:
        cfg = compose(["dataset=digits", *over])  # the dataset node is unused: the data are passed in
        g = torch.Generator().manual_seed(0)
        n = max(args.batch_size * 8, 512)
        x = torch.rand(n, 3, args.image_size, args.image_size, generator=g) * 2 - 1
        data = GANData(name="fake", x=x, holdout=x[:256].clone(), info={"source": "torch.rand"}).to(device)
        trainer = build_trainer(cfg, run_dir, data=data)
    trainer.evaluate = lambda: {}
    return trainer


def ganlab_iteration(trainer: Any) -> None:
    if hasattr(trainer, "train_step"):
        trainer.train_step()
    else:
        _, real, _, _ = trainer.d_step()
        trainer.g_step(real)
    trainer.state.step += 1


def run_ganlab(trainer: Any, args: argparse.Namespace, device: torch.device) -> dict[str, Any]:
    times = []
    for j in range(args.warmup + args.iters):
        sync(device)
        t0 = time.perf_counter()
        ganlab_iteration(trainer)
        sync(device)
        if j >= args.warmup:
            times.append(time.perf_counter() - t0)
    return {"iteration_s": times, "median_iteration_s": median(times),
            "window_images_per_s": args.batch_size * len(times) / sum(times)}


def reference_style_step(G: torch.nn.Module, D: torch.nn.Module, real: torch.Tensor, opt_g: Any, opt_d: Any) -> None:
    """What dcgan/main.py computes per iteration (one G forward, fakes reused for the G step), on ganlab's
    modules; used only to count its FLOPs."""
    D.zero_grad()
    F.softplus(-D(real)).mean().backward()
    fake = G(torch.randn(len(real), G.z_dim, device=real.device))
    F.softplus(D(fake.detach())).mean().backward()
    opt_d.step()
    G.zero_grad()
    F.softplus(-D(fake)).mean().backward()
    opt_g.step()


def count_flops(trainer: Any, device: torch.device) -> dict[str, float]:
    from torch.utils.flop_counter import FlopCounterMode

    G, D = copy.deepcopy(trainer.G), copy.deepcopy(trainer.D)
    opt_g = torch.optim.Adam(G.parameters(), lr=2e-4, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(D.parameters(), lr=2e-4, betas=(0.5, 0.999))
    real = trainer.data.x[: trainer.cfg.batch_size]
    counter = FlopCounterMode(display=False)
    with counter:
        reference_style_step(G, D, real, opt_g, opt_d)
    ref = counter.get_total_flops()
    counter = FlopCounterMode(display=False)
    with counter:
        ganlab_iteration(trainer)
    return {"ganlab_gflop_per_iteration": counter.get_total_flops() / 1e9, "reference_gflop_per_iteration": ref / 1e9}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reference", type=Path, required=True, help="path to pytorch/examples dcgan/main.py")
    p.add_argument("--device", default="cpu", help="cpu | cuda | auto")
    p.add_argument("--data", default="fake", choices=["fake", "fashion_mnist"])
    p.add_argument("--width", type=int, default=64, help="ngf = ndf")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--image-size", type=int, default=64, help="the reference's architecture needs 64")
    p.add_argument("--iters", type=int, default=None, help="timed iterations per run (default 8 on CPU, 200 on CUDA)")
    p.add_argument("--warmup", type=int, default=None, help="untimed first iterations (default 2 on CPU, 20 on CUDA)")
    p.add_argument("--repeats", type=int, default=2, help="runs of each, alternating")
    p.add_argument("--workers", type=int, default=2, help="the reference's DataLoader workers (its default: 2)")
    p.add_argument("--threads", type=int, default=None, help="CPU threads (default: 1 on CPU, torch's on CUDA)")
    p.add_argument("--out", type=Path, default=None, help="folder for bench_reference_dcgan.json")
    args = p.parse_args(argv)
    if not args.reference.is_file():
        raise SystemExit(f"--reference {args.reference} is not a file")
    device = resolve_device(args.device)
    cuda = device.type == "cuda"
    args.iters = args.iters or (200 if cuda else 8)
    args.warmup = args.warmup or (20 if cuda else 2)
    set_threads(args.threads if args.threads is not None else (None if cuda else 1))
    dataroot = mnist_layout_of_fashion_mnist(Path(tempfile.mkdtemp(prefix="bench_ref_fmnist_"))) \
        if args.data == "fashion_mnist" else None
    trainer = make_trainer(args, device)
    flops = count_flops(trainer, device)
    variants = {"ganlab": False}
    if cuda:
        variants["ganlab, cudnn.benchmark=True"] = True
    runs: dict[str, list[dict[str, Any]]] = {"reference": [], **{v: [] for v in variants}}
    for r in range(args.repeats):
        print(f"round {r + 1}/{args.repeats}: reference ...", flush=True)
        runs["reference"].append(run_reference(args, device, dataroot))
        for name, bench_flag in variants.items():
            print(f"round {r + 1}/{args.repeats}: {name} ...", flush=True)
            torch.backends.cudnn.benchmark = bench_flag
            runs[name].append(run_ganlab(trainer, args, device))
    torch.backends.cudnn.benchmark = False
    if dataroot is not None:
        shutil.rmtree(dataroot, ignore_errors=True)
    summary = {}
    for name, rs in runs.items():
        it = median([x for r in rs for x in r["iteration_s"]])
        gflop = flops["reference_gflop_per_iteration" if name == "reference" else "ganlab_gflop_per_iteration"]
        summary[name] = {"images_per_s": args.batch_size / it, "median_iteration_s": it,
                         "window_images_per_s": median([r["window_images_per_s"] for r in rs]),
                         "gflop_per_iteration": gflop, "achieved_gflop_per_s": gflop / it}
    ref = summary["reference"]
    for s in summary.values():
        s["images_per_s_ratio_vs_reference"] = s["images_per_s"] / ref["images_per_s"]
        s["gflop_per_s_ratio_vs_reference"] = s["achieved_gflop_per_s"] / ref["achieved_gflop_per_s"]
    channels = 3 if args.data == "fake" else 1
    setup = {"reference": str(args.reference), "data": args.data, "device": str(device),
             "image": f"{channels}x{args.image_size}x{args.image_size}", "ngf_ndf": args.width, "nz": 100,
             "batch_size": args.batch_size, "iters": args.iters, "warmup": args.warmup, "repeats": args.repeats,
             "reference_workers": args.workers, **flops}
    report = {"env": env_info(device), "setup": setup, "runs": runs, "summary": summary}
    rows = [[name, s["images_per_s"], s["images_per_s_ratio_vs_reference"], s["window_images_per_s"],
             s["gflop_per_iteration"], s["achieved_gflop_per_s"], s["gflop_per_s_ratio_vs_reference"]]
            for name, s in summary.items()]
    data_desc = ("random 3x64x64 images: reference via torchvision FakeData + DataLoader "
                 f"({args.workers} workers), ganlab from an in-memory tensor" if args.data == "fake" else
                 "Fashion-MNIST 1x64x64: reference via torchvision MNIST layout + per-batch PIL resize "
                 f"({args.workers} workers), ganlab resized once, in memory")
    print(f"\nDCGAN 64x64, ngf=ndf={args.width}, nz=100, batch {args.batch_size}, {device} "
          f"({torch.get_num_threads()} thread(s)); {data_desc}. Median iteration over {args.repeats} runs x "
          f"{args.iters} iterations after {args.warmup} warm-up:")
    print(table(["script", "images/s", "vs reference", "images/s (window mean)", "GFLOP/iteration",
                 "GFLOP/s", "GFLOP/s vs reference"], rows))
    flop_ratio = flops["ganlab_gflop_per_iteration"] / flops["reference_gflop_per_iteration"]
    print(f"FLOPs per iteration, ganlab / reference = {flop_ratio:.3f}: ganlab draws fresh z for "
          "the G step (one more no-grad G forward) but freezes D meanwhile (no D weight gradients); the reference "
          "reuses the D step's fakes and back-propagates into D's weights in the G step too. Same architecture, "
          "loss (BCE on a sigmoid = softplus on logits) and Adam settings.")
    finish(report, args.out, "bench_reference_dcgan")
    return report


if __name__ == "__main__":
    main()
