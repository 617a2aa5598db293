"""What ``ganlab-study NAME`` prints while its jobs run: a line per job that ended, then the study's running total.

The jobs run in other processes (joblib's workers, a cluster's nodes) or in this one (``basic``), so the study's
process does not hear of a job's end from the launcher until every job has ended. It watches the run folders
instead: a job ends by appending its record to its folder's ``study_jobs.jsonl`` (:func:`ganlab.study.runner.
train_job`, with its status and wall time; read by :func:`ganlab.layout.read_study_jobs`), so :class:`Watcher`
compares each launched folder's number of records with the number it had at launch. A thread polls every few seconds
(:func:`watching`) and once more when the launch returns, so no job's line is missed. The total is ``ganlab-study
status``'s counting (:mod:`ganlab.study.status`): finished / running / failed / left per stage, run-hours spent, and
an estimate of the time left: per left or running run, the mean wall hours of its arm's finished runs on its data
set, or the study's predicted hours of one run (:mod:`ganlab.study.cost`) while its arm has none, else the other
arms' finished runs on its data set per generator step times its steps (:func:`ganlab.study.status.summarize`),
summed and divided by the runs going at once. Plain lines, a file's as a terminal's. No torch.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TextIO

from ganlab import layout
from ganlab.study.collect import Recorded
from ganlab.study.plan import Job, folder
from ganlab.study.schema import StudySchema

#: Seconds between two looks at the run folders.
POLL_S = 5.0


def job_label(study: StudySchema, job: Job) -> str:
    """``tune ring8 / GAN (no strategy) / lr 0.001 / seed 100``: the stage, data set, arm, axis value and seed."""
    value = "" if job.value is None or study.tuning is None else f" / {study.tuning.axis.name} {job.value:g}"
    return f"{job.stage} {job.dataset} / {job.arm}{value} / seed {job.seed}"


def minutes(wall_s: float) -> str:
    """``42 s``, ``3.6 min`` or ``2.05 h``: a duration given in seconds, in a unit that reads well."""
    if wall_s < 60:
        return f"{wall_s:.0f} s"
    return f"{wall_s / 60:.1f} min" if wall_s < 3600 else f"{wall_s / 3600:.2f} h"


def job_line(study: StudySchema, job: Job, record: dict[str, Any], n: int, of: int) -> str:
    """The line of a job that ended: ``[n/of] <label>: <status> (steps a-b), <wall time>`` (its error when it
    failed). ``record`` is the job's line of ``study_jobs.jsonl`` as :func:`ganlab.layout.read_study_jobs` reads
    it."""
    status = record["status"]
    steps = f" (steps {record.get('from_step')}-{record.get('to_step')})" if record.get("to_step") is not None else ""
    error = f": {record['error']}" if record.get("error") else ""
    return (f"ganlab-study: [{n}/{of}] {job_label(study, job)}: {status}{steps}, "
            f"{minutes(float(record.get('wall_s') or 0.0))}{error}")


def total_line(study: StudySchema, recorded: Recorded, parallel: int | None,
               predicted: dict[tuple[str, str], float]) -> str:
    """The study's running total from its folders and its ``recorded`` rows (:func:`ganlab.study.status.states`):
    ``stage f/of finished, r running, x failed, l left`` per stage, run-hours spent, and the time left estimated as
    the module's text says with ``parallel`` runs at once (None: the run-hours left alone); no time left when no
    run is left or running."""
    from ganlab.machine import cpu_capability
    from ganlab.study.plan import arm_steps
    from ganlab.study.status import STATES, states, summarize

    runs = states(study, recorded)
    steps, cpu = arm_steps(study), cpu_capability()
    lines = summarize(runs, predicted, steps, cpu)
    stages: dict[str, dict[str, int]] = {}
    for line in lines:
        counts = stages.setdefault(line.stage, dict.fromkeys([*STATES, "of"], 0))
        for s in STATES:
            counts[s] += line.counts[s]
        counts["of"] += line.planned
    parts = [f"{stage} {c['finished']}/{c['of']} finished, {c['running']} running, {c['failed']} failed, "
             f"{c['left']} left" for stage, c in stages.items()]
    spent = sum(line.hours for line in lines)
    if not any(c["left"] or c["running"] for c in stages.values()):  # nothing left: no time left to estimate
        return f"ganlab-study: total: {'; '.join(parts)}; {spent:.2f} run-h spent"
    left_h, unknown, guessed, other = _hours_left(runs, lines, predicted, steps, cpu)
    if unknown and not left_h:
        eta = ("time left unknown (no run of the arms or data sets left has finished, and the study has no predicted "
               "cost)")
        unknown = 0
    elif parallel is None:
        eta = f"{'at least ' if unknown else ''}{left_h:.2f} run-h left (est.)"
    else:
        eta = (f"{'at least' if unknown else 'about'} {minutes(3600 * left_h / max(parallel, 1))} left at "
               f"{parallel} at once")
    notes = [f"{guessed} from the predicted cost" if guessed else "",
             f"{other} from other arms' runs per step" if other else "",
             f"{unknown} of unknown cost not counted" if unknown else ""]
    notes = [n for n in notes if n]
    return (f"ganlab-study: total: {'; '.join(parts)}; {spent:.2f} run-h spent; {eta}"
            + (f" ({', '.join(notes)})" if notes else ""))


def _hours_left(runs: Sequence[Any], lines: Sequence[Any], predicted: dict[tuple[str, str], float],
                steps: dict[str, int], cpu: str | None = None) -> tuple[float, int, int, int]:
    """(run-hours left, runs of unknown cost, runs costed from the prediction, runs costed from other arms' runs):
    the left runs as :func:`ganlab.study.status.summarize` estimates them, and each running run as one more run of
    its arm."""
    from ganlab.study.status import summarize

    running = [r for r in runs if r.state == "running"]
    if running:  # the same estimate, as if each running run were left (the mean is over the finished runs)
        import dataclasses

        as_left = [dataclasses.replace(r, state="left") if r.state == "running" else r for r in runs]
        lines = summarize(as_left, predicted, steps, cpu)
    return (sum(line.left_hours for line in lines), sum(line.left_unknown for line in lines),
            sum(line.left_predicted for line in lines), sum(line.left_other for line in lines))


class Watcher:
    """Watches the run folders of the launched ``jobs`` (see the module's text); :meth:`poll` prints the line of each
    job that ended since the last look and, after any, the study's total (``total()``).

    Args:
        study: the study.
        jobs: the jobs launched, in launch order.
        total: the running total's line (:func:`total_line` with the launcher's parallelism), called after a poll
            that found ended jobs.
        out: where the lines go (default ``sys.stdout``, flushed after each).
    """

    def __init__(self, study: StudySchema, jobs: Sequence[Job], total: Callable[[], str],
                 out: TextIO | None = None) -> None:
        self.study, self.jobs, self.total, self.out = study, list(jobs), total, out
        self.seen = {job: len(self._records(job)) for job in self.jobs}
        self.ended = 0
        self._lock = threading.Lock()

    def _records(self, job: Job) -> list[dict[str, Any]]:
        return layout.read_study_jobs(folder(self.study, job))

    def poll(self) -> list[str]:
        """Print (and return) the lines of the jobs that ended since the last poll, then the total when any did."""
        with self._lock:
            lines = []
            for job in self.jobs:
                records = self._records(job)
                if len(records) > self.seen[job]:
                    self.seen[job] = len(records)
                    self.ended += 1
                    lines.append(job_line(self.study, job, records[-1], self.ended, len(self.jobs)))
            if lines:
                lines.append(self.total())
            out = self.out or sys.stdout
            for line in lines:
                print(line, file=out, flush=True)
            return lines


@contextlib.contextmanager
def watching(watcher: Watcher, every_s: float = POLL_S) -> Iterator[Watcher]:
    """Poll ``watcher`` every ``every_s`` seconds in a daemon thread while inside, and once more on leaving (the jobs
    that ended last). A poll that raises (a folder removed under it) is skipped, never stops the study."""
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(every_s):
            with contextlib.suppress(Exception):
                watcher.poll()

    thread = threading.Thread(target=loop, name="ganlab-study-progress", daemon=True)
    thread.start()
    try:
        yield watcher
    finally:
        stop.set()
        thread.join(timeout=every_s + 5)
        with contextlib.suppress(Exception):
            watcher.poll()
