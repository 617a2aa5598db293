"""Graceful stop on SIGINT (Ctrl-C) and SIGTERM (``kill``, a cluster's pre-emption notice): the loop finishes
the generator step under way, saves a checkpoint and raises :class:`TrainingInterrupted`; ``ganlab-train``
then prints the command that resumes the run and exits with 128 + the signal number (130, 143), the shell's
convention. A second Ctrl-C aborts at once (KeyboardInterrupt)."""

from __future__ import annotations

import logging
import signal
import threading
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

log = logging.getLogger("ganlab")

SIGNALS = (signal.SIGINT, signal.SIGTERM)

#: A signal that arrived before the training loop (while a run was built): the next :class:`GracefulStop` starts
#: with it, so the loop stops after its first step. Set by :func:`request_stop` (a study job's own handler).
_PENDING: int | None = None


def request_stop(signum: int) -> None:
    """Note ``signum`` (``signal.SIGINT`` or ``signal.SIGTERM``) for the next training loop of this process: it
    saves a checkpoint after its first step and raises :class:`TrainingInterrupted`, as if the signal had come
    during the step. For a handler installed outside the loop (``ganlab.study.stopping``)."""
    global _PENDING
    _PENDING = int(signum)


def clear_request() -> None:
    """Forget a signal noted by :func:`request_stop` (a new job starts in this process)."""
    global _PENDING
    _PENDING = None


class TrainingInterrupted(Exception):
    """Training stopped on a signal after saving ``checkpoint`` at generator step ``step``.

    Attributes:
        signum: the signal (``signal.SIGINT`` = 2, ``signal.SIGTERM`` = 15).
        checkpoint: the checkpoint just written.
        step: generator updates done.
        exit_code: 128 + ``signum``.
    """

    def __init__(self, signum: int, checkpoint: Path, step: int) -> None:
        self.signum, self.checkpoint, self.step = int(signum), Path(checkpoint), int(step)
        self.exit_code = 128 + self.signum
        name = signal.Signals(self.signum).name
        super().__init__(f"{name} at generator step {step}: the step finished and {checkpoint} was saved")


class GracefulStop:
    """Context manager: while inside, SIGINT/SIGTERM set :attr:`signum` instead of killing the process.

    Outside the main thread (where Python cannot install handlers) it does nothing and :attr:`signum` stays None.
    """

    def __init__(self) -> None:
        self.signum: int | None = None
        self._previous: dict[int, Any] = {}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is not None and signum == signal.SIGINT:  # the second Ctrl-C: abort now
            raise KeyboardInterrupt
        self.signum = signum
        log.warning("%s received: finishing the current step, then saving a checkpoint (Ctrl-C again aborts at "
                    "once, without saving)", signal.Signals(signum).name)

    def __enter__(self) -> GracefulStop:
        global _PENDING
        self.signum, _PENDING = _PENDING, None  # a signal noted while the run was built: stop after one step
        if threading.current_thread() is threading.main_thread():
            for s in SIGNALS:
                self._previous[s] = signal.signal(s, self._handle)
        return self

    def __exit__(self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None) -> None:
        for s, handler in self._previous.items():
            signal.signal(s, handler)
        self._previous.clear()
