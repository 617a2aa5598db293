"""Training progress a person can read, on a terminal or in a file.

On a terminal (``stream.isatty()``) a tqdm bar: its description says what the loop is doing while it does it
(``train (evaluating)``, ``train (checkpointing)``, ``train (rolling back)``), set before the work starts so the bar
is never frozen without a word; its rate, and so its ETA, is the average over wall time since the run (re)started,
evaluations and checkpoints included (tqdm's ``smoothing=0``); log records go through ``tqdm.write``
(:func:`logs_through_bar`, as ``tqdm.contrib.logging`` does, whose import warns in a notebook), each on its own line
above the bar.

Into a file or a pipe (not a terminal) no carriage-return redraws: one plain line each time the run passes a tenth
of its steps (and at least every :data:`MAX_INTERVAL_S` seconds), with the step, the rate, the elapsed time, the
ETA, the latest losses and the latest headline scores::

    train: step 400/2000 (20%), 41.3 step/s, elapsed 00:09, ETA 00:38; D 1.386, G 0.693; modes_covered 8, ...
"""

from __future__ import annotations

import contextlib
import logging
import math
import sys
import time
from collections.abc import Callable, Iterator
from typing import IO, Any

from tqdm import tqdm  # plain: tqdm.auto warns "IProgress not found" in a notebook without ipywidgets

from ganlab.metrics.registry import headline

#: Plain lines: one each time the run passes this fraction of its steps.
EVERY_FRACTION = 0.1
#: Plain lines: at most this many seconds apart (a long run's tenth can take an hour).
MAX_INTERVAL_S = 300.0
#: Latest scores shown: this many of the headline scores for the kind of data (:func:`headline`).
SHOWN_SCORES = 3


def is_terminal(stream: IO[str]) -> bool:
    """True when ``stream`` is an open terminal (``isatty()``); False for a file, a pipe or a closed stream."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or closed
        return False


def shown_scores(scores: dict[str, float], count: int = SHOWN_SCORES) -> dict[str, float]:
    """The first ``count`` headline scores (``ganlab-compare``'s default columns: mixture ones when ``scores``
    has ``hq_fraction`` or ``reverse_kl``, else image ones) that ``scores`` holds, in headline order."""
    kind = "mixture" if {"hq_fraction", "reverse_kl"} & scores.keys() else "image"
    keys = [k for k in headline()[kind] if k in scores][:count]
    return {k: scores[k] for k in keys}


def _fmt(values: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:.4g}" for k, v in values.items())


class _BarWriter(logging.Handler):
    """Writes each record with ``tqdm.write`` (above the bar), formatted as the handler it stands in for."""

    def __init__(self, stream: IO[str]) -> None:
        super().__init__()
        self.stream = stream

    def emit(self, record: logging.LogRecord) -> None:
        try:
            tqdm.write(self.format(record), file=self.stream)
        except Exception:  # noqa: BLE001 - logging's contract: report, never raise
            self.handleError(record)


@contextlib.contextmanager
def logs_through_bar(loggers: list[logging.Logger]) -> Iterator[None]:
    """Inside: each console handler (a ``StreamHandler`` to stdout or stderr) of ``loggers`` is replaced by one
    that writes through ``tqdm.write`` with the same formatter and level; restored at exit. (What
    ``tqdm.contrib.logging.logging_redirect_tqdm`` does; that module imports ``tqdm.auto``, which warns
    "IProgress not found" in a notebook without ipywidgets.)"""
    swapped: list[tuple[logging.Logger, list[logging.Handler]]] = []
    for logger in loggers:
        before = list(logger.handlers)
        after = []
        for h in before:
            if isinstance(h, logging.StreamHandler) and getattr(h, "stream", None) in (sys.stdout, sys.stderr):
                writer = _BarWriter(h.stream)
                writer.setFormatter(h.formatter)
                writer.setLevel(h.level)
                writer.filters = list(h.filters)  # e.g. a sweep job's console filter (ganlab.cli.sweep)
                after.append(writer)
            else:
                after.append(h)
        logger.handlers = after
        swapped.append((logger, before))
    try:
        yield
    finally:
        for logger, before in swapped:
            logger.handlers = before


#: Where the plain lines go instead of the stream when set (:func:`plain_lines_to_log`): a sweep job's console shows
#: one line per job, so its progress lines go to its ``train.log`` only.
_PLAIN_LOG: list[logging.Logger] = []


@contextlib.contextmanager
def plain_lines_to_log(logger: logging.Logger) -> Iterator[None]:
    """Inside: a :class:`Progress` writes its plain lines (not a terminal bar) as INFO records of ``logger``."""
    _PLAIN_LOG.append(logger)
    try:
        yield
    finally:
        _PLAIN_LOG.remove(logger)


class Progress:
    """The progress of one training run: a tqdm bar on a terminal, plain lines otherwise (see the module).

    Use it as a context manager (it redirects console logging through the bar and closes it at exit).

    Args:
        total: the run's last step (``trainer.steps``).
        initial: the step the run starts from (a resumed run's checkpoint step).
        enabled: False shows nothing (``trainer.progress=false``, ranks other than 0).
        desc: the bar's name (``train``).
        stream: where to write; default ``sys.stderr`` (tqdm's).
        clock: seconds, monotonic (tests may pass their own).

    Raises:
        ValueError: ``initial`` outside ``0 .. total``.
    """

    def __init__(self, total: int, initial: int = 0, enabled: bool = True, desc: str = "train",
                 stream: IO[str] | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        if not 0 <= initial <= total:
            raise ValueError(f"progress: the starting step {initial} is outside 0 .. {total} (trainer.steps)")
        self.total, self.initial, self.step, self.desc = total, initial, initial, desc
        self.stream = stream if stream is not None else sys.stderr
        self.enabled, self.clock = enabled, clock
        self.terminal = enabled and is_terminal(self.stream)
        self.doing: str = ""  # what the loop is doing besides training steps ("" while it trains)
        self.losses: dict[str, float] = {}
        self.scores: dict[str, float] = {}
        self.t0 = self.last_line_t = clock()
        self.lines = 0  # plain lines written
        self.bar: Any = None
        if self.terminal:
            self.bar = tqdm(total=total, initial=initial, file=self.stream, dynamic_ncols=True, unit="step",
                            desc=desc, smoothing=0)  # smoothing=0: the rate over wall time, evaluations included
        self._redirect: contextlib.ExitStack | None = None

    def __enter__(self) -> Progress:
        if self.terminal:
            self._redirect = contextlib.ExitStack()
            self._redirect.enter_context(logs_through_bar([logging.getLogger(), logging.getLogger("ganlab")]))
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the bar and give the console log handlers back; calling it again does nothing."""
        if self.bar is not None:
            self.bar.close()
            self.bar = None
        if self._redirect is not None:
            self._redirect.close()
            self._redirect = None

    def update(self, n: int = 1) -> None:
        """``n`` more steps done."""
        self.set_step(self.step + n)

    def set_step(self, step: int) -> None:
        """The run is at ``step`` (also backwards: a rollback to an earlier checkpoint)."""
        before, self.step = self.step, step
        if self.bar is not None:
            self.bar.update(step - before)
        elif self.enabled and self._line_due(before, step):
            self.write_line()

    def _line_due(self, before: int, step: int) -> bool:
        """A plain line at each tenth of the steps passed, at the last step, and after :data:`MAX_INTERVAL_S`."""
        if step <= before:
            return False
        tenth = max(1, math.ceil(self.total * EVERY_FRACTION))
        return step // tenth > before // tenth or step == self.total or \
            self.clock() - self.last_line_t >= MAX_INTERVAL_S

    def line(self) -> str:
        """The plain progress line of the current step (see the module's example)."""
        elapsed = self.clock() - self.t0
        done = self.step - self.initial
        rate = done / elapsed if elapsed > 0 and done > 0 else math.nan
        eta = tqdm.format_interval((self.total - self.step) / rate) if rate == rate and rate > 0 else "?"
        parts = [f"{self.desc}: step {self.step}/{self.total} ({100 * self.step // max(self.total, 1)}%), "
                 f"{rate:.3g} step/s, elapsed {tqdm.format_interval(elapsed)}, ETA {eta}"]
        parts += [text for text in (_fmt(self.losses), _fmt(shown_scores(self.scores))) if text]
        return "; ".join(parts)

    def write_line(self) -> None:
        """Write :meth:`line` as one plain line and flush (or log it: :func:`plain_lines_to_log`)."""
        if _PLAIN_LOG:
            _PLAIN_LOG[-1].info("%s", self.line())
        else:
            self.stream.write(self.line() + "\n")
            self.stream.flush()
        self.lines += 1
        self.last_line_t = self.clock()

    @contextlib.contextmanager
    def status(self, doing: str) -> Iterator[None]:
        """Inside: the bar's description reads ``<desc> (<doing>)`` (``train (evaluating)``), shown before the
        work starts; back to ``<desc>`` after."""
        before = self.doing
        self._show(doing)
        try:
            yield
        finally:
            self._show(before)

    def _show(self, doing: str) -> None:
        self.doing = doing
        if self.bar is not None:
            self.bar.set_description(f"{self.desc} ({doing})" if doing else self.desc, refresh=bool(doing))

    def set_losses(self, **losses: float) -> None:
        """The latest logged losses (``D=..., G=...``): the bar's postfix and the plain lines'."""
        self.losses = losses
        self._postfix()

    def set_scores(self, scores: dict[str, float]) -> None:
        """The latest evaluation's scores; the first :data:`SHOWN_SCORES` headline ones are shown."""
        self.scores = dict(scores)
        self._postfix()

    def _postfix(self) -> None:
        if self.bar is not None:
            values = self.losses | shown_scores(self.scores)
            self.bar.set_postfix({k: f"{v:.3g}" for k, v in values.items()}, refresh=False)
