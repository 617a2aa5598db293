"""The evaluation hook: sample the generator, embed, run every scorer that applies to the data set.

Scorers (``metrics.scorers``, one entry each) and the embedder (``metrics.embedder``) are built by Hydra;
the evaluator never branches on a scorer's or data set's name. Every scorer also runs once on held-out
real data, so a user can tell a model problem from a data problem: those scores carry the prefix ``data/``.

Image samples are read in the range their source states, never a range guessed from their values: generated
samples in the generator's ``output_range`` (ganlab's image generators end in a tanh: (-1, 1)), else the data set's
``value_range``; real samples in the data set's; samples passed to :meth:`Evaluator.score` in the ``value_range``
given there (uint8 images are 0..255 counts). Every scorer and embedder then sees them in [-1, 1]
(:func:`~ganlab.metrics.embedders.image_inputs`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor, nn

from ganlab.data.base import GANData
from ganlab.distributed import SINGLE, Dist
from ganlab.metrics.base import EvalBatch, ReferenceFits, Scorer
from ganlab.metrics.class_evaluation import ClassEvaluation
from ganlab.metrics.clusters import default_num_clusters
from ganlab.metrics.embedders import AutoEmbedder, Embedder, image_inputs
from ganlab.metrics.numeric.kmeans import KMeansResult, assign
from ganlab.metrics.registry import DATA_PREFIX, register_scores
from ganlab.models.base import eval_mode
from ganlab.models.conditional import balanced_labels, make_codes

log = logging.getLogger("ganlab")

#: The score that counts generated samples with a NaN or Inf value (left out of every other score).
NONFINITE_KEY = "nonfinite_samples"
register_scores("nonfinite", rank=210, higher_is_better={NONFINITE_KEY: False})


@dataclass
class EvalResult:
    """One evaluation: ``scores`` (model and ``data/`` baseline), the generated ``samples``, their
    ``embeddings`` and mode ``labels`` (the embedder's), the ``classes`` (N,) a class-conditional G was asked
    for (None when unconditional), ``histograms`` (name -> (counts, edges)) for TensorBoard, and
    ``settings`` (scorer name -> the conventions its scores used, e.g. ``{"prdc": {"boundary": "official",
    ...}}``; see :meth:`Evaluator.settings`)."""

    scores: dict[str, float]
    samples: Tensor
    embeddings: Tensor
    labels: Tensor | None = None
    histograms: dict[str, tuple[Tensor, Tensor]] = field(default_factory=dict)
    settings: dict[str, dict[str, Any]] = field(default_factory=dict)
    classes: Tensor | None = None


class Evaluator:
    """Scores a generator on ``num_samples`` samples drawn from fixed latent codes.

    Args:
        num_samples: generated samples to score (PacGAN mixture protocol: 2,500).
        num_real: real training samples embedded once as the reference (seeded subset).
        scorers: name -> :class:`~ganlab.metrics.base.Scorer`.
        embedder: maps samples to embeddings (default: identity for points, classifier for images).
        batch_size: samples generated per forward pass.
        seed: seed of the evaluation latent codes and the reference subset; the training RNG streams are
            never touched.
        class_clusters: k-means centres per class for the per-class ``clusters_covered`` of a class-conditional
            G (:mod:`ganlab.metrics.per_class`; at most a class's real samples - 1).
        class_tau: cosine threshold of the per-class ``high_similarity_fraction``.
        predicted_classes: score an *unconditional* G per class too, its samples grouped by the classes the
            embedder's classifier predicts (``pred_class/...``,
            :func:`~ganlab.metrics.per_class.predicted_class_scores`; only when that classifier predicts the data's
            own classes, else skipped with a log line).

    A class-conditional G (``num_classes`` K > 0) is sampled balanced over the classes (class c for codes
    ``floor(i K / n) = c``, the same fixed z as an unconditional one) and also gets the per-class scores of
    :mod:`ganlab.metrics.per_class`, with their ``data/class/...`` baseline on held-out real samples. An
    unconditional G on labelled data gets the ``pred_class/...`` scores (``predicted_classes``), with their
    ``data/pred_class/...`` baseline on the held-out samples of the ``data/`` baseline, grouped the same way.
    The per-class half lives in :class:`~ganlab.metrics.class_evaluation.ClassEvaluation` (attribute ``classes``).

    Raises (constructor): ValueError naming the ``metrics.*`` key: a count that is not an integer or is too small,
    ``predicted_classes`` not true or false.

    Attribute ``dist`` (:class:`~ganlab.distributed.Dist`, set by the trainer's builder; one process by
    default): under several processes each rank generates and embeds its contiguous share of the rows
    (:func:`shares`) and the shares are gathered, so every rank scores the same samples a one-process run
    scores (the same latent codes, in the same order); every rank must then call the evaluator together.
    """

    dist: Dist = SINGLE

    def __init__(self, num_samples: int = 2500, num_real: int = 10_000, scorers: Mapping[str, Scorer] | None = None,
                 embedder: Embedder | None = None, batch_size: int = 1000, seed: int = 0,
                 class_clusters: int = 10, class_tau: float = 0.9, predicted_classes: bool = True) -> None:
        for key, value in (("num_samples", num_samples), ("num_real", num_real), ("class_clusters", class_clusters)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"metrics.{key} must be an integer, got {value!r}")
        if not isinstance(predicted_classes, bool):  # 'no' (a string) would read as true
            raise ValueError(f"metrics.predicted_classes must be true or false, got {predicted_classes!r}")
        if num_samples <= 1 or num_real <= 1:
            raise ValueError("metrics.num_samples and metrics.num_real must be at least 2, "
                             f"got {num_samples}, {num_real}")
        if class_clusters < 1:
            raise ValueError(f"metrics.class_clusters must be at least 1, got {class_clusters}")
        self.predicted_classes = bool(predicted_classes)
        self._held: tuple[Tensor, Tensor | None] | None = None  # the data/ baseline's embeddings and mode labels
        self.num_samples, self.num_real, self.batch_size, self.seed = num_samples, num_real, batch_size, seed
        self.classes = ClassEvaluation(num_samples, seed, class_clusters, class_tau)  # the per-class half
        self.scorers = dict(scorers or {})
        self.embedder = embedder or AutoEmbedder()
        self._prepared_for: int | None = None
        self._real: tuple[Tensor, Tensor] | None = None
        self._baseline: dict[str, float] = {}
        self._baseline_due: tuple[Tensor, GANData] | None = None  # prepare(data, baseline=False): scored later
        self._ready: list[tuple[Tensor, int, tuple, EvalResult]] = []  # precompute(): samples, id(data), range, result
        self.fits = ReferenceFits()  # k-means fits of the real reference, shared by scorers, alarm, projector

    @torch.no_grad()
    def sample(self, generator: nn.Module, n: int, device: torch.device) -> Tensor:
        """(n, *data_shape) samples from the evaluation latent codes; G is put in eval mode meanwhile. A
        class-conditional G gets the classes :func:`~ganlab.models.conditional.balanced_labels` (n, K).

        Under several processes every rank draws all n codes (in the same chunks of ``batch_size``), generates
        its share of the rows and gathers the others'.
        """
        gen = torch.Generator(device=device).manual_seed(self.seed + 7919)
        k = int(getattr(generator, "num_classes", 0))
        classes = balanced_labels(n, k, device) if k else None

        def codes(i: int) -> Tensor:
            z = torch.randn(min(self.batch_size, n - i), generator.z_dim, generator=gen, device=device)
            return z if classes is None else make_codes(z, classes[i:i + len(z)])

        with eval_mode(generator):
            if not self.dist.active:
                return torch.cat([generator(codes(i)) for i in range(0, n, self.batch_size)])
            z = torch.cat([codes(i) for i in range(0, n, self.batch_size)])  # (n, z_dim[+1]), the one-process codes
            return self._sharded(lambda part: torch.cat([generator(c) for c in part.split(self.batch_size)])
                                 if len(part) else generator(part), z)

    def _sharded(self, fn: Any, x: Tensor) -> Any:
        """``fn(x)`` computed row-wise in shares: each rank applies ``fn`` to its rows of (N, ...) ``x`` and the
        results are gathered in row order (one process: ``fn(x)``). ``fn`` returns (rows, ...) or None."""
        if not self.dist.active:
            return fn(x)
        counts = shares(len(x), self.dist.world)
        lo = sum(counts[: self.dist.rank])
        local = fn(x[lo:lo + counts[self.dist.rank]])
        if local is None:
            return None
        return self.dist.gather_rows(local, counts)

    def prepare(self, data: GANData, baseline: bool = True) -> None:
        """Once per data set: prepare the embedder, embed the real reference, score the held-out baseline.

        ``baseline=False`` leaves the baseline's scoring for :meth:`prepare_baseline` (the first evaluation does it
        otherwise), so that an ensemble can score its members' baselines side by side
        (:func:`ganlab.run.ensemble.run.build_ensemble`); the scores are the same.

        Under several processes rank 0 prepares the embedder first (it may train and cache a classifier), then the
        other ranks prepare theirs from that cache, so the ranks neither train it N times nor write one cache file
        at once; every rank must call this together.
        """
        if self._prepared_for == id(data):
            return
        if not self.dist.main:
            self.dist.barrier()
        self.embedder.prepare(data)
        if self.dist.main:
            self.dist.barrier()  # a no-op in one process
        for scorer in self.scorers.values():  # refuse a scorer that cannot score these data before any scoring
            scorer.check(data, self.embedder)
        idx = self._reference_index(data).to(data.x.device)
        real = model_range(data.x[idx], data)
        self._real = (real, self._sharded(self.embedder, real))
        self.classes.reset(*self._real, data.labels[idx] if data.labels is not None else None)
        self.fits.clear()
        self._prepared_for = id(data)
        self._baseline, self._ready = {}, []
        held = data.holdout if data.holdout is not None else data.x
        if len(held) < self.num_samples and self.dist.main:
            log.warning("the data baseline (data/...) scores all %d held-out samples of %s, fewer than the %d "
                        "generated ones (metrics.num_samples): the scores that depend on the sample size (NDB, "
                        "reverse KL, PRDC, Vendi, the similarity histogram) are not on the same footing in the two "
                        "columns; metrics.num_samples=%d scores as many of each", len(held), data.name,
                        self.num_samples, len(held))
        self._baseline_due = (held[: self.num_samples], data)
        if baseline:
            self.prepare_baseline()

    def _reference_index(self, data: GANData) -> Tensor:
        """The indices (num_real,) of ``data``'s samples in the real reference (seeded by the evaluator's seed)."""
        gen = torch.Generator().manual_seed(self.seed)
        return torch.randperm(len(data), generator=gen)[: self.num_real]

    def check_class_counts(self, data: GANData, num_classes: int) -> None:
        """Before any work: a class-conditional G's per-class scores (:meth:`per_class`, :meth:`class_baseline`)
        have enough samples of each class (:meth:`ganlab.metrics.class_evaluation.ClassEvaluation.check_counts`).

        Raises:
            ValueError: naming the setting to raise (``metrics.num_samples``, ``metrics.num_real``) and a value that
                gives enough, or the class with too few held-out samples.
        """
        assert data.labels is not None
        self.classes.check_counts(data, num_classes, data.labels[self._reference_index(data)], self.num_real)

    def prepare_baseline(self) -> None:
        """Score the held-out real samples (the ``data/`` scores) if :meth:`prepare` left them to do; else no-op."""
        if self._baseline_due is None:
            return
        held, data = self._baseline_due
        result = self.score(held, data)
        self._held = (result.embeddings, result.labels)
        self._baseline = {f"{DATA_PREFIX}{k}": v for k, v in result.scores.items()}
        if self.embedder.test_accuracy is not None:
            self._baseline[f"{DATA_PREFIX}classifier_accuracy"] = float(self.embedder.test_accuracy)
        self._baseline_due = None

    def precompute(self, samples: Tensor, data: GANData, value_range: tuple[float, float] | None = None) -> None:
        """Score ``samples`` now and keep the result for the next :meth:`score` of the same samples (equal
        element by element) on the same data set, which returns it instead of scoring again: an ensemble scores
        its members' evaluations side by side before each member's trainer evaluates
        (:meth:`ganlab.run.ensemble.trainer.EnsembleTrainer.precompute_evaluations`). Samples that differ (or are
        read in another ``value_range``) are simply scored again, so the scores never depend on this."""
        result = self.score(samples, data, value_range)  # prepares first (which empties the list) on a new data set
        self._ready.append((samples, id(data), data.value_range if value_range is None else tuple(value_range), result))

    @property
    def reference(self) -> tuple[Tensor, Tensor]:
        """The real reference the scorers compare against: ``(samples (num_real, *data_shape), embeddings
        (num_real, D))``, a seeded subset of the training data (images in [-1, 1]).

        Raises:
            RuntimeError: the evaluator has not been prepared (call :meth:`prepare` or score something first).
        """
        if self._real is None:
            raise RuntimeError("the evaluator has no real reference yet: call evaluator.prepare(data) first")
        return self._real

    def reference_clusters(self, k: int, seed: int | None = None) -> KMeansResult:
        """k-means (k-means++, 3 inits, seeded by ``seed``, default the evaluator's) on the real reference
        embeddings: the same cached fit the ``clusters``/``ndb`` scorers use for that k and seed.

        Raises:
            RuntimeError: the evaluator has not been prepared.
            ValueError: k is not in [1, num_real).
        """
        if self._real is None:
            raise RuntimeError("the evaluator has no real reference yet: call evaluator.prepare(data) first")
        return self.fits.fit(self._real[1], k, self.seed if seed is None else seed)

    def settings(self, data: GANData) -> dict[str, dict[str, Any]]:
        """Scorer name -> :meth:`~ganlab.metrics.base.Scorer.settings`, for the scorers that apply to ``data``
        and report any (``metrics.json``'s ``"score_settings"``)."""
        out = {name: scorer.settings() for name, scorer in self.scorers.items() if scorer.applies_to(data)}
        return {name: s for name, s in out.items() if s}

    def score(self, samples: Tensor, data: GANData, value_range: tuple[float, float] | None = None) -> EvalResult:
        """Embed ``samples`` (N, *data_shape) and run every applicable scorer (after :meth:`prepare`).

        Args:
            samples: generated or real samples; images float or uint8 (0..255 counts).
            data: the data set they are scored against.
            value_range: ``(low, high)`` of float image ``samples`` (e.g. ``(0, 1)``); None: the data set's
                ``value_range`` ((-1, 1) for ganlab's loaders). Ignored for points. ``result.samples`` are the
                samples in [-1, 1].

        Raises:
            ValueError: image values outside the stated range (naming it), or a scorer that cannot score them.
        """
        self.prepare(data)
        assert self._real is not None
        value_range = data.value_range if value_range is None else tuple(value_range)  # type: ignore[assignment]
        for i, (done, data_id, done_range, result) in enumerate(self._ready):
            if data_id == id(data) and done_range == value_range and done.shape == samples.shape \
                    and torch.equal(done, samples):
                del self._ready[i]
                return result
        samples = model_range(samples, data, value_range)
        batch = EvalBatch(samples=samples, embeddings=self._sharded(self.embedder, samples),
                          labels=self._sharded(self.embedder.mode_labels, samples),
                          real_embeddings=self._real[1], real_samples=self._real[0], data=data, fits=self.fits,
                          embedder=self.embedder)
        scores: dict[str, float] = {}
        for name, scorer in self.scorers.items():
            if scorer.applies_to(data):
                try:
                    scores.update(scorer(batch))
                except ValueError as err:
                    raise ValueError(f"metrics.scorers.{name} cannot score {len(samples)} samples against "
                                     f"{len(batch.real_embeddings)} real ones: {err}. Raise metrics.num_samples / "
                                     f"metrics.num_real, or drop the scorer with ~metrics.scorers.{name}") from err
        return EvalResult(scores, samples, batch.embeddings, batch.labels, batch.histograms, self.settings(data))

    def __call__(self, generator: nn.Module, data: GANData) -> EvalResult:
        """Score ``generator``; the result's scores include the ``data/`` baseline.

        G's images are read in its ``output_range`` (:func:`generated_range`). Generated samples with a NaN or Inf
        value are left out: every score is computed on the finite ones,
        and ``scores["nonfinite_samples"]`` counts the others (0 when all are finite; the trainer alerts on
        more). ``result.samples`` holds the finite samples only.

        Raises:
            ValueError: fewer than 2 generated samples are finite (nothing to score; G's outputs are broken).
        """
        self.prepare(data)
        self.prepare_baseline()
        samples, finite = self.generate(generator)
        result = self.score(samples, data, generated_range(generator, data))
        result.scores[NONFINITE_KEY] = float(self.num_samples - len(samples))
        result.scores.update(self._baseline)
        k = int(getattr(generator, "num_classes", 0))
        if k:
            classes = balanced_labels(self.num_samples, k, samples.device)[finite.to(samples.device)]
            result.classes = classes
            result.scores.update(self.per_class(result.embeddings, classes, result.labels, k))
            result.scores.update(self.class_baseline(data, k))
        elif self.predicted_classes:
            result.scores.update(self.predicted_class(result, data))
        return result

    def predicted_class_skip(self, data: GANData) -> str:
        """Why an unconditional G's ``pred_class/...`` scores do not apply to ``data`` (after :meth:`prepare`), or
        "" when they do (:meth:`ganlab.metrics.class_evaluation.ClassEvaluation.predicted_skip`)."""
        return self.classes.predicted_skip(data, self.embedder)

    def predicted_class(self, result: EvalResult, data: GANData) -> dict[str, float]:
        """The ``pred_class/...`` scores of an unconditional G's evaluation ``result`` (its samples grouped by
        ``result.labels``, the embedder's predicted classes) and their ``data/pred_class/...`` baseline; {} (and
        one log line per data set) when :meth:`predicted_class_skip` says they do not apply."""
        return self.classes.predicted(result.embeddings, result.labels, data, self.embedder, self._held)

    def generate(self, generator: nn.Module, warn: bool = True) -> tuple[Tensor, Tensor]:
        """The samples an evaluation scores: ``num_samples`` from the fixed codes (:meth:`sample`), those with a
        NaN or Inf value left out (with a logged warning when ``warn``). Returns ``(finite samples
        (M, *data_shape), finite mask (num_samples,))``.

        Raises:
            ValueError: fewer than 2 generated samples are finite (nothing to score; G's outputs are broken).
        """
        samples = self.sample(generator, self.num_samples, next(generator.parameters()).device)
        finite = torch.isfinite(samples.flatten(1)).all(dim=1)  # (N,)
        bad = len(samples) - int(finite.sum())
        if bad:
            if warn:
                log.warning("evaluation: %d of %d generated samples contain NaN or Inf; scoring the %d finite ones",
                            bad, len(samples), len(samples) - bad)
            samples = samples[finite]
        if len(samples) < 2:
            raise ValueError(f"evaluation: {bad} of {self.num_samples} generated samples contain NaN or Inf, "
                             "fewer than 2 are finite; the generator's outputs are broken (check its weights "
                             "for NaN, or train with monitor.nan_guard=true)")
        return samples, finite

    def class_reference(self, c: int) -> tuple[Tensor, Tensor, KMeansResult]:
        """Class c's part of the real reference: ``(samples (N_c, *data_shape), embeddings (N_c, D), fit)``, with
        ``fit`` the k-means of those embeddings behind ``class/<c>/clusters_covered`` (cached).

        Raises:
            ValueError: the evaluator is not prepared on a labelled data set, or class c has no reference sample.
        """
        return self.classes.reference(c)

    def per_class(self, embeddings: Tensor, classes: Tensor, predicted: Tensor | None,
                  num_classes: int) -> dict[str, float]:
        """:func:`~ganlab.metrics.per_class.class_scores` of ``embeddings`` (N, D) made for ``classes`` (N,)
        against the real reference (after :meth:`prepare`); ``predicted``: the embedder's labels or None.

        Raises:
            ValueError: the data set has no labels, or a class has too few samples (naming the settings to raise).
        """
        return self.classes.scores(embeddings, classes, predicted, num_classes)

    def class_baseline(self, data: GANData, num_classes: int) -> dict[str, float]:
        """The per-class scores of held-out real samples (up to ``num_samples / K`` of each class, their true
        classes as the requested ones), as ``data/class/...``; computed once per data set."""

        def embed(held: Tensor) -> tuple[Tensor, Tensor | None]:
            x = model_range(held, data)
            return self.embedder(x), self.embedder.mode_labels(x)

        return self.classes.baseline(data, num_classes, embed)

    def projector(self, result: EvalResult, data: GANData,
                  n: int = 500) -> tuple[Tensor, list[list[str]], list[str], Tensor | None]:
        """Points for TensorBoard's projector: ``n`` real and ``n`` generated embeddings with metadata
        (source, k-means cluster of the real reference) and, for images, sprites in [0, 1].

        Returns:
            (mat (2n, D), metadata rows, header ``["source", "cluster"]``, sprites (2n, C, H, W) or None).
        """
        assert self._real is not None, "call the evaluator first"
        real_x, real_emb = self._real[0][:n], self._real[1][:n]
        fake_x, fake_emb = result.samples[:n], result.embeddings[:n]
        fit = self.reference_clusters(min(default_num_clusters(data.num_modes), len(self._real[1]) - 1))
        clusters = torch.cat([assign(real_emb, fit.centers)[0], assign(fake_emb, fit.centers)[0]]).tolist()
        sources = ["real"] * len(real_emb) + ["generated"] * len(fake_emb)
        metadata = [[src, str(c)] for src, c in zip(sources, clusters)]
        sprites = torch.cat([real_x, fake_x]).add(1).div(2).clamp(0, 1) if data.is_image else None
        return torch.cat([real_emb, fake_emb]), metadata, ["source", "cluster"], sprites


def shares(n: int, world: int) -> list[int]:
    """Rows of each of ``world`` ranks when n rows are split in contiguous shares, the first ``n % world`` ranks
    one row more (``shares(5, 2) == [3, 2]``)."""
    return [n // world + (r < n % world) for r in range(world)]


def generated_range(generator: nn.Module, data: GANData) -> tuple[float, float]:
    """The range G's samples are read in: its ``output_range`` (:class:`ganlab.models.base.Generator`) when it
    declares one, else the data set's ``value_range`` (G is trained to make samples like the data's)."""
    declared = getattr(generator, "output_range", None)
    return (float(declared[0]), float(declared[1])) if declared is not None else data.value_range


def model_range(samples: Tensor, data: GANData, value_range: tuple[float, float] | None = None) -> Tensor:
    """Image ``samples`` (N, C, H, W) of ``data``'s kind in [-1, 1], read in ``value_range`` (None: the data set's
    ``value_range``) by :func:`~ganlab.metrics.embedders.image_inputs`; points (N, D) as they are.

    Raises:
        ValueError: image values outside the stated range, or a dtype that is neither float nor uint8.
    """
    if samples.dim() < 3:
        return samples
    return image_inputs(samples, data.value_range if value_range is None else value_range)
