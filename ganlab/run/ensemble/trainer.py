"""S seeds of one 2-D experiment trained in one process: the members' networks stacked (:class:`Stacked`), every
D and G update of all members done by one vectorised forward/backward and one optimiser step.

Each member is first built exactly as its single-seed run (``ganlab.run.build.build_trainer`` with ``seed=<k>``): its
own data set, initial weights, batch order (``Batcher``), latent-code stream, evaluator and run folder. The
ensemble draws every member's batches and codes from that member's own streams, and the strategies' per-sample
random numbers (:meth:`~ganlab.strategies.base.StepContext.uniform`, e.g. WGAN-GP's interpolation weights) from a
copy of the member's global RNG as the single run leaves it after building (the single run draws them from the
global RNG). The strategies run through their hooks only, as in a single run, on the members' batches flattened.
For evaluations and checkpoints the member's weights, EMA copy and optimiser moments are written back into its
own :class:`~ganlab.trainer.loop.Trainer`, which scores (callbacks included), saves and writes ``metrics.json``
through its public methods (:meth:`~ganlab.trainer.loop.Trainer.evaluate`, ``save``, ``publish``, ``finish``).

The NaN guard (``monitor.nan_guard``, on by default): before each D and G update is applied, every member's loss
and gradient norm are read (one host synchronisation per update, as in a single run); a non-finite one stops the
ensemble before the update, naming the seed, with the checkpoints saved so far all finite. The single run's
recovery (roll back, lower the lr) is not done in the ensemble: train that seed alone, where it is.

Left out, against a single run: the rest of the training-health monitor (gradient-norm statistics, update ratios,
the hard limit and the collapse risk between evaluations), per-member penalty values in the logs (only each
member's adversarial losses and D outputs are logged), and SIGINT handling (each member's last checkpoint resumes
as a single run).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor
from torch.func import vmap
from tqdm import tqdm

from ganlab import layout
from ganlab.health import TrainingHealthError
from ganlab.lr import LRRule
from ganlab.metrics.evaluator import generated_range
from ganlab.metrics.numeric.workers import WorkerPool
from ganlab.run.ensemble.stack import Stacked
from ganlab.strategies.base import StepContext, TrainState
from ganlab.trainer import checkpoint as ckpt_io
from ganlab.trainer.loop import Trainer
from ganlab.trainer.state import scored_generator

log = logging.getLogger("ganlab")


def score_workers(setting: int | None, size: int) -> int:
    """Threads that score an ensemble's members side by side: ``trainer.ensemble_workers``, or when null one per
    CPU core this process may use (``os.sched_getaffinity``), at most the ``size`` members. 1 (one after another)
    when torch runs more than one intra-op thread (``threads`` > 1): the scorers split their work over those
    threads there, and a worker's single thread could add up in another order than the single run's."""
    if torch.get_num_threads() > 1:
        return 1
    if setting is not None:
        return int(setting)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(size, cores))


def stacked_optimiser(like: torch.optim.Optimizer, params: Any) -> torch.optim.Optimizer:
    """An optimiser of ``like``'s class and hyperparameters over the stacked ``params``.

    Raises:
        ValueError: ``like`` has more than one parameter group.
    """
    if len(like.param_groups) != 1:
        raise ValueError(f"trainer.ensemble needs one parameter group per optimiser, got {len(like.param_groups)}")
    settings = {k: v for k, v in like.param_groups[0].items() if k != "params"}
    return type(like)([{"params": list(params), **settings}])


@torch.no_grad()
def copy_optimiser_member(stacked: torch.optim.Optimizer, k: int, into: torch.optim.Optimizer) -> None:
    """Member k's slice of ``stacked``'s state (moments; shared step counts copied) into ``into``, the member's own
    optimiser over the same parameters in the same order, with the stacked group's current lr."""
    for src, dst in zip(stacked.param_groups, into.param_groups):
        dst["lr"] = src["lr"]
        for p_s, p in zip(src["params"], dst["params"]):
            state = stacked.state.get(p_s, {})
            into.state[p] = {key: (v[k].clone() if torch.is_tensor(v) and v.shape == p_s.shape
                                   else v.clone() if torch.is_tensor(v) else v) for key, v in state.items()}


class _FlatCritic:
    """The stacked D as a critic of flat batches: (S * B, *shape) -> (S * B',), member k on rows k*B .. (k+1)*B - 1;
    what a strategy's per-sample-mean loss term expects (its mean over S * B samples is the members' mean)."""

    def __init__(self, d: Stacked) -> None:
        self.d = d

    def __call__(self, x: Tensor) -> Tensor:
        return self.d(x.view(self.d.size, -1, *x.shape[1:])).flatten(0, 1)


class EnsembleTrainer:
    """Train the member trainers' networks together; see the module docstring.

    Args:
        members: S built single-seed trainers of one config (differing only in ``seed``).
        global_rngs: each member's global RNG as its single run would start training with it (WGAN-GP's draws).
        run_dir: the ensemble's folder (the members' are its ``seed_<k>/`` sub-folders).
    """

    def __init__(self, members: list[Trainer], global_rngs: list[torch.Generator], run_dir: Path) -> None:
        first = members[0]
        self.members, self.rngs, self.run_dir, self.cfg = members, global_rngs, Path(run_dir), first.cfg
        self.size, self.seeds = len(members), [t.seed for t in members]
        self.nan_guard = bool(first.health.cfg.nan_guard)  # one config: the same in every member
        lazy = [s.name for s in first.strategies if s.regularisation_update]
        if lazy:  # the stacked loop has no separate regularisation update
            raise ValueError(f"strategy {lazy[0]} with lazy regularisation (a separate D update, e.g. "
                             f"strategy.{lazy[0]}.interval > 1) does not run in trainer.ensemble: set "
                             f"strategy.{lazy[0]}.interval=1, or train the seeds as separate runs")
        self.workers = score_workers(self.cfg.ensemble_workers, self.size)
        for t in members:
            t.start()  # strategies' on_start on each member (its EMA copy, written back at evaluations)
        self.G, self.D = Stacked([t.G for t in members]), Stacked([t.D for t in members])
        self.opt_g = stacked_optimiser(first.state.opt_g, self.G.parameters())
        self.opt_d = stacked_optimiser(first.state.opt_d, self.D.parameters())
        self.lr = LRRule({"G": self.opt_g, "D": self.opt_d}, first.lr.schedules, self.cfg.steps)
        self.loss, self.strategies = first.loss, first.strategies  # one config: the same settings in every member
        self.state = TrainState(self.G, self.D, self.opt_g, self.opt_d, loss=self.loss, lr=self.lr)
        for s in self.strategies:
            s.on_start(self.state)  # EMA: a stacked copy of the stacked G
        self._flat_state = dataclasses.replace(self.state, discriminator=_FlatCritic(self.D),  # type: ignore[arg-type]
                                               draw_uniform=self._uniform)

    # ---------------------------------------------------------------- one step of every member
    def _real(self) -> Tensor:
        return torch.stack([t.data.x[t.batcher.next()] for t in self.members])  # (S, B, 2)

    def _z(self) -> Tensor:
        return torch.stack([t.G.sample_z(self.cfg.batch_size, t.noise) for t in self.members])  # (S, B, z_dim)

    def _uniform(self, n: int, dtype: torch.dtype, device: torch.device) -> Tensor:
        """(n,) = (S * B,) numbers U[0, 1), member k's B rows from member k's own global-RNG stream (what its single
        run draws with ``torch.rand(B)``)."""
        b = n // self.size
        return torch.cat([torch.rand(b, generator=g, dtype=dtype, device=device) for g in self.rngs])

    def _d_terms(self, real: Tensor, fake: Tensor, z: Tensor) -> list[Tensor]:
        """The strategies' D terms summed over the members (a term that is a mean over one member's samples is
        S x its mean over the S * B flattened samples)."""
        self._flat_state.step = self.state.step  # a copy of the state: its step follows the ensemble's
        ctx = StepContext(self._flat_state, real.flatten(0, 1), fake.flatten(0, 1), z.flatten(0, 1))
        return [self.size * v for s in self.strategies for v in s.d_terms(ctx).values()]

    def _guard(self, net: str, losses: Tensor, module: Stacked, opt: torch.optim.Optimizer,
               shared: Sequence[Tensor] = ()) -> None:
        """The NaN guard before an update is applied: each member's loss (``losses``, (S,)) and the L2 norm of its
        gradients in ``module``, read in one host synchronisation; nothing when ``monitor.nan_guard=false``.
        ``shared``: the strategies' 0-d terms, each summed over the members, so a non-finite one counts against
        every member.

        Raises:
            TrainingHealthError: a member's loss or gradient norm is NaN/Inf (the update is dropped first), naming
                its seed and the way to recover it.
        """
        if not self.nan_guard:
            return
        squares = [p.grad.flatten(1).float().pow(2).sum(1) for p in module.parameters() if p.grad is not None]
        norms = torch.stack(squares).sum(0).sqrt()  # (S,) each member's global gradient norm
        losses = losses.detach().float() + sum(0.0 * t.detach().float() for t in shared)  # (S,)
        finite = torch.isfinite(torch.stack([losses, norms])).all(0).tolist()  # (S,) bools: the one sync
        bad = [seed for seed, ok in zip(self.seeds, finite) if not ok]
        if bad:
            opt.zero_grad(set_to_none=True)
            raise TrainingHealthError(
                f"seed {', '.join(map(str, bad))}: a non-finite {net} loss or gradient at step {self.state.step + 1}; "
                f"the update was not applied and every checkpoint so far is finite. The ensemble does not roll back: "
                f"train seed={bad[0]} alone (without trainer.ensemble), where monitor.nan_guard rolls back and "
                "lowers the lr")

    def d_step(self) -> tuple[Tensor, Tensor, Tensor]:
        """One D update of every member; returns (adversarial D losses (S,), D(real) (S, B), D(fake) (S, B))."""
        real, z = self._real(), self._z()
        with torch.no_grad():
            fake = self.G(z)
        d_real, d_fake = self.D(real), self.D(fake)  # (S, B), (S, B)
        adv = vmap(self.loss.d_loss)(d_real, d_fake)  # (S,)
        total, terms = adv.sum(), self._d_terms(real, fake, z)
        for term in terms:
            total = total + term
        self.opt_d.zero_grad(set_to_none=True)
        total.backward()
        self._guard("D", adv, self.D, self.opt_d, shared=terms)
        self.opt_d.step()
        return adv.detach(), d_real.detach(), d_fake.detach()

    def g_step(self) -> Tensor:
        """One G update of every member (D frozen); returns the adversarial G losses (S,)."""
        z = self._z()
        self.D.requires_grad_(False)
        try:
            adv = vmap(self.loss.g_loss)(self.D(self.G(z)))  # (S,)
            self.opt_g.zero_grad(set_to_none=True)
            adv.sum().backward()
            self._guard("G", adv, self.G, self.opt_g)
            self.opt_g.step()
        finally:
            self.D.requires_grad_(True)
        return adv.detach()

    def train_step(self) -> dict[str, Tensor]:
        """The lr rule, ``n_critic`` D updates, one G update; the last D update's and the G update's values."""
        self.lr.apply("D", self.state.step)
        self.lr.apply("G", self.state.step)
        for _ in range(self.cfg.n_critic):
            d_adv, d_real, d_fake = self.d_step()
        g_adv = self.g_step()
        return {"loss/D/adv": d_adv, "loss/G/adv": g_adv, "D/real": d_real.mean(1), "D/fake": d_fake.mean(1)}

    # ---------------------------------------------------------------- the members' own trainers
    def sync_member(self, k: int) -> Trainer:
        """Write member k's weights, EMA copy, optimiser moments, lrs, step and global RNG into its trainer."""
        t = self.members[k]
        self.G.copy_member_into(k, t.G)
        self.D.copy_member_into(k, t.D)
        if self.state.g_ema is not None and t.state.g_ema is not None:
            self.state.g_ema.copy_member_into(k, t.state.g_ema)
        copy_optimiser_member(self.opt_g, k, t.state.opt_g)
        copy_optimiser_member(self.opt_d, k, t.state.opt_d)
        t.lr.applied = {net: list(lrs) for net, lrs in self.lr.applied.items()}
        t.state.step = self.state.step
        if t.device.type == "cpu":  # the checkpoint's global RNG: the member's, as its single run would save it
            torch.set_rng_state(self.rngs[k].get_state())
        return t

    def precompute_evaluations(self) -> None:
        """Score every member's coming evaluation side by side on :attr:`workers` threads (one intra-op thread
        each), before the members' trainers evaluate one after another: each member's samples are drawn as its
        :meth:`~ganlab.trainer.loop.Trainer.evaluate` draws them and scored by its own evaluator
        (:meth:`~ganlab.metrics.evaluator.Evaluator.precompute`), which then hands the result to that evaluation.
        A member whose samples cannot be scored is left to its evaluation, which raises the single run's error."""
        jobs = []
        for k in range(self.size):
            t = self.sync_member(k)
            try:
                with t.isolated_rng():
                    scored = scored_generator(t.state)
                    jobs.append((t, t.evaluator.generate(scored, warn=False)[0], generated_range(scored, t.data)))
            except ValueError:  # fewer than 2 finite samples: evaluate() raises it with the run's context
                continue

        def score(job: tuple[Trainer, Tensor, tuple[float, float]]) -> None:
            t, samples, value_range = job
            try:
                t.evaluator.precompute(samples, t.data, value_range)
            except ValueError:  # a scorer refused: evaluate() scores again and raises the single run's message
                pass

        with WorkerPool(self.members[0].device, self.workers) as pool:
            pool.map(score, jobs)

    def _log(self, values: dict[str, Tensor], step: int) -> None:
        """Each member's scalars to its logger; a non-finite loss stops the ensemble, naming the seed."""
        host = {key: v.tolist() for key, v in values.items()}
        for k, t in enumerate(self.members):
            scalars = {key: float(v[k]) for key, v in host.items()}
            if not all(map(torch.isfinite, torch.tensor(list(scalars.values())))):
                raise FloatingPointError(f"seed {t.seed}: a loss or D output is NaN/Inf at step {step} ({scalars}); "
                                         f"the ensemble has no NaN guard: train seed={t.seed} alone (without "
                                         "trainer.ensemble), where monitor.nan_guard rolls back")
            t.stats.report_all(scalars | {f"lr/{net}": lrs[0] for net, lrs in self.lr.applied.items()})
            t.publish(step)

    def fit(self) -> dict[str, Any]:
        """Train to ``trainer.steps``, evaluating and checkpointing each member on the single run's schedule; write
        each member's ``metrics.json`` and the ensemble's ``ensemble.json``. Returns the latter's content."""
        cfg, t0 = self.cfg, time.perf_counter()
        bar = tqdm(total=cfg.steps, disable=not cfg.progress, dynamic_ncols=True, unit="step",
                   desc=f"train x{self.size}")
        while self.state.step < cfg.steps:
            out = self.train_step()
            self.state.step += 1
            step = self.state.step
            for s in self.strategies:
                s.after_step(self.state)
            if step % cfg.log_every == 0 or step == cfg.steps:
                self._log(out, step)
            evaluate, save = step % cfg.eval_every == 0 or step == cfg.steps, step % cfg.ckpt_every == 0
            if evaluate and self.workers > 1:
                self.precompute_evaluations()
            for k in range(self.size) if evaluate or save else ():
                t = self.sync_member(k)
                if evaluate:
                    t.evaluate()
                if save:
                    t.save(t.run_dir / layout.CHECKPOINT_DIR / layout.step_checkpoint_name(step))
            bar.update(1)
        bar.close()
        elapsed = time.perf_counter() - t0
        metrics = [t.finish(0, elapsed) for t in self.members]
        summary = {"seeds": self.seeds, "members": [f"seed_{s}" for s in self.seeds], "step": self.state.step,
                   "wall_time_s": elapsed, "scores": {str(s): m["scores"] for s, m in zip(self.seeds, metrics)},
                   "verdicts": {str(s): m["verdict"] for s, m in zip(self.seeds, metrics)}}
        ckpt_io.atomic_write_text(self.run_dir / layout.ENSEMBLE_FILE, json.dumps(summary, indent=2))
        return summary
