"""Minibatch discrimination (Salimans et al. 2016, "Improved Techniques for Training GANs", Sec. 3.2).

D's penultimate features f(x_i) in R^A are multiplied by a tensor T in R^{A x B x C}, giving rows
M_i in R^{B x C} (eq. in Sec. 3.2). For each kernel b, c_b(x_i, x_j) = exp(-||M_{i,b} - M_{j,b}||_1) and
o(x_i)_b = sum_{j != i} c_b(x_i, x_j). The B values o(x_i) are concatenated to f(x_i) and a new
Linear(A + B, 1) head scores the result. Real and generated batches are scored separately (the loop
calls D on each), so a collapsed generator shows up as large o(x).

Each sample's score depends on the other samples of its batch by design (the method), so the strategies whose term
needs a per-sample D (``r1``, ``wgan_gp``) refuse this head before training
(:func:`ganlab.strategies.common.check_per_sample_critic`).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from ganlab.strategies.base import GANSpec, Part, Strategy
from ganlab.strategies.common import head_owner, install_head


def minibatch_features_direct(m: Tensor) -> Tensor:
    """Reference o(x) computed in one shot (memory N x N x B x C); see :func:`minibatch_features`.

    Args:
        m: (N, B, C) projected features M.

    Returns:
        (N, B) values o(x_i)_b in [0, N - 1].
    """
    dist = (m[:, None] - m[None]).abs().sum(-1)  # (N, N, B) L1 distances
    return torch.exp(-dist).sum(1) - 1.0  # the j = i term is exp(0) = 1


def _row_block(rows: Tensor, m: Tensor) -> Tensor:
    """o for the (b, B, C) ``rows`` against all (N, B, C) ``m``: (b, B). L1 distances via ``torch.cdist``."""
    dist = torch.cdist(rows.transpose(0, 1), m.transpose(0, 1), p=1.0)  # (B, b, N) L1 distances per kernel
    return (torch.exp(-dist).sum(-1) - 1.0).t()  # (b, B); the j = i term is exp(0) = 1


def minibatch_features(m: Tensor, max_elements: int = 2**24) -> Tensor:
    """o(x_i)_b = sum_{j != i} exp(-||M_ib - M_jb||_1) (Salimans et al. 2016, Sec. 3.2), computed in row blocks.

    Each block of b rows holds a (B, b, N) distance matrix, with b chosen so that it stays <= ``max_elements``
    (at least one row). When gradients are needed, every block is checkpointed (recomputed in backward),
    so peak memory stays bounded by one block for any batch size N.

    Args:
        m: (N, B, C) projected features M, N >= 1.
        max_elements: memory budget of one block, in tensor elements (> 0).

    Returns:
        (N, B) values in [0, N - 1]; exactly 0 for N = 1, exactly N - 1 for N identical rows.

    Raises:
        ValueError: ``m`` is not 3-D or ``max_elements`` is not positive.
    """
    if m.dim() != 3:
        raise ValueError(f"minibatch features need M of shape (N, B, C); got {tuple(m.shape)}")
    if max_elements <= 0:
        raise ValueError(f"max_elements must be positive, got {max_elements}")
    n = m.shape[0]
    rows = max(1, max_elements // max(1, n * m.shape[1]))
    if rows >= n:
        return _row_block(m, m)
    blocks = []
    for i in range(0, n, rows):
        if torch.is_grad_enabled() and m.requires_grad:
            blocks.append(checkpoint(_row_block, m[i:i + rows], m, use_reentrant=False))
        else:
            blocks.append(_row_block(m[i:i + rows], m))
    return torch.cat(blocks)  # (N, B)


class MinibatchDiscriminationHead(nn.Module):
    """D's head with minibatch discrimination: f (N, A) -> Linear(A + B, 1)([f, o(f)]) of shape (N, 1).

    Args:
        in_features: A, width of D's penultimate features (> 0).
        num_kernels: B, number of kernels (> 0; paper default 100).
        kernel_dim: C, dimension of each kernel (> 0; paper default 5).
        max_elements: memory budget of one block (see :func:`minibatch_features`).

    Raises:
        ValueError: for a non-positive size.
    """

    #: Mixes the samples of a batch by design (the method): penalties that need a per-sample D refuse it
    #: (:func:`ganlab.strategies.common.check_per_sample_critic`).
    mixes_samples = "minibatch_discrimination"

    def __init__(self, in_features: int, num_kernels: int = 100, kernel_dim: int = 5,
                 max_elements: int = 2**24) -> None:
        super().__init__()
        for key, v in (("in_features", in_features), ("num_kernels", num_kernels), ("kernel_dim", kernel_dim),
                       ("max_elements", max_elements)):
            if int(v) <= 0:
                raise ValueError(f"strategy.minibatch_discrimination.{key} must be positive, got {v}")
        self.num_kernels, self.kernel_dim, self.max_elements = int(num_kernels), int(kernel_dim), int(max_elements)
        self.T = nn.Parameter(0.05 * torch.randn(in_features, num_kernels * kernel_dim))  # (A, B*C)
        self.linear = nn.Linear(in_features + num_kernels, 1)

    def project(self, f: Tensor) -> Tensor:
        """M = f T: (N, A) -> (N, B, C), in the dtype of ``f``.

        The product is taken in float64 and rounded back: in float32, BLAS kernels may round identical rows
        differently (by one ulp), and then N identical samples would not give exactly N - 1.
        """
        m = (f.double() @ self.T.double()).to(f.dtype)
        return m.view(f.shape[0], self.num_kernels, self.kernel_dim)

    def forward(self, f: Tensor) -> Tensor:
        o = minibatch_features(self.project(f), self.max_elements)  # (N, B)
        return self.linear(torch.cat([f, o], dim=1))  # (N, 1)


class MinibatchDiscrimination(Strategy):
    """Replace ``discriminator.head`` by a :class:`MinibatchDiscriminationHead` (Salimans et al. 2016).

    Args:
        num_kernels: B (default 100).
        kernel_dim: C (default 5).
        max_elements: memory budget of one block of the pairwise computation, in elements.

    Raises:
        ValueError: a non-positive size, or a discriminator without ``features``/``head``/``feature_dim``.
    """

    name = "minibatch_discrimination"
    replaces = frozenset({Part.DISCRIMINATOR_HEAD})

    def __init__(self, num_kernels: int = 100, kernel_dim: int = 5, max_elements: int = 2**24) -> None:
        for key, v in (("num_kernels", num_kernels), ("kernel_dim", kernel_dim), ("max_elements", max_elements)):
            if int(v) <= 0:
                raise ValueError(f"strategy.{self.name}.{key} must be positive, got {v}")
        self.num_kernels, self.kernel_dim, self.max_elements = int(num_kernels), int(kernel_dim), int(max_elements)

    def configure(self, spec: GANSpec) -> None:
        d = head_owner(spec.discriminator, self.name)
        head = MinibatchDiscriminationHead(d.feature_dim, self.num_kernels, self.kernel_dim, self.max_elements)
        install_head(d, head)

    def __repr__(self) -> str:
        return f"MinibatchDiscrimination(B={self.num_kernels}, C={self.kernel_dim})"

