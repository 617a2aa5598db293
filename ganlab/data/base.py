"""In-memory data sets and the seeded, resumable batch sampler the training loop draws from."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor


@dataclass
class Mixture:
    """A Gaussian mixture with equal weights and isotropic components.

    Attributes:
        means: (K, D) component means.
        std: per-coordinate standard deviation of every component.
    """

    means: Tensor
    std: float


@dataclass
class GANData:
    """A data set held as one tensor, on the training device once :meth:`to` has been called.

    Attributes:
        name: data set name (``dataset.name``).
        x: (N, *sample_shape) float32 training samples; images are in [-1, 1] with shape (C, H, W).
        labels: (N,) int64 mode label of each sample (class, or label triple ``100a + 10b + c`` for stacked
            data), or None.
        num_modes: number of distinct modes the labels can take (10, 1000, K), or None.
        mixture: the generating mixture for synthetic 2-D data, else None.
        holdout: (M, *sample_shape) real samples not trained on (test split or a fresh draw), or None.
        holdout_labels: (M,) labels of ``holdout``, or None.
        info: free-form provenance (files read, resize applied).
        value_range: ``(low, high)`` of the image samples' values: (-1, 1) for every loader of ganlab (images are
            stored in the model range); a data set built by hand in another range states it here, and the scores
            convert its real samples from it (:func:`ganlab.metrics.embedders.image_inputs`). Unused for points.
    """

    name: str
    x: Tensor
    labels: Tensor | None = None
    num_modes: int | None = None
    mixture: Mixture | None = None
    holdout: Tensor | None = None
    holdout_labels: Tensor | None = None
    info: dict[str, Any] = field(default_factory=dict)
    value_range: tuple[float, float] = (-1.0, 1.0)

    @property
    def sample_shape(self) -> tuple[int, ...]:
        """Shape of one sample, e.g. (2,) or (1, 32, 32)."""
        return tuple(self.x.shape[1:])

    @property
    def is_image(self) -> bool:
        """True for (C, H, W) samples."""
        return self.x.dim() == 4

    def __len__(self) -> int:
        return self.x.shape[0]

    def check_finite(self) -> None:
        """Raise ValueError naming the first sample (training, then hold-out) that holds NaN or Inf."""
        for part, t in (("training", self.x), ("hold-out", self.holdout)):
            if t is None:
                continue
            bad = ~torch.isfinite(t.reshape(t.shape[0], -1)).all(dim=1)
            if bool(bad.any()):
                i = int(bad.nonzero()[0, 0])
                raise ValueError(f"data set {self.name!r}: {part} sample {i} contains NaN or Inf "
                                 f"({int(bad.sum())} bad samples in all); fix or drop them before training")

    def to(self, device: torch.device | str) -> GANData:
        """Move every tensor to ``device`` (in place) and return self."""
        for name in ("x", "labels", "holdout", "holdout_labels"):
            t = getattr(self, name)
            if t is not None:
                setattr(self, name, t.to(device))
        if self.mixture is not None:
            self.mixture.means = self.mixture.means.to(device)
        return self


class Batcher:
    """Yields index batches over N samples, reshuffled every epoch by its own seeded generator.

    Each epoch is a fresh permutation; the last partial batch of an epoch is dropped. The whole state
    (generator, permutation, position) is in :meth:`state_dict`, so a resumed run sees the same order.

    Args:
        n: number of samples (>= batch_size).
        batch_size: samples per batch (> 0).
        seed: seed of the shuffling generator.
        device: where the returned indices live. The permutation is drawn on the CPU (the same order on every
            device) and copied to ``device`` once per epoch, so a step on the GPU makes no host-to-device copy.

    Raises:
        ValueError: batch_size not positive or larger than n.
    """

    def __init__(self, n: int, batch_size: int, seed: int, device: torch.device | str = "cpu") -> None:
        if batch_size <= 0:
            raise ValueError(f"trainer.batch_size must be positive, got {batch_size}")
        if batch_size > n:
            raise ValueError(f"trainer.batch_size={batch_size} is larger than the data set ({n} samples); "
                             "lower trainer.batch_size")
        self.n, self.batch_size = n, batch_size
        self.gen = torch.Generator().manual_seed(seed)
        self.epoch, self.pos, self.device = 0, 0, torch.device(device)
        self._set_perm(torch.randperm(n, generator=self.gen))

    def _set_perm(self, perm: Tensor) -> None:
        self.perm = perm
        self._perm_on_device = perm.to(self.device)

    def next(self) -> Tensor:
        """The next (batch_size,) int64 index tensor, on ``device``."""
        if self.pos + self.batch_size > self.n:
            self._set_perm(torch.randperm(self.n, generator=self.gen))
            self.epoch, self.pos = self.epoch + 1, 0
        idx = self._perm_on_device[self.pos:self.pos + self.batch_size]
        self.pos += self.batch_size
        return idx

    def state_dict(self) -> dict[str, Any]:
        return {"gen": self.gen.get_state(), "perm": self.perm.clone(), "epoch": self.epoch, "pos": self.pos}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state["perm"].numel() != self.n:
            raise ValueError(f"checkpoint's data order covers {state['perm'].numel()} samples but the data set "
                             f"has {self.n}: resume with the same dataset settings")
        self.gen.set_state(state["gen"])
        self._set_perm(state["perm"].clone())
        self.epoch, self.pos = int(state["epoch"]), int(state["pos"])
