"""PacGAN (Lin et al. 2018, "PacGAN: The power of two samples in GANs", Sec. 3).

D judges m samples at once: each update draws m x ``trainer.batch_size`` real and generated samples
(``GANSpec.samples_per_score``), the batch (m*B, C, ...) is cut into B packs of m consecutive samples,
concatenated along dim 1 into (B, m*C, ...), and a discriminator built with ``in_channels = m*C`` scores
each pack (all m real, or all m generated). D thus gives ``trainer.batch_size`` scores per batch, as in the
paper's code, for any m. Packing penalises collapse because m samples from a collapsed G look alike. The
paper uses m = 2..4 (PacGAN2, PacGAN3, PacGAN4).

``g_per_column=true`` applies G as PacGAN's code does: once per pack column (m passes of ``trainer.batch_size``
codes), so G's batch-norm statistics are per group of ``trainer.batch_size`` samples; by default G makes the m x B
fakes in one pass. Pack i holds sample i of every column. Together with ``trainer.update=simultaneous`` this is
their update scheme (docs/concepts/update_scheme.md).

Mixing the m samples of a pack is the method: the pack is the unit D scores, and no pack's score depends on another
pack, so the per-score penalties (``r1``, ``wgan_gp``) are allowed with it and taken per pack
(:func:`ganlab.strategies.common.check_per_sample_critic` does not count the packing as mixing).
"""

from __future__ import annotations

from torch import Tensor, nn
from torch.nn.utils import parametrize

from ganlab.strategies.base import GANSpec, Mode, Part, Strategy
from ganlab.strategies.common import AugmentedDiscriminator


def pack(x: Tensor, m: int) -> Tensor:
    """(B, C, ...) -> (B/m, m*C, ...): samples i*m .. i*m + m - 1 side by side along dim 1.

    Raises:
        ValueError: B is not divisible by m.
    """
    if x.shape[0] % m:
        raise ValueError(f"strategy pacgan packs m={m} samples, but the batch has {x.shape[0]} samples, not a "
                         f"multiple of m (the loop draws trainer.batch_size x m samples per update)")
    return x.reshape(x.shape[0] // m, m * x.shape[1], *x.shape[2:])


def _parametrized(module: nn.Module) -> int:
    """How many submodules of ``module`` carry a parametrization (e.g. spectral norm)."""
    return sum(parametrize.is_parametrized(m) for m in module.modules())


class PackedDiscriminator(nn.Module):
    """Wraps a D built for m*C input channels: (B, C, ...) -> pack -> (B/m,) scores.

    Args:
        inner: a :class:`ganlab.models.Discriminator` with ``in_channels = m*C``.
        m: pack size (>= 2).
    """

    def __init__(self, inner: nn.Module, m: int) -> None:
        super().__init__()
        self.inner, self.m = inner, int(m)

    def forward(self, x: Tensor) -> Tensor:
        return self.inner(pack(x, self.m))  # (B/m,)


class PacGAN(Strategy):
    """Rebuild D with m times the input channels and feed it packs of m samples.

    List pacgan before strategies that change D's layers (``spectral_norm``), since it rebuilds the
    features; a head already replaced (``minibatch_discrimination``, ``minibatch_stddev``) is kept.

    Args:
        m: pack size, 2..4 as in the paper (any m >= 2 is accepted).
        g_per_column: apply G once per pack column in training (``GANSpec.g_groups`` = m), as PacGAN's code; False:
            one pass over all m x B codes. Only G's batch norm (training mode) sees the difference.

    Raises:
        ValueError: m < 2, g_per_column not true or false, the discriminator cannot be rebuilt with
            ``in_channels``, or its layers were already changed by another strategy (or put behind an augmentation:
            list pacgan first).
    """

    name = "pacgan"
    replaces = frozenset({Part.DISCRIMINATOR_INPUT})
    refuses = {Mode.CONDITIONAL: "it packs m samples into one D input, and a projection D scores one class per input "
                                 "(the m samples of a pack may belong to different classes)",
               Mode.ENSEMBLE: None}

    def __init__(self, m: int = 2, g_per_column: bool = False) -> None:
        if int(m) < 2:
            raise ValueError(f"strategy.pacgan.m must be >= 2 (samples per pack), got {m}")
        if not isinstance(g_per_column, bool):
            raise ValueError(f"strategy.pacgan.g_per_column must be true or false, got {g_per_column!r}")
        self.m, self.g_per_column = int(m), g_per_column

    def configure(self, spec: GANSpec) -> None:
        old = spec.discriminator
        if isinstance(old, AugmentedDiscriminator):  # rebuilding D would drop the augmentation around it
            raise ValueError(f"strategy pacgan rebuilds D, which strategy {old.strategy} has already put behind its "
                             f"augmentation; list pacgan first: 'strategy=[pacgan,{old.strategy}]'")
        channels = getattr(old, "in_channels", None)
        if channels is None:
            raise ValueError(f"strategy pacgan needs a discriminator with in_channels; got {type(old).__name__}")
        inner = spec.build_discriminator(in_channels=self.m * int(channels))
        if _parametrized(old) > _parametrized(inner):  # the model's own (model.discriminator.spectral_norm) are kept
            raise ValueError("strategy pacgan rebuilds D's layers, which another strategy has already changed "
                             "(e.g. spectral_norm); list pacgan first: 'strategy=[pacgan,spectral_norm]'")
        if hasattr(old, "head"):
            inner.head = old.head  # keep a head another strategy installed (it sees features, not inputs)
        spec.discriminator = PackedDiscriminator(inner, self.m)
        spec.samples_per_score *= self.m  # D still scores trainer.batch_size packs per update
        if self.g_per_column:
            spec.g_groups = self.m  # G once per pack column: the loop's codes j, j + m, ... make column j

    def __repr__(self) -> str:
        return f"PacGAN(m={self.m}, g_per_column=True)" if self.g_per_column else f"PacGAN(m={self.m})"
