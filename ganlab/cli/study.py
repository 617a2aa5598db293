"""``ganlab-study``: run or report a study declared in ``conf/study/<name>.yaml`` (see docs/howto/studies.md).

A Hydra main over ``conf/ganlab_study.yaml``; the study is its ``study`` group::

    ganlab-study fair_table                          # = ganlab-study study=fair_table action=run
    ganlab-study fair_table study.budget.steps=200   # any key of the study, or of the command, overridden
    ganlab-study fair_table hydra/launcher=submitit_slurm hydra.launcher.partition=gpu hydra.launcher.gpus_per_node=1
    ganlab-study check fair_table                    # check every job's overrides, run nothing
    ganlab-study collect fair_table                  # the table of evaluations from the run folders, train nothing
    ganlab-study report fair_table                   # table.md, curves.png, results page from that table alone
    ganlab-study status fair_table                   # runs finished, running, failed, left; hours spent and left
    ganlab-study tensorboard fair_table              # TensorBoard events of every run from its folder, by arm
    ganlab-study cost fair_table                     # <results>/cost_spent.md: wall hours spent beside the prediction
    ganlab-study blocks [--check]                    # refresh (check) every generated block of the docs
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import os
import sys
import textwrap
import typing
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig, OmegaConf

import ganlab
from ganlab.cli.help import WIDTH, page, rows
from ganlab.study import collect as collect_mod
from ganlab.study.catalog import load_study, shipped_studies
from ganlab.study.plan import all_jobs, check_folders, final_jobs, tuning_jobs
from ganlab.study.schema import StudyError, StudySchema, register

register()  # conf/study/*.yaml name /schema/study

#: Words that may precede the study's name on the command line (each sets ``action``).
ACTIONS = ("run", "check", "collect", "report", "status", "tensorboard", "cost")

#: What ``ganlab-study --help`` says the command does.
ABOUT = """Run or report a study declared in conf/study/<STUDY>.yaml (docs/howto/studies.md): its arms, data sets,
seeds and budget, trained through ganlab-train's checks into runs/study/<STUDY>/, then one table of evaluations
(evaluations.csv) from which the report (table.md, curves.png, the results page) is made."""

EXAMPLES = [
    ("ganlab-study fair_table", "train what is missing (= ganlab-study run fair_table), then collect"),
    ("ganlab-study fair_table study.budget.steps=200", "any key of the study, or of the command, overridden"),
    ("ganlab-study fair_table stage=tune", "only the tuning stage"),
    ("ganlab-study fair_table hydra/launcher=submitit_slurm hydra.launcher.partition=gpu", "the runs on SLURM"),
    ("ganlab-study check fair_table", "check every job's overrides, run nothing"),
    ("ganlab-study collect fair_table", "the table of evaluations from the run folders, train nothing"),
    ("ganlab-study report fair_table", "table.md, curves.png, results page from that table alone"),
    ("ganlab-study status fair_table", "runs finished, running, failed and left per stage and data set; hours"),
    ("ganlab-study tensorboard fair_table", "TensorBoard events of every run, grouped by arm; no training"),
    ("ganlab-study tensorboard fair_table logdir=/tmp/tb", "the same, written to /tmp/tb"),
    ("ganlab-study cost fair_table", "<results>/cost_spent.md: wall run-hours spent per arm and stage beside the "
                                     "predicted cost"),
    ("ganlab-study blocks --check", "check every generated block of the docs (without --check: refresh them)"),
]


def usage() -> str:
    """The text of ``ganlab-study --help``: usage, examples, the actions, the command's keys and the studies of
    ``conf/study/``."""
    actions = rows([("run", "check, train what is missing, write the table of evaluations (the default)"),
                    ("check", "the checks of every job's overrides only"),
                    ("collect", "the table from the run folders, no training"),
                    ("report", "table.md, curves.png, trials.csv and the results page, from the table alone"),
                    ("status", "runs finished, running, failed, left per stage and data set, run-hours spent and "
                               "an estimate of those left; from the folders and the table, no torch"),
                    ("tensorboard", "TensorBoard event files of every run, by arm, from the run folders (no "
                                    "training); rewritten whole each time"),
                    ("cost", "<results>/cost_spent.md from the committed table: wall run-hours spent per arm and "
                             "stage beside the predicted cost (bench_study_cost.py); no torch"),
                    ("blocks [--check]", "refresh (check) every generated block of README.md and docs/")])
    keys = rows([("study.<key>=<value>", "any key of the study's YAML (e.g. study.budget.steps, study.seeds)"),
                 ("stage=<all|tune|final>", "all; tune: the tuning stage only; final: the reporting runs of the "
                                            "pairs already tuned"),
                 ("'arms=[a,b]'", "train only these arms (the others are left alone); default: every arm"),
                 ("logdir=<folder>", "tensorboard: where the event files go; default <runs>/tensorboard/<STUDY>"),
                 ("hydra/launcher=<option>", "where the runs go: joblib (default, this machine), submitit_slurm, "
                                             "submitit_local, basic (in this process)")])
    return page(["ganlab-study [ACTION] STUDY [key=value ...]", "ganlab-study status STUDY [study.key=value ...]",
                 "ganlab-study cost STUDY [study.key=value ...]",
                 "ganlab-study blocks [--check]"], ABOUT, EXAMPLES,
                [("actions (the word before STUDY)", actions), ("keys (key=value)", keys),
                 ("studies (conf/study/)", textwrap.wrap(", ".join(shipped_studies()), WIDTH, initial_indent="  ",
                                                         subsequent_indent="  "))],
                "Hydra's own flags and help: ganlab-study STUDY --hydra-help.")


def hydra_argv(argv: list[str]) -> list[str]:
    """Rewrite the short forms into Hydra overrides: ``[ACTION] NAME rest`` -> ``study=NAME action=ACTION rest``
    (the first word without ``=`` or a leading ``-`` is the name; ``run`` when no action is given)."""
    out, action, name = [], None, None
    for a in argv:
        if name is None and "=" not in a and not a.startswith("-"):
            if action is None and a in ACTIONS:
                action = a
            else:
                name = a
            continue
        out.append(a)
    return ([f"study={name}"] if name else []) + ([f"action={action}"] if action else []) + out


def _fail(err: Exception) -> None:
    if os.environ.get("HYDRA_FULL_ERROR") == "1":
        raise err
    print(f"ganlab-study: {err}", file=sys.stderr)
    sys.exit(1)


def recorded_for(study: StudySchema) -> collect_mod.Recorded:
    """The rows jobs without a run folder keep (:func:`ganlab.study.reuse.study_recorded`): those of other studies'
    runs that reusing arms take, then this study's own committed rows (which win)."""
    from ganlab.study.reuse import study_recorded

    return study_recorded(study, load_study)


def write_collected(study: StudySchema, recorded: collect_mod.Recorded, refuse_empty: bool = False) -> str:
    """Write the study's table of evaluations from its run folders and, for jobs without one, the ``recorded`` rows
    (a study with ``detection``: its corpus CSVs, :func:`ganlab.study.corpus_collect.collect_corpus`, which keeps
    committed runs itself); returns what was written.

    Raises:
        StudyError: ``refuse_empty`` and no row to write (no run folder holds an evaluation, none is recorded): the
            ``collect`` action of a study never trained here, which would otherwise write a header-only table.
    """
    if study.detection is not None:
        from ganlab.study.corpus_collect import collect_corpus

        return ", ".join(map(str, collect_corpus(study)))
    rows = collect_mod.collect(study, all_jobs(study), recorded)
    if not rows and refuse_empty:
        raise StudyError(f"{study.name}: no run to collect: none of its run folders under {study.runs} holds an "
                         f"evaluation and no table of evaluations ({Path(study.results) / collect_mod.TABLE}) records "
                         f"one; train it first ({study_command('run', study.name)}); nothing was written")
    return str(collect_mod.write_table(study, rows))


#: The command line as typed (before :func:`hydra_argv` rewrote it): the command that resumes a stopped study.
TYPED: list[str] = []


def resume_command() -> str:
    """The command as typed, shell-quoted for bash and zsh: running it again resumes the study."""
    return study_command(None)


def study_command(action: str | None, name: str | None = None) -> str:
    """A ``ganlab-study`` command to print, shell-quoted for bash and zsh (:func:`ganlab.quoting.shell_join`), with
    the full path of the venv's ``ganlab-study`` when the venv is not active (:func:`ganlab.cli.common.program`):
    the command as typed (:data:`TYPED`) with its action word (or ``action=...``) replaced by ``action`` (None: the
    command as typed), so that every override the user gave (``study.runs=...``, ``study.results=...``) acts on
    the same folders. ``name``: the study, when nothing was typed (the command called from Python)."""
    from ganlab.cli.common import program
    from ganlab.quoting import shell_join

    words = list(TYPED) or ([name] if name else [])
    if action is not None:
        words = [w for w in words if not w.startswith("action=")]
        first = next((i for i, w in enumerate(words) if "=" not in w and not w.startswith("-")), None)
        if first is not None and words[first] in ACTIONS:
            del words[first]
        words = [action, *words]
    return shell_join([program("ganlab-study"), *words])


def run_study(study: StudySchema, cfg: DictConfig) -> None:
    """Check every job, then the tuning stage, the choice, the reporting stage (as ``cfg.stage`` says; only the
    arms ``cfg.arms`` when set), then the table of evaluations. A Ctrl-C stops it as :mod:`ganlab.study.stopping`
    says: :func:`report_stopped`, then exit 130."""
    from ganlab.study import stopping

    with stopping.catching_ctrl_c(Path(study.runs), resume_command()):
        done, stopped, refused = _run_stages(study, cfg)
    if stopped:
        report_stopped(study, done)
        sys.exit(INTERRUPTED_EXIT)
    path = write_collected(study, recorded_for(study))
    failed = failed_records(done)
    print(done_line(study, done, path), flush=True)
    for r in failed:
        print(f"  failed: {r['job']}: {r['error']}", file=sys.stderr)
    if refused:
        print(f"ganlab-study: {refused}", file=sys.stderr)
    if failed or refused:
        sys.exit(1)


def failed_records(done: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records of ``done`` (the study's job records) whose run failed (``status`` failed, or an ``error``)."""
    return [r for r in done if r.get("status") == "failed" or r.get("error")]


def done_line(study: StudySchema, done: list[dict[str, Any]], path: str) -> str:
    """The line a study that ran to its end prints: the runs its jobs trained (``done``: their records), those that
    failed, those that only wrote their final record (resumed from a checkpoint at the budget: no step trained), where
    the table of evaluations is (``path``) and the commands for its table and TensorBoard."""
    failed = failed_records(done)
    closed = [r for r in done if r not in failed and r.get("from_step") is not None
              and r.get("from_step") == r.get("to_step")]
    return (f"ganlab-study: {len(done) - len(closed)} run(s) trained, {len(failed)} failed"
            + (f", {len(closed)} finished from a checkpoint at the budget (final record only)" if closed else "")
            + f"; every evaluation in {path}; the table: {study_command('report', study.name)}; the runs in "
            f"TensorBoard: {study_command('tensorboard', study.name)}")


def _run_stages(study: StudySchema, cfg: DictConfig) -> tuple[list[dict[str, Any]], bool, str | None]:
    """:func:`run_study`'s stages: the records of the jobs launched, whether a Ctrl-C stopped the study, and why the
    reporting stage did not run when a tuning choice sits at an edge of the grid (:func:`ganlab.study.edges.refusal`;
    None otherwise)."""
    from hydra.core.hydra_config import HydraConfig

    from ganlab.study import edges, stats, stopping
    from ganlab.study.check import check_jobs
    from ganlab.study.runner import launch

    n = check_jobs(study)
    print(f"ganlab-study: {study.name}: the overrides of all {n} (arm, data set, value) variants pass "
          "ganlab-train's checks", flush=True)
    arms = list(cfg.arms) if cfg.get("arms") else None
    if arms and (unknown := sorted(set(arms) - {a.name for a in study.arms})):
        raise StudyError(f"arms={unknown}: not arms of {study.name}; choose from {[a.name for a in study.arms]}")
    launcher = HydraConfig.get().launcher
    recorded = recorded_for(study)
    done: list[dict[str, Any]] = []
    if cfg.stage in ("all", "tune") and not stopping.requested():
        done += launch(study, collect_mod.to_train(study, tuning_jobs(study, arms), recorded), launcher, recorded)
    if cfg.stage in ("all", "final") and not stopping.requested():
        tuned = collect_mod.collect(study, tuning_jobs(study), recorded)
        chosen = stats.choices(study, tuned) if study.tuning else None
        if chosen is not None and (refused := edges.refusal(
                study, {k: v for k, v in chosen.items() if arms is None or k[0] in arms}, tuned)):
            return done, stopping.requested(), refused
        done += launch(study, collect_mod.to_train(study, final_jobs(study, chosen, arms), recorded), launcher,
                       recorded)
    return done, stopping.requested(), None


#: The exit status of a study stopped by Ctrl-C (128 + SIGINT, as ``ganlab-train``'s).
INTERRUPTED_EXIT = 130


def report_stopped(study: StudySchema, done: list[dict[str, Any]]) -> None:
    """After a Ctrl-C: one line per job launched (finished, interrupted and where it saved, failed, not started),
    the study's total (:func:`ganlab.study.progress.total_line`) and the command that resumes it (on stdout)."""
    from ganlab.study.cost import predicted_hours
    from ganlab.study.progress import job_label, minutes, total_line

    counts: dict[str, int] = {}
    lines = []
    for r in done:
        status = r.get("status") or ("failed" if r.get("error") else "finished")
        counts[status] = counts.get(status, 0) + 1
        if status == "interrupted":
            what = f"at step {r.get('to_step')}, saved; {minutes(float(r.get('wall_s') or 0.0))}"
        elif status == "not started":
            what = ""
        else:
            what = f"steps {r.get('from_step')}-{r.get('to_step')}, {minutes(float(r.get('wall_s') or 0.0))}"
        error = f"; {r['error']}" if r.get("error") else ""
        lines.append(f"  {status:<12} {job_label(study, r['job'])}" + (f" ({what}{error})" if what or error else ""))
    summary = ", ".join(f"{n} {s}" for s, n in counts.items()) or "no run had started"
    print(f"ganlab-study: {study.name} stopped by Ctrl-C: {summary}; an interrupted run continues from its "
          "checkpoint when the study runs again", flush=True)
    if lines:
        print("\n".join(lines), flush=True)
    print(total_line(study, recorded_for(study), None, predicted_hours(study)), flush=True)
    print(f"ganlab-study: run the same command to resume: {resume_command()}", flush=True)


def tensorboard(study: StudySchema, logdir: str | None) -> None:
    """``ganlab-study tensorboard``: write the study's runs as TensorBoard runs into ``logdir`` (default
    :func:`ganlab.study.tensorboard.default_logdir`; replaced whole, :func:`ganlab.study.tensorboard.write_events`)
    and print the ``tensorboard`` command that shows them.

    Raises:
        StudyError: a study that does not check, a logdir that is not the command's, or no evaluation at all.
    """
    import shlex

    from ganlab.cli.common import program
    from ganlab.study import tensorboard as board
    from ganlab.study.schema import check_study

    check_study(study)
    check_folders(study)
    path = Path(logdir) if logdir else board.default_logdir(study)
    board.check_logdir(path)
    runs = board.job_rows(study, recorded_for(study))
    if not runs and study.detection is not None:
        raise StudyError(f"study {study.name}: no run folder under {study.runs}, and its committed corpus "
                         f"({study.detection.corpus}) holds no event data; to see its runs in TensorBoard, train them "
                         f"again: move runs.csv, evals.csv and signals.csv out of {study.detection.corpus}, then "
                         f"{study_command('run', study.name)}")
    if not runs:
        raise StudyError(f"study {study.name}: no evaluation in its run folders under {study.runs} nor in its table "
                         f"of evaluations: train it first ({study_command('run', study.name)})")
    n = board.write_events(study, runs, path)
    print(f"ganlab-study: {study.name}: {n} scalars of {len(runs)} runs in {path}\n"
          f"look at them: {shlex.join([program('tensorboard'), '--logdir', str(path)])}")


@hydra.main(version_base="1.3", config_path=str(ganlab._config_dir()), config_name="ganlab_study")
def study_main(cfg: DictConfig) -> None:
    """The Hydra job of ``ganlab-study``: ``cfg.action`` on ``cfg.study``."""
    from ganlab.study.report import report
    from ganlab.study.schema import check_study

    assert ganlab.CONFIG_DIR  # its first use registers the training schemas the jobs compose (imports torch)
    try:
        study: StudySchema = OmegaConf.to_object(cfg.study)
        if cfg.action == "check":
            from ganlab.study.check import check_jobs

            print(f"ganlab-study: {study.name}: all {check_jobs(study)} override variants pass ganlab-train's checks")
            jobs = all_jobs(study)
            if reused := len(jobs) - len(collect_mod.to_train(study, jobs, recorded_for(study))):
                print(f"ganlab-study: {study.name}: {reused} run(s) recorded in a table of evaluations (this study's "
                      "or a reused study's) are not trained again")
        elif cfg.action == "run":
            run_study(study, cfg)
        elif cfg.action == "collect":
            check_study(study)
            check_folders(study)
            print(f"ganlab-study: wrote {write_collected(study, recorded_for(study), refuse_empty=True)}")
        elif cfg.action == "tensorboard":
            tensorboard(study, cfg.get("logdir"))
        elif cfg.action == "status":
            from ganlab.study.status import status

            print(status(study), end="")
        elif cfg.action == "cost":
            from ganlab.study.blocks import update_blocks
            from ganlab.study.cost import write_spent

            print(f"wrote {write_spent(study)}")
            for doc in update_blocks(Path(".")):
                print(f"updated {doc}")
        elif cfg.action == "report" and study.detection is not None:
            from ganlab.study.detection_report import report_detection

            check_study(study)
            for p in report_detection(study):
                print(f"wrote {p}")
        elif cfg.action == "report":
            check_study(study)
            table = Path(study.results) / collect_mod.TABLE
            if not table.is_file():
                raise StudyError(f"no table of evaluations at {table}: run the study "
                                 f"({study_command('run', study.name)}) or collect its run folders "
                                 f"({study_command('collect', study.name)}) first")
            rows = collect_mod.read_table(table)
            if not rows:
                raise StudyError(f"{table} holds no evaluation: run the study ({study_command('run', study.name)}), "
                                 "which writes it; nothing was reported")
            for p in report(study, rows, command=study_command("report", study.name)):
                print(f"wrote {p}")
        else:
            raise StudyError(f"action={cfg.action}: choose one of {', '.join(ACTIONS)}")
    except StudyError as err:
        _fail(err)
    finally:  # Hydra made the study's run folder as this command's own; only training writes there
        runs = OmegaConf.select(cfg, "study.runs", default=None)
        if cfg.action != "run" and runs:
            with contextlib.suppress(OSError):  # rmdir removes it only when empty
                Path(runs).rmdir()


def check_study_keys(args: list[str]) -> None:
    """Refuse an override whose first key is not ganlab-study's (:func:`check_top_keys`, first), then an override
    ``study.<key>...=value`` whose key path is no field of :class:`StudySchema` (walking nested schema dataclasses; a
    list or mapping field ends the walk), naming the closest field, before Hydra's own message (which advises
    ``+study...``, which the schema then refuses too). ``+study...``/``~study...`` lines are left to Hydra.

    Raises:
        StudyError: the override, the unknown key, the closest field and every field at that level.
    """
    check_top_keys(args)
    for arg in args:
        if not arg.startswith("study.") or "=" not in arg:
            continue
        schema: Any = StudySchema
        path = "study"
        for part in arg.split("=", 1)[0].split(".")[1:]:
            fields = typing.get_type_hints(schema)
            if part not in fields:
                close = difflib.get_close_matches(part, list(fields), n=1, cutoff=0.6)
                hint = f"did you mean {path}.{close[0]}? " if close else ""
                raise StudyError(f"{arg}: {path}.{part} is not a key of the study; {hint}"
                                 f"{path} takes: {', '.join(fields)}")
            hint_type = fields[part]
            inner = [t for t in typing.get_args(hint_type) if t is not type(None)] or [hint_type]
            if typing.get_origin(hint_type) is not typing.Union:  # list[X], dict[...]: items, not fields
                inner = [hint_type]
            schema = inner[0] if dataclasses.is_dataclass(inner[0]) else None
            path = f"{path}.{part}"
            if schema is None:
                break


def check_top_keys(args: list[str]) -> None:
    """Refuse an override whose first key is none of ``ganlab-study``'s own (``conf/ganlab_study.yaml``: action,
    stage, arms, logdir; ``study`` and ``hydra``), with or without ``+``/``~``, before Hydra's message (which advises
    ``+key=...``: a key nothing reads, so the command would run as if it had not been given). A key of the study
    given without its ``study.`` prefix (``seeds=[0,1]``) is named with it.

    Raises:
        StudyError: the override, and the override to write instead or the keys there are.
    """
    top = {k for k in OmegaConf.load(Path(ganlab._config_dir()) / "ganlab_study.yaml") if k != "defaults"}
    fields = list(typing.get_type_hints(StudySchema))
    for arg in args:
        if arg.startswith("-"):
            continue
        sign = arg[:len(arg) - len(arg.lstrip("+~"))]
        key = arg[len(sign):].split("=", 1)[0]
        head = key.split(".")[0].split("/")[0]
        if head in top or head in ("study", "hydra"):
            continue
        if head in fields:
            fix = ("~" if sign.startswith("~") else "") + f"study.{arg[len(sign):]}"  # a study key exists: no +
            raise StudyError(f"{arg}: {head} is a key of the study: write {fix}")
        raise StudyError(f"{arg}: {head} is no key of ganlab-study; it takes {', '.join(sorted(top - {'hydra'}))}, "
                         f"hydra.* and the study's keys as study.<key>: {', '.join(fields)}")


def check_name(name: str) -> None:
    """Exit with a message naming the closest shipped study when ``name`` is none of ``conf/study/``."""
    studies = shipped_studies()
    if name not in studies:
        from difflib import get_close_matches

        close = get_close_matches(name, studies, n=1)
        hint = f"; did you mean {close[0]}?" if close else ""
        _fail(StudyError(f"no study {name!r} (conf/study/{name}.yaml){hint or ';'} the studies: {', '.join(studies)} "
                         "(ganlab-study --help)"))


def main() -> None:
    """``ganlab-study``: ``blocks`` goes to :func:`ganlab.study.blocks.main`; anything else to :func:`study_main`
    after :func:`hydra_argv`."""
    argv = sys.argv[1:]
    TYPED[:] = argv
    if argv[:1] == ["blocks"]:
        from ganlab.study.blocks import main as blocks_main

        sys.exit(blocks_main(argv[1:]))
    if "-h" in argv or "--help" in argv:
        print(usage(), end="")
        sys.exit(0)
    hydra_args = hydra_argv(argv)
    name = next((a.split("=", 1)[1] for a in hydra_args if a.startswith("study=")), None)
    searchpath = any(a.lstrip("+").startswith("hydra.searchpath") for a in hydra_args)
    if name is not None and "/" not in name and not searchpath:
        check_name(name)
    try:
        check_study_keys(hydra_args)
    except StudyError as err:
        _fail(err)
    if argv[:1] == ["status"]:  # before Hydra's app and the training schemas: no torch (ganlab.study.status)
        from ganlab.study.status import main as status_main

        sys.exit(status_main(argv[1:]))
    if argv[:1] == ["cost"]:  # the same: the committed table and the prediction, no torch
        from ganlab.study.cost import main as cost_main

        sys.exit(cost_main(argv[1:]))
    sys.argv = [sys.argv[0], *hydra_args]
    try:
        assert ganlab.CONFIG_DIR  # registers the config schemas before Hydra composes
        study_main()
    except KeyboardInterrupt:  # Ctrl-C outside a study's run (composing, checking, another action): no traceback
        print(f"ganlab-study: interrupted. To go on, run the same command again: {resume_command()}",
              file=sys.stderr)
        sys.exit(INTERRUPTED_EXIT)


if __name__ == "__main__":
    main()
