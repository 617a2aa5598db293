"""The ``Strategy`` interface: how an anti-collapse method plugs into the training loop.

A strategy never sees an ``if strategy == ...`` in the loop. It acts only through these hooks, called in
this order (every hook has a no-op default, so a strategy overrides just what it needs):

1. ``configure(spec)`` once, after G and D are built and before optimisers exist: wrap or replace
   ``spec.generator`` / ``spec.discriminator`` (e.g. a new ``discriminator.head``), replace ``spec.loss``,
   change ``spec.g_optim`` / ``spec.d_optim`` (``functools.partial`` optimiser factories; re-wrap with
   ``functools.partial(spec.d_optim, lr=...)``) or ``spec.n_critic``.
2. ``on_start(state)`` once, when optimisers exist (after a resume, after ``load_state_dict``).
3. ``d_terms(ctx)`` at every discriminator update and ``g_terms(ctx)`` at every generator update: named
   scalar loss terms added to the adversarial loss. The loop sums them and logs each as
   ``loss/D/<term>`` / ``loss/G/<term>``. Two strategies returning the same term name is an error.
   Before the generator's adversarial term, ``g_discriminator(discriminator, real, fake)`` may swap the
   function that scores the fakes in the G step (unrolled GANs score them with a look-ahead copy of D);
   strategies chain, each receiving the previous result. The default returns ``discriminator`` unchanged.
4. ``after_step(state)`` after each generator update (``state.step`` already counts it) and
   ``after_eval(state, scores)`` after each evaluation (``scores``: the dict written to ``metrics.jsonl``).
   Both return scalars to log under ``strategy/<name>/<key>``.
5. ``state_dict()`` / ``load_state_dict(d)``: whatever the strategy must carry across a resume. Only
   tensors, numbers, strings, lists and dicts (checkpoints load with ``weights_only=True``).

``replaces`` declares which part of the GAN a strategy takes over (e.g. ``{"loss"}``): two selected
strategies that replace the same part are refused before training by :func:`check_compatible`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from ganlab.losses import AdversarialLoss
from ganlab.models.standing_stats import StandingStats


@dataclass
class GANSpec:
    """What strategies may change in ``configure`` before training starts.

    Attributes:
        generator: G, maps (B, z_dim) to (B, *data_shape).
        discriminator: D, maps (B, *data_shape) to (B,) scores; see :class:`ganlab.models.Discriminator`.
        loss: the adversarial loss.
        g_optim, d_optim: optimiser factories ``params -> torch.optim.Optimizer``.
        n_critic: discriminator updates per generator update.
        data_shape: shape of one sample.
        build_discriminator: rebuilds D from its config with keyword overrides (e.g. ``in_channels=``).
        samples_per_score: samples D consumes per output score (PacGAN-m: m). Each update draws
            ``trainer.batch_size * samples_per_score`` real and generated samples, so D still gives
            ``trainer.batch_size`` scores per batch (as PacGAN's code does).
    """

    generator: nn.Module
    discriminator: nn.Module
    loss: AdversarialLoss
    g_optim: Callable[..., torch.optim.Optimizer]
    d_optim: Callable[..., torch.optim.Optimizer]
    n_critic: int
    data_shape: tuple[int, ...]
    build_discriminator: Callable[..., nn.Module]
    samples_per_score: int = 1


@dataclass
class TrainState:
    """The live training objects, handed to ``on_start``, ``after_step`` and ``after_eval``.

    Attributes:
        generator, discriminator: the networks being trained.
        opt_g, opt_d: their optimisers.
        step: number of generator updates done so far.
        g_ema: an exponential-moving-average copy of G when a strategy keeps one, else None. Score or sample
            it through :func:`ganlab.strategies.ema.scored_generator`, which recomputes its batch-norm statistics.
        log_text: ``log_text(tag, message)`` writes an event to the log and TensorBoard.
        extra: free slots strategies may share (e.g. the latest eval scores).
        lr_scale: the factor the NaN/Inf guard has applied to every learning rate (``monitor.nan_lr_factor``
            per recovery); a strategy that sets learning rates from stored base values multiplies them by it.
        g_ema_stats: how ``g_ema``'s batch-norm statistics are recomputed (set by the strategy that keeps it;
            None: the defaults of :class:`~ganlab.models.standing_stats.StandingStats`).
    """

    generator: nn.Module
    discriminator: nn.Module
    opt_g: torch.optim.Optimizer
    opt_d: torch.optim.Optimizer
    step: int = 0
    g_ema: nn.Module | None = None
    log_text: Callable[[str, str], None] = lambda tag, msg: None
    extra: dict[str, Any] = field(default_factory=dict)
    lr_scale: float = 1.0
    g_ema_stats: StandingStats | None = None


@dataclass
class StepContext:
    """Inputs of one D or G update, handed to ``d_terms`` / ``g_terms``.

    Attributes:
        step: generator updates done before this one.
        real: (B, *data_shape) real batch.
        fake: (B, *data_shape) generated batch; detached from G in the D step, attached in the G step.
        z: (B, z_dim) latent codes that made ``fake``.
        d_real: (B,) D outputs on ``real`` (in the G step: None; the G step does not score real data).
        d_fake: (B,) D outputs on ``fake``.
        generator, discriminator: the networks.
        grad_scale: the loss scale of this update (1.0 except under ``trainer.precision=fp16``). A term built
            from ``autograd.grad`` (a gradient penalty) multiplies the differentiated output by it and divides
            the gradient by it, so fp16 gradients neither underflow nor get the penalty wrong (PyTorch AMP,
            "Gradient penalty" recipe).
    """

    step: int
    real: Tensor
    fake: Tensor
    z: Tensor
    d_real: Tensor | None
    d_fake: Tensor
    generator: nn.Module
    discriminator: nn.Module
    grad_scale: float = 1.0


class Strategy:
    """Base class of anti-collapse strategies; every hook is a no-op here. See the module docstring."""

    name: ClassVar[str] = "strategy"
    replaces: ClassVar[frozenset[str]] = frozenset()
    double_backward: bool = False  # True when a loss term differentiates a gradient (torch.compile cannot)

    def configure(self, spec: GANSpec) -> None:
        """Change G, D, the loss, the optimiser factories or n_critic before training (in place on ``spec``)."""

    def on_start(self, state: TrainState) -> None:
        """Called once when the optimisers exist, before the first step (and after a resume)."""

    def d_terms(self, ctx: StepContext) -> dict[str, Tensor]:
        """Extra discriminator loss terms, each a scalar tensor to minimise."""
        return {}

    def g_terms(self, ctx: StepContext) -> dict[str, Tensor]:
        """Extra generator loss terms, each a scalar tensor to minimise."""
        return {}

    def g_discriminator(self, discriminator: Callable[[Tensor], Tensor], real: Tensor,
                        fake: Tensor) -> Callable[[Tensor], Tensor]:
        """The function that scores ``fake`` (B, *data_shape) for G's adversarial term; default: unchanged.

        Called in every generator step while D's parameters are frozen; ``real`` is the last D step's batch
        and ``fake`` is attached to G. A strategy that overrides it should declare ``"g_discriminator"`` in
        ``replaces``.
        """
        return discriminator

    def after_step(self, state: TrainState) -> dict[str, float]:
        """Act after each generator update; return scalars to log under ``strategy/<name>/``."""
        return {}

    def after_eval(self, state: TrainState, scores: dict[str, float]) -> dict[str, float]:
        """Act on the latest evaluation scores; return scalars to log under ``strategy/<name>/``."""
        return {}

    def state_dict(self) -> dict[str, Any]:
        """State to carry across a resume (tensors, numbers, strings, lists, dicts only)."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def check_compatible(strategies: Sequence[Strategy]) -> None:
    """Refuse combinations that cannot work together, before anything is built.

    Raises:
        ValueError: two strategies share a name, or both replace the same part of the GAN; the message
            names both strategies and the part.
    """
    owner: dict[str, str] = {}
    seen: set[str] = set()
    for s in strategies:
        if s.name in seen:
            raise ValueError(f"strategy {s.name!r} is selected twice; list each strategy once in strategy=[...]")
        seen.add(s.name)
        for part in sorted(s.replaces):
            if part in owner:
                raise ValueError(f"strategies {owner[part]!r} and {s.name!r} both replace the {part}; "
                                 "select only one of them in strategy=[...]")
            owner[part] = s.name


def with_optim_kwargs(factory: Callable[..., torch.optim.Optimizer], **kwargs: Any) -> Callable[..., torch.optim.Optimizer]:
    """Return ``factory`` with keyword arguments (e.g. ``lr``, ``betas``) overridden; None values are ignored."""
    kwargs = {k: v for k, v in kwargs.items() if v is not None}
    return functools.partial(factory, **kwargs) if kwargs else factory
