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

from typing import Any

import torch
from torch import Tensor, nn

from ganlab.strategies.base import GANSpec, Part, Strategy
from ganlab.strategies.common import head_owner, install_head

#: Elements of one block of the pairwise computation, (kernels, C, rows, columns): 4 MiB of float32, so that the
#: few passes over a block (difference, absolute value or sign, sum) stay in cache while each pass is long enough for
#: the per-call overhead not to matter.
BLOCK_ELEMENTS = 2**20
#: Row blocks per kernel (at least): each block of rows i is paired with the columns j >= its first row only, and
#: the pairs below the diagonal are read off by symmetry, so more row blocks skip more of the N x N pairs (8 blocks
#: compute 9/16 of them; 2, 4 and 8 measured at N = 256, B = 100, C = 5 on one CPU thread: 8 the fastest).
ROW_BLOCKS = 8


def minibatch_features_direct(m: Tensor) -> Tensor:
    """Reference o(x) computed in one shot (memory N x N x B x C); see :func:`minibatch_features`.

    Args:
        m: (N, B, C) projected features M.

    Returns:
        (N, B) values o(x_i)_b in [0, N - 1].
    """
    dist = (m[:, None] - m[None]).abs().sum(-1)  # (N, N, B) L1 distances
    return torch.exp(-dist).sum(1) - 1.0  # the j = i term is exp(0) = 1


def _blocks(kernels: int, dims: int, n: int) -> list[tuple[slice, slice]]:
    """(kernel slice, row slice) pairs that tile B x N: about :data:`ROW_BLOCKS` row blocks per kernel, and as many
    kernels per block as keep its (kernels, C, rows, N) within :data:`BLOCK_ELEMENTS` (at least one kernel and
    one row)."""
    rb = max(1, min(-(-n // ROW_BLOCKS), BLOCK_ELEMENTS // (dims * n)))
    kb = max(1, BLOCK_ELEMENTS // (dims * rb * n))
    return [(slice(b, min(b + kb, kernels)), slice(r, min(r + rb, n)))
            for b in range(0, kernels, kb) for r in range(0, n, rb)]


def _diff(mt: Tensor, kernels: slice, rows: slice) -> Tensor:
    """M_ibc - M_jbc for the block's kernels b, rows i and the columns j >= its first row: (kb, C, rb, N - r0),
    from ``mt`` (B, C, N)."""
    x = mt[kernels]  # (kb, C, N)
    return x[:, :, rows, None] - x[:, :, None, rows.start:]


def _kernel_block(d: Tensor, out: Tensor | None = None) -> Tensor:
    """c_b(x_i, x_j) = exp(-||M_ib - M_jb||_1) from the block's differences ``d`` (kb, C, rb, cols), which it
    overwrites: (kb, rb, cols), written into ``out`` when given."""
    dist = torch.sum(d.abs_(), 1) if out is None else torch.sum(d.abs_(), 1, out=out)  # (kb, rb, cols) L1
    return dist.neg_().exp_()


def _differentiable_features(m: Tensor, max_elements: int) -> Tensor:
    """o through ``torch.cdist(p=1)`` and autograd, in row blocks of <= ``max_elements`` distances: the path for a
    gradient that is itself differentiated (a penalty on D's input gradient, e.g. WGAN-GP's)."""
    n = m.shape[0]
    rows = max(1, max_elements // max(1, n * m.shape[1]))
    mt = m.transpose(0, 1)  # (B, N, C)
    blocks = [torch.cdist(mt[:, i:i + rows], mt, p=1.0) for i in range(0, n, rows)]  # (B, rows, N) each
    return (torch.exp(-torch.cat(blocks, 1)).sum(-1) - 1.0).t()  # (N, B)


class _MinibatchKernelSums(torch.autograd.Function):
    """(N, B, C) M -> (N, B) o with the hand-written backward of :func:`minibatch_features`."""

    @staticmethod
    def forward(ctx: Any, m: Tensor, max_elements: int) -> Tensor:  # type: ignore[override]
        n, kernels, dims = m.shape
        mt = m.detach().permute(1, 2, 0).contiguous()  # (B, C, N): the batch along the contiguous dimension
        keep = kernels * n * n <= max_elements  # keep the (B, N, N) kernel values for the backward pass
        c = torch.empty(kernels, n, n, dtype=m.dtype, device=m.device) if keep else None  # upper blocks only
        o = torch.zeros(kernels, n, dtype=m.dtype, device=m.device)  # (B, N)
        for kb, rb in _blocks(kernels, dims, n):
            cb = _kernel_block(_diff(mt, kb, rb), None if c is None else c[kb, rb, rb.start:])  # (kb, rb, N - r0)
            o[kb, rb] += cb.sum(-1)  # rows i: their pairs with every j >= r0 (the diagonal block whole)
            o[kb, rb.stop:] += cb[:, :, rb.stop - rb.start:].sum(1)  # columns j >= r1: c_ji = c_ij
        ctx.max_elements = max_elements
        ctx.save_for_backward(m, mt, c)
        return o.sub_(1.0).t()  # (N, B); the j = i term is exp(0) = 1

    @staticmethod
    def backward(ctx: Any, grad_o: Tensor) -> tuple[Tensor, None]:  # type: ignore[override]
        m, mt, c = ctx.saved_tensors
        if torch.is_grad_enabled():  # create_graph=True: the gradient must itself be differentiable
            with torch.enable_grad():
                o = _differentiable_features(m, ctx.max_elements)
                (grad_m,) = torch.autograd.grad(o, m, grad_o, create_graph=True)
            return grad_m, None
        kernels, dims, n = mt.shape
        g = grad_o.t().contiguous()  # (B, N)
        acc = torch.zeros_like(mt)  # (B, C, N): sum_j (g_i + g_j) c_ij sign(M_ibc - M_jbc)
        for kb, rb in _blocks(kernels, dims, n):
            d = _diff(mt, kb, rb)  # (kb, C, rb, N - r0)
            cb = c[kb, rb, rb.start:] if c is not None else _kernel_block(d.clone())  # (kb, rb, N - r0)
            w = (g[kb, rb, None] + g[kb, None, rb.start:]).mul_(cb)  # (kb, rb, N - r0): (g_i + g_j) c_ij
            t = d.sign_().mul_(w[:, None])  # (kb, C, rb, N - r0): w_ij sign(M_ibc - M_jbc)
            acc[kb, :, rb] += t.sum(-1)  # rows i
            acc[kb, :, rb.stop:] -= t[..., rb.stop - rb.start:].sum(2)  # columns j >= r1: sign(M_j - M_i) = -sign
        return acc.neg_().permute(2, 0, 1), None


def minibatch_features(m: Tensor, max_elements: int = 2**24) -> Tensor:
    """o(x_i)_b = sum_{j != i} exp(-||M_ib - M_jb||_1) (Salimans et al. 2016, "Improved Techniques for Training
    GANs", Sec. 3.2), with a hand-written backward pass.

    The gradient, for an upstream gradient g = dL/do (N, B), is

        dL/dM_kbc = -sum_j (g_kb + g_jb) c_b(x_k, x_j) sign(M_kbc - M_jbc),

    taken with sign(0) = 0, the subgradient ``torch.cdist(p=1)`` uses too: equal rows (a collapsed batch) push
    each other nowhere along a coordinate where they agree. Both passes run over blocks of kernels and rows that
    stay in cache (:data:`BLOCK_ELEMENTS`), each block of rows paired only with the columns from its first row on:
    c is symmetric and the signs antisymmetric, so the pairs below are read off by symmetry. The kernel values c
    are kept for the backward pass when the (B, N, N) of them hold at most ``max_elements`` elements, else
    recomputed block by block, so peak memory stays bounded for any batch size N. Inputs in float16/bfloat16 are
    computed in float32 (as autocast runs ``torch.cdist``).

    Args:
        m: (N, B, C) projected features M, N >= 1.
        max_elements: memory budget, in tensor elements (> 0), for keeping the kernel values.

    Returns:
        (N, B) values in [0, N - 1] (float32 for half-precision input, else m's dtype); exactly 0 for N = 1,
        exactly N - 1 for N identical rows. Twice differentiable: a gradient taken with ``create_graph=True``
        (WGAN-GP's or R1's penalty on D's input gradient) is recomputed through ``torch.cdist`` and autograd.

    Raises:
        ValueError: ``m`` is not 3-D or ``max_elements`` is not positive.
    """
    if m.dim() != 3:
        raise ValueError(f"minibatch features need M of shape (N, B, C); got {tuple(m.shape)}")
    if max_elements <= 0:
        raise ValueError(f"max_elements must be positive, got {max_elements}")
    if m.dtype in (torch.float16, torch.bfloat16):
        m = m.float()
    return _MinibatchKernelSums.apply(m, int(max_elements))


class MinibatchDiscriminationHead(nn.Module):
    """D's head with minibatch discrimination: f (N, A) -> Linear(A + B, 1)([f, o(f)]) of shape (N, 1).

    Args:
        in_features: A, width of D's penultimate features (> 0).
        num_kernels: B, number of kernels (> 0; paper default 100).
        kernel_dim: C, dimension of each kernel (> 0; paper default 5).
        max_elements: memory budget for keeping the kernel values (see :func:`minibatch_features`).

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
        max_elements: memory budget, in elements, for keeping the pairwise kernel values for the backward pass.

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

