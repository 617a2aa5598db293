"""Where training statistics go: TensorBoard event files in the run directory (or nowhere)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from ganlab.hparams import hparams_summaries

log = logging.getLogger("ganlab")

#: Most points one projector embedding holds (TensorBoard's projector slows to a crawl beyond this).
PROJECTOR_MAX_ROWS = 100_000
#: Fewest columns TensorBoard's projector draws points from (see :func:`pad_for_projector`).
PROJECTOR_MIN_DIM = 3


def pad_for_projector(mat: Tensor) -> Tensor:
    """(N, D) points with D < 3 -> (N, 3), the missing columns zero; others returned unchanged.

    TensorBoard's projector (``vz_projector`` ``DataSet.projectPCA``, TensorBoard 2.x) projects every point on
    10 principal components by reading a D x D eigenvector matrix, so components D and up are NaN; its default
    3-D PCA view uses components 1-3. With D = 2 the third is NaN: no point is drawn and the panel reads "Total
    variance described: NaN%". A zero third column has zero variance, so the view becomes the data's plane and
    the two real components describe 100 % of the variance.

    Raises:
        ValueError: ``mat`` is not 2-D.
    """
    if mat.dim() != 2:
        raise ValueError(f"projector points must be (N, D), got shape {tuple(mat.shape)}")
    missing = PROJECTOR_MIN_DIM - mat.shape[1]
    return torch.cat([mat, mat.new_zeros(len(mat), missing)], 1) if missing > 0 else mat


class NullLogger:
    """Discards everything (``logger=none``); the interface every logger implements."""

    def __init__(self, log_dir: str | Path | None = None, **_: Any) -> None:
        self.log_dir = log_dir

    def scalars(self, values: dict[str, float], step: int) -> None:
        """Log each name -> value at ``step``."""

    def image(self, tag: str, image: Tensor, step: int) -> None:
        """Log a (3, H, W) image in [0, 1]."""

    def figure(self, tag: str, figure: Any, step: int) -> None:
        """Log a matplotlib figure (closed afterwards, so long runs do not pile figures up)."""
        if getattr(figure.canvas, "manager", None) is not None:  # a pyplot figure; one made without pyplot is freed
            import matplotlib.pyplot as plt  # once unreferenced, and pyplot is not needed

            plt.close(figure)

    def histogram(self, tag: str, values: Tensor, step: int) -> None:
        """Log the distribution of ``values``."""

    def histogram_counts(self, tag: str, counts: Tensor, edges: Tensor, step: int) -> None:
        """Log a histogram already binned: ``counts`` (B,) over ``edges`` (B+1,)."""

    def embedding(self, mat: Tensor, metadata: list[list[str]], header: list[str], label_img: Tensor | None,
                  tag: str, step: int) -> None:
        """Log points (N, D) for TensorBoard's projector, with metadata rows and optional (N, C, H, W) sprites."""

    def text(self, tag: str, text: str, step: int) -> None:
        """Log a text event (alerts, rollbacks)."""

    def hparams(self, hparams: dict[str, str | int | float], metric_tags: list[str]) -> None:
        """Log the run's HParams session: hyperparameter values, and the scalar tags to show as metrics."""

    def custom_scalars(self, layout: dict[str, dict[str, list[Any]]]) -> None:
        """Log a custom-scalars layout ``{category: {chart title: ["Multiline", [tag regexes]]}}``."""

    def flush(self) -> None:
        """Write buffered events to disk."""

    def close(self) -> None:
        """Flush and release files."""


class TensorBoardLogger(NullLogger):
    """Writes TensorBoard event files into ``log_dir`` (the run directory) via ``torch.utils.tensorboard``.

    Histograms never raise or write NaN: non-finite values are dropped (counted in :attr:`dropped` and
    warned about), and a histogram with nothing left is skipped with a warning. The projector holds at most
    ``projector_max_rows`` points: larger sets are subsampled (seeded, the same rows every time) and the
    metadata gains a ``row`` column with each point's index in the full set.

    Args:
        log_dir: folder for the event files.
        flush_secs: how often pending events are written.
        purge_step: on resume, events at or after this step left by an earlier writer are hidden.
        projector_max_rows: at most this many projector points (>= 1; default :data:`PROJECTOR_MAX_ROWS`).

    Raises:
        ValueError: ``projector_max_rows`` < 1.
    """

    def __init__(self, log_dir: str | Path, flush_secs: int = 30, purge_step: int | None = None,
                 projector_max_rows: int = PROJECTOR_MAX_ROWS) -> None:
        from torch.utils.tensorboard import SummaryWriter

        if int(projector_max_rows) < 1:
            raise ValueError(f"logger.projector_max_rows must be >= 1, got {projector_max_rows}")
        self.projector_max_rows = int(projector_max_rows)
        self.dropped: dict[str, int] = {}  # tag -> non-finite histogram values dropped so far
        self.writer = SummaryWriter(log_dir=str(log_dir), flush_secs=flush_secs, purge_step=purge_step)

    def scalars(self, values: dict[str, float], step: int) -> None:
        for k, v in values.items():
            self.writer.add_scalar(k, v, step)

    def image(self, tag: str, image: Tensor, step: int) -> None:
        self.writer.add_image(tag, image, step)

    def figure(self, tag: str, figure: Any, step: int) -> None:
        self.writer.add_figure(tag, figure, step, close=True)

    def histogram(self, tag: str, values: Tensor, step: int) -> None:
        v = values.detach().flatten().cpu()
        finite = v[torch.isfinite(v)]
        if len(finite) < len(v):
            self.dropped[tag] = self.dropped.get(tag, 0) + len(v) - len(finite)
            log.warning("histogram %s at step %d: dropped %d non-finite of %d values", tag, step,
                        len(v) - len(finite), len(v))
        if len(finite) == 0:
            log.warning("histogram %s at step %d: no finite values; skipped", tag, step)
            return
        self.writer.add_histogram(tag, finite, step)

    def histogram_counts(self, tag: str, counts: Tensor, edges: Tensor, step: int) -> None:
        c, e = counts.detach().double().cpu(), edges.detach().double().cpu()
        if len(c) == 0 or len(e) != len(c) + 1 or not (torch.isfinite(c).all() and torch.isfinite(e).all()):
            log.warning("histogram %s at step %d: %d counts over %d edges, finite: %s; skipped", tag, step, len(c),
                        len(e), bool(torch.isfinite(c).all() and torch.isfinite(e).all()))
            return
        centres = (e[:-1] + e[1:]) / 2
        nz = (c > 0).nonzero()
        lo, hi = (float(e[nz[0, 0]]), float(e[nz[-1, 0] + 1])) if len(nz) else (0.0, 0.0)
        self.writer.add_histogram_raw(tag, min=lo, max=hi, num=int(c.sum()), sum=float((c * centres).sum()),
                                      sum_squares=float((c * centres**2).sum()), bucket_limits=e[1:].tolist(),
                                      bucket_counts=c.tolist(), global_step=step)

    def embedding(self, mat: Tensor, metadata: list[list[str]], header: list[str], label_img: Tensor | None,
                  tag: str, step: int) -> None:
        if len(mat) > self.projector_max_rows:
            rows = torch.randperm(len(mat), generator=torch.Generator().manual_seed(0))[: self.projector_max_rows]
            rows = rows.sort().values
            log.warning("projector %s: %d points, more than %d; writing a seeded subsample (metadata column 'row': "
                        "each point's index in the full set)", tag, len(mat), self.projector_max_rows)
            mat, header = mat[rows.to(mat.device)], [*header, "row"]
            metadata = [[*metadata[i], str(i)] for i in rows.tolist()]
            label_img = None if label_img is None else label_img[rows.to(label_img.device)]
        mat = mat.detach().float().cpu()
        if mat.shape[1] < PROJECTOR_MIN_DIM:
            log.info("projector: %d-D points padded with %d zero column(s) (TensorBoard's PCA view needs %d)",
                     mat.shape[1], PROJECTOR_MIN_DIM - mat.shape[1], PROJECTOR_MIN_DIM)
            mat = pad_for_projector(mat)
        self.writer.add_embedding(mat, metadata=metadata, metadata_header=header,
                                  label_img=None if label_img is None else label_img.detach().float().cpu(),
                                  global_step=step, tag=tag)

    def text(self, tag: str, text: str, step: int) -> None:
        self.writer.add_text(tag, text, step)

    def hparams(self, hparams: dict[str, str | int | float], metric_tags: list[str]) -> None:
        # Into this run's own event file: SummaryWriter.add_hparams would make a sub-run folder (a duplicate run).
        for summary in hparams_summaries(hparams, metric_tags):  # experiment, session start, session end
            self.writer.file_writer.add_summary(summary)

    def custom_scalars(self, layout: dict[str, dict[str, list[Any]]]) -> None:
        self.writer.add_custom_scalars(layout)

    def flush(self) -> None:
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()
