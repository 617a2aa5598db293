"""Ctrl-C on ``ganlab-study NAME``: every running job saves, the jobs not started stay so, exit 130 (issue 44).

A Ctrl-C in a terminal reaches every process of the command's group: the study's own and joblib's workers.

* The study's process (:func:`catching_ctrl_c`, around a run) handles SIGINT without raising: no
  ``KeyboardInterrupt`` inside joblib (which killed its workers mid-save and printed a traceback); it creates the
  *stop file* and notes the signal for a training loop of this process (the ``basic`` launcher, and joblib with
  ``n_jobs=1``, train in it). A second Ctrl-C stops the running runs at once, as ``ganlab-train``'s does (the
  workers get it themselves); a third leaves without waiting for them.
* A joblib worker gets the same handler from :func:`worker_init` (joblib's ``initializer``): a worker that is idle,
  or building a run, when the signal comes no longer dies of it; a run it was building stops after its first step.
* A job in its training loop: the trainer's own handler finishes the step, saves a checkpoint and raises
  ``TrainingInterrupted``; the job writes ``interrupted.json`` (:mod:`ganlab.study.runner`).
* A job whose turn comes once the stop file exists returns at once, *not started*.

The stop file (``<runs>/.study_stop.<pid>``) is named to the workers by :data:`STOP_ENV`, which they inherit; the
command that resumes the study by :data:`RESUME_ENV`. Light to import: no torch until a signal comes.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

#: The environment variable naming the stop file of the study under way.
STOP_ENV = "GANLAB_STUDY_STOP"
#: The environment variable holding the command that resumes the study (written into each interrupted job).
RESUME_ENV = "GANLAB_STUDY_RESUME"


def stop_file() -> Path | None:
    """The stop file :data:`STOP_ENV` names, None outside a study run."""
    path = os.environ.get(STOP_ENV)
    return Path(path) if path else None


def requested() -> bool:
    """Whether the study under way is stopping (its stop file exists); False outside a study run."""
    path = stop_file()
    return path is not None and path.exists()


def request() -> None:
    """Say the study under way is stopping: create its stop file (nothing outside a study run)."""
    path = stop_file()
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()


def resume_command() -> str:
    """The command that resumes the study under way (:data:`RESUME_ENV`; ``ganlab-study`` when unset)."""
    return os.environ.get(RESUME_ENV) or "ganlab-study"


def _on_sigint(signum: int, frame: FrameType | None) -> None:
    """SIGINT outside a training loop: the study stops; a run being built in this process stops after one step."""
    request()
    from ganlab.trainer.interrupt import request_stop

    request_stop(signum)


#: Ctrl-Cs the study's process has had in the run under way (:func:`_on_sigint_here`).
_SEEN = [0]


def _on_sigint_here(signum: int, frame: FrameType | None) -> None:
    """The study process's SIGINT. The first stops the study (:func:`_on_sigint`) and says so on stderr; a second
    only says that the running runs now stop at once (their own second Ctrl-C; the newest checkpoint on disk is
    kept); a third leaves without waiting for them (``KeyboardInterrupt``: a launcher that waits on runs elsewhere,
    e.g. SLURM's, which no Ctrl-C here reaches)."""
    import sys

    _SEEN[0] += 1
    if _SEEN[0] >= 3:
        raise KeyboardInterrupt
    _on_sigint(signum, frame)
    if _SEEN[0] == 1:
        message = ("each running run finishes its step, saves a checkpoint and stops; the runs not started stay so "
                   "(Ctrl-C again stops them at once)")
    else:
        message = ("the running runs stop at once, keeping their newest checkpoint (a third Ctrl-C leaves without "
                   "waiting for them)")
    print(f"ganlab-study: Ctrl-C: {message}", file=sys.stderr, flush=True)


def worker_init() -> None:
    """joblib's ``initializer`` for a study's worker processes: SIGINT handled by :func:`_on_sigint` (see the
    module's text), not a ``KeyboardInterrupt`` that kills the worker."""
    signal.signal(signal.SIGINT, _on_sigint)


@contextlib.contextmanager
def catching_ctrl_c(runs: Path, resume: str) -> Iterator[None]:
    """While inside: SIGINT stops the study instead of raising (see the module's text); :data:`STOP_ENV` names
    ``<runs>/.study_stop.<pid>`` and :data:`RESUME_ENV` holds ``resume``. On leaving: the previous handler and
    variables back, the stop file removed. Outside the main thread only the variables are set."""
    path = Path(runs).resolve() / f".study_stop.{os.getpid()}"
    saved = {k: os.environ.get(k) for k in (STOP_ENV, RESUME_ENV)}
    os.environ[STOP_ENV], os.environ[RESUME_ENV] = str(path), resume
    path.unlink(missing_ok=True)
    import threading

    main = threading.current_thread() is threading.main_thread()
    _SEEN[0] = 0
    previous = signal.signal(signal.SIGINT, _on_sigint_here) if main else None
    try:
        yield
    finally:
        if main:
            signal.signal(signal.SIGINT, previous)
        path.unlink(missing_ok=True)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
