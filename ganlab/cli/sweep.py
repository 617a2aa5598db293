"""Sweeps (``ganlab-train -m``): job folder names, failed-job markers and the sweep summary.

* Job folders are named from every swept key: ``<num>_<key>=<value>_..._<strategies>_s<seed>`` (resolver
  ``ganlab.job_name`` in ``conf/train.yaml``; ``-m model=mlp,dcgan`` gives ``0_model=mlp_plain_s0`` and
  ``1_model=dcgan_plain_s0``), so ``tensorboard --logdir <sweep dir>`` labels every run readably and no two jobs of
  a sweep share a name.
* Under multirun a job that raises does not stop the sweep: ``ganlab.cli.train.train`` logs the traceback into
  the job's log and calls :func:`ganlab.layout.record_failure`, which writes ``failure.json`` and ``FAILED``
  into the job.
* ``debug.fail_at_step=k`` (tests only; :mod:`ganlab.strategies.debug`) makes a run raise after its k-th
  generator step; the failed job returns the worst objective (:func:`failed_objective`) to an Optuna sweep.
* :class:`SweepSummary`, a Hydra callback, writes ``summary.md`` (the comparison table, the failed jobs and the
  jobs that never ran) into the sweep directory when the sweep ends or is interrupted (Ctrl-C);
  :func:`exit_status` is then ``ganlab-train -m``'s exit status: 1 when any job failed or never ran.
* On the terminal a finished job prints one line (:func:`job_line`), and the sweep prints its one table at its end.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import re
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from ganlab.analysis.table import collect_runs, headline_of, job_counts, markdown_table, summarise, terminal_table
from ganlab.hparams import SWEPT_KEYS_ENV, strategy_label

log = logging.getLogger("ganlab")


def _key_value(overrides: Any, key: str) -> str | None:
    """The value the job's override list gives ``key`` (its last line for that key), None if none does."""
    found = None
    for line in overrides or []:
        k, _, v = str(line).partition("=")
        if k.lstrip("+~") == key:
            found = v
    return found


def _short(key: str, keys: list[str]) -> str:
    """``optim.generator.lr`` -> ``lr`` unless another swept key ends alike (then the whole key);
    ``metrics/embedder`` -> ``embedder``."""
    last = re.split(r"[./]", key)[-1]
    return last if sum(re.split(r"[./]", k)[-1] == last for k in keys) == 1 else key.replace("/", ".")


def job_name(num: Any, strategy: Any, seed: Any, overrides: Any = None) -> str:
    """``3_model=dcgan_wgan_gp_s1``: the job number, each swept key other than ``strategy`` and ``seed`` as
    ``<key>=<value>`` (the keys of :data:`SWEPT_KEYS_ENV`, read from the job's ``overrides``; a value's commas,
    brackets and other characters a folder name should not hold become ``+``), the selected strategies (``plain``
    for none) and the seed."""
    names = list(strategy.keys()) if isinstance(strategy, (dict, DictConfig)) else []
    keys = [k for k in os.environ.get(SWEPT_KEYS_ENV, "").split(",") if k and k not in ("strategy", "seed")]
    parts = [str(num)]
    for key in keys:
        value = _key_value(overrides, key)
        if value is not None:
            clean = re.sub(r"[^A-Za-z0-9._+=@-]+", "+", value.strip("[]'\"")).strip("+") or "none"
            parts.append(f"{_short(key, keys)}={clean[:60]}")
    return "_".join([*parts, strategy_label([str(n) for n in names]), f"s{seed}"])


OmegaConf.register_new_resolver("ganlab.job_name", job_name, replace=True)


def run_group(experiment: Any, dataset: Any) -> str:
    """The folder under ``runs/`` of a single run: the preset's name with ``experiment=<name>`` (runs of
    ``pacgan_ring`` apart from the default ring's), else the data set's."""
    return str(experiment) if experiment not in (None, "", "null", "None") else str(dataset)


OmegaConf.register_new_resolver("ganlab.run_group", run_group, replace=True)


def is_multirun() -> bool:
    """True inside a job of a Hydra multirun (``-m``); False in a single run or outside Hydra."""
    return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN


#: ``extra`` of a log record that a sweep job shows on the console (:func:`quiet_job_console`): its one line.
SWEEP_LINE = {"sweep_line": True}


class _JobConsole(logging.Filter):
    """A sweep job's console: warnings, errors and the records marked :data:`SWEEP_LINE`."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.WARNING or bool(getattr(record, "sweep_line", False))


class LauncherLines(logging.Filter):
    """Drops the launchers' ``#3 : seed=1 ...`` line per job (a sweep job prints its own line); set on Hydra's basic
    and joblib launchers' loggers by ``conf/hydra/job_logging/ganlab.yaml`` and ``hydra_logging/ganlab.yaml``."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not re.match(r"\s*#\d+ : ", record.getMessage())


@contextlib.contextmanager
def quiet_job_console() -> Any:
    """Inside a sweep job (:func:`is_multirun`): the console handlers show warnings, errors and the job's line
    (:data:`SWEEP_LINE`) only, and the plain progress lines become log records: everything still goes to the
    job's ``train.log``. A single run: nothing changes."""
    if not is_multirun():
        yield
        return
    from ganlab.trainer.progress import plain_lines_to_log

    quiet = _JobConsole()
    handlers = [h for h in logging.getLogger().handlers
                if isinstance(h, logging.StreamHandler) and not isinstance(h, logging.FileHandler)]
    for h in handlers:
        h.addFilter(quiet)
    try:
        with plain_lines_to_log(logging.getLogger("ganlab.progress")):
            yield
    finally:
        for h in handlers:
            h.removeFilter(quiet)


def failed_objective() -> float:
    """The objective a failed job returns: the worst value for the sweeper's ``direction``.

    Optuna 2 refuses NaN (its sweeper then crashes); +inf (minimize) or -inf (maximize) is a finished trial
    with the worst possible score, so the search goes on.
    """
    direction = HydraConfig.get().sweeper.get("direction") if HydraConfig.initialized() else None
    return -math.inf if str(direction).lower().startswith("max") else math.inf


BASIC_SWEEPER = "hydra._internal.core_plugins.basic_sweeper.BasicSweeper"


def sweep_lines(config: DictConfig) -> list[str]:
    """The override lines a sweep expands: ``hydra.sweeper.params`` (an experiment's grid) then the command line's
    (``hydra.overrides.task``), as Hydra's basic sweeper reads them; Hydra's own (``hydra.*``) left out."""
    params = config.hydra.sweeper.get("params") or {}
    lines = [f"{k}={v}" for k, v in params.items()] + [str(o) for o in config.hydra.overrides.task]
    return [ln for ln in lines if not ln.lstrip("+~").startswith(("hydra.", "hydra/"))]


def swept_keys(config: DictConfig) -> list[str]:
    """The keys a sweep varies (``model``, ``seed``), in the order typed; [] when a line does not parse."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    try:
        parsed = OverridesParser.create().parse_overrides(sweep_lines(config))
    except HydraException:
        return []
    return list(dict.fromkeys(o.get_key_element() for o in parsed if o.is_sweep_override()))


def planned_jobs(config: DictConfig) -> list[list[str]] | None:
    """Each job's overrides, in job-number order, as Hydra's basic sweeper will run them (their cross product);
    None for another sweeper (Optuna chooses its trials as it goes) or a line that does not parse."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    if config.hydra.sweeper.get("_target_") != BASIC_SWEEPER:
        return None
    try:
        parsed = OverridesParser.create().parse_overrides(sweep_lines(config))
        return [job for batch in BasicSweeper.split_arguments(parsed, None) for job in batch]
    except HydraException:
        return None


def jobs_not_run(sweep_dir: Path, planned: list[list[str]] | None,
                 swept: list[str] | None = None) -> list[tuple[int, list[str]]]:
    """``(number, overrides)`` of each planned job without a folder ``<number>_*`` in ``sweep_dir``; with ``swept``,
    only the overrides of those keys (what tells the job from the others)."""
    started = {p.name.split("_", 1)[0] for p in sweep_dir.iterdir() if p.is_dir()} if sweep_dir.is_dir() else set()
    keep = set(swept or [])
    return [(i, [o for o in job if not keep or o.split("=", 1)[0].lstrip("+~") in keep])
            for i, job in enumerate(planned or []) if str(i) not in started]


def write_summary(sweep_dir: Path, planned: list[list[str]] | None, swept: list[str] | None = None,
                  interrupted: bool = False, filename: str = "summary.md",
                  resume: str | None = None) -> tuple[int, int, int, int]:
    """Write ``<sweep_dir>/<filename>``: the counts (:func:`ganlab.analysis.table.job_counts`), the comparison
    table, the failed jobs and the jobs that never ran (with their ``swept`` keys' values, see :func:`jobs_not_run`);
    log the counts and the table (the sweep's one table on the terminal: each job printed one line, see
    :func:`job_line`), then the jobs that need attention. When some job did not finish, ``resume``
    (:func:`sweep_resume_command`) is written and logged last: the command that continues the whole sweep.

    Returns:
        ``(finished, failed or unfinished, interrupted, not run)`` job counts.
    """
    runs, failed = collect_runs(sweep_dir)
    missing = jobs_not_run(sweep_dir, planned, swept)
    counts = job_counts(runs, failed, len(missing))
    lines = [f"# Sweep {sweep_dir}", "", f"{'Interrupted: ' if interrupted else ''}{counts}.", ""]
    if runs:
        lines += [markdown_table(summarise(runs)), ""]
    if failed:
        lines += ["## Failed jobs", ""] + [f"- {f.status} `{f.run_dir}`: {f.error} (log: `{f.log}`)"
                                              for f in failed] + [""]
    if missing:
        lines += ["## Jobs not run", ""] + [f"- {i}: `{' '.join(job)}`" for i, job in missing] + [""]
    resume = resume if failed or missing else None
    if resume:
        lines += ["## Continue the whole sweep", "", CONTINUE_SWEEP + ":", "", "```", resume, "```"]
    (sweep_dir / filename).write_text("\n".join(lines).rstrip("\n") + "\n")
    table = f"\n{terminal_table(summarise(runs))}" if runs else ""
    log.info("sweep %s: %s; summary in %s%s", "interrupted" if interrupted else "finished", counts,
             sweep_dir / filename, table)
    _log_unfinished(runs if interrupted else [], failed, missing)
    if resume:
        log.warning("%s:\n  %s", CONTINUE_SWEEP, resume)
    stopped = sum(f.status == "interrupted" for f in failed)
    return len(runs), len(failed) - stopped, stopped, len(missing)


def _log_unfinished(runs: list[dict[str, Any]], failed: list[Any], missing: list[tuple[int, list[str]]]) -> None:
    """Log the finished ``runs`` (an interrupted sweep's; a finished sweep's jobs each printed their line), the
    failed and interrupted jobs (with the command that continues one) and the jobs that never ran."""
    for run in runs:
        log.info("finished job %s", run["run_dir"])
    for f in failed:
        if f.resume:
            log.warning("interrupted job %s (log: %s); to continue it:\n  %s", f.run_dir, f.log, f.resume)
        else:
            log.warning("%s job %s: %s (log: %s)", f.status, f.run_dir, f.error, f.log)
    for i, job in missing:
        log.warning("job %d not run: %s", i, " ".join(job))


#: How many headline scores a sweep job's line shows (:func:`job_line`).
JOB_LINE_SCORES = 3


def job_line(metrics: dict[str, Any], run_dir: Path) -> str:
    """A sweep job's one line when it finished: its folder's name (job number and swept values), the steps and
    wall time (``steps 130-400`` when the job resumed from step 130: this attempt's steps), the first
    :data:`JOB_LINE_SCORES` headline scores (:func:`ganlab.analysis.table.headline_of`), the verdict's first
    word(s) and the folder. Every score stays in the job's ``metrics.json``; the sweep's
    table comes at its end (:func:`write_summary`)."""
    scores = metrics.get("scores", {})
    shown = ", ".join(f"{k} {scores[k]:.4g}" for k in headline_of(scores)[:JOB_LINE_SCORES])
    verdict = str(metrics.get("verdict", "-")).split(":", 1)[0]
    start = metrics.get("start_step") or 0
    steps = f"steps {start}-{metrics['step']}" if start else f"{metrics['step']} steps"
    return (f"job {run_dir.name}: {steps} in {metrics.get('wall_time_s', 0.0):.1f} s; {shown}; "
            f"verdict: {verdict}; folder {run_dir}")


#: What the command of :func:`sweep_resume_command` does, as the summary and the log say it.
CONTINUE_SWEEP = ("to continue the whole sweep (each stopped job from its newest checkpoint, finished jobs kept, the "
                  "others started)")


def sweep_resume_command(config: DictConfig) -> str | None:
    """The command that continues the whole sweep of ``config`` (its multirun config): ``ganlab-train -m``, its
    Hydra and task overrides as typed (so it plans the same jobs into the same job folders), ``trainer.resume=auto``
    (each job continues from its own folder's checkpoint, a finished job is kept, one with nothing saved starts
    from step 0: :func:`ganlab.cli.train.resolve_auto`) and ``hydra.sweep.dir`` (absolute); quoted for Hydra and
    the shell (:mod:`ganlab.quoting`). None for a sweeper
    other than Hydra's basic one (Optuna picks its trials as it goes: the same command would not give the same
    jobs)."""
    from ganlab.cli.common import program
    from ganlab.quoting import hydra_override, shell_join

    if config.hydra.sweeper.get("_target_") != BASIC_SWEEPER:
        return None
    hydra = [str(o) for o in config.hydra.overrides.hydra
             if not str(o).lstrip("+~").startswith(("hydra.sweep.dir=", "hydra.mode="))]
    task = [str(o) for o in config.hydra.overrides.task if not str(o).lstrip("+~").startswith("trainer.resume=")]
    folder = Path(str(config.hydra.sweep.dir)).absolute()
    return shell_join([program("ganlab-train"), "-m", *hydra, *task, "trainer.resume=auto",
                       hydra_override("hydra.sweep.dir", str(folder))])


class SweepSummary(Callback):
    """Hydra callback: names the swept keys for the job names (:data:`SWEPT_KEYS_ENV`) when a multirun starts; at
    its end, writes ``<sweep dir>/summary.md`` (:func:`write_summary`) and keeps the counts for
    :func:`exit_status`. :func:`sweep_interrupted` writes the summary of a sweep stopped mid-way.

    Args:
        filename: name of the summary file in the sweep directory.
    """

    def __init__(self, filename: str = "summary.md") -> None:
        self.filename = filename
        self.sweep_dir: Path | None = None
        self.planned: list[list[str]] | None = None
        self.swept: list[str] = []
        self.counts: tuple[int, int, int, int] | None = None
        self.resume: str | None = None

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        global _ACTIVE
        self.swept = swept_keys(config)
        os.environ[SWEPT_KEYS_ENV] = ",".join(self.swept)
        self.sweep_dir, self.planned, self.counts = Path(config.hydra.sweep.dir), planned_jobs(config), None
        self.resume = sweep_resume_command(config)
        _ACTIVE = self

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        self.sweep_dir = Path(config.hydra.sweep.dir)
        if self.sweep_dir.is_dir():
            self.counts = write_summary(self.sweep_dir, self.planned, self.swept, filename=self.filename,
                                        resume=self.resume)


class SweepFolderLock(Callback):
    """Hydra callback (``hydra.callbacks.sweep_folder_lock``, the first): when a multirun starts, before Hydra
    writes ``multirun.yaml`` or any job's files, take the sweep folder's lock (:data:`ganlab.layout.LOCK_FILE`)
    for the sweep's length, and refuse the sweep (the message on stderr, exit 1; nothing written) when another
    process holds it or the lock of one of its job folders (a job continued alone). A job's own folder is taken
    by the job (:func:`ganlab.run.session.claim_folder`) before it writes anything there."""

    def __init__(self) -> None:
        self.lock: Any = None

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        from ganlab.cli.train import _report
        from ganlab.config.keys import ConfigError

        try:
            self.lock = claim_sweep_folder(Path(str(config.hydra.sweep.dir)).absolute())
        except ConfigError as err:
            _report(err)
            raise SystemExit(1) from None

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        if self.lock is not None:
            self.lock.close()
            self.lock = None


def claim_sweep_folder(sweep_dir: Path) -> Any:
    """The sweep folder's lock, held (the open lock file: keep it open while the sweep runs).

    Raises:
        ConfigError: another process holds the lock of ``sweep_dir`` (another sweep) or of one of its job folders
            (a job continued alone); the message names the folder and how to go on.
    """
    from ganlab import layout
    from ganlab.config.keys import ConfigError

    busy = [job for job in sorted(sweep_dir.iterdir()) if layout.folder_in_use(job)] if sweep_dir.is_dir() else []
    if busy:  # before the sweep's own lock file is made: a refused sweep writes nothing
        raise ConfigError(f"job folder {busy[0]} of sweep folder {sweep_dir} is in use: another ganlab-train process "
                          f"holds its lock ({layout.LOCK_FILE}); wait for that run to end, or start this sweep in "
                          "another folder (hydra.sweep.dir=<new folder>)")
    lock = layout.lock_folder(sweep_dir)
    if lock is None:
        raise ConfigError(f"sweep folder {sweep_dir} is in use: another ganlab-train -m process holds its lock "
                          f"({layout.LOCK_FILE}); two sweeps never write one folder. Start this sweep in another "
                          "folder (hydra.sweep.dir=<new folder>, or leave hydra.sweep.dir out), or wait for that sweep "
                          "to end")
    return lock


#: The summary callback of the sweep under way in this process (None outside a sweep).
_ACTIVE: SweepSummary | None = None


_NEW_FOLDERS: list[Path] = []  # hydra.run.dir and its parents that did not exist before this call (deepest first)


class NewRunFolders(Callback):
    """Hydra callback (``hydra.callbacks.new_run_folders``): before Hydra makes ``hydra.run.dir``, note which of
    its folders do not exist yet (e.g. ``runs/<data set>/`` on a first run), so that a run refused at its start
    removes the empty folders this call made and no others (:func:`remove_new_folders`, called by
    ``ganlab.cli.train``)."""

    def on_run_start(self, config: DictConfig, **kwargs: object) -> None:
        HydraConfig.instance().set_config(config)  # as Hydra's run_job does next: ${hydra:...} in the folder's name
        run_dir = Path(str(config.hydra.run.dir)).absolute()  # ${now:} is cached: the folder Hydra will make
        _NEW_FOLDERS[:] = [p for p in (run_dir, *run_dir.parents) if not p.exists()]


def remove_new_folders() -> None:
    """Remove the folders :class:`NewRunFolders` noted, deepest first, each only while it is empty (a folder another
    run wrote into meanwhile stays)."""
    for folder in _NEW_FOLDERS:
        with contextlib.suppress(OSError):  # not empty, or gone already
            folder.rmdir()


def remove_unstarted_run_folder() -> Path | None:
    """A single run stopped while Hydra set it up (its ``.hydra/`` files may be half-written): remove the run
    folder :class:`NewRunFolders` saw this call make, when it holds nothing but Hydra's files, its log and its lock,
    then the empty parents this call made. Returns the folder removed, or None."""
    import shutil

    from ganlab import layout

    if not _NEW_FOLDERS or not _NEW_FOLDERS[0].is_dir():
        return None
    run_dir = _NEW_FOLDERS[0]
    if not {p.name for p in run_dir.iterdir()} <= {layout.HYDRA_DIR, layout.JOB_LOG, layout.LOCK_FILE}:
        return None
    shutil.rmtree(run_dir, ignore_errors=True)
    remove_new_folders()
    return run_dir


def sweep_interrupted() -> bool:
    """After a sweep stopped mid-way (Ctrl-C, a signal, a job that exited): write its ``summary.md`` and log the
    jobs that finished, the command that continues the interrupted job and the jobs that never ran; nothing
    outside a sweep or after one that ended. Returns whether a sweep's summary was written."""
    active = _ACTIVE
    if active is None or active.counts is not None or active.sweep_dir is None or not active.sweep_dir.is_dir():
        return False
    active.counts = write_summary(active.sweep_dir, active.planned, active.swept, interrupted=True,
                                  filename=active.filename, resume=active.resume)
    return True


def exit_status() -> int:
    """``ganlab-train -m``'s exit status after its sweep: 1 when any job failed, did not finish, was interrupted or
    never ran, else 0 (also outside a sweep)."""
    counts = _ACTIVE.counts if _ACTIVE is not None else None
    return 1 if counts is not None and any(counts[1:]) else 0
