"""Minibatch standard deviation (Karras et al. 2018, "Progressive Growing of GANs", Sec. 3).

The batch is split into groups of ``group_size`` (4); for every feature, the standard deviation over the
group is computed (sqrt(Var + 1e-8)); these are averaged over all features into one scalar per group,
which is appended as one extra feature to every member of the group. Karras et al. tile it as an extra
feature *map* before the last convolution block; ganlab's head-based D appends it to the penultimate
features instead (``discriminator.head`` becomes Linear(A + 1, 1) over [f, s]), for MLP and DCGAN alike.
Groups are strided as in the official code: group g holds samples g, g + N/G, g + 2N/G, ...

Each sample's score depends on the other samples of its batch by design (the method), so the strategies whose term
needs a per-sample D (``r1``, ``wgan_gp``) refuse this head before training
(:func:`ganlab.strategies.common.check_per_sample_critic`).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ganlab.strategies.base import GANSpec, Mode, Part, Strategy
from ganlab.strategies.common import head_owner, install_head


def minibatch_stddev(f: Tensor, group_size: int = 4, eps: float = 1e-8) -> Tensor:
    """One scalar per sample: mean over features of the std over its group (Karras et al. 2018, Sec. 3).

    Args:
        f: (N, A) features.
        group_size: G; the group is min(G, N) and N must be divisible by it.
        eps: added to the variance before the square root.

    Returns:
        (N, 1) values >= sqrt(eps); all members of a group share one value.

    Raises:
        ValueError: ``f`` is not 2-D, or N is not divisible by min(G, N).
    """
    if f.dim() != 2 or group_size < 1:
        raise ValueError(f"minibatch stddev needs (N, A) features and group_size >= 1; got {tuple(f.shape)}, "
                         f"{group_size}")
    n, g = f.shape[0], min(group_size, f.shape[0])
    if n % g:
        raise ValueError(f"minibatch stddev: D scores {n} samples at a time, not divisible by the group size {g}; "
                         "choose trainer.batch_size / trainer.accumulate as a multiple of "
                         "strategy.minibatch_stddev.group_size")
    y = f.view(g, n // g, -1)  # (G, N/G, A): group j = samples j, j + N/G, ...
    std = torch.sqrt(y.var(dim=0, unbiased=False) + eps)  # (N/G, A)
    s = std.mean(dim=1)  # (N/G,)
    return s.repeat(g)[:, None]  # (N, 1), sample i gets s[i % (N/G)]


class MinibatchStdDevHead(nn.Module):
    """f (N, A) -> Linear(A + 1, 1)([f, minibatch_stddev(f)]) of shape (N, 1).

    Args:
        in_features: A (> 0).
        group_size: G (>= 1; paper: 4).
    """

    #: Mixes the samples of a batch by design (the method): penalties that need a per-sample D refuse it
    #: (:func:`ganlab.strategies.common.check_per_sample_critic`).
    mixes_samples = "minibatch_stddev"

    def __init__(self, in_features: int, group_size: int = 4) -> None:
        super().__init__()
        self.group_size = int(group_size)
        self.linear = nn.Linear(in_features + 1, 1)

    def forward(self, f: Tensor) -> Tensor:
        return self.linear(torch.cat([f, minibatch_stddev(f, self.group_size)], dim=1))  # (N, 1)


class MinibatchStdDev(Strategy):
    """Replace ``discriminator.head`` by a :class:`MinibatchStdDevHead`.

    Args:
        group_size: G (>= 1; paper: 4); the batch size must be divisible by it.

    Raises:
        ValueError: group_size < 1, a discriminator without features/head/feature_dim, or (in ``configure``) D
            scoring a number of samples per forward pass (``GANSpec.scores_per_pass``) above the group size and
            not a multiple of it.
    """

    name = "minibatch_stddev"
    replaces = frozenset({Part.DISCRIMINATOR_HEAD})
    refuses = {Mode.ENSEMBLE: None}  # runs vectorised (ganlab.run.ensemble)

    def __init__(self, group_size: int = 4) -> None:
        if int(group_size) < 1:
            raise ValueError(f"strategy.minibatch_stddev.group_size must be >= 1, got {group_size}")
        self.group_size = int(group_size)

    def configure(self, spec: GANSpec) -> None:
        n, step = spec.scores_per_pass, self.group_size * spec.accumulate
        if n is not None and n % min(self.group_size, n):
            raise ValueError(
                f"strategy minibatch_stddev: D scores {n} samples per forward pass (trainer.batch_size / "
                f"trainer.accumulate = {spec.batch_size} / {spec.accumulate}), not a multiple of "
                f"strategy.minibatch_stddev.group_size={self.group_size}; make trainer.batch_size a multiple of "
                f"group_size x trainer.accumulate (e.g. trainer.batch_size={-(-n // self.group_size) * step}) or "
                "lower trainer.accumulate")
        d = head_owner(spec.discriminator, self.name)
        install_head(d, MinibatchStdDevHead(d.feature_dim, self.group_size))

    def __repr__(self) -> str:
        return f"MinibatchStdDev(group_size={self.group_size})"
