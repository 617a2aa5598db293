"""Instructions per generator step of ganlab's loop against the plain PyTorch loop, counted by the CPU (perf) or
by valgrind's callgrind.

Usage::

    python tests/benchmarks/bench_instructions.py [--counter auto|perf|callgrind] [--steps 20] [--warmup 20]
                                                  [--tree PATH [PATH ...]] [--out DIR] [--set KEY=VALUE ...]

Why: on a shared VM the CPU-time ratios of ``bench_loop.py`` spread over several percent (its A/A and B/B control
rows), so an overhead of 1-2 % cannot be resolved by timing. The number of instructions a loop executes does not
depend on the machine's load: counted twice, the same loop gives the same count to within a few hundredths of a
percent (the A/A row below). It leaves out what instructions do not show (cache misses, memory placement), which
``bench_loop.py`` measures, so read the two together.

Setup: the MLP pair of ``bench_loop.py`` (``model=mlp`` on ring8, batch 256, non-saturating loss, Adam; the plain
loop trains deep copies of ganlab's freshly built G and D on the same data tensor), ``--warmup`` steps of each, then
``--steps`` steps of each variant in turn, counted one variant at a time, in one process:

* ``ganlab steps``: ``trainer.train_step()`` with the training-health checks as configured (NaN guard on);
* ``plain``: ``PlainGAN.step`` of ``bench_loop.py``;
* ``plain again (A/A control)``: the same plain loop counted a second time;
* ``ganlab steps, monitor.nan_guard=false``: a second trainer with the guard off;
* ``ganlab fit() loop``: the first trainer's ``fit()`` loop (``Trainer._train_until_done``): each step's
  ``train_step`` and what fit() does after it (the strategies' and callbacks' ``after_step``, the monitor, the
  scalars); evaluation, checkpoints and logging never fall due.

The default ``--steps`` equals ``monitor.every`` (20), so every count holds exactly one monitored step (per-layer
norms, the early-warning risk). Overhead = instructions per step / plain's - 1.

Counters (``--counter``):

* ``perf``: the CPU's retired-instruction counter in user space (``perf_event_open(2)``, as ``perf stat -e
  instructions:u``), read in the process before and after each variant, for the calling thread (torch runs on one
  thread here). Needs a CPU performance-monitoring unit the kernel exposes (many VMs have none) and
  ``kernel.perf_event_paranoid`` <= 2. Runs at full speed (about a minute).
* ``callgrind``: valgrind's simulated count, ``--instr-atstart=no``; the counted process zeroes the count right
  before a variant and dumps it right after, through callgrind's client requests (``CALLGRIND_ZERO_STATS``,
  ``CALLGRIND_DUMP_STATS_AT`` from ``<valgrind/callgrind.h>``, in a 10-line C library compiled with ``cc`` at the
  start), so nothing but the variant is counted. (Switching from outside with ``callgrind_control`` also counted
  the process's polling while it waited for the switch, which varied with the machine's load by up to a few
  hundredths of a percent of a step.) Needs ``valgrind`` with its headers and a C compiler; about 50 times slower
  (about 12 minutes a tree on a 2-core VM).
* ``calls``: not instructions but Python-level calls (:mod:`cProfile`'s count), where neither counter can run in
  reasonable time: load-independent and fast, and where a change to ganlab's own Python shows; blind to what a call
  costs (a kernel and an attribute read count one each). The ``instructions`` in the table are then calls.
* ``auto`` (default): perf where the counter opens, else callgrind.

The two counters agree on ratios, not on absolute counts (callgrind counts the instructions valgrind simulates, perf
those the CPU retires, including its own few hundred per read).

``--tree``: the ganlab checkouts to count (default: this one), each in its own process with that tree's ``ganlab/``
and ``conf/`` first on the path, and this folder's scripts (so a tree from before a change is counted by the same
benchmark). With two trees, the table adds the ratio second / first of every row: the overhead of a change in
instructions. ``--merge A.json B.json`` prints the trees of earlier reports as one (trees counted in separate
processes, e.g. at the same time: a count does not depend on the load). Prints a table; ``--out DIR`` writes
``DIR/bench_instructions.json``. Not a test.
"""

from __future__ import annotations

import argparse
import copy
import cProfile
import ctypes
import fcntl
import json
import os
import platform
import pstats
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from _common import REPO, env_info, finish, table

VARIANTS = ("ganlab steps", "plain", "plain again (A/A control)", "ganlab steps, monitor.nan_guard=false",
            "ganlab fit() loop")
HERE = Path(__file__).resolve().parent


# ------------------------------------------------------------------------------------------ the perf counter
class _PerfEventAttr(ctypes.Structure):
    """The first 64 bytes of ``struct perf_event_attr`` (``PERF_ATTR_SIZE_VER0``; linux/perf_event.h)."""

    _fields_ = [("type", ctypes.c_uint32), ("size", ctypes.c_uint32), ("config", ctypes.c_uint64),
                ("sample_period", ctypes.c_uint64), ("sample_type", ctypes.c_uint64),
                ("read_format", ctypes.c_uint64), ("flags", ctypes.c_uint64), ("wakeup_events", ctypes.c_uint32),
                ("bp_type", ctypes.c_uint32), ("config1", ctypes.c_uint64)]


PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS = 0, 1
PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK = 1, 1  # nanoseconds on this thread: present on every kernel
_DISABLED, _EXCLUDE_KERNEL, _EXCLUDE_HV = 1 << 0, 1 << 5, 1 << 6  # bits of perf_event_attr.flags
_IOC_ENABLE, _IOC_DISABLE, _IOC_RESET = 0x2400, 0x2401, 0x2403
_SYSCALL = {"x86_64": 298, "aarch64": 241}  # __NR_perf_event_open


class PerfCounter:
    """A kernel performance counter of the calling thread, user space only (``perf_event_open(2)``).

    Args:
        kind: ``PERF_TYPE_HARDWARE`` or ``PERF_TYPE_SOFTWARE``.
        config: the event: ``PERF_COUNT_HW_INSTRUCTIONS`` (retired instructions, as ``perf stat -e
            instructions:u``) or ``PERF_COUNT_SW_TASK_CLOCK`` (ns of CPU time).

    Raises:
        OSError: the counter cannot be opened (errno ENOENT/EOPNOTSUPP: no such event here, e.g. a VM without a
            performance-monitoring unit; EACCES/EPERM: ``kernel.perf_event_paranoid`` above 2, or a seccomp
            filter), or the machine is neither x86_64 nor aarch64.
    """

    def __init__(self, kind: int = PERF_TYPE_HARDWARE, config: int = PERF_COUNT_HW_INSTRUCTIONS) -> None:
        nr = _SYSCALL.get(platform.machine())
        if nr is None:
            raise OSError(f"perf_event_open's number is not known for {platform.machine()}")
        attr = _PerfEventAttr(type=kind, size=ctypes.sizeof(_PerfEventAttr), config=config,
                              flags=_DISABLED | _EXCLUDE_KERNEL | _EXCLUDE_HV)
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        fd = libc.syscall(ctypes.c_long(nr), ctypes.byref(attr), ctypes.c_int(0), ctypes.c_int(-1),
                          ctypes.c_int(-1), ctypes.c_ulong(0))
        if fd < 0:
            err = ctypes.get_errno()
            raise OSError(err, f"perf_event_open: {os.strerror(err)}")
        self.fd = int(fd)

    def count(self, fn: Callable[[], None]) -> int:
        """The events counted while ``fn()`` runs (the counter reset, enabled around the call, then read)."""
        fcntl.ioctl(self.fd, _IOC_RESET, 0)
        fcntl.ioctl(self.fd, _IOC_ENABLE, 0)
        fn()
        fcntl.ioctl(self.fd, _IOC_DISABLE, 0)
        return struct.unpack("Q", os.read(self.fd, 8))[0]

    def close(self) -> None:
        os.close(self.fd)


def perf_available() -> str | None:
    """None when the instruction counter opens here, else why not (one line)."""
    try:
        PerfCounter().close()
        return None
    except OSError as e:
        return f"{e.strerror or e} (a VM without a performance-monitoring unit, or kernel.perf_event_paranoid > 2)"


def python_calls(fn: Callable[[], None]) -> int:
    """The Python-level calls (functions, methods and C functions called from Python) made while ``fn()`` runs,
    as :mod:`cProfile` counts them."""
    profile = cProfile.Profile()
    profile.runcall(fn)
    return pstats.Stats(profile).total_calls


# ------------------------------------------------------------------------------------- the counted process
class _StopAfter:
    """Stands in for fit()'s progress bar: ``update`` raises :class:`StopIteration` after ``k`` steps."""

    def __init__(self, k: int) -> None:
        self.left = k

    def update(self, n: int) -> None:
        self.left -= n
        if self.left <= 0:
            raise StopIteration


def fit_steps(trainer: Any, k: int) -> None:
    """``k`` steps of fit()'s loop (``Trainer._train_until_done``, private), stopped through its progress bar."""
    try:
        trainer._train_until_done(_StopAfter(k), types.SimpleNamespace(signum=None))
    except StopIteration:
        pass


def variants(steps: int, warmup: int, extra: list[str]) -> dict[str, Callable[[], None]]:
    """Build the trainers and the plain loop, warm them up, and return each variant's ``steps``-step run."""
    from _common import compose
    from bench_loop import PlainGAN, build_trainer, overrides

    def composed(more: list[str]) -> Any:
        return compose(overrides("mlp", argparse.Namespace(mlp_batch=256, set=[*extra, *more]), torch.device("cpu")))

    torch.set_num_threads(1)
    cfg = composed([])
    trainer = build_trainer(cfg, Path(tempfile.mkdtemp(prefix="bench_instr_")))
    unguarded = build_trainer(composed(["monitor.nan_guard=false"]),
                              Path(tempfile.mkdtemp(prefix="bench_instr_unguarded_")))
    unguarded.G.load_state_dict(trainer.G.state_dict())
    unguarded.D.load_state_dict(trainer.D.state_dict())
    for t in (trainer, unguarded):
        t.start()  # as fit() does first: the strategies' and callbacks' on_start
    og, od = cfg.optim.generator, cfg.optim.discriminator
    plain = PlainGAN(copy.deepcopy(trainer.G), copy.deepcopy(trainer.D), trainer.data.x, int(cfg.trainer.batch_size),
                     float(og.lr), tuple(og.betas), float(od.lr), tuple(od.betas), trainer.G.z_dim)

    def ganlab(t: Any, k: int) -> None:
        for _ in range(k):
            t.train_step()
            t.state.step += 1

    def plain_steps(k: int) -> None:
        for _ in range(k):
            plain.step()

    for _ in range(warmup):
        ganlab(trainer, 1)
        plain.step()
        ganlab(unguarded, 1)
    return {VARIANTS[0]: lambda: ganlab(trainer, steps), VARIANTS[1]: lambda: plain_steps(steps),
            VARIANTS[2]: lambda: plain_steps(steps), VARIANTS[3]: lambda: ganlab(unguarded, steps),
            VARIANTS[4]: lambda: fit_steps(trainer, steps)}


def inner(args: argparse.Namespace) -> None:
    """The counted process: ``args.tree``'s ganlab first on the path, build, warm up, count each variant.

    perf and calls: counted here, written to ``<flag dir>/counts.json``. callgrind: instrumentation switched on
    after the warm-up, then per variant the count zeroed, the variant run and the count dumped (one
    ``callgrind.out.<i>`` each, in order), through :data:`MARKS_C`'s library in the flag folder."""
    sys.path.insert(0, str(args.tree))
    runs = variants(args.steps, args.warmup, list(args.set))
    tree = Path(args.tree).resolve()
    strays = sorted(n for n, m in sys.modules.items() if n.split(".")[0] == "ganlab" and getattr(m, "__file__", None)
                    and not Path(m.__file__).resolve().is_relative_to(tree))
    if strays:  # e.g. an editable install of another checkout supplying a module this tree lacks
        raise SystemExit(f"modules from outside --tree {tree}: {strays[:5]}")
    flags: Path = args.inner
    if args.counter in ("perf", "calls"):
        count = PerfCounter().count if args.counter == "perf" else python_calls
        counts = {name: count(run) for name, run in runs.items()}
        (flags / "counts.json").write_text(json.dumps(counts))
        return
    marks = ctypes.CDLL(str(flags / "marks.so"))
    marks.start()
    for name, run in runs.items():
        marks.zero()
        run()
        marks.dump(name.encode())


# ------------------------------------------------------------------------------------------------ the driver
#: callgrind's client requests as C functions for ctypes: a request is a marker instruction sequence that only
#: valgrind sees (a no-op on the real CPU), so it has to be compiled in.
MARKS_C = r"""
#include <valgrind/callgrind.h>
void start(void) { CALLGRIND_START_INSTRUMENTATION; }
void zero(void) { CALLGRIND_ZERO_STATS; }
void dump(const char *name) { CALLGRIND_DUMP_STATS_AT(name); }
"""


def compile_marks(folder: Path) -> Path:
    """Compile :data:`MARKS_C` into ``folder/marks.so``; SystemExit naming what is missing when it cannot."""
    (folder / "marks.c").write_text(MARKS_C)
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise SystemExit("--counter callgrind: no C compiler (cc) on the PATH to build callgrind's client requests "
                         "(Debian/Ubuntu: apt-get install gcc)")
    done = subprocess.run([cc, "-O1", "-shared", "-fPIC", "-o", str(folder / "marks.so"), str(folder / "marks.c")],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit("--counter callgrind: could not compile callgrind's client requests (is valgrind's header "
                         f"<valgrind/callgrind.h> installed? Debian/Ubuntu: apt-get install valgrind):\n{done.stderr}")
    return folder / "marks.so"


def totals(path: Path) -> int:
    """The ``totals:`` line of a callgrind output file (instructions counted in that dump)."""
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith("totals:"):
            return int(line.split()[1])
    raise ValueError(f"no totals line in {path}")


def count_tree(tree: Path, args: argparse.Namespace) -> dict[str, int]:
    """Total instructions of each variant over ``args.steps`` steps, counted in one process on ``tree``'s code."""
    work = Path(tempfile.mkdtemp(prefix="bench_instr_flags_"))
    cmd = [sys.executable, str(HERE / "bench_instructions.py"), "--inner", str(work), "--tree", str(tree),
           "--counter", args.counter, "--steps", str(args.steps), "--warmup", str(args.warmup), "--set", *args.set]
    if args.counter == "callgrind":
        compile_marks(work)
        cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={work / 'callgrind.out'}",
               *cmd]
    env = {k: v for k, v in os.environ.items() if k != "GANLAB_CONF"}
    # a fixed string-hash seed: randomised hashing moves dict probing, and so the count, between processes
    env |= {"OMP_NUM_THREADS": "1", "PYTHONHASHSEED": "0", "PYTHONPATH": os.pathsep.join([str(tree), str(HERE)])}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    out, _ = proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"the counted process failed (exit {proc.returncode}):\n{out[-3000:]}")
    if args.counter in ("perf", "calls"):
        return json.loads((work / "counts.json").read_text())
    return {name: totals(work / f"callgrind.out.{i + 1}") for i, name in enumerate(VARIANTS)}


def commit_of(tree: Path) -> str | None:
    """The tree's commit (short), with ``+modified`` when its ganlab/ or conf/ differ from it."""
    def git(*a: str) -> str:
        return subprocess.run(["git", *a], cwd=tree, capture_output=True, text=True, timeout=20).stdout.strip()

    head = git("rev-parse", "--short", "HEAD")
    return (head + ("+modified" if git("status", "--porcelain", "--", "ganlab", "conf") else "")) or None


def choose_counter(name: str) -> str:
    """``perf`` or ``callgrind`` for ``--counter name``; refuses a counter that cannot run here, saying why."""
    if name == "calls":
        return name
    why = perf_available() if name in ("perf", "auto") else None
    if name == "perf" and why is not None:
        raise SystemExit(f"--counter perf: the CPU's instruction counter cannot be opened here: {why}; "
                         "use --counter callgrind")
    if name == "perf" or (name == "auto" and why is None):
        return "perf"
    for tool in ("valgrind",):
        if shutil.which(tool) is None:
            raise SystemExit(f"--counter callgrind: {tool} is not on the PATH (Debian/Ubuntu: apt-get install "
                             f"valgrind)" + (f"; perf cannot count here either: {why}" if why else ""))
    return "callgrind"


def drive(args: argparse.Namespace) -> dict[str, Any]:
    """Count every tree (one process each, in turn) and return the report of :func:`report`."""
    args.counter = choose_counter(args.counter)
    trees = [t.resolve() for t in (args.tree or [REPO])]
    for t in trees:
        if not (t / "ganlab" / "trainer" / "loop.py").is_file() or not (t / "conf" / "train.yaml").is_file():
            raise SystemExit(f"--tree {t}: not a ganlab checkout (no ganlab/trainer/loop.py or conf/train.yaml)")
    results = []
    for t in trees:
        t0 = time.perf_counter()
        per_step = {n: c / args.steps for n, c in count_tree(t, args).items()}
        results.append({"tree": str(t), "commit": commit_of(t), "counter": args.counter, "steps": args.steps,
                        "warmup": args.warmup, "overrides": list(args.set), "seconds": time.perf_counter() - t0,
                        "instructions_per_step": per_step})
    return report(results)


def merged(paths: list[Path]) -> dict[str, Any]:
    """The trees of earlier reports (``--out`` JSONs, e.g. one tree each, counted in separate processes), in the
    order given, as one report; refuses reports whose counter, steps, warm-up or overrides differ."""
    results = [t for p in paths for t in json.loads(p.read_text())["trees"]]
    setup = {(r["counter"], r["steps"], r["warmup"], tuple(r["overrides"])) for r in results}
    if len(setup) > 1:
        raise SystemExit(f"--merge: the reports were counted differently (counter, steps, warm-up, overrides): "
                         f"{sorted(setup)}; count them alike")
    return report(results)


def report(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Print the table of ``results`` (per tree: instructions per step and overhead against its plain loop; with two
    trees, the ratio second / first of every row) and return the report: the trees (each with
    ``overhead_percent``), ``second_over_first`` for two trees, and the environment."""
    for r in results:
        r["overhead_percent"] = {n: 100 * (c / r["instructions_per_step"]["plain"] - 1)
                                 for n, c in r["instructions_per_step"].items()}
    calls = results[0]["counter"] == "calls"
    unit, scale = ("calls/step", 1.0) if calls else ("M instr/step", 1e6)
    headers, rows = ["loop"], [[n] for n in VARIANTS]
    for r in results:
        headers += [f"{unit} {r['commit']}", f"overhead % {r['commit']}"]
        for row, n in zip(rows, VARIANTS):
            row += [f"{r['instructions_per_step'][n] / scale:.3f}", f"{r['overhead_percent'][n]:+.2f}"]
    out: dict[str, Any] = {"trees": results}
    if len(results) == 2:
        a, b = (r["instructions_per_step"] for r in results)
        out["second_over_first"] = {n: b[n] / a[n] for n in VARIANTS}
        headers.append(f"{results[1]['commit']} / {results[0]['commit']}")
        for row, n in zip(rows, VARIANTS):
            row.append(f"{out['second_over_first'][n]:.4f}")
    first = results[0]
    print(f"{'Python calls' if calls else 'instructions'} per generator step ({first['counter']}, {first['steps']} "
          f"steps each after {first['warmup']} "
          "warm-up steps, MLP pair on ring8, batch 256, 1 thread); overhead = count / plain's - 1:")
    print(table(headers, rows))
    out["env"] = env_info(torch.device("cpu"))
    return out


def main(argv: list[str] | None = None) -> dict[str, Any] | None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--counter", choices=("auto", "perf", "callgrind", "calls"), default="auto",
                   help="perf (the CPU's counter, fast; needs a PMU), callgrind (valgrind, slow); auto: perf if it "
                   "opens")
    p.add_argument("--steps", type=int, default=20, help="counted steps of each variant (default monitor.every)")
    p.add_argument("--warmup", type=int, default=20, help="uncounted steps of each loop first")
    p.add_argument("--tree", type=Path, nargs="+", default=None, metavar="PATH",
                   help="ganlab checkouts to count, each with its own ganlab/ and conf/ (default: this one)")
    p.add_argument("--out", type=Path, default=None, help="folder for bench_instructions.json")
    p.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="extra overrides for ganlab's run")
    p.add_argument("--merge", type=Path, nargs="+", default=None, metavar="JSON",
                   help="count nothing: print (and with --out write) the trees of these reports as one")
    p.add_argument("--inner", type=Path, default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.steps < 1 or args.warmup < 0:
        p.error(f"--steps must be >= 1 and --warmup >= 0 (got {args.steps}, {args.warmup})")
    if args.inner is not None:
        args.tree = args.tree[0]
        inner(args)
        return None
    res = merged(args.merge) if args.merge else drive(args)
    finish(res, args.out, "bench_instructions")
    return res


if __name__ == "__main__":
    main()
