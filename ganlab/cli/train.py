"""``ganlab-train``: one Hydra-configured GAN experiment (``-m`` for a sweep). See ``conf/train.yaml``.

This module imports torch and the rest of ganlab only inside its functions: ``ganlab-train lr=1e-3`` is answered
by :func:`ganlab.config.keys.check_top_level` before that import (about a second instead of many).
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import shlex
import shutil
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from ganlab import _config_dir
from ganlab.cli.help import train_help
from ganlab.config.keys import ConfigError, check_top_level
from ganlab.quoting import hydra_override, hydra_value, shell_join  # noqa: F401 - hydra_value: also imported from here
from ganlab.run.session import StartError

if TYPE_CHECKING:
    from ganlab.distributed import Dist

log = logging.getLogger("ganlab")

#: The exit status of a run or sweep stopped by Ctrl-C: 128 + SIGINT, the shell's convention.
INTERRUPTED_EXIT = 128 + signal.SIGINT


def tensorboard_command(run_dir: Path) -> str:
    """``tensorboard --logdir <run_dir>`` that works as printed (see :func:`ganlab.cli.common.program`)."""
    from ganlab.cli.common import program

    return shlex.join([program("tensorboard"), "--logdir", str(run_dir)])


def preflight(cfg: DictConfig) -> bool:
    """``preflight=true``: dry-run the experiment in its folder (held as a run's, :func:`run`), print the pass/fail
    table; True when every check passed. A folder another run holds is refused: the message, exit 1."""
    from ganlab import layout
    from ganlab.run.preflight import format_table, run_preflight
    from ganlab.run.session import RunFolderTaken, claim_folder

    run_dir = Path(HydraConfig.get().runtime.output_dir)
    try:
        lock = claim_folder(run_dir, cfg.trainer.get("resume"))  # .hydra/ and preflight.json: the folder's owner only
    except RunFolderTaken as err:
        _report(err)
        sys.exit(1)
    with lock:
        layout.save_hydra_record(run_dir, cfg, HydraConfig.instance().cfg)
        rows = run_preflight(cfg, run_dir)
    print(format_table(rows), flush=True)
    log.info("preflight table in %s", run_dir / layout.PREFLIGHT_FILE)
    return all(r.passed is not False for r in rows)


def _report(err: Exception) -> None:
    """A bad setting on the terminal: ``ganlab-train: <message>`` on stderr; with HYDRA_FULL_ERROR=1, re-raise it
    (the traceback) instead."""
    if os.environ.get("HYDRA_FULL_ERROR") == "1":
        raise err
    print(f"ganlab-train: {err}", file=sys.stderr)


def run(cfg: DictConfig) -> dict:
    """Train one configuration into Hydra's output directory (:func:`ganlab.run.session.train_run`) and return
    ``metrics.json``'s content; a finished single run logs its final scores, verdict and folder.

    Rank 0 first takes the folder (:func:`ganlab.run.session.claim_folder`), then writes ``.hydra/``
    (:func:`ganlab.layout.save_hydra_record`): a run refused there has written nothing into it.
    ``trainer.resume=auto`` (:func:`resolve_auto`) returns a finished run's record without training.

    Raises:
        StartError: the run could not be built, or its folder is another run's
            (:class:`~ganlab.run.session.RunFolderTaken`).
    """
    from ganlab import distributed, layout
    from ganlab.run.session import AUTO_RESUME, claim_folder, train_run

    run_dir = Path(HydraConfig.get().runtime.output_dir)
    if not distributed.current().main:  # the other ranks write into rank 0's folder, which rank 0 holds
        return resolve_auto(cfg, run_dir) or train_run(cfg, run_dir, report=_log_finished)
    resume = cfg.trainer.get("resume")
    with claim_folder(run_dir, str(run_dir) if resume == AUTO_RESUME else resume):  # before any work: ours alone
        finished = resolve_auto(cfg, run_dir)
        if finished is not None:
            return finished
        layout.save_hydra_record(run_dir, cfg, HydraConfig.instance().cfg)
        return train_run(cfg, run_dir, report=_log_finished)


def resolve_auto(cfg: DictConfig, run_dir: Path) -> dict | None:
    """``trainer.resume=auto``: a run that finished in ``run_dir`` is kept (its record returned, nothing written,
    not retrained); else ``cfg.trainer.resume`` becomes ``run_dir`` when it holds a checkpoint
    (:func:`ganlab.run.session.auto_resume`), or null (the run starts from step 0). Other values: None, ``cfg``
    untouched.

    Raises:
        StartError: see :func:`ganlab.run.session.auto_resume`; :class:`~ganlab.run.session.RunFolderTaken` when
            nothing can be continued but the folder holds a run's records (a new run never writes among them).
    """
    from ganlab import layout
    from ganlab.run.session import AUTO_RESUME, RunFolderTaken, auto_resume, finished_record

    if cfg.trainer.get("resume") != AUTO_RESUME:
        return None
    ensemble = cfg.trainer.get("ensemble") is not None
    finished = finished_record(run_dir, ensemble)
    if finished is not None:
        log.info("trainer.resume=auto: %s finished already (step %s); kept, not trained again", run_dir,
                 finished.get("step"))
        return finished
    cfg.trainer.resume = auto_resume(run_dir, ensemble)
    records = [] if cfg.trainer.resume else layout.run_records(run_dir)
    if records:  # e.g. metrics.jsonl of a run killed before its first checkpoint: never appended to by a new run
        raise RunFolderTaken(f"trainer.resume=auto: run folder {run_dir} holds a run's records ({', '.join(records)}) "
                             "but no checkpoint to continue from; start this run in a new folder "
                             "(hydra.run.dir=<new folder>)")
    log.info("trainer.resume=auto: %s", f"continuing from {run_dir}" if cfg.trainer.resume else "nothing saved in "
             f"{run_dir}: starting from step 0")
    return None


def _log_finished(metrics: dict, run_dir: Path) -> None:
    """A finished run on the terminal: a single run, its final scores' table, verdict and folder; a sweep's job,
    one line (:func:`ganlab.cli.sweep.job_line`: the sweep prints one table at its end)."""
    from ganlab.cli import sweep
    from ganlab.cli.common import format_scores

    if sweep.is_multirun():
        log.info("%s", sweep.job_line(metrics, run_dir), extra=sweep.SWEEP_LINE)
        return

    trained = metrics["step"] - metrics.get("start_step", 0)  # 0: a run resumed at its last step, only finished
    speed = f"{metrics['steps_per_s']:.1f} steps/s" if trained > 0 else "no step left: its final record written"
    log.info("finished %d steps (%s); final scores (model beside the held-out real data):\n%s\n"
             "verdict: %s\nrun folder: %s%s", metrics["step"], speed,
             format_scores(metrics["scores"]), metrics["verdict"], run_dir,
             f"\nlook at it: {tensorboard_command(run_dir)}" if any(run_dir.glob("events.out.tfevents.*")) else "")


def _failed_start(cfg: DictConfig, err: StartError) -> float | None:
    """A run that could not start. Single run: print the message (the traceback too with HYDRA_FULL_ERROR=1),
    remove the run folder Hydra made when it holds nothing else, and its parents this call made while they are
    empty, exit 1. Multirun: mark the job's folder (``failure.json`` with ``"stage": "start"``, listed by
    ganlab-compare as a config error) and go on. A folder another run holds
    (:class:`~ganlab.run.session.RunFolderTaken`) is left as it is: the message, then exit 1 (a sweep's job: the
    worst objective)."""
    from ganlab import layout
    from ganlab.cli import sweep
    from ganlab.run.session import RunFolderTaken

    run_dir = Path(HydraConfig.get().runtime.output_dir)
    if isinstance(err, RunFolderTaken):  # another run's folder: write nothing there, remove nothing
        _report(err)
        if sweep.is_multirun():
            return sweep.failed_objective() if cfg.get("objective") else None
        sys.exit(1)
    if sweep.is_multirun():
        layout.record_failure(run_dir, err.__cause__ or err, log_traceback=False, stage="start")
        log.error("job could not start: %s", err)
        return sweep.failed_objective() if cfg.get("objective") else None
    _report(err)
    if run_dir.is_dir() and {p.name for p in run_dir.iterdir()} <= {layout.HYDRA_DIR, layout.JOB_LOG,
                                                                  layout.LOCK_FILE}:
        shutil.rmtree(run_dir, ignore_errors=True)
        sweep.remove_new_folders()  # runs/<data set>/ too when this call made it
    sys.exit(1)


def resume_command(run_dir: Path) -> str:
    """The ``ganlab-train`` command that continues the run in ``run_dir``: this run's command-line overrides
    (loop settings such as ``trainer.steps`` come from the command, not the checkpoint), then
    ``trainer.resume`` and ``hydra.run.dir`` pointing at the run folder (its newest intact checkpoint)."""
    from ganlab.cli.common import program

    task = [o for o in HydraConfig.get().overrides.task
            if not o.startswith(("trainer.resume=", "hydra.run.dir=", "debug."))]
    folder = str(run_dir)
    return shell_join([program("ganlab-train"), *task, hydra_override("trainer.resume", folder),
                       hydra_override("hydra.run.dir", folder)])


def start_command(run_dir: Path) -> str:
    """The ``ganlab-train`` command that starts the run of ``run_dir`` again from step 0: this run's command-line
    overrides and ``hydra.run.dir`` (a run stopped before it saved a checkpoint)."""
    from ganlab.cli.common import program

    task = [o for o in HydraConfig.get().overrides.task
            if not o.startswith(("trainer.resume=", "hydra.run.dir=", "debug."))]
    return shell_join([program("ganlab-train"), *task, hydra_override("hydra.run.dir", str(run_dir))])


def _finished_at(run_dir: Path, cfg: DictConfig) -> int | None:
    """The step of the run's final record when the run in ``run_dir`` finished this configuration: its
    ``metrics.json`` (not a failed run's) at ``cfg.trainer.steps`` or beyond; else None (no record, or the record of
    the shorter run this one extends)."""
    from ganlab.run.session import finished_record

    record = finished_record(run_dir) if cfg.trainer.get("ensemble") is None else None
    step = None if record is None else record.get("step")
    return int(step) if step is not None and int(step) >= int(cfg.trainer.steps) else None


def _stopped(signal_name: str, step: int | None, checkpoint: Path | None, cfg: DictConfig) -> None:
    """A run stopped by a signal: mark its folder (:func:`ganlab.layout.record_interrupt`, not a failure)
    and log where it is and the command that continues it (shell-quoted, one line of its own to paste).

    A signal after the run finished (:func:`_finished_at`: its final record written, while the rest of its end ran
    or its scores were printed) marks nothing: the run is whole, and the command that would continue it would be
    refused; the log says so and where its scores are.

    ``step``/``checkpoint`` None: the signal came outside the training loop (while the run was built or scored,
    or a second Ctrl-C); then the newest checkpoint already on disk (every file is written atomically) is the
    one to resume from, and a run that saved none has its folder removed when nothing else is in it, and
    the command that starts it again is printed."""
    from ganlab import layout
    from ganlab.cli import sweep

    run_dir = Path(HydraConfig.get().runtime.output_dir)
    dist = sys.modules.get("ganlab.distributed")  # not imported anew: the signal may have cut its import short
    if dist is not None and not dist.current().main:
        return
    layout.remove_interrupted_writes(run_dir, None)  # a write the signal cut off
    if step is None and (done := _finished_at(run_dir, cfg)) is not None:
        log.warning("%s after the run finished at generator step %d: nothing to continue, its final scores are in "
                    "%s", signal_name, done, run_dir / layout.METRICS_FILE)
        return
    saved = checkpoint is not None or any((run_dir / layout.CHECKPOINT_DIR).glob("*.pt"))
    if not saved:
        if not sweep.is_multirun() and run_dir.is_dir() and {p.name for p in run_dir.iterdir()} <= {
                layout.HYDRA_DIR, layout.JOB_LOG, layout.LOCK_FILE}:
            shutil.rmtree(run_dir, ignore_errors=True)
            sweep.remove_new_folders()
            log.warning("%s before the first checkpoint: nothing saved, run folder %s removed. To start the run "
                        "again:\n  %s", signal_name, run_dir, start_command(run_dir))
            return
        command = start_command(run_dir)
        layout.record_interrupt(run_dir, signal_name, 0, None, command)
        log.warning("%s before the first checkpoint: nothing saved; run folder %s. To start the run again:\n  %s",
                    signal_name, run_dir, command)
        return
    command = resume_command(run_dir)
    where = f"at generator step {step}: {checkpoint.name} saved" if checkpoint is not None and step is not None \
        else "stopped at once (a second Ctrl-C, or one outside the training loop): the newest checkpoint on disk " \
        "is kept"
    layout.record_interrupt(run_dir, signal_name, step, checkpoint, command)
    log.warning("%s %s; run folder %s. To continue the run:\n  %s", signal_name, where, run_dir, command)


def _quiet_other_ranks(dist: Dist) -> None:
    """On ranks other than 0: no log file of their own in the shared run folder, and only their warnings and errors
    on the console (rank 0 reports the run)."""
    if dist.main:
        return
    log.setLevel(logging.WARNING)
    root = logging.getLogger()
    for h in [h for h in root.handlers if isinstance(h, logging.FileHandler)]:
        root.removeHandler(h)
        h.close()


def check_arguments(argv: list[str]) -> None:
    """Before Hydra starts: :func:`ganlab.config.check.check_command_line` on the command's overrides (each value
    of a sweep under ``-m``); a bad key, type or option prints its message as a bad setting found at the start does
    (:func:`_report`) and exits 1, before Hydra makes a run folder. ``--help`` prints :func:`ganlab.cli.help.train_help`
    and exits. Left to Hydra: ``--hydra-help``, ``--info``, shell
    completion, another config (``--config-name/-path/-dir``) and command lines Hydra's parser refuses."""
    from hydra._internal.utils import get_args_parser

    try:
        with contextlib.redirect_stderr(io.StringIO()):
            args = get_args_parser().parse_args(argv)
    except SystemExit:
        return
    if args.help:  # written for a person; Hydra's own (with the schema groups) stays behind --hydra-help
        print(train_help(_config_dir()), end="")
        sys.exit(0)
    if any([args.hydra_help, args.info, args.shell_completion, args.config_path, args.config_name,
            args.config_dir, args.experimental_rerun]):
        return
    try:
        check_top_level(args.overrides, _config_dir())  # before torch is imported: a typo answered at once
        from ganlab.config.check import check_command_line
        from ganlab.config.run import check_config  # every job's values too: a sweep is refused before its jobs run

        check_command_line(args.overrides, multirun=args.multirun, check=check_config)
        if args.multirun:
            check_no_sweep_under_torchrun()
    except ConfigError as err:
        _report(err)
        sys.exit(1)


def upgraded_arguments(argv: list[str]) -> list[str]:
    """``argv`` with each moved key (``monitor.risk.threshold=0.9``) renamed to its new one
    (``callbacks.collapse_risk.threshold=0.9``, :mod:`ganlab.config.legacy`), one line on stderr per renamed key."""
    from ganlab.config.legacy import upgrade_overrides

    upgraded, notes = upgrade_overrides(argv)
    for text in notes:
        print(f"ganlab-train: {text}", file=sys.stderr)
    return upgraded


def check_no_sweep_under_torchrun() -> None:
    """Refuse ``-m`` in a process torchrun started (``WORLD_SIZE`` > 1 before Hydra runs).

    Raises:
        ConfigError: every process would run the whole sweep, each in a sweep folder named from its own clock.
    """
    world = int(os.environ.get("WORLD_SIZE", "1") or 1)
    if "RANK" in os.environ and world > 1:
        raise ConfigError(f"a sweep (-m) under torchrun would run every job in each of the {world} processes, each "
                          "with its own sweep folder; start one torchrun per job (without -m), or run the sweep "
                          "on SLURM with hydra/launcher=slurm_ddp trainer.distributed=true")


def main() -> None:
    """``ganlab-train``: :func:`check_arguments`, then the Hydra job :func:`train`. A sweep (``-m``) exits 1 when any
    job failed or never ran, and writes its ``summary.md`` also when it is interrupted
    (:func:`ganlab.cli.sweep.sweep_interrupted`). Once it exits on a signal (130, 143), everything is saved and
    printed, so a further Ctrl-C during the interpreter's exit is ignored (it only printed a traceback from an
    atexit handler)."""
    try:
        _main()
    except SystemExit as done:
        if done.code in (INTERRUPTED_EXIT, 128 + signal.SIGTERM):
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        raise


def _main() -> None:
    """:func:`main`'s work: the checks, the run or sweep, its exit status."""
    try:
        sys.argv[1:] = upgraded_arguments(sys.argv[1:])  # Hydra reads sys.argv: it composes the new keys
        check_arguments(sys.argv[1:])
        from ganlab import CONFIG_DIR  # the schemas the YAMLs name, stored before Hydra composes
        from ganlab.cli import sweep  # the resolvers of the run and job folders' names
    except KeyboardInterrupt:  # Ctrl-C while the settings were checked (torch loading): nothing written yet
        print("ganlab-train: interrupted before the run started; nothing was written", file=sys.stderr)
        sys.exit(INTERRUPTED_EXIT)

    log.debug("config folder %s", CONFIG_DIR)
    try:
        train()
    except KeyboardInterrupt:  # outside a job (Hydra between a sweep's jobs, or composing): no traceback
        if not sweep.sweep_interrupted():
            from ganlab.cli.common import program

            removed = sweep.remove_unstarted_run_folder()
            print("ganlab-train: interrupted before the run started; nothing was saved"
                  f"{f' (its folder {removed} removed)' if removed else ''}. To start it again:\n  "
                  f"{shell_join([program('ganlab-train'), *sys.argv[1:]])}", file=sys.stderr)
        sys.exit(INTERRUPTED_EXIT)
    except SystemExit:
        sweep.sweep_interrupted()
        raise
    sys.exit(sweep.exit_status())


@hydra.main(version_base="1.3", config_path=str(_config_dir()), config_name="train")
def train(cfg: DictConfig) -> float | None:
    """The Hydra job of ``ganlab-train``; returns the sweep objective (``cfg.objective``) when set.

    In a multirun (``-m``) a job that raises does not stop the sweep: its traceback goes into the job's log,
    ``failure.json`` and ``FAILED`` into its folder, and it returns the worst objective (+-inf). A single run
    re-raises.
    """
    if not isinstance(cfg.get("preflight", False), bool):
        raise ValueError(f"preflight must be true or false, got {cfg.preflight!r}")
    try:
        if cfg.get("preflight"):
            if not preflight(cfg):
                sys.exit(1)
            return None
        from ganlab import distributed
        try:
            return _train(cfg)
        finally:
            distributed.shutdown()
    except KeyboardInterrupt:  # Ctrl-C outside the training loop (start, final scores) or a second Ctrl-C
        if cfg.get("preflight"):
            print("ganlab-train: preflight interrupted", file=sys.stderr)
        else:
            _stopped("SIGINT", None, None, cfg)
        sys.exit(INTERRUPTED_EXIT)


def _train(cfg: DictConfig) -> float | None:
    """:func:`train` after the preflight branch: run, and report a failed start, a signal or an error."""
    from ganlab import distributed, layout
    from ganlab.cli import sweep
    from ganlab.trainer.interrupt import TrainingInterrupted

    try:
        dist = distributed.init(str(cfg.device), float(cfg.trainer.dist_timeout_s)) \
            if cfg.trainer.get("distributed") else distributed.current()
    except ValueError as err:
        return _failed_start(cfg, StartError(str(err)))
    _quiet_other_ranks(dist)
    try:
        with sweep.quiet_job_console():  # a sweep job: its line, warnings and errors on the console
            metrics = run(cfg)
    except StartError as err:
        return _failed_start(cfg, err)
    except TrainingInterrupted as stop:
        _stopped(signal.Signals(stop.signum).name, stop.step, stop.checkpoint, cfg)
        sys.exit(stop.exit_code)
    except Exception as err:
        multirun = sweep.is_multirun()  # a single run also marks its folder, so ganlab-compare tells it from a kill
        if distributed.current().main:
            layout.record_failure(HydraConfig.get().runtime.output_dir, err, log_traceback=multirun)
        if not multirun:
            raise
        return sweep.failed_objective() if cfg.get("objective") else None
    objective = cfg.get("objective")
    return metrics["scores"].get(objective) if objective else None


if __name__ == "__main__":
    main()
