"""Where training statistics go: TensorBoard event files in the run directory (or nowhere)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torch import Tensor


class NullLogger:
    """Discards everything (``logger=none``); the interface every logger implements."""

    def __init__(self, log_dir: str | Path | None = None, **_: Any) -> None:
        self.log_dir = log_dir

    def scalars(self, values: dict[str, float], step: int) -> None:
        """Log each name -> value at ``step``."""

    def image(self, tag: str, image: Tensor, step: int) -> None:
        """Log a (3, H, W) image in [0, 1]."""

    def figure(self, tag: str, figure: Any, step: int) -> None:
        """Log a matplotlib figure (closed afterwards)."""

    def histogram(self, tag: str, values: Tensor, step: int) -> None:
        """Log the distribution of ``values``."""

    def text(self, tag: str, text: str, step: int) -> None:
        """Log a text event (alerts, rollbacks)."""

    def flush(self) -> None:
        """Write buffered events to disk."""

    def close(self) -> None:
        """Flush and release files."""


class TensorBoardLogger(NullLogger):
    """Writes TensorBoard event files into ``log_dir`` (the run directory) via ``torch.utils.tensorboard``.

    Args:
        log_dir: folder for the event files.
        flush_secs: how often pending events are written.
        purge_step: on resume, events at or after this step left by an earlier writer are hidden.
    """

    def __init__(self, log_dir: str | Path, flush_secs: int = 30, purge_step: int | None = None) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=str(log_dir), flush_secs=flush_secs, purge_step=purge_step)

    def scalars(self, values: dict[str, float], step: int) -> None:
        for k, v in values.items():
            self.writer.add_scalar(k, v, step)

    def image(self, tag: str, image: Tensor, step: int) -> None:
        self.writer.add_image(tag, image, step)

    def figure(self, tag: str, figure: Any, step: int) -> None:
        self.writer.add_figure(tag, figure, step, close=True)

    def histogram(self, tag: str, values: Tensor, step: int) -> None:
        self.writer.add_histogram(tag, values, step)

    def text(self, tag: str, text: str, step: int) -> None:
        self.writer.add_text(tag, text, step)

    def flush(self) -> None:
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()
