"""The GAN training loop. It reads top to bottom and never branches on a component's name: strategies act
only through the hooks of :class:`ganlab.strategies.Strategy`. Each update is written out in :meth:`Trainer._update`
(zero_grad, backward of each micro-batch, unscale, clip, step); the health monitor only reads the gradients and
returns findings, which the loop acts on (NaN rollback, hard-limit stop: :mod:`ganlab.trainer.recovery`). Observers
(collapse alarm, detector, risk) are callbacks (:mod:`ganlab.trainer.callback`), called at fixed points; every scalar
goes through one channel, :attr:`Trainer.stats`, which :meth:`Trainer.publish` writes."""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import math
import operator
import signal
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from ganlab import layout
from ganlab.data.base import Batcher, GANData
from ganlab.distributed import SINGLE, Dist, wrap
from ganlab.health import AlertLog, HealthMonitor, MonitorConfig, UpdateFindings, peak_memory_mib
from ganlab.hparams import log_run_summary
from ganlab.io import append_jsonl, read_jsonl, rewrite_jsonl
from ganlab.losses import AdversarialLoss
from ganlab.lr import LRRule, LRSchedule
from ganlab.metrics.evaluator import NONFINITE_KEY, EvalResult, Evaluator
from ganlab.models.conditional import AuxiliaryClassLoss, code_labels, grid_codes
from ganlab.provenance import provenance
from ganlab.strategies.base import StepContext, Strategy, TrainState
from ganlab.trainer import checkpoint as ckpt_io
from ganlab.trainer import recovery, visuals
from ganlab.trainer.callback import Callback
from ganlab.trainer.checkpointing import Checkpointing
from ganlab.trainer.config import TrainerConfig
from ganlab.trainer.interrupt import GracefulStop, TrainingInterrupted
from ganlab.trainer.loggers import NullLogger
from ganlab.trainer.precision import MixedPrecision
from ganlab.trainer.progress import Progress
from ganlab.trainer.state import scored_generator
from ganlab.trainer.stats import HEALTH, SCORES, Stats

log = logging.getLogger("ganlab")


def _total(terms: dict[str, Tensor]) -> Tensor:
    """The sum of the loss terms (``sum()`` would add a 0 first: one more kernel per update)."""
    return functools.reduce(operator.add, terms.values())


def _float32(t: Tensor) -> Tensor:
    """``t.float()``, skipping the call (a dispatch per use, per update) when ``t`` is float32 already."""
    return t if t.dtype == torch.float32 else t.float()


@dataclass
class StepResult:
    """One generator step (:meth:`Trainer.train_step`): the last D update's and the G update's loss terms and
    D outputs ((B,) each, detached), or ``stopped``: the findings of an update the loop did not apply."""

    d_terms: dict[str, Tensor]
    g_terms: dict[str, Tensor]
    d_real: Tensor | None
    d_fake: Tensor | None
    stopped: UpdateFindings | None = None


class Trainer(Checkpointing):
    """Alternating (or simultaneous, ``trainer.update``) D/G updates with strategies, evaluation, TensorBoard
    logging and resumable checkpoints.

    Args:
        data: the training data, already on ``device``.
        generator, discriminator: built (and configured by strategies) networks on ``device``.
        loss: adversarial loss.
        opt_g, opt_d: optimisers over G's and D's parameters.
        strategies: selected strategies (already ``configure``d).
        evaluator: scores the generator at each evaluation.
        run_dir: output folder (checkpoints/, samples/, metrics.json, metrics.jsonl, event files).
        cfg: loop settings; ``n_critic`` here is the effective value after strategies.
        seed: seeds the batch order and the latent-code stream.
        logger: where scalars/images go.
        config: the resolved run config, stored in checkpoints.
        monitor: per-update training-health settings (:mod:`ganlab.health`); defaults when None.
        callbacks: the observers (:class:`~ganlab.trainer.callback.Callback`), called in this order; one per name.
        lr_schedules: ``{"G": ..., "D": ...}`` warmup/decay of each network's lr (:mod:`ganlab.lr`); constant
            when None or missing.
        dist: this process's rank among the processes training together (:mod:`ganlab.distributed`);
            None: one process. Under several, G and D train inside DistributedDataParallel, each rank takes its
            slice of the seeded global batch, and only rank 0 writes files.
        class_loss: AC-GAN's class loss (``model.conditional_head=acgan``): D has an auxiliary classifier
            (``D(x, y, class_logits=True)`` gives its logits), D's loss gains ``class_real`` + ``class_fake`` and
            G's ``class`` (:class:`~ganlab.models.conditional.AuxiliaryClassLoss`), and logged steps report D's
            class accuracy on its real batch as ``D/class_accuracy_real``; None: no class loss.
        g_groups: G's forward passes per batch of codes in training (:attr:`ganlab.strategies.base.GANSpec.g_groups`;
            PacGAN's pack columns); 1: one pass.
    """

    def __init__(self, *, data: GANData, generator: nn.Module, discriminator: nn.Module, loss: AdversarialLoss,
                 opt_g: torch.optim.Optimizer, opt_d: torch.optim.Optimizer, strategies: list[Strategy],
                 evaluator: Evaluator, run_dir: str | Path, cfg: TrainerConfig, seed: int,
                 logger: NullLogger | None = None, config: dict[str, Any] | None = None,
                 monitor: MonitorConfig | None = None, lr_schedules: dict[str, LRSchedule] | None = None,
                 dist: Dist | None = None, class_loss: AuxiliaryClassLoss | None = None, g_groups: int = 1,
                 callbacks: Sequence[Callback] = ()) -> None:
        cfg.validate()
        self.dist = dist or SINGLE
        self.data, self.G, self.D, self.loss = data, generator, discriminator, loss
        self.strategies, self.evaluator, self.cfg, self.seed = strategies, evaluator, cfg, seed
        self.run_dir, self.config = Path(run_dir), config or {}
        self.logger = logger or NullLogger()
        self.device = data.x.device
        self.batcher = Batcher(len(data), cfg.batch_size * self.dist.world, seed, device=self.device)
        # the modules that train (DDP averages their gradients over the ranks); self.G, self.D stay the plain ones
        self.g_train = wrap(generator, self.device) if self.dist.active else generator
        self.d_train = wrap(discriminator, self.device) if self.dist.active else discriminator
        self.noise = torch.Generator(device=self.device).manual_seed(seed + 1)
        self.lr = LRRule({"G": opt_g, "D": opt_d}, lr_schedules, cfg.steps)  # the lrs opt_g, opt_d have are the base
        self.state = TrainState(generator, discriminator, opt_g, opt_d, step=0, log_text=self._log_text, loss=loss,
                                lr=self.lr)
        self.num_classes = int(getattr(generator, "num_classes", 0))  # > 0: class-conditional (model.conditional)
        self.class_loss = class_loss
        self.g_groups = int(g_groups)  # G's passes per batch of codes in training (GANSpec.g_groups)
        self._class_accuracy: Tensor | None = None  # D's class accuracy on the latest D step's real batch (AC-GAN)
        self.fixed_z, self.grid_nrow = grid_codes(generator, cfg.grid_size,
                                                  torch.Generator(device=self.device).manual_seed(seed + 2))
        self.last_scores: dict[str, float] = {}
        self.last_result: EvalResult | None = None
        self._pending_g_ema: dict[str, Tensor] | None = None
        self._pending_after_eval: dict[str, float] | None = None  # from last.pt: the strategies' reaction to replay
        self._started = False
        self.alerts = AlertLog(self.run_dir, self.logger, write=self.dist.main)
        self.amp = MixedPrecision(cfg.precision, self.device)  # autocast of the forward passes, fp16's loss scalers
        self.health = HealthMonitor(monitor or MonitorConfig(), self.device, self.alerts, scalers=self.amp.scalers)
        self.callbacks = list(callbacks)
        names = [c.name for c in self.callbacks]
        if len(set(names)) < len(names):
            raise ValueError(f"two callbacks share a name in {names}: each saves its state under its name; rename one")
        self.stats = Stats()  # the one channel for scalars; publish() writes it
        self.good_checkpoint: Path | None = None  # the newest checkpoint saved with finite weights
        self.last_batch: dict[str, Any] = {}      # inputs/outputs of the latest update, dumped on a NaN
        self._last_idx: Tensor | None = None      # the latest D step's sample indices (their classes: the G step's)
        self._d_params: list[nn.Parameter] | None = None  # D's parameters, for freezing them in the G step

    # ---------------------------------------------------------------- one D update and one G update
    def _global(self, ctx: StepContext) -> StepContext:
        """``ctx`` with every rank's rows gathered (rank order): what ``after_d_step`` sees under several ranks,
        so statistics of D's outputs (ADA's r_t, d_lr_damping's accuracy) are those of the whole batch."""
        if not self.dist.active:
            return ctx

        def cat(t: Tensor | None) -> Tensor | None:
            return None if t is None else self.dist.gather_batch(t.detach())

        return StepContext(ctx.state, cat(ctx.real), cat(ctx.fake), cat(ctx.z), cat(ctx.d_real),  # type: ignore[arg-type]
                           cat(ctx.d_fake), cat(ctx.labels))

    def _sum_terms(self, base: Tensor, extra: list[dict[str, Tensor]]) -> dict[str, Tensor]:
        terms = {"adv": base}
        for contribution in extra:
            for name, value in contribution.items():
                if name in terms:
                    raise ValueError(f"two loss terms are both named {name!r}; rename one in its strategy")
                terms[name] = value
        return terms

    def _update(self, net: str, module: nn.Module, opt: torch.optim.Optimizer,
                micro_loss: Callable[[int], Tensor]) -> UpdateFindings:
        """Back-propagate the loss of each of the ``trainer.accumulate`` = k micro-batches (``micro_loss(i)``: the
        0-d mean loss of micro-batch i) into ``module``, then step ``opt`` once, unless the monitor's findings stop it.

        The order of nanoGPT's and StyleGAN2-ADA's loops, with the fp16 GradScaler (Micikevicius et al. 2018),
        whose calls pass through when it is disabled (precision 32 or bf16). Gradient accumulation as in PyTorch's
        AMP recipe ("Gradient accumulation"): each micro-batch's loss is divided by k, scaled and back-propagated;
        the gradients add up in ``.grad`` to those of the whole batch's mean loss, and unscaling, the monitor (the
        NaN guard, the hard limit, the norms), clipping and the step see that sum once. A stopped update is
        dropped (gradients cleared, the scaler's iteration closed); the caller rolls back or stops the run.
        """
        k = self.cfg.accumulate
        scaler = self.amp.scalers[net]
        fp16 = scaler.is_enabled()  # otherwise the scaler's calls would pass through: they are skipped
        opt.zero_grad(set_to_none=True)
        losses = []
        for i in range(k):
            loss = micro_loss(i) if k == 1 else micro_loss(i) / k
            (scaler.scale(loss) if fp16 else loss).backward()
            losses.append(loss if k == 1 else loss.detach())  # k > 1: no micro-batch's graph is kept alive
        # the whole batch's loss: the sum of the micro-batches' loss / k (the monitor detaches it if it must)
        return self._apply(net, module, opt, functools.reduce(operator.add, losses), fp16)

    def _apply(self, net: str, module: nn.Module, opt: torch.optim.Optimizer, total: Tensor,
               fp16: bool | None = None) -> UpdateFindings:
        """The second half of an update, once the gradients of ``net``'s whole-batch loss ``total`` are in
        ``.grad``: unscale (fp16), the monitor's findings, clip, step; a stopped update is dropped. ``fp16``:
        whether ``net``'s GradScaler is on, when the caller has read it."""
        scaler = self.amp.scalers[net]
        fp16 = scaler.is_enabled() if fp16 is None else fp16
        if fp16:
            scaler.unscale_(opt)  # the monitor and the clipping see the true gradients
        found = self.health.inspect(net, module, opt, total)
        if not found.apply:
            opt.zero_grad(set_to_none=True)
            if fp16:
                scaler.update()
            return found
        if self.health.cfg.clip is not None and found.finite:
            torch.nn.utils.clip_grad_norm_(module.parameters(), float(self.health.cfg.clip))
        if found.found_inf is not None:  # deferred read: the fused kernel skips a non-finite update on the device
            opt.found_inf = found.found_inf  # type: ignore[attr-defined]
            try:
                opt.step()
            finally:
                del opt.found_inf  # type: ignore[attr-defined]
        elif fp16:
            scaler.step(opt)  # the scaler skips the step when a gradient is inf/NaN
            scaler.update()
        else:
            opt.step()
        self.health.record(found, opt)
        return found

    def _micro(self, *batch: Tensor) -> list[tuple[Tensor, ...]]:
        """Split (B, ...) tensors into the ``trainer.accumulate`` micro-batches, (B / k, ...) each (views).

        Raises:
            ValueError: B is not divisible by k (a ``cfg.accumulate`` changed after :meth:`TrainerConfig.validate`).
        """
        n, k = batch[0].shape[0], self.cfg.accumulate
        if k == 1:
            return [batch]  # no split: two fewer tensor ops per update
        if n % k:
            raise ValueError(f"a batch of {n} samples does not split into trainer.accumulate={k} micro-batches")
        size = n // k
        return list(zip(*(t.split(size) for t in batch)))

    def _merged(self, parts: list[tuple[StepContext, dict[str, Tensor]]]) -> tuple[StepContext, dict[str, Tensor]]:
        """One update's micro-batches as one: the contexts concatenated (outputs detached) and each loss term the
        mean over the micro-batches (the whole batch's value for a mean over samples). A single part as it is."""
        if len(parts) == 1:
            return parts[0]
        ctxs = [c for c, _ in parts]

        def cat(name: str) -> Tensor | None:
            values = [getattr(c, name) for c in ctxs]
            return None if values[0] is None else torch.cat([v.detach() for v in values])

        first = ctxs[0]
        ctx = StepContext(first.state, cat("real"), cat("fake"), cat("z"), cat("d_real"),  # type: ignore[arg-type]
                          cat("d_fake"), cat("labels"))
        names = dict.fromkeys(n for _, terms in parts for n in terms)  # a term may come in one micro-batch only
        terms = {n: functools.reduce(operator.add, [t[n].detach() for _, t in parts if n in t]) / len(parts)
                 for n in names}
        return ctx, terms

    def _codes(self, idx: Tensor | None) -> Tensor:
        """A batch of latent codes from the run's noise stream: z (B, z_dim), or, for a class-conditional G,
        codes ``[z | y]`` (B, z_dim + 1) whose classes y are those of the training samples ``idx`` (the global
        (world * B,) indices, remembered for the G step, whose fakes get the same classes). Under several
        processes all world * B codes are drawn and this rank keeps its slice."""
        n = self.cfg.batch_size * self.dist.world
        if not self.num_classes:
            z = self.G.sample_z(n, self.noise)
        else:
            assert idx is not None and self.data.labels is not None
            self._last_idx = idx
            z = self.G.sample_z(n, self.noise, labels=self.data.labels[idx])
        return z[self.dist.rows(self.cfg.batch_size)] if self.dist.active else z

    def _score(self, x: Tensor, labels: Tensor | None) -> Tensor:
        """D's scores (B,) of samples ``x`` in the D step (through DDP under several processes), given their
        classes ``labels`` (B,) when the model is conditional."""
        return self.d_train(x) if labels is None else self.d_train(x, labels)

    def _d_outputs(self, real: Tensor, fake: Tensor, labels: Tensor | None,
                   accuracy: list[Tensor]) -> tuple[Tensor, Tensor, dict[str, Tensor]]:
        """D's float32 scores (B,) of ``real`` and ``fake`` and, with an AC-GAN head, its class terms (the
        auxiliary classifier's logits come from the same passes; their accuracy on ``real`` is appended to
        ``accuracy``)."""
        if self.class_loss is None or labels is None:
            return _float32(self._score(real, labels)), _float32(self._score(fake, labels)), {}
        d_real, logits_real = self.d_train(real, labels, class_logits=True)
        d_fake, logits_fake = self.d_train(fake, labels, class_logits=True)
        accuracy.append((logits_real.detach().argmax(1) == labels).float().mean())
        return _float32(d_real), _float32(d_fake), self.class_loss.d_terms(logits_real, logits_fake, labels)

    def d_step(self) -> tuple[StepContext, dict[str, Tensor], UpdateFindings]:
        """One discriminator update on a fresh real batch (in ``trainer.accumulate`` micro-batches); returns (its
        context and loss terms, each for the whole batch, and the findings)."""
        idx = self.batcher.next()  # (world * B,) global sample indices, already on the device
        real = self.data.x[idx[self.dist.rows(self.cfg.batch_size)] if self.dist.active else idx]  # (B, *shape)
        z = self._codes(idx)  # (B, z_dim), or (B, z_dim + 1) [z | class] codes for the real batch's classes
        micro, parts, accuracy = self._micro(real, z), [], []

        def micro_loss(i: int) -> Tensor:
            real_i, z_i = micro[i]
            labels = code_labels(z_i) if self.num_classes else None
            with self.amp.autocast():
                with torch.no_grad():
                    fake = self.G(z_i) if self.g_groups == 1 else self._fakes(self.G, z_i)
                d_real, d_fake, class_terms = self._d_outputs(real_i, fake, labels, accuracy)  # (B/k,) each
                ctx = StepContext(self.state, real_i, fake, z_i, d_real, d_fake, labels)
                terms = self._sum_terms(self.loss.d_loss(d_real, d_fake),
                                        [class_terms, *(s.d_terms(ctx) for s in self.strategies)])
            parts.append((ctx, terms))
            return _total(terms)

        found = self._update("D", self.D, self.state.opt_d, micro_loss)
        ctx, terms = self._merged(parts)
        if accuracy:
            self._class_accuracy = torch.stack(accuracy).mean()
        if not found.late:  # late: the previous update failed; its batch stays for the dump
            self.last_batch = {"real": ctx.real, "z": ctx.z, "fake": ctx.fake, "d_real": ctx.d_real,
                               "d_fake": ctx.d_fake, "terms": terms}
        if found.apply:
            whole, lazy = self._global(ctx), False
            for s in self.strategies:
                s.after_d_step(whole)
                lazy = lazy or type(s).d_reg_terms is not Strategy.d_reg_terms  # the base's gives no terms
            if lazy:  # a strategy with a regularisation phase of its own
                reg, reg_found = self._d_reg_step([c for c, _ in parts])
                terms, found = terms | reg, reg_found if reg_found is not None else found
        return ctx, terms, found

    def _d_reg_step(self, ctxs: list[StepContext]) -> tuple[dict[str, Tensor], UpdateFindings | None]:
        """Lazy regularisation (StyleGAN2's separate phase, Karras et al. 2020, Appendix B): when a strategy's
        ``d_reg_terms`` returns terms after an applied D update (its micro-batches' contexts ``ctxs``), one more D
        update minimises their sum alone. Returns (its terms for the whole batch, its findings), or ({}, None)."""
        def terms_of(ctx: StepContext) -> dict[str, Tensor]:
            out: dict[str, Tensor] = {}
            for s in self.strategies:
                for name, value in s.d_reg_terms(ctx).items():
                    if name in out:
                        raise ValueError(f"two regularisation terms are both named {name!r}; rename one")
                    out[name] = value
            return out

        with self.amp.autocast():
            first = terms_of(ctxs[0])
        if not first:
            return {}, None
        parts: list[tuple[StepContext, dict[str, Tensor]]] = []

        def micro_loss(i: int) -> Tensor:
            if i == 0:
                terms = first
            else:
                with self.amp.autocast():
                    terms = terms_of(ctxs[i])
            parts.append((ctxs[i], terms))
            return _total(terms)

        found = self._update("D", self.D, self.state.opt_d, micro_loss)
        return self._merged(parts)[1], found

    def g_step(self, real: Tensor) -> tuple[dict[str, Tensor], UpdateFindings]:
        """One generator update (``real``: the last D step's batch, split into the same micro-batches as the
        codes); D's parameters are frozen meanwhile (no gradient is stored for them). Returns (its loss terms for
        the whole batch, the findings)."""
        z = self._codes(self._last_idx if self.num_classes else None)  # the fakes get the real batch's classes
        micro, parts = self._micro(real, z), []

        def micro_loss(i: int) -> Tensor:
            real_i, z_i = micro[i]
            with self.amp.autocast():
                fake = self.g_train(z_i) if self.g_groups == 1 else self._fakes(self.g_train, z_i)
                ctx = StepContext(self.state, real_i, fake, z_i, labels=code_labels(z_i) if self.num_classes else None)
                class_terms = self._score_fakes(ctx)  # sets ctx.d_fake
                terms = self._sum_terms(self.loss.g_loss(ctx.d_fake),
                                        [class_terms, *(s.g_terms(ctx) for s in self.strategies)])
            parts.append((ctx, terms))
            return _total(terms)

        self._d_requires_grad(False)
        try:
            found = self._update("G", self.G, self.state.opt_g, micro_loss)
        finally:
            self._d_requires_grad(True)
        ctx, terms = self._merged(parts)
        if not found.late:
            self.last_batch = {"real": real, "z": z, "fake": ctx.fake, "d_real": None, "d_fake": ctx.d_fake,
                               "terms": terms}
        return terms, found

    def simultaneous_step(self) -> tuple[StepContext, dict[str, Tensor], dict[str, Tensor], UpdateFindings]:
        """One simultaneous update (``trainer.update=simultaneous``, PacGAN's and ALI's code): one real batch, one
        batch of fakes, one D pass over each; D's loss is back-propagated into D's parameters only and G's loss
        (scoring the same D outputs) into G's only, both at the current parameters, then D's and G's optimisers
        step. Returns (D's context, D's and G's loss terms for the whole batch, the findings of the update the
        monitor stopped, else G's). Strategies that need a second D pass are refused when the run is built
        (:func:`ganlab.trainer.update_scheme.check_update_scheme`)."""
        idx = self.batcher.next()  # (B,) sample indices
        real, z = self.data.x[idx], self._codes(idx)  # (B, *shape), (B, z_dim) or (B, z_dim + 1)
        k, opt_d, opt_g = self.cfg.accumulate, self.state.opt_d, self.state.opt_g
        scale_d, scale_g = self.amp.scalers["D"], self.amp.scalers["G"]
        d_params = [p for p in self.D.parameters() if p.requires_grad]
        g_params = [p for p in self.G.parameters() if p.requires_grad]
        opt_d.zero_grad(set_to_none=True)
        opt_g.zero_grad(set_to_none=True)
        d_parts, g_parts, d_losses, g_losses = [], [], [], []
        for real_i, z_i in self._micro(real, z):
            labels = code_labels(z_i) if self.num_classes else None
            with self.amp.autocast():
                fake = self._fakes(self.g_train, z_i)  # attached to G
                d_real, d_fake, _ = self._d_outputs(real_i, fake, labels, [])  # (B/k,) each; the one D pass
                d_ctx = StepContext(self.state, real_i, fake.detach(), z_i, d_real, d_fake, labels)
                d_terms = self._sum_terms(self.loss.d_loss(d_real, d_fake), [s.d_terms(d_ctx) for s in self.strategies])
                g_ctx = StepContext(self.state, real_i, fake, z_i, None, d_fake, labels)
                g_terms = self._sum_terms(self.loss.g_loss(d_fake), [s.g_terms(g_ctx) for s in self.strategies])
            d_loss, g_loss = _total(d_terms), _total(g_terms)
            if k > 1:  # micro-batches: the gradients add up to those of the whole batch's mean losses
                d_loss, g_loss = d_loss / k, g_loss / k
            # both gradients before either step: D's loss into D's parameters, G's into G's, through one graph
            (scale_d.scale(d_loss) if scale_d.is_enabled() else d_loss).backward(inputs=d_params, retain_graph=True)
            (scale_g.scale(g_loss) if scale_g.is_enabled() else g_loss).backward(inputs=g_params)
            d_losses.append(d_loss.detach())
            g_losses.append(g_loss.detach())
            d_parts.append((d_ctx, d_terms))
            g_parts.append((g_ctx, g_terms))
        found = self._apply("D", self.D, opt_d, functools.reduce(operator.add, d_losses))
        if found.apply:
            found = self._apply("G", self.G, opt_g, functools.reduce(operator.add, g_losses))
        else:
            opt_g.zero_grad(set_to_none=True)  # D's update was dropped: so is G's
        ctx, d_terms = self._merged(d_parts)
        g_terms = self._merged(g_parts)[1]
        if not found.late:
            self.last_batch = {"real": ctx.real, "z": ctx.z, "fake": ctx.fake, "d_real": ctx.d_real,
                               "d_fake": ctx.d_fake, "terms": d_terms | {f"G/{n}": v for n, v in g_terms.items()}}
        if found.apply:
            for s in self.strategies:
                s.after_d_step(ctx)
        return ctx, d_terms, g_terms, found

    def _fakes(self, g: nn.Module, z: Tensor) -> Tensor:
        """G's samples (B, *shape) of the codes ``z`` (B, z_dim): one pass, or with ``g_groups`` = m > 1 one pass
        per pack column, codes j, j + m, j + 2m, ... making column j (PacGAN's code), so that in training G's
        batch-norm statistics are per column; pack i (samples i*m .. i*m + m - 1) holds sample i of each column."""
        m = self.g_groups
        if m == 1:
            return g(z)
        columns = [g(z[j::m]) for j in range(m)]  # (B/m, *shape) each
        return torch.stack(columns, 1).flatten(0, 1)  # (B, *shape)

    def _score_fakes(self, ctx: StepContext) -> dict[str, Tensor]:
        """Set ``ctx.d_fake`` (B,) float32, the scores of G's fakes in the G step, and return G's class terms.

        Without a class loss the fakes go through the strategies' ``g_discriminator`` chain. With an AC-GAN head
        D scores them and classifies them in one pass (strategies that replace that function are refused with
        that head when the run is built: :func:`ganlab.run.build.check_conditional_model`).
        """
        if self.class_loss is None or ctx.labels is None:
            critic: Any = ctx.critic  # a strategy may score the fakes differently (Strategy.g_discriminator)
            for s in self.strategies:
                critic = s.g_discriminator(ctx, critic)
            ctx.d_fake = _float32(critic(ctx.fake))
            return {}
        d_fake, logits = ctx.discriminator(ctx.fake, ctx.labels, class_logits=True)
        ctx.d_fake = _float32(d_fake)
        return self.class_loss.g_terms(logits, ctx.labels)

    def _d_requires_grad(self, flag: bool) -> None:
        """``self.D.requires_grad_(flag)`` over D's parameters listed once (at the first G step, after the
        strategies' ``on_start``): walking D's module tree twice per step costs more than the toggles themselves."""
        if self._d_params is None:
            self._d_params = list(self.D.parameters())
        for p in self._d_params:
            p.requires_grad_(flag)

    # ---------------------------------------------------------------- the run
    def train_step(self) -> StepResult:
        """The lr rule written into both optimisers, ``n_critic`` D updates, then one G update (or, with
        ``trainer.update=simultaneous``, :meth:`simultaneous_step`); stops at the first update the monitor's
        findings stop. A deferred read of the monitor (on CUDA) is settled before it returns."""
        self.lr.apply("D", self.state.step)
        self.lr.apply("G", self.state.step)
        upcoming = self.state.step + 1
        measure = upcoming % self.cfg.log_every == 0 or upcoming == self.cfg.steps
        self.health.begin_step(self.state.step, measure=measure)
        if self.cfg.update == "simultaneous":
            ctx, d_terms, g_terms, found = self.simultaneous_step()
            if found.apply:
                found = self.health.settle() or found
            if not found.apply:
                return StepResult({}, {}, None, None, stopped=found)
            assert ctx.d_real is not None and ctx.d_fake is not None
            return StepResult(d_terms, g_terms, ctx.d_real.detach(), ctx.d_fake.detach())
        for _ in range(self.cfg.n_critic):
            ctx, d_terms, found = self.d_step()
            if not found.apply:
                return StepResult({}, {}, None, None, stopped=found)
        g_terms, found = self.g_step(ctx.real)
        if found.apply:
            found = self.health.settle() or found  # the G update's deferred values, read now
        if not found.apply:
            return StepResult({}, {}, None, None, stopped=found)
        assert ctx.d_real is not None and ctx.d_fake is not None
        return StepResult(d_terms, g_terms, ctx.d_real.detach(), ctx.d_fake.detach())

    def start(self) -> None:
        """Strategies' ``on_start`` (which may create ``state.g_ema``), the checkpoint's EMA weights into it, then the
        callbacks' ``on_start``.

        :meth:`fit` and :meth:`evaluate` call it; call it yourself to use a loaded trainer without training (e.g. to
        score G's EMA copy). Calling it again does nothing.
        """
        if self._started:
            return
        for s in self.strategies:
            s.on_start(self.state)
        if self._pending_g_ema is not None and self.state.g_ema is not None:  # created by a strategy's on_start
            self.state.g_ema.load_state_dict(self._pending_g_ema)
        self._pending_g_ema = None
        for c in self.callbacks:
            c.on_start(self)
        self._started = True

    def callback(self, name: str) -> Callback:
        """The callback called ``name`` (e.g. ``collapse_risk``).

        Raises:
            KeyError: no callback has that name (naming those there are).
        """
        for c in self.callbacks:
            if c.name == name:
                return c
        raise KeyError(f"no callback named {name!r}; this trainer has {[c.name for c in self.callbacks]}")

    def fit(self) -> dict[str, Any]:
        """Train until ``cfg.steps`` generator updates; write checkpoints and ``metrics.json``; return it.

        Raises:
            TrainingHealthError: a gradient norm above ``monitor.hard_limit`` (a checkpoint is saved first), or
                more than ``monitor.max_recoveries`` non-finite updates.
            TrainingInterrupted: SIGINT or SIGTERM arrived; the step under way finished and a checkpoint
                ``checkpoints/step_<step>.pt`` was saved (:mod:`ganlab.trainer.interrupt`).
        """
        with GracefulStop() as stop:  # a signal while starting (the step-0 checkpoint) stops after the first step
            self.start()
            if self._pending_after_eval is not None:  # resumed from a last.pt: the strategies' reaction to its scores
                self._react_to_eval(self._pending_after_eval)
            if self.health.cfg.nan_guard and self.good_checkpoint is None:  # something to roll back to
                self.save(self.run_dir / layout.CHECKPOINT_DIR / layout.step_checkpoint_name(self.state.step))
            start_step, t0 = self.state.step, time.perf_counter()
            with Progress(self.cfg.steps, start_step, enabled=self.cfg.progress and self.dist.main) as progress:
                self._train_until_done(progress, stop)
        elapsed = time.perf_counter() - t0
        return self.finish(start_step, elapsed)

    def _train_until_done(self, progress: Progress, stop: GracefulStop) -> None:
        """The loop of :meth:`fit`: steps, logging, evaluations and checkpoints until ``cfg.steps``; ``progress``
        says what it is doing (evaluating, checkpointing, rolling back) before it starts doing it."""
        # the callbacks that observe steps (most observe evaluations only): no call per step to a no-op hook
        stepping = [c for c in self.callbacks if type(c).after_step is not Callback.after_step]
        while self.state.step < self.cfg.steps:
            out = self.train_step()
            if out.stopped is not None and out.stopped.over_limit:
                with progress.status("saving a checkpoint, then stopping"):
                    self._stop_at_hard_limit(out.stopped)
            if out.stopped is not None:  # a non-finite update: roll back and go on
                with progress.status("rolling back"):
                    self._recover(out.stopped)
                progress.set_step(self.state.step)
                continue
            self.state.step += 1
            step = self.state.step
            strategy_scalars = {f"strategy/{s.name}/{k}": v
                                for s in self.strategies for k, v in s.after_step(self.state).items()}
            monitor = self.health.after_step(step)  # monitored steps only
            if monitor:
                self.stats.report_all(monitor)
            for c in stepping:
                c.after_step(self, out, monitor)
            if step % self.cfg.log_every == 0 or step == self.cfg.steps:
                self.stats.report_all(self._step_scalars(out, strategy_scalars, progress))
            if self.stats.pending:  # most steps report nothing
                self.publish(step)
            if step % self.cfg.eval_every == 0 or step == self.cfg.steps:
                with progress.status("evaluating"):
                    progress.set_scores(self.evaluate())
            if step % self.cfg.ckpt_every == 0:
                with progress.status("checkpointing"):
                    self.save(self.run_dir / layout.CHECKPOINT_DIR / layout.step_checkpoint_name(step))
            progress.update(1)
            if self.dist.any(stop.signum is not None):  # every rank stops at the same step
                with progress.status("saving a checkpoint, then stopping"):
                    self._stop_on_signal(stop.signum if stop.signum is not None else signal.SIGTERM)

    def _step_scalars(self, out: StepResult, extra: dict[str, float], progress: Progress) -> dict[str, float]:
        """The scalars of a logged step (losses, D outputs, gradient norms, lrs, ``extra``); the losses shown in
        ``progress``."""
        assert out.d_real is not None and out.d_fake is not None
        scalars = {f"loss/D/{k}": float(v.detach()) for k, v in out.d_terms.items()}
        scalars |= {f"loss/G/{k}": float(v.detach()) for k, v in out.g_terms.items()}
        scalars |= {"D/real": float(out.d_real.mean()), "D/fake": float(out.d_fake.mean()),
                    "grad_norm/D": self.health.last["D"].grad_norm, "grad_norm/G": self.health.last["G"].grad_norm,
                    **extra}
        if self._class_accuracy is not None:  # AC-GAN: D's auxiliary classifier on the latest real batch
            scalars["D/class_accuracy_real"] = float(self._class_accuracy)
        scalars |= {f"lr/{net}": lrs[0] for net, lrs in self.lr.applied.items()}  # this step's (first group's)
        progress.set_losses(D=scalars["loss/D/adv"], G=scalars["loss/G/adv"])
        return scalars

    def evaluate(self) -> dict[str, float]:
        """Score the generator, report, save last.pt, then let the strategies react (``after_eval``).

        1. Score: the scored generator (:func:`ganlab.trainer.state.scored_generator`: the EMA copy, batch-norm
           statistics recomputed, when the run keeps one, else G), its sample grid, then the callbacks'
           ``after_eval`` (collapse alarm, detector), all with the global RNG isolated.
        2. Report: scores as ``diversity/<key>``, the callbacks' values and the peak memory as ``health/<key>``;
           :meth:`publish` writes them to TensorBoard and as one ``metrics.jsonl`` line.
        3. Save last.pt: the G that was scored, with its scores (a reaction may change G: a rollback), and the
           reaction's input, which :meth:`fit` replays when a run resumes from it.
        4. React: the strategies' ``after_eval`` on the scores and health values.
        """
        self.start()
        step = self.state.step
        with self.isolated_rng():
            G = scored_generator(self.state)
            result = self.evaluator(G, self.data)
            if self.dist.main:
                grid = self.run_dir / layout.SAMPLES_DIR / layout.step_sample_name(step)
                visuals.log_samples(G, result.samples, self.data, self.fixed_z, self.logger, grid, step,
                                    nrow=self.grid_nrow,
                                    rows=f"rows: classes 0-{self.num_classes - 1}" if self.num_classes else "")
            self.stats.report_all(result.scores, prefix=SCORES)
            for c in self.callbacks:
                c.after_eval(self, G, result)
        scores = result.scores
        if scores.get(NONFINITE_KEY, 0.0) > 0:
            self.alerts.emit("nonfinite_samples", step, f"{scores[NONFINITE_KEY]:.0f} of "
                             f"{self.evaluator.num_samples} generated samples contain NaN or Inf; the scores "
                             "are those of the finite ones", count=scores[NONFINITE_KEY])
        self.stats.report(HEALTH + "peak_memory_mib", peak_memory_mib(self.device))
        health = self.stats.under(HEALTH)
        for name, (counts, edges) in result.histograms.items():
            self.logger.histogram_counts(f"{SCORES}{name}", counts, edges, step)
        self.last_scores, self.last_result = scores, result
        self.publish(step, record=True)
        reaction = self.dist.broadcast(scores | health)  # every rank's strategies react to rank 0's values
        self.save(layout.last_checkpoint(self.run_dir), after_eval=reaction)
        self._react_to_eval(reaction)
        self.logger.flush()
        return scores

    def publish(self, step: int, record: bool = False) -> None:
        """Write the scalars reported to :attr:`stats` since the last call: to the logger (TensorBoard) at ``step``,
        and, when ``record`` (an evaluation), as one ``metrics.jsonl`` line ``{"step", "scores", "health"}`` (the
        ``diversity/`` and ``health/`` values, prefixes cut off; rank 0 only). The one place scalars are written."""
        values = self.stats.take()
        if values:
            self.logger.scalars(values, step)
        if record and self.dist.main:
            n, h = len(SCORES), len(HEALTH)
            self._append_jsonl({"step": step, "scores": {k[n:]: v for k, v in values.items() if k.startswith(SCORES)},
                                "health": {k[h:]: v for k, v in values.items() if k.startswith(HEALTH)}})

    def _react_to_eval(self, scores: dict[str, float]) -> None:
        """Strategies' ``after_eval`` on ``scores`` (scores and health values); their scalars published."""
        self._pending_after_eval = None
        for s in self.strategies:
            self.stats.report_all(s.after_eval(self.state, scores), prefix=f"strategy/{s.name}/")
        self.publish(self.state.step)

    @contextlib.contextmanager
    def isolated_rng(self) -> Iterator[None]:
        """Global RNG draws inside (evaluation, projector, a callback's forward passes) leave the training streams
        untouched."""
        with torch.random.fork_rng(devices=[self.device] if self.device.type == "cuda" else []):
            yield

    def _log_text(self, tag: str, message: str) -> None:
        log.info("[%s] step %d: %s", tag, self.state.step, message)
        self.logger.text(tag, message, self.state.step)

    def _drop_records_after(self, step: int) -> None:
        """Resuming an older checkpoint in this folder: its ``metrics.jsonl`` lines past ``step`` are rewritten by
        the resumed run, so they go (atomically; the others stay)."""
        path = self.run_dir / layout.CURVE_FILE
        if not self.dist.main or not path.is_file():
            return
        records = read_jsonl(path)  # a torn line (a run killed mid-write) is dropped with a warning
        kept = [r for r in records if r["step"] <= step]
        if len(kept) != len(records) or len(path.read_text().splitlines()) != len(records):
            rewrite_jsonl(path, kept)
            log.info("metrics.jsonl: dropped %d evaluation(s) after step %d (the resumed run redoes them)",
                     len(records) - len(kept), step)

    def _append_jsonl(self, record: dict[str, Any]) -> None:
        append_jsonl(self.run_dir / layout.CURVE_FILE, record)

    def finish(self, start_step: int, elapsed: float) -> dict[str, Any]:
        """End of training: ``metrics.json`` (the latest scores, the callbacks' summaries such as the verdict, the
        step this attempt started from (``start_step``: a resumed run's checkpoint step, else 0), the speed over
        ``state.step - start_step`` steps in ``elapsed`` seconds; NaN when it trained none), the projector and the
        TensorBoard run summary, the logger closed (rank 0 only writes). Returns ``metrics.json``'s content."""
        steps_done = self.state.step - start_step
        metrics = {"step": self.state.step, "start_step": start_step, "scores": self.last_scores,
                   "score_settings": self.evaluator.settings(self.data),  # e.g. PRDC's boundary convention
                   "embedder": self.evaluator.embedder.record()}  # what the scores' features came from
        for c in self.callbacks:
            metrics |= c.summary(self)  # the detector's verdict
        metrics |= {"dataset": self.data.name, "strategies": [s.name for s in self.strategies], "seed": self.seed,
                    "steps_per_s": steps_done / elapsed if elapsed > 0 and steps_done > 0 else math.nan,  # none: NaN
                    "wall_time_s": elapsed,
                    "provenance": provenance(self.device, self.cfg.precision)}
        if not self.dist.main:  # only rank 0 writes
            self.logger.close()
            return metrics
        ckpt_io.atomic_write_text(self.run_dir / layout.METRICS_FILE, json.dumps(metrics, indent=2))
        if self.last_result is not None and self.cfg.projector:
            with self.isolated_rng():
                mat, meta, header, sprites = self.evaluator.projector(self.last_result, self.data)
            self.logger.embedding(mat, meta, header, sprites, tag="real_vs_generated", step=self.state.step)
        log_run_summary(self.logger, metrics, self)  # TensorBoard: HParams row, custom-scalars layout
        self.logger.close()
        return metrics

    # ---------------------------------------------------------------- when the monitor's findings stop an update
    def _recover(self, found: UpdateFindings) -> None:
        """The NaN/Inf guard's rollback to :attr:`good_checkpoint` (``recovery.recover_from_nan``)."""
        self.health.recoveries += 1
        recovery.recover_from_nan(found, state=self.state, batch=self.last_batch, recoveries=self.health.recoveries,
                                  good_checkpoint=self.good_checkpoint, restore=self._restore,
                                  monitor=self.health.cfg, dtype=self.amp.dtype,
                                  run_dir=self.run_dir, alerts=self.alerts, logger=self.logger,
                                  rank=self.dist.rank if self.dist.active else None)

    def _restore(self, ckpt: dict[str, Any]) -> None:
        """Mid-run rollback: the training state of ``ckpt``, then the strategies' reaction to its scores (a
        last.pt holds the state before them), so the state is the one the run had after that checkpoint."""
        self._load_training_state(ckpt)
        if ckpt.get("after_eval") is not None:
            self._react_to_eval(ckpt["after_eval"])

    def _stop_on_signal(self, signum: int) -> None:
        """Save ``checkpoints/step_<step>.pt`` (unless this step's is there), close the logger and raise."""
        path = self.run_dir / layout.CHECKPOINT_DIR / layout.step_checkpoint_name(self.state.step)
        if not (self.state.step % self.cfg.ckpt_every == 0 and path.is_file()):
            self.save(path)
        self.logger.close()
        raise TrainingInterrupted(signum, path, self.state.step)

    def _stop_at_hard_limit(self, found: UpdateFindings) -> None:
        """Save a checkpoint (the update was not applied), then alert and raise TrainingHealthError."""
        path = self.run_dir / layout.CHECKPOINT_DIR / layout.hard_limit_checkpoint_name(self.state.step)
        self.save(path)
        recovery.stop_at_hard_limit(found, step=self.state.step, steps=self.cfg.steps,
                                    limit=float(self.health.cfg.hard_limit), checkpoint=path, alerts=self.alerts,
                                    logger=self.logger)
