"""``ganlab-train``: one Hydra-configured GAN experiment (``-m`` for a sweep). See ``conf/train.yaml``.

This module imports torch and the rest of ganlab only inside its functions: ``ganlab-train lr=1e-3`` is answered
by :func:`ganlab.config.keys.check_top_level` before that import (about a second instead of many).
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import re
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
    """``preflight=true``: dry-run the experiment, print the pass/fail table; True when every check passed."""
    from ganlab.run import layout
    from ganlab.run.preflight import format_table, run_preflight

    run_dir = Path(HydraConfig.get().runtime.output_dir)
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

    Raises:
        StartError: the run could not be built.
    """
    from ganlab import distributed
    from ganlab.run.session import claim_folder, train_run

    run_dir = Path(HydraConfig.get().runtime.output_dir)
    if not distributed.current().main:  # the other ranks write into rank 0's folder, which rank 0 holds
        return train_run(cfg, run_dir, report=_log_finished)
    with claim_folder(run_dir, cfg.trainer.get("resume")):  # before any work: the folder is this run's alone
        return train_run(cfg, run_dir, report=_log_finished)


def _log_finished(metrics: dict, run_dir: Path) -> None:
    from ganlab.cli.common import format_scores

    log.info("finished %d steps (%.1f steps/s); final scores (model beside the held-out real data):\n%s\n"
             "verdict: %s\nrun folder: %s%s", metrics["step"], metrics["steps_per_s"],
             format_scores(metrics["scores"]), metrics["verdict"], run_dir,
             f"\nlook at it: {tensorboard_command(run_dir)}" if any(run_dir.glob("events.out.tfevents.*")) else "")


def _failed_start(cfg: DictConfig, err: StartError) -> float | None:
    """A run that could not start. Single run: print the message (the traceback too with HYDRA_FULL_ERROR=1),
    remove the run folder Hydra made when it holds nothing else, and its parents this call made while they are
    empty, exit 1. Multirun: mark the job's folder (``failure.json`` with ``"stage": "start"``, listed by
    ganlab-compare as a config error) and go on. A folder another run holds
    (:class:`~ganlab.run.session.RunFolderTaken`) is left as it is: the message, then exit 1 (a sweep's job: the
    worst objective)."""
    from ganlab.cli import sweep
    from ganlab.run import layout
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
    folder = hydra_value(str(run_dir))
    return shell_join([program("ganlab-train"), *task, f"trainer.resume={folder}", f"hydra.run.dir={folder}"])


def shell_join(words: list[str]) -> str:
    """``words`` as one command line for bash and zsh, like :func:`shlex.join`, but a word holding single quotes
    (a Hydra-quoted value, ``hydra.run.dir='/a b'``) goes in double quotes when nothing in it is special there
    (no ``"``, ``$``, backquote, backslash or ``!``), which reads better than shlex's ``'"'"'`` splices."""
    def quote(word: str) -> str:
        if "'" in word and not any(c in word for c in '"$`\\!'):
            return f'"{word}"'
        return shlex.quote(word)

    return " ".join(quote(w) for w in words)


def hydra_value(text: str) -> str:
    """``text`` as the value of a Hydra override: as it is when Hydra's grammar reads it back unchanged (a plain
    path), else single-quoted with its quotes escaped (a folder name with a space, brackets or a comma).
    :func:`shell_join` then quotes the whole ``key=value`` for the shell."""
    if re.fullmatch(r"[\w./:@+-]+", text):
        return text
    return "'" + text.replace("'", "\\'") + "'"


def start_command(run_dir: Path) -> str:
    """The ``ganlab-train`` command that starts the run of ``run_dir`` again from step 0: this run's command-line
    overrides and ``hydra.run.dir`` (a run stopped before it saved a checkpoint)."""
    from ganlab.cli.common import program

    task = [o for o in HydraConfig.get().overrides.task
            if not o.startswith(("trainer.resume=", "hydra.run.dir=", "debug."))]
    return shell_join([program("ganlab-train"), *task, f"hydra.run.dir={hydra_value(str(run_dir))}"])


def _stopped(signal_name: str, step: int | None, checkpoint: Path | None) -> None:
    """A run stopped by a signal: mark its folder (:func:`ganlab.run.layout.record_interrupt`, not a failure)
    and log where it is and the command that continues it (shell-quoted, one line of its own to paste).

    ``step``/``checkpoint`` None: the signal came outside the training loop (while the run was built or scored,
    or a second Ctrl-C); then the newest checkpoint already on disk (every file is written atomically) is the
    one to resume from, and a run that saved none has its folder removed when nothing else is in it, and
    the command that starts it again is printed."""
    from ganlab.cli import sweep
    from ganlab.run import layout

    run_dir = Path(HydraConfig.get().runtime.output_dir)
    dist = sys.modules.get("ganlab.distributed")  # not imported anew: the signal may have cut its import short
    if dist is not None and not dist.current().main:
        return
    layout.remove_interrupted_writes(run_dir, None)  # a write the signal cut off
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
    (:func:`ganlab.cli.sweep.sweep_interrupted`)."""
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
            _stopped("SIGINT", None, None)
        sys.exit(INTERRUPTED_EXIT)


def _train(cfg: DictConfig) -> float | None:
    """:func:`train` after the preflight branch: run, and report a failed start, a signal or an error."""
    from ganlab import distributed
    from ganlab.cli import sweep
    from ganlab.run import layout
    from ganlab.trainer.interrupt import TrainingInterrupted

    try:
        dist = distributed.init(str(cfg.device), float(cfg.trainer.dist_timeout_s)) \
            if cfg.trainer.get("distributed") else distributed.current()
    except ValueError as err:
        return _failed_start(cfg, StartError(str(err)))
    _quiet_other_ranks(dist)
    try:
        metrics = run(cfg)
    except StartError as err:
        return _failed_start(cfg, err)
    except TrainingInterrupted as stop:
        _stopped(signal.Signals(stop.signum).name, stop.step, stop.checkpoint)
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
