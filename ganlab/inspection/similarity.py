"""How similar the samples are: pairwise-similarity histograms (now and over checkpoints), the most similar
pairs, and the table of scores."""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace
from pathlib import Path

import torch
from torch import Tensor

from ganlab import layout
from ganlab.inspection.runs import LoadedRun, list_checkpoints, load_run
from ganlab.io import md_row, md_rule
from ganlab.metrics.directions import higher_is_better, ordered_scores
from ganlab.metrics.evaluator import EvalResult, Evaluator, generated_range, model_range
from ganlab.metrics.numeric.blocks import DEFAULT_BLOCK_SIZE, rows_per_block, validate_embeddings
from ganlab.metrics.registry import DATA_PREFIX
from ganlab.metrics.similarity import SimilarityHistogram, SimilarityScorer, normalize_rows
from ganlab.trainer import checkpoint as ckpt_io
from ganlab.trainer.state import scored_generator


# ---------------------------------------------------------------------------------------------- similarity
@dataclass
class CheckpointHistogram:
    """The generated samples' pairwise-similarity histogram at one checkpoint (see
    :func:`histograms_over_checkpoints`)."""

    step: int
    checkpoint: Path
    histogram: SimilarityHistogram


def _similarity_settings(evaluator: Evaluator) -> SimilarityScorer:
    scorer = evaluator.scorers.get("similarity")
    return scorer if isinstance(scorer, SimilarityScorer) else SimilarityScorer()


def similarity_histograms(run: LoadedRun, result: EvalResult) -> dict[str, SimilarityHistogram]:
    """Pairwise cosine-similarity histograms of the generated and of held-out real samples.

    Both use the ``similarity`` scorer's settings (its ``num_samples``, ``bins``, ``tau``; the defaults when
    the run has no such scorer) on the embeddings, as the scores do: ``generated`` is computed on ``result``'s
    embeddings (its ``high_similarity_fraction`` is the score of that name), ``real`` on the held-out samples
    the ``data/`` baseline uses (the training data when there is no held-out split), so its fraction is
    ``data/high_similarity_fraction``.

    Returns:
        ``{"generated": SimilarityHistogram, "real": SimilarityHistogram}`` (counts (bins,), edges (bins + 1,)
        on [-1, 1]).
    """
    sim, ev = _similarity_settings(run.evaluator), run.evaluator
    held = run.data.holdout if run.data.holdout is not None else run.data.x
    real_emb = ev.embedder(model_range(held[: ev.num_samples], run.data))
    return {"generated": sim.histogram(result.embeddings), "real": sim.histogram(real_emb)}


@torch.no_grad()
def histograms_over_checkpoints(run: LoadedRun | str | Path, include_last: bool = True) -> list[CheckpointHistogram]:
    """The generated similarity histogram at every saved checkpoint of a run, in step order.

    Each ``checkpoints/step_*.pt`` (and ``last.pt`` when its step is not among them) is loaded into copies of
    the run's G and EMA copy; the one the loop scores (:func:`ganlab.trainer.state.scored_generator`: the EMA
    copy, batch-norm statistics recomputed, when the run kept one) is sampled from the evaluator's fixed latent codes,
    embedded, and histogrammed with the ``similarity`` scorer's settings. Mass moving to the right (towards
    cosine 1) over training is mode collapse setting in.

    Args:
        run: a :class:`LoadedRun`, or a run directory (loaded with :func:`load_run`).
        include_last: also use ``checkpoints/last.pt``.

    Returns:
        One :class:`CheckpointHistogram` per checkpoint, by increasing step.

    Raises:
        FileNotFoundError: not a run directory, or it holds no checkpoint (set ``trainer.ckpt_every`` below
            ``trainer.steps`` to keep intermediate ones).
    """
    if not isinstance(run, LoadedRun):
        run = load_run(run)
    found = dict(list_checkpoints(run.run_dir))
    last = layout.last_checkpoint(run.run_dir)
    if include_last and last.is_file():
        found.setdefault(int(ckpt_io.load_checkpoint(last)["step"]), last)
    if not found:
        raise FileNotFoundError(f"{run.run_dir} has no checkpoints/step_*.pt{' or last.pt' if include_last else ''}: "
                                "keep intermediate checkpoints with trainer.ckpt_every below trainer.steps")
    sim, ev = _similarity_settings(run.evaluator), run.evaluator
    live = run.trainer.state
    G = copy.deepcopy(live.generator)  # copies: the run's own networks keep the weights they were loaded with
    G_ema = copy.deepcopy(live.g_ema) if live.g_ema is not None else None
    device = next(G.parameters()).device
    out = []
    for step in sorted(found):
        ckpt = ckpt_io.load_checkpoint(found[step])  # one in memory at a time
        G.load_state_dict(ckpt["generator"])
        keeps_ema = G_ema is not None and ckpt.get("g_ema") is not None
        if keeps_ema:
            G_ema.load_state_dict(ckpt["g_ema"])
        scored = scored_generator(replace(live, generator=G, g_ema=G_ema if keeps_ema else None))
        samples = model_range(ev.sample(scored, ev.num_samples, device), run.data, generated_range(scored, run.data))
        out.append(CheckpointHistogram(step, found[step], sim.histogram(ev.embedder(samples))))
    return out


def most_similar_pairs(x: Tensor, n: int = 8, block_size: int = DEFAULT_BLOCK_SIZE) -> list[tuple[int, int, float]]:
    """The ``n`` most similar pairs ``i < j`` of rows of ``x`` by cosine similarity, most similar first.

    Computed in row blocks, never the whole N x N matrix (at most ``block_size`` similarities at once).
    Near-duplicates of a collapsed generator show up here with cosine near 1. An all-zero row has similarity 0
    with everything; ties at the cut-off are broken arbitrarily.

    Args:
        x: embeddings (or flattened samples), shape (N, D), N >= 2.
        n: number of pairs (>= 1); fewer when N (N - 1) / 2 < n.
        block_size: similarities held at once.

    Returns:
        ``[(i, j, cosine)]``, i < j row indices, cosine in [-1, 1], sorted by decreasing cosine (then i, j).

    Raises:
        ValueError: ``x`` not a finite (N, D) tensor with N >= 2, or ``n < 1``.
    """
    x = validate_embeddings(x, "x", min_rows=2)
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive integer number of pairs, got {n!r}")
    xn, total = normalize_rows(x), x.shape[0]
    cols = torch.arange(total, device=x.device)
    step = rows_per_block(total, block_size)
    vals, rows_i, cols_j = [], [], []
    for s in range(0, total - 1, step):
        e = min(s + step, total - 1)
        sim = xn[s:e] @ xn.T  # (r, N)
        sim.masked_fill_(cols.unsqueeze(0) <= torch.arange(s, e, device=x.device).unsqueeze(1), -float("inf"))
        top = torch.topk(sim.flatten(), min(n, sim.numel()))
        keep = torch.isfinite(top.values)
        vals.append(top.values[keep])
        rows_i.append(top.indices[keep] // total + s)
        cols_j.append(top.indices[keep] % total)
    v, i, j = torch.cat(vals).clamp(-1, 1).tolist(), torch.cat(rows_i).tolist(), torch.cat(cols_j).tolist()
    return sorted(zip(i, j, v), key=lambda t: (-t[2], t[0], t[1]))[:n]




# ---------------------------------------------------------------------------------------------- tables
def scores_table(scores: dict[str, float], stored: dict[str, float] | None = None) -> str:
    """A markdown table of the model's scores beside the ``data/`` baseline (held-out real data).

    Args:
        scores: score name -> value, with ``data/<name>`` baseline entries (``EvalResult.scores``).
        stored: optional scores saved at training time (``LoadedRun.stored_scores``), shown in a third column.

    Returns:
        Markdown text: one row per model score (known scores first, in ``ganlab-compare``'s order), with the
        direction (↑ higher is better, ↓ lower is better) and values to 4 significant digits.
    """
    arrows = {True: "↑", False: "↓", None: ""}
    head = ["score", "", "generated", "data (held-out)"] + (["at training"] if stored is not None else [])
    lines = [md_row(head), md_rule(len(head))]

    def fmt(value: float | None) -> str:
        return "" if value is None else f"{float(value):.4g}"

    for key in ordered_scores(k for k in scores if not k.startswith(DATA_PREFIX)):
        row = [key, arrows[higher_is_better(key)], fmt(scores[key]), fmt(scores.get(f"{DATA_PREFIX}{key}"))]
        if stored is not None:
            row.append(fmt(stored.get(key)))
        lines.append(md_row(row))
    return "\n".join(lines)

