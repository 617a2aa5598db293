"""Near-duplicate and memorisation rates of generated samples (cosine similarity, blocked).

Both rates use cosine similarity of embeddings, which ignores the embedding scale (so one
threshold works across feature extractors) and is what the pairwise-similarity histogram
of :mod:`ganlab.metrics.similarity` uses. A pair is a (near-)duplicate when its similarity
is ``>= threshold`` (default 0.99). Cosine similarity is undefined for an all-zero
embedding; by convention (:func:`~ganlab.metrics.similarity.cross_similarity`) two all-zero
embeddings are identical (a duplicate, or a memorised sample), and an all-zero embedding has
similarity 0 with any other, so a generator stuck on a zero output scores as collapsed.

These are thresholded nearest-neighbour rates defined here, not formulas from a paper.
Related tests: near-duplicates among generated samples underlie the birthday-paradox
support-size test of Arora, Risteski & Zhang 2018 ("Do GANs learn the distribution? Some
theory and empirics", ICLR); memorisation is usually checked via the nearest training
neighbour of each generated sample (e.g. Carlini et al. 2023, "Extracting Training Data
from Diffusion Models", USENIX Security), here in embedding space with cosine similarity.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from torch import Tensor

from ganlab.data.base import GANData
from ganlab.metrics.base import EvalBatch, Scorer
from ganlab.metrics.numeric.blocks import DEFAULT_BLOCK_SIZE, validate_embeddings
from ganlab.metrics.numeric.order import order_free_subset
from ganlab.metrics.registry import register
from ganlab.metrics.similarity import cross_similarity

__all__ = ["DEFAULT_DUPLICATE_THRESHOLD", "DuplicateScorer", "duplicate_fraction", "memorization_fraction"]

#: Cosine similarity at or above which two embeddings count as the same sample.
DEFAULT_DUPLICATE_THRESHOLD = 0.99


def _check_threshold(threshold: float) -> None:
    if not -1.0 <= threshold <= 1.0:
        raise ValueError(f"threshold is a cosine similarity and must lie in [-1, 1], got {threshold}")


def duplicate_fraction(fake: Tensor, threshold: float = DEFAULT_DUPLICATE_THRESHOLD,
                       block_size: int = DEFAULT_BLOCK_SIZE) -> float:
    """Share of generated samples with a near-duplicate among the *other* generated samples.

    ``(1/M) sum_i 1[max_{j != i} cos(y_i, y_j) >= threshold]``; the pair ``(i, i)`` is
    excluded by index. Both members of a duplicate pair count. Lower is better; a fully
    collapsed generator scores 1.

    Args:
        fake: Generated embeddings, shape ``(M, D)`` with ``M >= 2``.
        threshold: Cosine-similarity threshold in ``[-1, 1]``.
        block_size: Maximum number of similarities materialised at once.

    Returns:
        A float in ``[0, 1]``.

    Raises:
        ValueError: If ``fake`` is not a finite ``(M, D)`` tensor with ``M >= 2`` or
            ``threshold`` is outside ``[-1, 1]``.
    """
    _check_threshold(threshold)
    fake = validate_embeddings(fake, "fake", min_rows=2)
    best, _ = cross_similarity(fake, fake, exclude_self=True, block_size=block_size)
    return float((best >= threshold).sum()) / fake.shape[0]


def memorization_fraction(fake: Tensor, train: Tensor, threshold: float = DEFAULT_DUPLICATE_THRESHOLD,
                          block_size: int = DEFAULT_BLOCK_SIZE) -> float:
    """Share of generated samples nearly identical to some training sample.

    ``(1/M) sum_i 1[max_j cos(y_i, x_j) >= threshold]`` with ``y`` generated and ``x``
    training embeddings. Lower is better (0 = nothing copied, 1 = everything copied).

    Args:
        fake: Generated embeddings, shape ``(M, D)``.
        train: Training embeddings, shape ``(N, D)``, same device.
        threshold: Cosine-similarity threshold in ``[-1, 1]``.
        block_size: Maximum number of similarities materialised at once.

    Returns:
        A float in ``[0, 1]``.

    Raises:
        ValueError: On malformed inputs, mismatched ``D`` or ``threshold`` outside ``[-1, 1]``.
    """
    _check_threshold(threshold)
    fake = validate_embeddings(fake, "fake")
    train = validate_embeddings(train, "train")
    best, _ = cross_similarity(fake, train, block_size=block_size)
    return float((best >= threshold).sum()) / fake.shape[0]


@register("duplicates", rank=100,
          what="images: share of generated samples with a near-identical (pixel cosine ≥ 0.99) other generated "
               "sample / training sample", range="0-1", source="ganlab")
class DuplicateScorer(Scorer):
    """``duplicate_fraction`` (generated samples with a near-identical other generated sample) and
    ``memorization_fraction`` (generated samples nearly identical to a training sample): cosine similarity
    >= ``threshold`` in pixel space (``space="pixels"``, default) or in the embedding space.

    At most ``num_samples`` generated samples are scored: :func:`~ganlab.metrics.numeric.order.order_free_subset`'s
    of the compared rows (the same for any order of the samples).

    Pixel space is the default because a classifier's features make every sample of a class look alike
    (on digits, 75% of held-out images are within cosine 0.99 of a training image in classifier space,
    0.3% in pixel space).
    """

    higher_is_better: ClassVar[Mapping[str, bool | None]] = {
        "duplicate_fraction": False, "memorization_fraction": False}

    def __init__(self, threshold: float = 0.99, num_samples: int = 2500, space: str = "pixels") -> None:
        if space not in ("pixels", "embedding"):
            raise ValueError(f"metrics.scorers.duplicates.space must be 'pixels' or 'embedding', got {space!r}")
        self.threshold, self.num_samples, self.space = threshold, num_samples, space

    def applies_to(self, data: GANData) -> bool:
        return data.is_image  # 2-D points: cosine near-duplicates are meaningless (a whole mode is "one" direction)

    def __call__(self, batch: EvalBatch) -> dict[str, float]:
        if self.space == "pixels":
            fake, real = batch.samples.flatten(1), batch.real_samples.flatten(1)
        else:
            fake, real = batch.embeddings, batch.real_embeddings
        fake = fake[order_free_subset(fake, self.num_samples)]
        return {"duplicate_fraction": duplicate_fraction(fake, self.threshold),
                "memorization_fraction": memorization_fraction(fake, real, self.threshold)}
