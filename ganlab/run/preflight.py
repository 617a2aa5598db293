"""``ganlab-train preflight=true``: a short dry run of the configured experiment that prints a pass/fail table.

The dry run builds everything the real run builds (so every config error shows), trains
``monitor.preflight.steps`` generator steps on a ``monitor.preflight.batch_size`` batch with the NaN guard and
hard limit off (so problems show instead of being repaired), then times ``timing_steps`` steps at the real
``trainer.batch_size`` (in its ``trainer.accumulate`` micro-batches) and one evaluation to estimate the full run.
The dry steps run without gradient accumulation: their batch need not split into the run's micro-batches.
Nothing is written but ``preflight.json``.
"""

from __future__ import annotations

import json
import math
import statistics
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf, open_dict
from torch import Tensor, nn

from ganlab import layout
from ganlab.config.run import check_config
from ganlab.data.base import Batcher
from ganlab.health.memory import peak_memory_mib
from ganlab.io import atomic_write_text
from ganlab.run.build import build_trainer


@dataclass
class Check:
    """One row of the table; ``passed`` is None for information rows (memory, time)."""

    name: str
    passed: bool | None
    value: str
    criterion: str


class _NonFiniteOutputs:
    """Forward hooks that remember which modules ever produced a NaN/Inf output (no sync per call)."""

    def __init__(self, nets: dict[str, nn.Module]) -> None:
        self.flags: dict[str, Tensor] = {}
        self.handles = [m.register_forward_hook(self._hook(f"{tag}.{name}" if name else tag))
                        for tag, net in nets.items() for name, m in net.named_modules()]

    def _hook(self, name: str) -> Any:
        def hook(module: nn.Module, inputs: Any, output: Any) -> None:
            if isinstance(output, Tensor) and output.is_floating_point():
                bad = ~torch.isfinite(output.detach()).all()
                self.flags[name] = self.flags[name] | bad if name in self.flags else bad
        return hook

    def offenders(self) -> list[str]:
        for h in self.handles:
            h.remove()
        return [name for name, flag in self.flags.items() if bool(flag)]


def _dry_config(cfg: DictConfig) -> DictConfig:
    dry = cfg.copy()
    pf = dry.monitor.preflight
    with open_dict(dry):
        dry.trainer.steps, dry.trainer.batch_size = int(pf.steps), int(pf.batch_size)
        dry.trainer.accumulate = 1  # the run's is used for the timing at its batch size
        dry.trainer.progress, dry.trainer.projector = False, False
        dry.trainer.log_every = 1  # every update reads its loss and gradient norm (the guard is off)
        dry.monitor.nan_guard, dry.monitor.hard_limit = False, None
        if "collapse_alarm" in (dry.get("callbacks") or {}):
            dry.callbacks.collapse_alarm.n_z = 0  # the fixed-z alarm off
        dry.logger = OmegaConf.create({"_target_": "ganlab.trainer.loggers.NullLogger"})
    return dry


def _fmt_time(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.1f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _dry_run(trainer: Any, steps: int) -> dict[str, list[float]]:
    """Train ``steps`` generator steps; the loss and gradient norm of every last D update and G update."""
    rec: dict[str, list[float]] = {"D_loss": [], "G_loss": [], "D_norm": [], "G_norm": []}
    for _ in range(steps):
        trainer.train_step()
        trainer.state.step += 1
        for s in trainer.strategies:
            s.after_step(trainer.state)
        for net in "DG":
            rec[f"{net}_loss"].append(trainer.health.last[net].loss)
            rec[f"{net}_norm"].append(trainer.health.last[net].grad_norm)
    return rec


def _time_full_batch(trainer: Any, batch_size: int, accumulate: int, steps: int, seed: int) -> float:
    """Seconds per generator step at the run's real batch size and micro-batches (after 2 warm-up steps)."""
    trainer.cfg.batch_size, trainer.cfg.accumulate = batch_size, accumulate
    trainer.batcher = Batcher(len(trainer.data), batch_size, seed, device=trainer.device)
    for _ in range(2):
        trainer.train_step()
    _sync(trainer.device)
    t0 = time.perf_counter()
    for _ in range(steps):
        trainer.train_step()
    _sync(trainer.device)
    return (time.perf_counter() - t0) / steps


def _checks(rec: dict[str, list[float]], offenders: list[str], n_modules: int, pf: Any) -> list[Check]:
    bad = [i for i, v in enumerate(zip(rec["D_loss"], rec["G_loss"])) if not all(map(math.isfinite, v))]
    out = [Check("losses finite", not bad, f"first non-finite at step {bad[0] + 1}" if bad else
                 f"all {len(rec['D_loss'])} steps", "every D and G loss finite")]
    window = [v for v in rec["D_loss"][: pf.d_loss_window] if math.isfinite(v)]
    moved = max(window) - min(window) if window else 0.0
    scale = max(1.0, abs(statistics.fmean(window))) if window else 1.0
    out.append(Check("D loss moves", moved > 1e-3 * scale, f"range {moved:.3g}",
                     f"max - min over the first {pf.d_loss_window} steps > 1e-3 x max(1, |mean|)"))
    for net in "DG":
        norms = [v for v in rec[f"{net}_norm"] if math.isfinite(v)]
        med = statistics.median(norms) if norms and len(norms) == len(rec[f"{net}_norm"]) else math.nan
        out.append(Check(f"{net} gradient norm", pf.grad_norm_min <= med <= pf.grad_norm_max, f"median {med:.3g}",
                         f"median global L2 norm in [{pf.grad_norm_min:g}, {pf.grad_norm_max:g}]"))
    out.append(Check("forward outputs finite", not offenders,
                     ("NaN/Inf from " + ", ".join(offenders[:3]) + (" ..." if len(offenders) > 3 else "")) if offenders
                     else f"all {n_modules} modules", "no NaN/Inf output of any module of G or D"))
    return out


def run_preflight(cfg: DictConfig, run_dir: str | Path) -> list[Check]:
    """Dry-run ``cfg`` (see the module docstring) and return the table's rows; writes ``run_dir/preflight.json``.

    Raises:
        ValueError: a bad config (the same errors as the real run).
    """
    settings = check_config(cfg)  # the real run's settings (the dry run changes some: batch size, accumulation)
    pf, real = settings.monitor.preflight, settings.trainer
    full_bs, full_steps, eval_every = real.batch_size, real.steps, real.eval_every
    trainer = build_trainer(_dry_config(cfg), run_dir)
    if trainer.device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(trainer.device)
    trainer.start()
    hooks = _NonFiniteOutputs({"G": trainer.G, "D": trainer.D})
    rec = _dry_run(trainer, pf.steps)
    offenders = hooks.offenders()
    rows = _checks(rec, offenders, len(hooks.handles), pf)
    accumulate = real.accumulate
    per_step = _time_full_batch(trainer, full_bs, accumulate, pf.timing_steps, settings.seed)
    t0 = time.perf_counter()
    trainer.evaluator(trainer.G, trainer.data)
    _sync(trainer.device)
    per_eval = time.perf_counter() - t0
    n_evals = math.ceil(full_steps / eval_every)
    rows.append(Check("peak memory", None, f"{peak_memory_mib(trainer.device):.0f} MiB",
                      "GPU allocations" if trainer.device.type == "cuda" else "process RSS"))
    rows.append(Check("estimated run time", None, _fmt_time(full_steps * per_step + n_evals * per_eval),
                      f"{full_steps} steps x {per_step * 1e3:.2f} ms (batch {full_bs}"
                      + (f" in {accumulate} micro-batches) " if accumulate > 1 else ") ")
                      + f"+ {n_evals} evals x {per_eval:.1f} s"))
    record = {"passed": all(r.passed is not False for r in rows), "checks": [asdict(r) for r in rows]}
    atomic_write_text(Path(run_dir) / layout.PREFLIGHT_FILE, json.dumps(record, indent=2))
    return rows


def format_table(rows: list[Check]) -> str:
    """The rows as an aligned text table with PASS / FAIL / info and a verdict line."""
    status = {True: "PASS", False: "FAIL", None: "info"}
    width = max(len(r.name) for r in rows)
    vwidth = max(len(r.value) for r in rows)
    lines = [f"{'check':<{width}}  result  {'value':<{vwidth}}  criterion"]
    lines += [f"{r.name:<{width}}  {status[r.passed]:<6}  {r.value:<{vwidth}}  {r.criterion}" for r in rows]
    failed = [r.name for r in rows if r.passed is False]
    lines.append("preflight FAILED: " + ", ".join(failed) if failed else "preflight passed")
    return "\n".join(lines)
