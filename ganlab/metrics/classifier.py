"""A small CNN trained on a data set's real training split: its penultimate layer embeds images, and its
logits label the modes of stacked data (VEEGAN / PacGAN stacked-MNIST protocol, with our own classifier)."""

from __future__ import annotations

import inspect
import logging
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ganlab.data.base import GANData
from ganlab.io import atomic_save

log = logging.getLogger("ganlab")


class SmallCNN(nn.Module):
    """(B, in_channels, S, S) in [-1, 1] -> logits (B, num_classes); ``embed`` gives the (B, 128) penultimate features.

    Two 3x3 conv blocks (32, 64 channels, each with max-pool when the side allows) and a 128-unit layer.
    """

    def __init__(self, image_size: int, num_classes: int = 10, width: int = 32, in_channels: int = 1) -> None:
        super().__init__()
        pool = nn.MaxPool2d(2) if image_size >= 16 else nn.Identity()
        side = image_size // 4 if image_size >= 16 else image_size
        self.trunk = nn.Sequential(
            nn.Conv2d(in_channels, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU(), pool,
            nn.Conv2d(width, 2 * width, 3, padding=1), nn.BatchNorm2d(2 * width), nn.ReLU(),
            nn.MaxPool2d(2) if image_size >= 16 else nn.Identity(), nn.Flatten(),
            nn.Linear(2 * width * side * side, 128), nn.ReLU())
        self.out = nn.Linear(128, num_classes)
        self.image_size, self.num_classes, self.in_channels = image_size, num_classes, in_channels

    def embed(self, x: Tensor) -> Tensor:
        return self.trunk(x)  # (B, 128)

    def forward(self, x: Tensor) -> Tensor:
        return self.out(self.trunk(x))  # (B, num_classes)


def is_stacked(data: GANData) -> bool:
    """Stacked data (:func:`ganlab.data.stack`): each channel is an image of its own, labelled ``100a + 10b + c``.
    Other multi-channel data (CIFAR-10, colour image folders) are classified whole, as C-channel images."""
    return "stacked_from" in data.info


def split_channels(data: GANData) -> int:
    """Single-channel pieces the classifier sees per sample: C for stacked data, else 1 (the image whole)."""
    return data.sample_shape[0] if is_stacked(data) else 1


def channel_split(x: Tensor, labels: Tensor | None, num_channels: int) -> tuple[Tensor, Tensor | None]:
    """Stacked (N, C, S, S) images with triple labels -> (N*C, 1, S, S) single images with digit labels.

    Label ``100a + 10b + c`` of a 3-channel image gives channel labels (a, b, c); single-channel data pass through.
    """
    if num_channels == 1:
        return x, labels
    singles = x.reshape(-1, 1, *x.shape[2:])  # channel-major within each sample: (N*C, 1, S, S)
    if labels is None:
        return singles, None
    powers = 10 ** torch.arange(num_channels - 1, -1, -1, device=labels.device)
    return singles, (labels[:, None] // powers % 10).reshape(-1)


@torch.no_grad()
def accuracy(model: SmallCNN, x: Tensor, y: Tensor, batch_size: int = 2000) -> float:
    """Fraction of ``x`` (N, 1, S, S) whose argmax logit equals ``y`` (N,)."""
    model.eval()
    hits = sum(int((model(x[i:i + batch_size]).argmax(1) == y[i:i + batch_size]).sum())
               for i in range(0, len(x), batch_size))
    return hits / max(len(x), 1)


def require_labelled_images(data: GANData) -> None:
    """Raise ValueError, naming the embedders to choose instead, unless ``data`` are labelled images with a
    labelled hold-out (what the classifier trains and is tested on)."""
    if not data.is_image or data.labels is None or data.holdout is None or data.holdout_labels is None:
        raise ValueError(f"the classifier embedder needs labelled images with a labelled hold-out; "
                         f"{data.name!r} is not (choose metrics/embedder=identity for points, "
                         "metrics/embedder=pixels for unlabelled images)")


def train_classifier(data: GANData, epochs: int = 3, batch_size: int = 128, lr: float = 2e-3, seed: int = 0,
                     max_train: int | None = None) -> tuple[SmallCNN, float]:
    """Train :class:`SmallCNN` on the images of ``data`` (channels of stacked data split apart, others whole).

    Args:
        data: labelled image data with a hold-out split (the test split of Fashion-MNIST, say).
        epochs: passes over the training images; Adam with a cosine-decayed ``lr``.
        max_train: use at most this many training images (seeded subset), or all.

    Returns:
        (model in eval mode on the data's device, test accuracy in [0, 1] on the hold-out).

    Raises:
        ValueError: the data are not labelled images with a labelled hold-out.
    """
    require_labelled_images(data)
    c, s = split_channels(data), data.sample_shape[1]
    x, y = channel_split(data.x, data.labels, c)
    hx, hy = channel_split(data.holdout, data.holdout_labels, c)
    g = torch.Generator().manual_seed(seed)
    if max_train is not None and len(x) > max_train:
        keep = torch.randperm(len(x), generator=g)[:max_train].to(x.device)
        x, y = x[keep], y[keep]
    torch.manual_seed(seed)
    model = SmallCNN(s, num_classes=int(y.max()) + 1, in_channels=x.shape[1]).to(x.device)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    steps = epochs * (len(x) // batch_size)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, max(steps, 1))
    model.train()
    for _ in range(epochs):
        perm = torch.randperm(len(x), generator=g).to(x.device)
        for i in range(0, len(x) - batch_size + 1, batch_size):
            idx = perm[i:i + batch_size]
            loss = F.cross_entropy(model(x[idx]), y[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
    model.eval()
    return model, accuracy(model, hx, hy)


def classifier_path(data: GANData, cache_dir: str | Path, seed: int = 0, **train_kwargs: Any) -> Path:
    """The cache file of ``data``'s classifier, keyed by every setting that changes its weights:
    ``<cache_dir>/<data set>_<side>px_seed<seed>.pt`` for :func:`train_classifier`'s defaults, with
    ``_<name><value>`` added for each training setting in ``train_kwargs`` that differs from its default (e.g.
    ``digits_8px_seed0_epochs5.pt``), so classifiers trained differently never share a file. Colour (not
    stacked) data add ``_<C>ch`` after the data set's name, and a data set whose ``info`` has a ``fingerprint``
    (an image folder's files) adds it there too."""
    base = data.info.get("stacked_from", data.name)
    whole = data.sample_shape[0] if not is_stacked(data) else 1  # input channels of the classifier
    key = "_".join([base] + ([data.info["fingerprint"]] if "fingerprint" in data.info else [])
                   + ([f"{whole}ch"] if whole > 1 else []))
    defaults = inspect.signature(train_classifier).parameters
    extra = "".join(f"_{k}{v}" for k, v in sorted(train_kwargs.items()) if defaults[k].default != v)
    return Path(cache_dir).expanduser() / f"{key}_{data.sample_shape[1]}px_seed{seed}{extra}.pt"


def load_or_train(data: GANData, cache_dir: str | Path, seed: int = 0, **train_kwargs: Any) -> tuple[SmallCNN, float]:
    """The classifier for ``data`` from ``cache_dir`` (keyed by :func:`classifier_path`: data set, image size,
    seed, training settings and, for colour data, the channels; an image folder's fingerprint), else train and
    cache it.

    Returns:
        (model on the data's device in eval mode, its recorded test accuracy).

    Raises:
        ValueError: the data are not labelled images with a labelled hold-out (see :func:`require_labelled_images`).
    """
    require_labelled_images(data)
    c, s = data.sample_shape[0], data.sample_shape[1]
    base = data.info.get("stacked_from", data.name)
    path = classifier_path(data, cache_dir, seed, **train_kwargs)
    if path.is_file():
        state = torch.load(path, map_location="cpu", weights_only=True)
        model = SmallCNN(state["image_size"], state["num_classes"], in_channels=state.get("in_channels", 1))
        model.load_state_dict(state["weights"])
        return model.to(data.x.device).eval(), float(state["test_accuracy"])
    log.info("training the %s classifier for embeddings (cached at %s)", base, path)
    model, acc = train_classifier(data, seed=seed, **train_kwargs)
    log.info("classifier test accuracy on %s: %.4f", base, acc)
    atomic_save({"weights": model.state_dict(), "image_size": s, "num_classes": model.num_classes,
                 "in_channels": model.in_channels,
                 "test_accuracy": acc, "channels_of_data": c}, path)
    return model, acc
