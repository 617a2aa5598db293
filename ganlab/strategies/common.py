"""Small helpers shared by several strategies (not strategies themselves)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor, nn

from ganlab.strategies.spectral_norm import apply_spectral_norm

if TYPE_CHECKING:
    from ganlab.strategies.base import Strategy


def head_owner(discriminator: nn.Module, strategy: str) -> nn.Module:
    """The module holding ``features``, ``head`` and ``feature_dim``: D itself, or the D that wrappers hold as
    ``inner`` (wrappers nest: an augmentation around PacGAN's packing around D).

    Raises:
        ValueError: no such module (the model does not follow :class:`ganlab.models.Discriminator`).
    """
    d = discriminator
    while not all(hasattr(d, a) for a in ("features", "head", "feature_dim")) and hasattr(d, "inner"):
        d = d.inner
    if not all(hasattr(d, a) for a in ("features", "head", "feature_dim")):
        raise ValueError(f"strategy {strategy!r} needs a discriminator with features, head and feature_dim "
                         f"(ganlab.models.Discriminator); got {type(d).__name__}")
    return d


def install_head(d: nn.Module, head: nn.Module) -> None:
    """Set ``d.head = head`` (``d`` from :func:`head_owner`). When the model normalises its own layers
    (``d.spectral_norm`` is True, e.g. ``model.discriminator.spectral_norm=true``), the new head's Linear and Conv
    weights get spectral norm too (Miyato et al. 2018, eq. 8), so every layer of D stays normalised."""
    if getattr(d, "spectral_norm", False):
        apply_spectral_norm(head)
    d.head = head


class LRAdjust:
    """An optimiser factory that sets and/or scales every param group's lr right after building the optimiser, and
    raises its Adam betas to a power.

    Final lr = (``lr`` if given, else the lr the wrapped factory chose) * ``factor``; final betas = the betas the
    factory chose, each ** ``betas_power`` (groups without betas, e.g. SGD's, keep what they have). :meth:`wrap` merges
    with an ``LRAdjust`` already present (also one under a ``functools.partial``, as made by
    :func:`~ganlab.strategies.base.with_optim_kwargs`), so ``ttur`` (sets) and ``d_lr_damping`` (scales) give
    the same result in either order, and both win over lrs passed as keyword arguments (``wgan_gp``). On a
    resume the optimiser's saved param groups replace these, so a factor is never applied twice.

    Args:
        factory: ``params -> torch.optim.Optimizer``.
        lr: absolute learning rate (> 0), or None to keep the factory's.
        factor: multiplier (> 0).
        betas_power: exponent of the betas (> 0; lazy regularisation's c = k / (k + 1), Karras et al. 2020,
            StyleGAN2, Appendix B); merged multiplicatively like ``factor``.

    Raises:
        ValueError: non-positive lr, factor or betas_power.
    """

    def __init__(self, factory: Callable[..., torch.optim.Optimizer], lr: float | None = None,
                 factor: float = 1.0, betas_power: float = 1.0) -> None:
        if not factor > 0 or (lr is not None and not lr > 0) or not betas_power > 0:
            raise ValueError(f"lr, lr factor and betas power must be positive, got lr={lr}, factor={factor}, "
                             f"betas_power={betas_power}")
        self.factory, self.lr, self.factor, self.betas_power = factory, lr, float(factor), float(betas_power)

    @classmethod
    def wrap(cls, factory: Callable[..., torch.optim.Optimizer], lr: float | None = None,
             factor: float = 1.0, betas_power: float = 1.0) -> LRAdjust:
        """``factory`` with its lr set to ``lr`` (when given) and multiplied by ``factor``, its betas raised to
        ``betas_power``, merged as described."""
        inner, kwargs = factory, {}
        if isinstance(factory, functools.partial) and isinstance(factory.func, LRAdjust):
            inner, kwargs = factory.func, dict(factory.keywords)
        if isinstance(inner, LRAdjust):
            base = functools.partial(inner.factory, **kwargs) if kwargs else inner.factory
            return cls(base, lr if lr is not None else inner.lr, inner.factor * factor,
                       inner.betas_power * betas_power)
        return cls(factory, lr, factor, betas_power)

    def __call__(self, params: Iterable[Any], *args: Any, **kwargs: Any) -> torch.optim.Optimizer:
        opt = self.factory(params, *args, **kwargs)
        for group in opt.param_groups:
            group["lr"] = (self.lr if self.lr is not None else group["lr"]) * self.factor
            if self.betas_power != 1.0 and "betas" in group:
                group["betas"] = tuple(float(b) ** self.betas_power for b in group["betas"])
        return opt

    def __repr__(self) -> str:
        return f"LRAdjust({self.factory!r}, lr={self.lr}, factor={self.factor}, betas_power={self.betas_power})"


def input_gradient(critic: Callable[[Tensor], Tensor], x: Tensor) -> Tensor:
    """grad_x sum_i critic(x)_i, in float32 with autocast off, differentiable (``create_graph=True``).

    The gradient penalties (WGAN-GP, R1) use it. Under ``trainer.precision=fp16`` the usual AMP recipe
    multiplies the output by the GradScaler's scale before ``autograd.grad``; at the initial scale 2^16 that
    upstream gradient is already above fp16's largest value (65504), so the penalty came out NaN and the
    update was skipped. Here the critic's forward and both backward passes run in float32 (the parameters
    are float32 under autocast), so the penalty equals its float32 value at every loss scale; the outer
    (scaled) backward through it is float32 too. The cost: the penalty's pass runs at float32 speed.

    Args:
        critic: maps (B, *shape) to scores, e.g. (B,) (or (B/m,) for a packing critic).
        x: (B, *shape) inputs; detached here, cast to float32 (float64 stays float64).

    Returns:
        (B, *shape) gradient in ``x``'s (promoted) dtype, attached to the critic's parameters.
    """
    x = x.detach().to(torch.promote_types(x.dtype, torch.float32)).requires_grad_(True)
    with torch.autocast(x.device.type, enabled=False):
        out = critic(x)
        (grad,) = torch.autograd.grad(out.sum(), x, create_graph=True)
    return grad


class AugmentedDiscriminator(nn.Module):
    """D behind a differentiable augmentation: ``x -> inner(augment(x))``, with fresh random draws at every call.

    Every call of D (real and fake batches in the D step, the fakes in the G step, penalties such as R1 and
    WGAN-GP) goes through ``augment``, so G's gradient flows through the augmented fakes and D never sees an
    un-augmented image (Zhao et al. 2020, Sec. 3; Karras et al. 2020, Sec. 2). ``augment`` is a plain callable,
    not a submodule, so D's ``state_dict`` holds D's weights only (under ``inner.``); a strategy that adapts the
    augmentation checkpoints it in its own ``state_dict``.

    Args:
        inner: the discriminator, (B, C, H, W) -> (B,) scores (or a wrapper such as PacGAN's packing).
        augment: (B, C, H, W) -> (B, C, H, W), differentiable.
        strategy: the name of the strategy that installed it (for error messages).
    """

    def __init__(self, inner: nn.Module, augment: Callable[[Tensor], Tensor], strategy: str) -> None:
        super().__init__()
        self.inner, self.augment, self.strategy = inner, augment, strategy

    def forward(self, x: Tensor, *labels: Tensor, **kwargs: Any) -> Any:
        """Score augmented ``x``; ``labels`` (a class-conditional D's classes (B,)) and keyword arguments
        (``class_logits=True`` of an AC-GAN head) pass through unchanged."""
        return self.inner(self.augment(x), *labels, **kwargs)


def augment_discriminator(spec: Any, augment: Callable[[Tensor], Tensor], strategy: str) -> None:
    """Put D of ``spec`` (a :class:`~ganlab.strategies.base.GANSpec`) behind ``augment``, after checking the data.

    Raises:
        ValueError: the samples are not images (C, H, W) (2-D points: no colour, translation or cutout applies), or
            D is already behind another strategy's augmentation; each message says what to select instead.
    """
    shape = tuple(spec.data_shape)
    if len(shape) != 3:
        raise ValueError(f"strategy {strategy} augments images (C, H, W), but the data set's samples have shape "
                         f"{shape}; its colour, translation and cutout do not apply to points. Use an image data set "
                         f"with an image model (experiment=fashion_mnist_dcgan, or dataset=digits model=dcgan "
                         f"dataset.image_size=8), or remove {strategy} from strategy=[...]")
    if isinstance(spec.discriminator, AugmentedDiscriminator):
        raise ValueError(f"strategies {spec.discriminator.strategy!r} and {strategy!r} both augment D's inputs; "
                         "select only one of them in strategy=[...]")
    spec.discriminator = AugmentedDiscriminator(spec.discriminator, augment, strategy)


def sample_mixing_layers(discriminator: nn.Module) -> list[tuple[str, str | None]]:
    """The layers of D whose output for one sample depends on the other samples of its forward pass, as
    ``(name, strategy)`` pairs: every batch-norm layer (D trains in training mode, where batch norm normalises by
    the batch's statistics; ``strategy`` None) and every module whose ``mixes_samples`` attribute names the strategy
    that installed it (minibatch discrimination's and minibatch stddev's heads, where the mixing is the method).

    PacGAN's packing is not listed: a pack of m samples is the unit D scores, and no pack depends on another, so a
    per-score penalty stays per pack.
    """
    out: list[tuple[str, str | None]] = []
    for name, m in discriminator.named_modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            out.append((name or type(m).__name__, None))
        elif isinstance(getattr(m, "mixes_samples", None), str):
            out.append((name or type(m).__name__, m.mixes_samples))
    return out


def check_per_sample_critic(discriminator: nn.Module, strategies: Iterable[Strategy]) -> None:
    """Refuse, before training, a D that mixes samples (:func:`sample_mixing_layers`) when a selected strategy
    needs D to score each sample independently of the others (its ``per_sample_critic`` gives the reason, e.g. a
    gradient penalty that differentiates each sample's score by that sample: with batch norm in D each sample's
    term depends on the rest of the batch, Gulrajani et al. 2017, Sec. 4). The one rule of every such strategy:
    each calls it in ``configure`` and the builder once more after every strategy has configured D (a head installed
    by a later strategy counts too).

    Raises:
        ValueError: naming the strategy, the mixing layers and the way out (a D without batch norm:
            ``model.discriminator.norm=layer`` or ``none``; dropping the strategy that installed a mixing head).
    """
    needs = [s for s in strategies if getattr(s, "per_sample_critic", None)]
    layers = sample_mixing_layers(discriminator) if needs else []
    if not layers:
        return
    s = needs[0]
    bn = [name for name, owner in layers if owner is None]
    heads = sorted({owner for _, owner in layers if owner is not None})
    found = ([f"batch norm ({', '.join(bn[:3])}{', ...' if len(bn) > 3 else ''})"] if bn else []) + \
        [f"the {h} head" for h in heads]
    fixes = (["use a D without batch norm (model.discriminator.norm=layer or model.discriminator.norm=none)"]
             if bn else []) + ([f"drop {' and '.join(heads)} from strategy=[...]"] if heads else [])
    raise ValueError(f"strategy {s.name}: {s.per_sample_critic}, but D's score of one sample depends on the other "
                     f"samples of its batch through {' and '.join(found)}; {', and '.join(fixes)}, or drop {s.name}")
