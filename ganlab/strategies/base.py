"""The ``Strategy`` interface: how an anti-collapse method plugs into the training loop.

A strategy never sees an ``if strategy == ...`` in the loop. It acts only through these hooks, called in
this order (every hook has a no-op default, so a strategy overrides just what it needs). Each hook gets one
object that carries what it may read or change: ``spec`` before training, the live :class:`TrainState`
(``state``) once optimisers exist, and, inside an update, a :class:`StepContext` (``ctx``) whose
``ctx.state`` is that same TrainState.

1. ``configure(spec)`` once, after G and D are built and before optimisers exist: wrap or replace
   ``spec.generator`` / ``spec.discriminator`` (e.g. a new ``discriminator.head``), replace ``spec.loss``,
   change ``spec.g_optim`` / ``spec.d_optim`` (``functools.partial`` optimiser factories; re-wrap with
   ``functools.partial(spec.d_optim, lr=...)``) or ``spec.n_critic``.
2. ``on_start(state)`` once, when optimisers exist (after a resume, after ``load_state_dict``).
3. Every discriminator update: ``d_terms(ctx)`` returns named scalar loss terms added to the adversarial
   loss; after the update is applied, ``after_d_step(ctx)`` observes it (e.g. D's outputs ``ctx.d_real``,
   ``ctx.d_fake``). Then, when a strategy's ``d_reg_terms(ctx)`` returns terms (lazy regularisation, as
   StyleGAN2's separate regularisation phase), a second D update on the same real batch minimises their sum alone.
   Every generator update: ``g_discriminator(ctx, critic)`` may swap the function that
   scores the fakes (unrolled GANs score them with a look-ahead copy of D; strategies chain, each receiving
   the previous result, the first one D; ``ctx.d_fake`` is still None), then ``g_terms(ctx)`` returns G's
   extra terms. The loop sums the terms and logs each as ``loss/D/<term>`` / ``loss/G/<term>``; two
   strategies returning the same term name is an error.
4. ``after_step(state)`` after each generator update (``state.step`` already counts it) and
   ``after_eval(state, scores)`` after each evaluation (``scores``: the dict written to ``metrics.jsonl``,
   with the health values). Both return scalars to log under ``strategy/<name>/<key>``.
5. ``state_dict()`` / ``load_state_dict(d)``: whatever the strategy must carry across a resume. Only
   tensors, numbers, strings, lists and dicts (checkpoints load with ``weights_only=True``).

Class attributes (facts about the method, never set per instance): ``name``, and ``replaces``, the parts of
the GAN a strategy takes over, from the fixed set :class:`Part` (checked when the class is created): two
selected strategies that replace the same part are refused before training by :func:`check_compatible`; and
``refuses``, why the method cannot train in a :class:`Mode` (``trainer.distributed``, ``model.conditional``,
``trainer.ensemble``, ``trainer.update=simultaneous``), one reason per mode, read by the one checker
:func:`check_modes` before training starts.
``per_sample_critic``: why the method needs D to score each sample independently of the others (a penalty that
differentiates D per sample), or None; such a strategy is refused with a D that mixes samples (batch norm,
minibatch-statistics heads) by the one rule :func:`ganlab.strategies.common.check_per_sample_critic`.
``double_backward`` is a property (it may depend on the instance's settings): True when a loss term
differentiates a gradient, which ``torch.compile`` cannot.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from ganlab.losses import AdversarialLoss
from ganlab.lr import LRRule
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
        batch_size: D scores per update (``trainer.batch_size``); None when unknown (a spec built outside
            :func:`ganlab.run.build.build_trainer`).
        accumulate: micro-batches per update (``trainer.accumulate``); see :attr:`scores_per_pass`.
        g_groups: G's forward passes per batch of codes in training (default 1). With g > 1 the codes are cut into
            g interleaved groups (codes j, j + g, j + 2g, ...) and G is applied to each, so its batch-norm statistics
            are per group; PacGAN's code applies G once per pack column this way (``strategy.pacgan.g_per_column``).
        score_direction: the direction of a score by its logged name, True when higher is better, False when lower
            is, None when neither or unknown (:func:`ganlab.metrics.directions.higher_is_better`, set by
            :func:`ganlab.run.build.build_trainer`); a strategy that keeps a best score reads it. None: not given.
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
    batch_size: int | None = None
    accumulate: int = 1
    g_groups: int = 1
    score_direction: Callable[[str], bool | None] | None = None

    @property
    def scores_per_pass(self) -> int | None:
        """D scores per forward pass, ``batch_size / accumulate`` (None when unknown). A strategy whose D mixes the
        samples of a pass (minibatch stddev groups) checks it in ``configure``."""
        return None if self.batch_size is None else self.batch_size // self.accumulate


@dataclass
class TrainState:
    """The live training objects, handed to ``on_start``, ``after_step`` and ``after_eval``.

    Attributes:
        generator, discriminator: the networks being trained.
        opt_g, opt_d: their optimisers.
        step: number of generator updates done so far.
        g_ema: the exponential-moving-average copy of G once a strategy turned it on (:meth:`keep_ema`), else
            None. The scored generator then (:func:`ganlab.trainer.state.scored_generator`, which recomputes its
            batch-norm statistics).
        log_text: ``log_text(tag, message)`` writes an event to the log and TensorBoard.
        extra: free slots strategies may share (e.g. the latest eval scores).
        lr: the run's learning-rate rule (:class:`ganlab.lr.LRRule`): a strategy that changes an lr at run time
            sets a factor there (``state.lr.set_factor("D", self.name, f)``) instead of writing the optimiser's
            param groups; a TrainState built without one gets a constant rule over ``opt_g`` and ``opt_d``.
        loss: the adversarial loss in use (after every strategy's ``configure``); None outside a trainer.
        g_ema_stats: how ``g_ema``'s batch-norm statistics are recomputed (set by the strategy that keeps it;
            None: the defaults of :class:`~ganlab.models.standing_stats.StandingStats`).
        draw_uniform: where :meth:`StepContext.uniform` draws per-sample numbers from, ``(n, dtype, device) ->
            (n,)``; None: the global RNG (a single run). The ensemble (:mod:`ganlab.run.ensemble`) sets it so that each
            member's rows come from that member's own stream.
    """

    generator: nn.Module
    discriminator: nn.Module
    opt_g: torch.optim.Optimizer
    opt_d: torch.optim.Optimizer
    step: int = 0
    g_ema: nn.Module | None = None
    log_text: Callable[[str, str], None] = lambda tag, msg: None
    extra: dict[str, Any] = field(default_factory=dict)
    lr: LRRule | None = None
    loss: AdversarialLoss | None = None
    g_ema_stats: StandingStats | None = None
    draw_uniform: Callable[[int, torch.dtype, torch.device], Tensor] | None = None

    def __post_init__(self) -> None:
        if self.lr is None:
            self.lr = LRRule({"G": self.opt_g, "D": self.opt_d}, None, total_steps=1)

    def keep_ema(self, stats: StandingStats | None = None) -> nn.Module:
        """Turn on the EMA copy of G: ``g_ema`` becomes a deep copy of ``generator`` without gradients (unless the
        run keeps one already, e.g. a stacked copy), recalibrated with ``stats`` before it is scored; returned.
        Whoever turns it on updates it (:func:`ganlab.strategies.ema.ema_update`); a checkpoint's ``g_ema`` is
        loaded into it after the strategies' ``on_start``."""
        if self.g_ema is None:
            self.g_ema = copy.deepcopy(self.generator).requires_grad_(False)
        self.g_ema_stats = stats
        return self.g_ema


@dataclass
class StepContext:
    """One D or G update, handed to ``d_terms``, ``after_d_step``, ``g_discriminator`` and ``g_terms``.

    Attributes:
        state: the live training state (networks, optimisers, step, EMA copy, loss...).
        real: (B, *data_shape) real batch.
        fake: (B, *data_shape) generated batch; detached from G in the D step, attached in the G step.
        z: (B, z_dim) latent codes that made ``fake``.
        d_real: (B,) D outputs on ``real`` (in the G step: None; the G step does not score real data).
        d_fake: (B,) D outputs on ``fake`` (float32); None in the G step until the fakes are scored, i.e.
            during ``g_discriminator``.
        labels: (B,) int64 classes of ``real`` and of ``fake`` (the fakes are made for the real batch's classes)
            when the model is class-conditional (``model.conditional=true``), else None. Score samples of this
            update with :attr:`critic`, which passes them to D.

    A term built from ``autograd.grad`` (a gradient penalty) takes its gradient in float32 with autocast off
    (:func:`ganlab.strategies.common.input_gradient`), so fp16 loss scaling cannot overflow it.
    """

    state: TrainState
    real: Tensor
    fake: Tensor
    z: Tensor
    d_real: Tensor | None = None
    d_fake: Tensor | None = None
    labels: Tensor | None = None

    def uniform(self, n: int, dtype: torch.dtype, device: torch.device) -> Tensor:
        """(n,) numbers drawn U[0, 1) for the samples of this update (e.g. WGAN-GP's interpolation weights): from
        the global RNG (``torch.rand``), or from ``state.draw_uniform`` when it is set (the ensemble). Strategies
        draw per-sample randomness here, so that they run unchanged in a single run and vectorised in an ensemble."""
        draw = self.state.draw_uniform
        if draw is None:
            return torch.rand(n, device=device, dtype=dtype)
        return draw(n, dtype, device)

    @property
    def step(self) -> int:
        """Generator updates done before this one (``state.step``)."""
        return self.state.step

    @property
    def generator(self) -> nn.Module:
        return self.state.generator

    @property
    def discriminator(self) -> nn.Module:
        """D itself (its parameters are frozen in the G step), not a strategy's replacement critic."""
        return self.state.discriminator

    @property
    def critic(self) -> Callable[[Tensor], Tensor]:
        """D as a function of the samples, (B, *data_shape) -> (B,): D itself, or, for a class-conditional D, D
        with this update's :attr:`labels` bound (``x -> D(x, labels)``). Penalties that score samples of this
        batch (R1, WGAN-GP) call it."""
        d = self.state.discriminator
        if self.labels is None:
            return d
        labels = self.labels
        return lambda x: d(x, labels)


class Part(StrEnum):
    """The parts of the GAN a strategy may take over (``Strategy.replaces``); one owner each."""

    LOSS = "loss"                                # the adversarial loss (spec.loss)
    DISCRIMINATOR_HEAD = "discriminator head"    # D's last layer (discriminator.head)
    DISCRIMINATOR_INPUT = "discriminator input"  # what D's first layer sees (e.g. packed samples)
    G_DISCRIMINATOR = "g_discriminator"          # the function scoring the fakes in the G step
    G_EMA = "g_ema"                              # the averaged copy of G (state.g_ema)


class Mode(StrEnum):
    """Ways of training that a strategy may be unable to take part in (keys of ``Strategy.refuses``)."""

    DISTRIBUTED = "distributed"  # trainer.distributed=true: one process per device, each hook on its rank's slice
    CONDITIONAL = "conditional"  # model.conditional=true: G and D take class labels
    ENSEMBLE = "ensemble"        # trainer.ensemble=S: S seeds vectorised in one process (ganlab.run.ensemble)
    SIMULTANEOUS = "simultaneous"  # trainer.update=simultaneous: D's and G's gradients from one D pass on one batch


#: What a strategy that declares nothing about a mode gets: the ensemble is opt-in (a strategy runs there only once
#: it is shown to run vectorised, see :mod:`ganlab.run.ensemble.trainer`), the other modes opt-out.
DEFAULT_REFUSALS: Mapping[Mode, str | None] = MappingProxyType(
    {Mode.DISTRIBUTED: None, Mode.CONDITIONAL: None, Mode.ENSEMBLE: "it is not vectorised yet",
     Mode.SIMULTANEOUS: None})

#: Each mode's refusal: the strategy's name and reason, then the way out (``{fix}``; :data:`FIXES` by default).
MESSAGES = {Mode.DISTRIBUTED: "strategy {name} does not run under trainer.distributed=true: {reason}. {fix}",
            Mode.CONDITIONAL: "strategy {name!r} cannot train a class-conditional model: {reason}. {fix}",
            Mode.ENSEMBLE: "strategy {name} cannot run in trainer.ensemble: {reason}. {fix}",
            Mode.SIMULTANEOUS: "strategy {name} cannot train with trainer.update=simultaneous: {reason}. {fix}"}
FIXES = {Mode.DISTRIBUTED: "Train it in one process (trainer.distributed=false), or remove {name} from strategy=[...]",
         Mode.CONDITIONAL: "Drop it from strategy=[...], or set model.conditional=false",
         Mode.ENSEMBLE: "Drop trainer.ensemble and train the seeds as separate runs, or remove {name} from "
                        "strategy=[...]",
         Mode.SIMULTANEOUS: "Use trainer.update=alternating, or remove {name} from strategy=[...]"}


class Strategy:
    """Base class of anti-collapse strategies; every hook is a no-op here. See the module docstring.

    Raises:
        ValueError: at class creation, when ``replaces`` names something that is not a :class:`Part`, or
            ``refuses`` a mode that is not a :class:`Mode` or a reason that is not a string or None.
    """

    name: ClassVar[str] = "strategy"
    replaces: ClassVar[frozenset[Part]] = frozenset()
    #: Why the method cannot train in a :class:`Mode`, per mode: a reason (a clause after "cannot ...: ") refuses it
    #: there before anything is built (:func:`check_modes`), None lets it run. A class lists only the modes it
    #: changes; the others keep its parent's entries (from :data:`DEFAULT_REFUSALS` at the base).
    refuses: ClassVar[Mapping[Mode, str | None]] = DEFAULT_REFUSALS
    #: Why the method needs D's score of one sample to depend on that sample alone (a clause: "its penalty ..."), or
    #: None. Checked by :func:`ganlab.strategies.common.check_per_sample_critic` once every strategy has configured D.
    per_sample_critic: ClassVar[str | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        try:
            cls.replaces = frozenset(Part(p) for p in cls.replaces)
        except ValueError as err:
            raise ValueError(f"strategy {cls.name!r}: replaces={set(cls.replaces)} names an unknown part; "
                             f"allowed: {sorted(p.value for p in Part)}") from err
        cls.refuses = _merged_refusals(cls)

    @property
    def double_backward(self) -> bool:
        """True when a loss term differentiates a gradient (``torch.compile`` cannot); default False."""
        return False

    @property
    def regularisation_update(self) -> bool:
        """True when :meth:`d_reg_terms` may return terms (a separate D update; lazy regularisation); default
        False. The vectorised ensemble has no such update and refuses these settings."""
        return False

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

    def after_d_step(self, ctx: StepContext) -> None:
        """Observe a discriminator update once it is applied (``ctx`` as given to ``d_terms``)."""

    def d_reg_terms(self, ctx: StepContext) -> dict[str, Tensor]:
        """Terms of a separate regularisation update of D, right after the D update ``ctx`` describes (and its
        ``after_d_step``); {} (the default) when none is due. When any strategy returns terms, the loop runs one more
        D update (the same real micro-batches) minimising their sum alone: StyleGAN2's lazy regularisation phase
        (Karras et al. 2020, Appendix B). A strategy that uses it adjusts D's optimiser for the extra updates."""
        return {}

    def g_discriminator(self, ctx: StepContext, critic: Callable[[Tensor], Tensor]) -> Callable[[Tensor], Tensor]:
        """The function that scores ``ctx.fake`` (B, *data_shape) -> (B,) for G's adversarial term.

        Called in every generator step while D's parameters are frozen, before the fakes are scored
        (``ctx.d_fake`` is None); ``ctx.real`` is the last D step's batch and ``ctx.fake`` is attached to G.
        ``critic`` is D or the previous strategy's result; the default returns it unchanged. A strategy that
        overrides it declares :attr:`Part.G_DISCRIMINATOR` in ``replaces``.
        """
        return critic

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
    owner: dict[Part, str] = {}
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


def with_optim_kwargs(factory: Callable[..., torch.optim.Optimizer],
                      **kwargs: Any) -> Callable[..., torch.optim.Optimizer]:
    """Return ``factory`` with keyword arguments (e.g. ``lr``, ``betas``) overridden; None values are ignored."""
    kwargs = {k: v for k, v in kwargs.items() if v is not None}
    return functools.partial(factory, **kwargs) if kwargs else factory


def _merged_refusals(cls: type[Strategy]) -> Mapping[Mode, str | None]:
    """``cls.refuses``: its parent's entries updated with those ``cls`` declares, checked (see :class:`Strategy`)."""
    for legacy in ("ddp_refusal", "not_conditional"):
        if legacy in vars(cls):
            raise ValueError(f"strategy {cls.name!r}: {legacy} was replaced by refuses = {{Mode.<mode>: reason}} "
                             f"(modes: {', '.join(m.value for m in Mode)})")
    parent = next(b.refuses for b in cls.__mro__[1:] if "refuses" in vars(b))
    own = vars(cls).get("refuses", {})
    try:
        merged = {**parent, **{Mode(m): r for m, r in own.items()}}
    except ValueError as err:
        raise ValueError(f"strategy {cls.name!r}: refuses={dict(own)} names an unknown mode; allowed: "
                         f"{[m.value for m in Mode]}") from err
    bad = {m.value: r for m, r in merged.items() if r is not None and not (isinstance(r, str) and r)}
    if bad:
        raise ValueError(f"strategy {cls.name!r}: refuses={bad} must map each mode to a non-empty reason or None")
    return MappingProxyType(merged)


def check_modes(strategies: Iterable[Strategy | type[Strategy]], modes: Iterable[Mode | str],
                fixes: Mapping[Mode, str] | None = None) -> None:
    """Refuse, before anything is built, the first strategy that cannot train in one of ``modes``.

    Args:
        strategies: instances or classes (their ``refuses`` is a class attribute).
        modes: the modes the run uses, e.g. ``[Mode.DISTRIBUTED]``.
        fixes: a way out per mode in place of :data:`FIXES` (e.g. the ensemble's exact sweep); ``{name}`` is the
            strategy's name.

    Raises:
        ValueError: a strategy whose ``refuses`` gives a reason for one of ``modes``; the message (:data:`MESSAGES`)
            names the strategy, the mode, the reason and the way out. An unknown mode is a ValueError too.
    """
    modes = [Mode(m) for m in modes]
    for s in strategies:
        for mode in modes:
            reason = s.refuses[mode]
            if reason:
                fix = {**FIXES, **(fixes or {})}[mode].replace("{name}", s.name)  # any other brace stays as it is
                raise ValueError(MESSAGES[mode].format(name=s.name, reason=reason, fix=fix))


def check_distributed(strategies: Iterable[Strategy | type[Strategy]]) -> None:
    """``check_modes(strategies, [Mode.DISTRIBUTED])``: refuse what cannot run with one process per device.

    Raises:
        ValueError: as :func:`check_modes`.
    """
    check_modes(strategies, [Mode.DISTRIBUTED])


def check_conditional(strategies: Iterable[Strategy | type[Strategy]]) -> None:
    """``check_modes(strategies, [Mode.CONDITIONAL])``: refuse what cannot train a class-conditional model.

    Raises:
        ValueError: as :func:`check_modes`.
    """
    check_modes(strategies, [Mode.CONDITIONAL])
