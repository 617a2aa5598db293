"""The run folder: every file and folder name a run writes, finding runs and jobs, failure records, clean-up.

A run of ``ganlab-train`` (``runs/<dataset>/<date>/``, or one job folder of a sweep) holds::

    .hydra/config.yaml, overrides.yaml   the composed config and the command-line overrides (Hydra)
    metrics.json                         the final scores and the run's record (written at the end)
    metrics.jsonl                        one line per evaluation: the score curve
    checkpoints/last.pt                  the latest evaluated checkpoint; step_<7 digits>.pt every ckpt_every
    samples/step_<7 digits>.png          the sample grid of each evaluation
    eval/<checkpoint>[__<hash>]/         ganlab-eval's results (never a run itself)
    sample/<checkpoint>[__<hash>]/       ganlab-sample's pictures
    preflight.json                       a ``preflight=true`` dry run (no metrics.json: not a job)
    ensemble.json                        a ``trainer.ensemble=S`` run (its runs are the seed_<k>/ members)
    failure.json, FAILED                 a job that raised (:func:`record_failure`)
    interrupted.json                     a run stopped by Ctrl-C/SIGTERM, with the command that resumes it
                                         (:func:`record_interrupt`; not a failure: removed when the run resumes)
    .lock                                held by the ganlab-train process writing the folder (:func:`lock_folder`)
    study_jobs.jsonl, .study.lock        a ganlab-study job folder: one line per job that ran there
                                         (:func:`record_study_job`, :func:`read_study_jobs`), and the lock its job
                                         holds while it trains
    alerts.jsonl                         one line per training-health alert (written and read by
                                         :mod:`ganlab.health.alerts`)
    corpus_labels.jsonl,                 a run of the collapse corpus (``callbacks.corpus_recorder``): each
    corpus_signals.jsonl                 evaluation's fresh-sample labels and each monitored step's signals
                                         (written by :mod:`ganlab.callbacks.corpus`, read by
                                         :mod:`ganlab.study.corpus_collect`)

Each record has one writer and one reader here (or in the module named beside it): ``metrics.json`` is read by
:func:`read_metrics`, ``metrics.jsonl`` by :func:`read_evaluations`, ``ensemble.json`` by :func:`read_ensemble`,
``study_jobs.jsonl`` by :func:`read_study_jobs`; every command reads older runs through them, so a score renamed
since (:data:`RENAMED`) reads the same everywhere.

This module is a leaf: it imports nothing from ganlab but :mod:`ganlab.io`, so the trainer that writes these files,
the commands and the notebook API all take the names from here.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf, open_dict

from ganlab.io import append_jsonl, atomic_write_text, read_jsonl, remove_stale_temp_files

log = logging.getLogger("ganlab")

METRICS_FILE = "metrics.json"      # the final scores and the run's record
CURVE_FILE = "metrics.jsonl"       # one JSON line per evaluation
CHECKPOINT_DIR = "checkpoints"
LAST_CHECKPOINT = "last.pt"        # the latest evaluated checkpoint
SAMPLES_DIR = "samples"            # the sample grid of each evaluation
HYDRA_DIR = ".hydra"               # Hydra's record of the composed config
CONFIG_FILE = "config.yaml"        # in .hydra/
OVERRIDES_FILE = "overrides.yaml"  # in .hydra/: the command-line overrides
EVAL_DIR = "eval"                  # ganlab-eval's results, one folder per checkpoint and overrides
SAMPLE_DIR = "sample"              # ganlab-sample's pictures, one folder per checkpoint and overrides
PREFLIGHT_FILE = "preflight.json"  # the table of a preflight=true dry run
ENSEMBLE_FILE = "ensemble.json"    # the summary of a trainer.ensemble=S run
FAILURE_FILE = "failure.json"      # {"type", "message", "stage", "traceback", "log", "time"} of the exception
INTERRUPTED_FILE = "interrupted.json"  # {"signal", "step", "checkpoint", "resume", "time"} of a stopped run
FAILED_MARKER = "FAILED"           # a one-line flag file ("Type: message") for shell scripts: ls */FAILED
NAN_DUMPS_DIR = "nan_dumps"        # the batch and weights of each non-finite update (ganlab.health.recovery)
JOB_LOG = "train.log"              # Hydra's log of a ganlab-train job
LOCK_FILE = ".lock"                # held (fcntl.flock) by the ganlab-train process writing the folder
STUDY_JOBS_FILE = "study_jobs.jsonl"  # a ganlab-study job folder: one line per job that ran there
STUDY_LOCK_FILE = ".study.lock"    # held (fcntl.flock) by the ganlab-study job training the folder
ALERTS_FILE = "alerts.jsonl"       # one JSON line per training-health alert (ganlab.health.alerts)
CORPUS_LABELS_FILE = "corpus_labels.jsonl"    # a corpus run: one JSON line per evaluation (ganlab.callbacks.corpus)
CORPUS_SIGNALS_FILE = "corpus_signals.jsonl"  # a corpus run: one JSON line per monitored step

# the prefixes of the score keys in metrics.json and metrics.jsonl (ganlab.metrics.registry re-exports them)
#: A score computed on held-out real data (the data baseline): ``data/<score>``.
DATA_PREFIX = "data/"
#: A score of the collapse alarm's samples from its fixed latent codes: ``fixed_z/<score>``.
FIXED_Z_PREFIX = "fixed_z/"

# the prefixes of the TensorBoard tags a run writes (ganlab.trainer.stats names them SCORES and HEALTH)
#: An evaluation's scores: ``diversity/<score>`` (``metrics.jsonl``'s ``"scores"``).
SCORE_TAG_PREFIX = "diversity/"
#: An evaluation's health values: ``health/<key>`` (``metrics.jsonl``'s ``"health"``).
HEALTH_TAG_PREFIX = "health/"

#: Scores renamed since older runs were written: old name -> current name (``collapsed`` is a word of the verdict).
RENAMED = {"collapsed": "high_similarity_flag"}


def current_names(scores: dict[str, float]) -> dict[str, float]:
    """``scores`` with the names of older runs (:data:`RENAMED`, also behind ``data/`` and ``fixed_z/``) replaced
    by the current ones, so old and new runs share a column."""
    def rename(key: str) -> str:
        prefix, _, name = key.rpartition("/")
        return f"{prefix}/{RENAMED[name]}" if prefix and name in RENAMED else RENAMED.get(key, key)

    return {rename(k): v for k, v in scores.items()}


def read_evaluations(run_dir: str | Path) -> list[dict]:
    """The run's evaluations from ``metrics.jsonl`` (the one reader every command uses): one record
    ``{"step", "scores", "health"}`` per step in step order (a step written twice, by a resumed run, keeps its last
    record), the scores under their current names (:func:`current_names`); a torn line left by a run killed
    mid-write is skipped with a warning (:func:`ganlab.io.read_jsonl`). [] without the file."""
    newest = {}
    for record in read_jsonl(Path(run_dir) / CURVE_FILE):
        newest[int(record["step"])] = {**record, "scores": current_names(record.get("scores") or {})}
    return [newest[s] for s in sorted(newest)]


def read_metrics(run_dir: str | Path) -> dict[str, Any] | None:
    """The run's ``metrics.json`` (the one reader every command uses), its ``"scores"`` under their current names
    (:func:`current_names`); None without the file (a run that did not finish)."""
    path = Path(run_dir) / METRICS_FILE
    if not path.is_file():
        return None
    metrics = json.loads(path.read_text())
    return {**metrics, "scores": current_names(metrics.get("scores") or {})}


def read_ensemble(run_dir: str | Path) -> dict[str, Any] | None:
    """A ``trainer.ensemble=S`` run's ``ensemble.json`` (its one reader), each seed's ``"scores"`` under their
    current names (:func:`current_names`); None without the file."""
    path = Path(run_dir) / ENSEMBLE_FILE
    if not path.is_file():
        return None
    summary = json.loads(path.read_text())
    return {**summary, "scores": {seed: current_names(s) for seed, s in (summary.get("scores") or {}).items()}}


def record_study_job(run_dir: str | Path, record: dict[str, Any]) -> None:
    """Append ``record`` (a ganlab-study job that ran in ``run_dir``: ``from_step``, ``to_step``, ``wall_s``,
    ``commit``, ``cpu``, ``error``, ``status``) to its ``study_jobs.jsonl`` as one line
    (:func:`ganlab.io.append_jsonl`)."""
    append_jsonl(Path(run_dir) / STUDY_JOBS_FILE, record)


def read_study_jobs(run_dir: str | Path) -> list[dict[str, Any]]:
    """The ganlab-study jobs that ran in ``run_dir`` (``study_jobs.jsonl``, the one reader every study command
    uses), in the order they ended; a torn last line (a job killed mid-write) is skipped with a warning
    (:func:`ganlab.io.read_jsonl`), and a record of an older version without ``status`` gets one: ``failed`` when it
    has an ``error``, else ``finished``. [] without the file."""
    return [{**r, "status": r.get("status") or ("failed" if r.get("error") else "finished")}
            for r in read_jsonl(Path(run_dir) / STUDY_JOBS_FILE)]


_STEP_FILE = re.compile(r"step_(\d+)\.pt")


def step_checkpoint_name(step: int) -> str:
    """``step_0000500.pt``: the file name of the checkpoint of generator step ``step`` (7 digits, zero-padded)."""
    return f"step_{step:07d}.pt"


def hard_limit_checkpoint_name(step: int) -> str:
    """``hard_limit_step_0000500.pt``: the checkpoint written when a gradient norm passes ``monitor.hard_limit``."""
    return f"hard_limit_{step_checkpoint_name(step)}"


def step_sample_name(step: int) -> str:
    """``step_0000500.png``: the sample grid of the evaluation at generator step ``step`` (in ``samples/``)."""
    return f"step_{step:07d}.png"


def last_checkpoint(run_dir: str | Path) -> Path:
    """``<run_dir>/checkpoints/last.pt`` (which may not exist)."""
    return Path(run_dir) / CHECKPOINT_DIR / LAST_CHECKPOINT


def run_dir_of(checkpoint: str | Path) -> Path:
    """The run folder of a checkpoint file (``<run>/checkpoints/<name>.pt`` -> ``<run>``)."""
    return Path(checkpoint).parent.parent


# ---------------------------------------------------------------------------------------------- finding runs
def is_run_dir(path: str | Path) -> bool:
    """True when ``path`` is a folder of ``ganlab-train``: it holds ``metrics.json`` or ``checkpoints/last.pt``
    (and is not a ``ganlab-eval`` result folder, ``<run>/eval/<checkpoint>/``)."""
    p = Path(path)
    return p.is_dir() and p.parent.name != EVAL_DIR and (
        (p / METRICS_FILE).is_file() or last_checkpoint(p).is_file())


def _markers(run_dir: Path) -> list[Path]:
    return [m for m in (run_dir / METRICS_FILE, last_checkpoint(run_dir)) if m.is_file()]


def runs_under(root: Path) -> list[Path]:
    """Every run folder (:func:`is_run_dir`) at any depth below ``root``, sorted."""
    found = {p.parent for p in root.rglob(METRICS_FILE)}
    found |= {p.parent.parent for p in root.rglob(f"{CHECKPOINT_DIR}/{LAST_CHECKPOINT}")}
    return sorted(d for d in found if is_run_dir(d))


def newest(dirs: list[Path], markers: Callable[[Path], Iterable[Path]] = _markers) -> Path:
    """The folder whose newest marker file (default: ``metrics.json``, ``checkpoints/last.pt``) was modified last
    (ties: the later path)."""
    return max(dirs, key=lambda d: (max(m.stat().st_mtime for m in markers(d)), str(d)))


def find_runs_root(start: str | Path | None = None) -> Path:
    """The ``runs/`` folder ``ganlab-train`` writes to: ``<start>/runs`` or the nearest one in a parent folder
    (so a notebook started in ``notebooks/`` finds the repository's ``runs/``).

    Args:
        start: where to start looking (default: the current directory).

    Raises:
        FileNotFoundError: no ``runs/`` folder in ``start`` or any parent.
    """
    here = Path(start or os.getcwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "runs").is_dir():
            return folder / "runs"
    raise FileNotFoundError(f"no runs/ folder in {here} or its parents: train a model first (ganlab-train writes "
                            "runs/<dataset>/<date>/ in the directory it is started from), or give the folder")


def find_latest_run(root: str | Path | None = None) -> Path:
    """The most recently written run directory under ``root`` (any depth, sweep jobs included).

    A run directory holds ``metrics.json`` or ``checkpoints/last.pt``; "most recent" is the newest modification
    time of those files, so a run still training counts from its last evaluation.

    Args:
        root: a folder of runs (default: :func:`find_runs_root`). A run directory itself is returned as is.

    Raises:
        FileNotFoundError: ``root`` is not a folder, or no run lies under it.
    """
    root = Path(root) if root is not None else find_runs_root()
    if not root.is_dir():
        raise FileNotFoundError(f"{root} is not a folder; give the runs/ folder of ganlab-train")
    if is_run_dir(root):
        return root
    runs = runs_under(root)
    if not runs:
        raise FileNotFoundError(f"no run under {root}: no folder holds metrics.json or checkpoints/last.pt. Train "
                                "one with ganlab-train, or point GANLAB_RUN at a run directory")
    return newest(runs)


def find_latest_sweep(root: str | Path | None = None) -> Path:
    """The most recently written sweep folder: the child of ``root`` whose runs were written last.

    Args:
        root: the folder holding sweeps (default: ``runs/multirun`` of :func:`find_runs_root`).

    Raises:
        FileNotFoundError: ``root`` is not a folder, or none of its sub-folders holds a run.
    """
    root = Path(root) if root is not None else find_runs_root() / "multirun"
    if not root.is_dir():
        raise FileNotFoundError(f"{root} is not a folder: run a sweep first (ganlab-train -m ... writes "
                                "runs/multirun/<date>/), or point GANLAB_SWEEP at a sweep folder")
    sweeps = {child: runs_under(child) for child in sorted(root.iterdir()) if child.is_dir()}
    sweeps = {child: runs for child, runs in sweeps.items() if runs}
    if not sweeps:
        raise FileNotFoundError(f"no sweep under {root}: none of its folders holds a run (metrics.json or "
                                "checkpoints/last.pt). Run ganlab-train -m ..., or point GANLAB_SWEEP at a sweep")
    return newest(list(sweeps), lambda s: [m for r in sweeps[s] for m in _markers(r)])


def step_checkpoints(run_dir: str | Path) -> list[tuple[int, Path]]:
    """``(step, path)`` of every ``checkpoints/step_*.pt`` of a run folder, in step order (``last.pt`` excluded)."""
    found = [(int(m.group(1)), p) for p in (Path(run_dir) / CHECKPOINT_DIR).glob("step_*.pt")
             if (m := _STEP_FILE.fullmatch(p.name))]
    return sorted(found)


# ---------------------------------------------------------------------------------------------- jobs of a sweep
@dataclass(frozen=True)
class FailedJob:
    """A job that raised (``failure.json``) or never wrote ``metrics.json``."""

    run_dir: Path
    log: Path                  # the job's log, holding the traceback
    error: str                 # ``Type: message`` from failure.json, or why the job counts as failed
    status: str = "failed"     # "failed" (it raised), "config error" (refused before training), "interrupted"
    #                            (Ctrl-C/SIGTERM: interrupted.json, resumable) or "unfinished" (killed, or running)
    resume: str | None = None  # an interrupted job: the shell command that continues it


def is_ensemble(folder: Path) -> bool:
    """A ``trainer.ensemble=S`` run's folder: its runs are its ``seed_<k>/`` sub-folders, it is none itself."""
    path = folder / HYDRA_DIR / OVERRIDES_FILE
    lines = path.read_text().splitlines() if path.exists() else []
    return (folder / ENSEMBLE_FILE).exists() or any(
        line.strip().lstrip("- ").startswith("trainer.ensemble=") and not line.strip().endswith("=null")
        for line in lines)


def stored_overrides(job: Path) -> list[str]:
    """The job's command-line overrides (``.hydra/overrides.yaml``); an ensemble member (``seed_<k>/`` of a
    ``trainer.ensemble=S`` run) has its ensemble's, without ``trainer.ensemble``."""
    path = job / HYDRA_DIR / OVERRIDES_FILE
    member = not path.exists() and is_ensemble(job.parent)
    path = job.parent / HYDRA_DIR / OVERRIDES_FILE if member else path
    if not path.exists():
        return []
    found = [str(o) for o in OmegaConf.load(path)]
    return [o for o in found if not o.startswith("trainer.ensemble=")] if member else found


def job_folders(root: Path) -> list[Path]:
    """Every job folder below ``root`` (one holding ``.hydra/``, ``checkpoints/``, ``failure.json`` or
    ``metrics.json``), sorted; ``ganlab-eval`` results, ``preflight=true`` dry runs (``preflight.json`` and no
    ``metrics.json``) and the folder of a ``trainer.ensemble=S`` run (its jobs are its members) left out."""
    markers = (HYDRA_DIR, CHECKPOINT_DIR, FAILURE_FILE, METRICS_FILE)
    jobs = sorted({p.parent for m in markers for p in root.rglob(m) if p.parent.parent.name != EVAL_DIR})
    return [j for j in jobs if not ((j / PREFLIGHT_FILE).exists() and not (j / METRICS_FILE).exists())
            and not is_ensemble(j)]


def is_finished(job: Path) -> bool:
    """The job wrote ``metrics.json`` and did not fail."""
    return (job / METRICS_FILE).exists() and not (job / FAILURE_FILE).exists()


def job_failure(job: Path) -> FailedJob | None:
    """Why ``job`` counts as failed (its ``failure.json``), interrupted (``interrupted.json``) or unfinished (no
    ``metrics.json``), or None for a finished job."""
    log_file = next(iter(sorted(job.glob("*.log"))), job / JOB_LOG)
    failure = job / FAILURE_FILE
    if failure.exists():
        info = json.loads(failure.read_text())
        status = "config error" if info.get("stage") == "start" else "failed"
        return FailedJob(job, Path(info.get("log", log_file)), f"{info['type']}: {info['message']}", status)
    stopped = job / INTERRUPTED_FILE
    if stopped.exists() and not (job / METRICS_FILE).exists():
        info = json.loads(stopped.read_text())
        return FailedJob(job, log_file, f"stopped by {info['signal']}"
                         f"{'' if info.get('step') is None else ' at step ' + str(info['step'])}; "
                         f"continue it: {info['resume']}",
                         "interrupted", info["resume"])
    if not (job / METRICS_FILE).exists():
        return FailedJob(job, log_file, "no metrics.json (killed, or still running)", "unfinished")
    return None


# ---------------------------------------------------------------------------------------------- writing
def record_failure(run_dir: str | Path, err: BaseException, log_traceback: bool = True, stage: str = "train") -> Path:
    """Log ``err``'s traceback (into the job's log) and write ``failure.json`` and ``FAILED`` into ``run_dir``.

    ``log_traceback=False`` (a single run, which re-raises and so prints the traceback anyway) only writes the files.
    ``stage``: ``"train"`` (it raised while training) or ``"start"`` (a bad setting found before training).

    Returns:
        The path of ``failure.json``.
    """
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    if log_traceback:
        log.error("job failed; the sweep goes on. %s: %s", type(err).__name__, err, exc_info=err)
    logs = sorted(run_dir.glob("*.log"))
    info = {"type": type(err).__name__, "message": str(err), "stage": stage,
            "traceback": "".join(traceback.format_exception(err)),
            "log": str(logs[0] if logs else run_dir / JOB_LOG), "time": time.strftime("%Y-%m-%d %H:%M:%S")}
    path = run_dir / FAILURE_FILE
    path.write_text(json.dumps(info, indent=2))
    (run_dir / FAILED_MARKER).write_text(f"{info['type']}: {info['message']}\n")
    return path


def record_interrupt(run_dir: str | Path, signal_name: str, step: int | None, checkpoint: str | Path | None,
                     resume: str) -> Path:
    """Write ``interrupted.json`` into ``run_dir`` (atomically): a run stopped on purpose (Ctrl-C, SIGTERM), not
    a failure. ``ganlab-compare`` and a sweep's ``summary.md`` list it as ``interrupted`` with ``resume``, the
    command that continues it; :func:`clear_failure` removes it when the run starts again.

    Args:
        run_dir: the run folder.
        signal_name: ``SIGINT`` or ``SIGTERM``.
        step: generator updates done when it stopped (None: stopped outside the training loop).
        checkpoint: the checkpoint it resumes from (None: none was saved).
        resume: the shell command that continues the run (or starts it again when nothing was saved).

    Returns:
        The path of ``interrupted.json``.
    """
    info = {"signal": signal_name, "step": None if step is None else int(step),
            "checkpoint": None if checkpoint is None else str(checkpoint), "resume": resume,
            "time": time.strftime("%Y-%m-%d %H:%M:%S")}
    path = Path(run_dir) / INTERRUPTED_FILE
    atomic_write_text(path, json.dumps(info, indent=2) + "\n")
    return path


def clear_failure(run_dir: str | Path) -> bool:
    """Remove ``failure.json``, ``FAILED`` and ``interrupted.json`` from ``run_dir`` (a run that starts again
    there, resumed after a failure or an interrupt, is no longer failed nor stopped: the markers describe the
    folder's present state). Returns whether there was a record to remove; the earlier one stays in the job's log."""
    removed = []
    for name in (FAILURE_FILE, FAILED_MARKER, INTERRUPTED_FILE):
        path = Path(run_dir) / name
        if path.is_file():
            path.unlink()
            removed.append(name)
    if removed:
        what = ("failure record" if INTERRUPTED_FILE not in removed else
                "interrupt record" if len(removed) == 1 else "failure and interrupt records")
        log.info("%s: an earlier attempt's %s removed (%s; this attempt starts from its checkpoint)", run_dir, what,
                 ", ".join(removed))
    return bool(removed)


HYDRA_RECORD = ("config.yaml", "hydra.yaml", "overrides.yaml")  # in .hydra/, what Hydra's run_job would write


def save_hydra_record(run_dir: str | Path, config: Any, hydra_config: Any) -> Path:
    """Write ``<run_dir>/.hydra/config.yaml``, ``hydra.yaml`` and ``overrides.yaml`` as Hydra's ``run_job`` writes
    them (``conf/train.yaml`` sets ``hydra.output_subdir: null``, so that a run writes them only once it holds its
    folder: a run refused there writes nothing), each atomically.

    Args:
        run_dir: the run folder (held by this run).
        config: the composed task config (without ``hydra``), as the job received it.
        hydra_config: Hydra's config of the job (``HydraConfig.instance().cfg``: a node with one key, ``hydra``);
            its ``output_subdir`` is saved as ``.hydra``, the folder the files are in.

    Returns:
        The ``.hydra`` folder.
    """
    folder = Path(run_dir) / HYDRA_DIR
    folder.mkdir(parents=True, exist_ok=True)
    record = OmegaConf.create(OmegaConf.to_container(hydra_config, resolve=False))
    with open_dict(record):
        record.hydra.output_subdir = HYDRA_DIR
    for name, node in zip(HYDRA_RECORD, (config, record, hydra_config.hydra.overrides.task), strict=True):
        atomic_write_text(folder / name, OmegaConf.to_yaml(node))
    return folder


#: A temporary checkpoint file in the folder of the run being resumed counts as abandoned after this many
#: seconds without a write (that run may still be going; a checkpoint write takes seconds).
ABANDONED_AFTER_S = 300.0


def remove_interrupted_writes(run_dir: Path, resume: str | None) -> list[Path]:
    """Delete the temporary files of checkpoint writes killed mid-way (``checkpoints/.<name>.<random>.tmp``,
    see :func:`ganlab.io.atomic_open`), with a log line: all of them in this run's own ``checkpoints/``, and
    those untouched for :data:`ABANDONED_AFTER_S` in the ``checkpoints/`` of the run ``resume`` continues.

    Returns:
        The files deleted.
    """
    folders = [(run_dir / CHECKPOINT_DIR, 0.0)]
    if resume:
        given = Path(resume).expanduser()
        source = given / CHECKPOINT_DIR if given.is_dir() else given.parent
        if source.resolve() != folders[0][0].resolve():
            folders.append((source, ABANDONED_AFTER_S))
    removed = [p for folder, age in folders for p in remove_stale_temp_files(folder, age)]
    if removed:
        log.info("removed %d temporary file(s) left by interrupted checkpoint writes: %s", len(removed),
                 ", ".join(str(p) for p in removed))
    return removed


def run_records(run_dir: str | Path) -> list[str]:
    """The records of a run already in ``run_dir``: the names among ``metrics.jsonl``, ``metrics.json`` and a
    non-empty ``checkpoints/`` that exist there ([] for a fresh folder or one holding only Hydra's files)."""
    run_dir = Path(run_dir)
    found = [name for name in (CURVE_FILE, METRICS_FILE) if (run_dir / name).is_file()]
    ckpt = run_dir / CHECKPOINT_DIR
    if ckpt.is_dir() and any(ckpt.iterdir()):
        found.append(f"{CHECKPOINT_DIR}/")
    return found


#: How long :func:`lock_folder` waits for a lock held briefly (a status probe) before calling it taken.
LOCK_PATIENCE_S = 0.5


def lock_folder(run_dir: str | Path, name: str = LOCK_FILE) -> Any:
    """An exclusive lock on ``run_dir`` (the file ``name``, :data:`LOCK_FILE` by default; ``fcntl.flock``): the
    open lock file, to keep open while the run writes there (the OS releases it when the process ends, crashed or
    not), or None when another process holds it. A lock held for less than :data:`LOCK_PATIENCE_S` (a reader such
    as ``ganlab-study status`` probing it) is waited for. Without ``fcntl`` (Windows) no lock is taken and the
    open file is returned."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    handle = open(run_dir / name, "a")  # noqa: SIM115 - held open for the run's whole length
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        return handle
    deadline = time.monotonic() + LOCK_PATIENCE_S
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return handle
        except BlockingIOError:
            if time.monotonic() >= deadline:
                handle.close()
                return None
            time.sleep(0.02)


def folder_in_use(folder: str | Path, names: Sequence[str] = (LOCK_FILE,)) -> bool:
    """Whether a process holds one of ``folder``'s locks (the files ``names``, :data:`LOCK_FILE` by default; see
    :func:`lock_folder`): probed with a shared lock taken without waiting and released at once, so two probes never
    see each other. A lock file that does not exist is not held, and none is made; False without ``fcntl``."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        return False
    for name in names:
        path = Path(folder) / name
        if not path.is_file():
            continue
        with open(path) as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            fcntl.flock(handle, fcntl.LOCK_UN)
    return False
    lock = lock_folder(folder)
    if lock is None:
        return True
    lock.close()
    return False
