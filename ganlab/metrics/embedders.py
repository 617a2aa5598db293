"""Embedders map samples to the vectors diversity scores are computed on (``metrics.embedder=``).

Every embedder has ``prepare(data)`` (called once per data set: train or load what it needs),
``__call__(x) -> (N, D)`` embeddings, ``mode_labels(x) -> (N,) | None``: the mode of each sample when
the embedder can tell (the classifier labels classes, and label triples for stacked data), and ``record()``:
what made the embeddings (class, weights file and its SHA-256, input size, resize mode), written to
``metrics.json`` so that scores from different feature extractors are never mixed unnoticed.

Image embedders take ganlab's convention, float images in [-1, 1] (:func:`image_inputs`): uint8 images
(0..255) are converted, other dtypes and values outside [-1, 1] are refused, naming what was found. Images in
another range are converted by the caller, who states it (:func:`image_inputs`' ``value_range``; the evaluator
takes the generator's output range for generated samples and the data set's for real ones); a range is never
guessed from the values.
"""

from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from ganlab.data.base import GANData
from ganlab.metrics.classifier import SmallCNN, channel_split, classifier_path, load_or_train, split_channels

log = logging.getLogger("ganlab")

#: Rounding slack of the [-1, 1] check (a tanh output or a resize may overshoot by a hair).
RANGE_TOLERANCE = 1e-3


def image_inputs(x: Tensor, value_range: tuple[float, float] | None = None) -> Tensor:
    """(N, C, H, W) images in ganlab's convention, float in [-1, 1], from images in the range the caller states.

    The range is never guessed from the values (a [0, 1] batch and a [-1, 1] batch of a generator saturated at +1
    cannot be told apart): float images are in ``value_range`` (default: ganlab's [-1, 1]) and are mapped linearly,
    ``2 (x - lo) / (hi - lo) - 1``; uint8 images are 0..255 counts (their dtype says so), mapped as ``x / 127.5 - 1``,
    as torchmetrics' ``normalize`` flag tells its metrics which of the two they get. Non-finite values are left for
    the caller (the evaluator drops such samples).

    Args:
        x: (N, C, H, W) float or uint8 images.
        value_range: ``(lo, hi)``, lo < hi, the range of float ``x`` (e.g. ``(0, 1)``); None: [-1, 1]. For uint8
            ``x`` only None or ``(0, 255)``.

    Raises:
        ValueError: another dtype (bool, int); a bad ``value_range``; float values outside the stated range
            (± :data:`RANGE_TOLERANCE` of its half-width); the message names the dtype or the range found and what to
            state or convert.
    """
    if x.dtype == torch.uint8:  # 0..255 counts whatever value_range says (it states the range of float images)
        return x.float() / 127.5 - 1.0
    if not x.is_floating_point():
        raise ValueError(f"embedder input has dtype {x.dtype}; embedders take float images (in [-1, 1], or in the "
                         "value_range stated) or uint8 images in [0, 255]: for 0..255 counts pass x.to(torch.uint8)")
    lo, hi = (-1.0, 1.0) if value_range is None else (float(value_range[0]), float(value_range[1]))
    if not lo < hi:
        raise ValueError(f"value_range must be (low, high) with low < high, got {value_range}")
    finite = x[torch.isfinite(x)]
    if finite.numel():
        got_lo, got_hi = float(finite.min()), float(finite.max())
        slack = RANGE_TOLERANCE * (hi - lo) / 2
        if got_lo < lo - slack or got_hi > hi + slack:
            hint = "pass x.to(torch.uint8) (0..255 counts) or state value_range=(0, 255)" \
                if got_lo >= 0 and got_hi <= 255 and got_hi > 1 else "state the range the images are in as value_range"
            raise ValueError(f"image values lie in [{got_lo:.4g}, {got_hi:.4g}], outside the stated range [{lo:g}, "
                             f"{hi:g}]{' (ganlab convention)' if value_range is None else ''}: {hint}")
    if (lo, hi) == (-1.0, 1.0):
        return x
    return (x - lo) * (2.0 / (hi - lo)) - 1.0


def file_sha256(path: str | Path) -> str:
    """Hex SHA-256 of a file's bytes (read in 1 MiB chunks)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class Embedder:
    """Base class: flattens samples; no mode labels."""

    test_accuracy: float | None = None

    def prepare(self, data: GANData) -> None:
        """Train or load what the embedder needs for ``data`` (no-op here)."""

    def record(self) -> dict[str, Any]:
        """What makes these embeddings: ``{"class", "weights", "weights_sha256", "input_size", "resize"}``
        (``weights`` a file path or None; ``input_size`` the side the network sees, None for the sample
        itself; ``resize`` ``"none"`` or the interpolation mode). Equal records mean comparable scores."""
        return {"class": f"{type(self).__module__}.{type(self).__qualname__}", "weights": None,
                "weights_sha256": None, "input_size": None, "resize": "none"}

    @torch.no_grad()
    def __call__(self, x: Tensor) -> Tensor:
        """(N, *sample_shape) -> (N, D) float32 embeddings."""
        return x.reshape(x.shape[0], -1).float()

    def mode_labels(self, x: Tensor) -> Tensor | None:
        """(N,) int64 mode of each sample, or None when this embedder cannot label modes."""
        return None

    def predicts_classes_of(self, data: GANData) -> bool:
        """Whether :meth:`mode_labels` are predictions of ``data``'s own classes (``data.labels``): a classifier
        trained on them. Per-class scores of an unconditional generator group its samples by these labels
        (:func:`ganlab.metrics.per_class.predicted_class_scores`). False here."""
        return False

    def classifier_info(self) -> dict[str, Any] | None:
        """None when this embedder has no classification layer (no class probabilities, so no Inception Score);
        else ``{"network", "classes", "comparable_with_published", "note"}``: what the probabilities of
        :meth:`class_probabilities` come from, recorded beside the Inception Score in ``metrics.json``."""
        return None

    def class_probabilities(self, embeddings: Tensor) -> Tensor:
        """(N, K) class probabilities (rows sum to 1) from this embedder's (N, D) ``embeddings``: its network's
        classification layer on those penultimate features, then a softmax.

        Raises:
            ValueError: this embedder has no classification layer (:meth:`classifier_info` is None).
        """
        raise ValueError(f"the {type(self).__name__} gives no class probabilities; choose metrics/embedder=classifier "
                         "(labelled images) or metrics/embedder=inception")


class IdentityEmbedder(Embedder):
    """The samples themselves (2-D points): ``metrics.embedder=identity``."""


class PixelEmbedder(Embedder):
    """Flattened pixels in [-1, 1], (N, C*H*W): ``metrics.embedder=pixels``; images (N, C, H, W) are checked and
    converted as :func:`image_inputs`; vectors (N, D) have no pixel convention and pass as they are."""

    @torch.no_grad()
    def __call__(self, x: Tensor) -> Tensor:
        return super().__call__(image_inputs(x) if x.dim() >= 3 else x)


class ClassifierEmbedder(Embedder):
    """Penultimate features of a small CNN trained on the data set's real training split.

    For C-channel stacked data every channel is embedded on its own and the C feature vectors are
    concatenated, (N, 128*C); mode labels combine the per-channel classes as ``100a + 10b + c``. Other images
    (single-channel, or colour: CIFAR-10, image folders) are classified whole: (N, 128), labels their classes.

    Args:
        cache_dir: where trained classifiers are kept (default ``$GANLAB_CACHE`` or ``~/.cache/ganlab``).
        epochs: training epochs when no cached classifier exists.
        max_train: at most this many training images (seeded subset), or all when None.
        seed: seed of the classifier's training (part of the cache key).
        batch_size: images embedded per forward pass; None = 256 on the CPU (cache-sized batches were 1.3-1.7x
            faster than 2,000 in ``tests/benchmarks/bench_diversity.py``) and 2,000 on a GPU.
    """

    def __init__(self, cache_dir: str | None = None, epochs: int = 3, max_train: int | None = None, seed: int = 0,
                 batch_size: int | None = None) -> None:
        root = cache_dir or os.environ.get("GANLAB_CACHE") or "~/.cache/ganlab"
        self.cache_dir = Path(root).expanduser() / "classifiers"
        self.epochs, self.max_train, self.seed, self.batch_size = epochs, max_train, seed, batch_size
        self.model: SmallCNN | None = None
        self.channels = 1
        self.weights: Path | None = None
        self._sha256: str | None = None
        self.input_size: int | None = None

    def prepare(self, data: GANData) -> None:
        self.channels = split_channels(data)  # stacked: C single-channel images; colour: 1 image of C channels
        self.model, self.test_accuracy = load_or_train(data, self.cache_dir, seed=self.seed, epochs=self.epochs,
                                                       max_train=self.max_train)
        self.weights, self._sha256 = classifier_path(data, self.cache_dir, self.seed, epochs=self.epochs,
                                                       max_train=self.max_train), None
        self.input_size = data.sample_shape[-1]

    def record(self) -> dict[str, Any]:
        if self.weights is not None and self._sha256 is None:
            self._sha256 = file_sha256(self.weights)
        return super().record() | {"weights": None if self.weights is None else str(self.weights),
                                   "weights_sha256": self._sha256, "input_size": self.input_size}

    def _per_channel(self, x: Tensor, head: bool) -> Tensor:
        if self.model is None:
            raise RuntimeError("ClassifierEmbedder.prepare(data) must be called before embedding")
        singles, _ = channel_split(image_inputs(x), None, self.channels)
        fn = self.model if head else self.model.embed
        bs = self.batch_size or (256 if x.device.type == "cpu" else 2000)
        out = torch.cat([fn(singles[i:i + bs]) for i in range(0, len(singles), bs)])
        return out.reshape(x.shape[0], self.channels, -1)  # (N, C, F)

    @torch.no_grad()
    def __call__(self, x: Tensor) -> Tensor:
        return self._per_channel(x, head=False).reshape(x.shape[0], -1)  # (N, C*128)

    def predicts_classes_of(self, data: GANData) -> bool:
        """True once prepared on labelled data whose images it classifies whole (single-channel or colour): it was
        trained on ``data.labels``. Stacked data's labels combine C channels' classes (``100a + 10b + c``): False."""
        return self.model is not None and self.channels == 1 and data.labels is not None

    @torch.no_grad()
    def mode_labels(self, x: Tensor) -> Tensor:
        classes = self._per_channel(x, head=True).argmax(dim=2)  # (N, C)
        powers = 10 ** torch.arange(self.channels - 1, -1, -1, device=x.device)
        return (classes * powers).sum(dim=1)

    def classifier_info(self) -> dict[str, Any]:
        """The small CNN's softmax: 10 classes, 10^C label combinations for C-channel stacked data; an Inception
        Score over it lies in [1, classes] and is comparable only with scores from the same classifier."""
        classes = (self.model.num_classes if self.model is not None else 10) ** self.channels
        return {"network": "classifier", "classes": classes, "comparable_with_published": False,
                "note": "softmax of ganlab's small CNN trained on this data set, not ImageNet Inception-v3: "
                        "not comparable with published Inception Scores"}

    @torch.no_grad()
    def class_probabilities(self, embeddings: Tensor) -> Tensor:
        """(N, K^C) probabilities from (N, 128*C) embeddings: the CNN's output layer and softmax per channel; for
        C-channel stacked data the product of the channels' probabilities, indexed as the mode labels
        (``100a + 10b + c`` for 3 channels of 10 classes); C = 1 for single-channel and colour images."""
        if self.model is None:
            raise RuntimeError("ClassifierEmbedder.prepare(data) must be called before class_probabilities")
        per_channel = self.model.out(embeddings.reshape(len(embeddings), self.channels, -1)).softmax(dim=2)
        probs = per_channel[:, 0]
        for c in range(1, self.channels):  # (N, K^c) x (N, K) -> (N, K^(c+1)), earlier channels more significant
            probs = (probs[:, :, None] * per_channel[:, c, None, :]).reshape(len(probs), -1)
        return probs


#: torchvision's Inception-v3 weights (``Inception_V3_Weights.IMAGENET1K_V1``): the file name and where to get it.
INCEPTION_FILE = "inception_v3_google-0cc3c7bd.pth"
INCEPTION_URL = f"https://download.pytorch.org/models/{INCEPTION_FILE}"


def default_inception_weights() -> Path:
    """Where torchvision itself caches the weights: ``<torch hub dir>/checkpoints/inception_v3_google-0cc3c7bd.pth``
    (``$TORCH_HOME/hub``, default ``~/.cache/torch/hub``; see ``torch.hub.get_dir``)."""
    return Path(torch.hub.get_dir()) / "checkpoints" / INCEPTION_FILE


class InceptionEmbedder(Embedder):
    """2048-d pool features of torchvision's Inception-v3, from a local weights file (never downloaded).

    Scores on these features are FID-like; they equal the published FID only with the original
    TF-Inception weights (pytorch-fid / torch-fidelity), which this embedder does not ship.

    Args:
        weights_path: a torchvision ``inception_v3`` state dict (``inception_v3_google-0cc3c7bd.pth``); None:
            :func:`default_inception_weights`, where torchvision caches it.
        batch_size: images per forward pass (resized to 299 x 299).

    Raises:
        ValueError: the data are not images (in ``prepare``).
        FileNotFoundError: no weights file (in ``prepare``); the message says where to put it.
    """

    #: The side Inception-v3 sees, and how images are resized to it.
    INPUT_SIZE, RESIZE = 299, "bilinear"

    def __init__(self, weights_path: str | None = None, batch_size: int = 200) -> None:
        self.weights_path, self.batch_size = weights_path, batch_size
        self.model: torch.nn.Module | None = None
        self._sha256: str | None = None

    def record(self) -> dict[str, Any]:
        path = Path(self.weights_path).expanduser() if self.weights_path else None
        if path is not None and path.is_file() and self._sha256 is None:
            self._sha256 = file_sha256(path)
        return super().record() | {"weights": None if path is None else str(path), "weights_sha256": self._sha256,
                                   "input_size": self.INPUT_SIZE, "resize": self.RESIZE}

    def prepare(self, data: GANData) -> None:
        if not data.is_image:
            raise ValueError(f"the inception embedder embeds images; {data.name!r} holds {data.sample_shape} points: "
                             "choose metrics/embedder=identity")
        path = Path(self.weights_path).expanduser() if self.weights_path else default_inception_weights()
        if not path.is_file():
            given = (f"metrics.embedder.weights_path={self.weights_path}" if self.weights_path
                     else "metrics.embedder.weights_path is unset, and the default")
            raise FileNotFoundError(
                f"{given} ({path}) is not a file: the inception embedder needs torchvision's Inception-v3 weights "
                f"on disk, and ganlab never downloads them. Fetch {INCEPTION_URL} and put it at "
                f"{default_inception_weights()} (where torchvision caches it; $TORCH_HOME moves it), or set "
                "metrics.embedder.weights_path=<the file>; or choose another embedder, e.g. "
                "metrics/embedder=classifier")
        import torchvision

        model = torchvision.models.inception_v3(weights=None, aux_logits=True, init_weights=False)
        model.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
        self.fc, model.fc = model.fc, torch.nn.Identity()  # the 1000-way ImageNet layer, kept for class_probabilities
        self.model = model.eval().to(data.x.device)

    @torch.no_grad()
    def __call__(self, x: Tensor) -> Tensor:
        assert self.model is not None, "call prepare(data) first"
        x = image_inputs(x)
        out = []
        for i in range(0, len(x), self.batch_size):
            b = x[i:i + self.batch_size]
            b = b.expand(-1, 3, -1, -1) if b.shape[1] == 1 else b
            b = torch.nn.functional.interpolate(b, size=(self.INPUT_SIZE,) * 2, mode=self.RESIZE, align_corners=False)
            out.append(self.model(b))
        return torch.cat(out)

    def classifier_info(self) -> dict[str, Any]:
        """ImageNet's 1,000 classes: the Inception Score proper (Salimans et al. 2016), up to the network's port."""
        return {"network": "inception", "classes": 1000, "comparable_with_published": True,
                "note": "ImageNet Inception-v3 softmax from torchvision's weights; published scores used the "
                        "original TensorFlow graph, which torchvision's port approximates (scores of one image set "
                        "differ between Inception ports: Barratt & Sharma 2018)"}

    @torch.no_grad()
    def class_probabilities(self, embeddings: Tensor) -> Tensor:
        """(N, 1000) ImageNet class probabilities: Inception-v3's final layer on the (N, 2048) pool features."""
        assert self.model is not None, "call prepare(data) first"
        return self.fc(embeddings).softmax(dim=1)


class AutoEmbedder(Embedder):
    """Identity for points, the classifier for labelled images, pixels for other images (the default)."""

    def __init__(self, **classifier_kwargs: Any) -> None:
        self.classifier_kwargs = classifier_kwargs
        self.inner: Embedder = IdentityEmbedder()

    def prepare(self, data: GANData) -> None:
        if data.is_image and data.labels is not None and data.holdout_labels is not None:
            self.inner = ClassifierEmbedder(**self.classifier_kwargs)
        elif data.is_image:
            self.inner = PixelEmbedder()
        self.inner.prepare(data)
        self.test_accuracy = self.inner.test_accuracy

    def __call__(self, x: Tensor) -> Tensor:
        return self.inner(x)

    def classifier_info(self) -> dict[str, Any] | None:
        return self.inner.classifier_info()

    def class_probabilities(self, embeddings: Tensor) -> Tensor:
        return self.inner.class_probabilities(embeddings)

    def mode_labels(self, x: Tensor) -> Tensor | None:
        return self.inner.mode_labels(x)

    def predicts_classes_of(self, data: GANData) -> bool:
        return self.inner.predicts_classes_of(data)

    def record(self) -> dict[str, Any]:
        """The record of the embedder chosen for the data (after ``prepare``)."""
        return self.inner.record()
