"""Append-only run records survive a writer killed mid-line: one writer (:func:`ganlab.io.append_jsonl`) starts a
fresh line after a torn one, one reader (:func:`ganlab.io.read_jsonl`) skips it with one warning, and a run whose
``metrics.jsonl`` ends in a torn line resumes, losing only that record, and reads in every command's reader."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from tiny_config import RING8_RUN, train_tiny

from ganlab import io, layout
from ganlab.analysis.plots import read_curve
from ganlab.health import AlertLog, read_alerts
from ganlab.trainer.loggers import NullLogger


def _tear(path: Path, keep_of_last: int = 9) -> str:
    """Cut ``path``'s last line after ``keep_of_last`` characters (no newline), as a writer killed mid-write."""
    lines = path.read_text().splitlines()
    torn = lines[-1][:keep_of_last]
    path.write_text("".join(line + "\n" for line in lines[:-1]) + torn)
    return torn


def test_a_torn_line_is_skipped_once_and_the_next_record_starts_a_fresh_line(tmp_path, caplog):
    path = tmp_path / "records.jsonl"
    for step in (1, 2):
        io.append_jsonl(path, {"step": step, "scores": {"x": 0.5}})
    _tear(path)
    io.append_jsonl(path, {"step": 3, "scores": {"x": float("nan")}})
    lines = path.read_text().splitlines()
    assert lines[1] == '{"step": '  # the torn record stays alone on its line
    assert lines[2] == json.dumps({"step": 3, "scores": {"x": float("nan")}})
    with caplog.at_level(logging.WARNING, logger="ganlab"):
        assert [r["step"] for r in io.read_jsonl(path)] == [1, 3]
        assert [r["step"] for r in io.read_jsonl(path)] == [1, 3]
    warnings = [r.getMessage() for r in caplog.records if "torn" in r.getMessage()]
    assert len(warnings) == 1 and "line(s) 2" in warnings[0] and str(path) in warnings[0]
    assert io.read_jsonl(tmp_path / "none.jsonl") == []


def test_alerts_written_after_a_torn_alert_are_read(tmp_path):
    alerts = AlertLog(tmp_path, NullLogger())
    alerts.emit("collapse", 10, "first")
    _tear(tmp_path / "alerts.jsonl", 20)
    alerts.emit("collapse", 20, "second")
    assert [(a["step"], a["message"]) for a in read_alerts(tmp_path)] == [(20, "second")]


def test_a_run_killed_mid_append_resumes_and_every_reader_reads_it(tmp_path):
    """Evaluations at steps 20 and 40 of a 40-step run; the step-40 line is torn: the curve readers give step 20,
    a resume from the run (its step-40 checkpoint) to 60 keeps step 20, loses only the torn record and adds 60, and
    the file is whole again."""
    run = train_tiny(RING8_RUN, tmp_path / "run")
    curve = run / layout.CURVE_FILE
    _tear(curve)
    assert [s for s, _ in read_curve(run)] == [20]
    assert [r["step"] for r in layout.read_evaluations(run)] == [20]
    train_tiny([*RING8_RUN, "trainer.steps=60", f"trainer.resume={run}"], run)
    assert [s for s, _ in read_curve(run)] == [20, 60]
    assert all(json.loads(line) for line in curve.read_text().splitlines())  # no torn line left
    assert "modes_covered" in read_curve(run)[-1][1]


def test_a_folder_lock_held_for_a_moment_is_waited_for_and_one_held_on_is_refused(tmp_path):
    """flock locks conflict between open files, in one process too: a lock a reader holds for 0.1 s (a status
    probe) is waited for; one still held after LOCK_PATIENCE_S is refused (None), and taken once released."""
    import fcntl
    import threading

    from ganlab import layout

    held = open(tmp_path / layout.LOCK_FILE, "a")  # noqa: SIM115
    fcntl.flock(held, fcntl.LOCK_SH | fcntl.LOCK_NB)
    threading.Timer(0.1, fcntl.flock, (held, fcntl.LOCK_UN)).start()
    first = layout.lock_folder(tmp_path)
    assert first is not None
    assert layout.lock_folder(tmp_path) is None  # ``first`` holds it for the run's length
    first.close()
    second = layout.lock_folder(tmp_path)
    assert second is not None
    second.close()
    held.close()
