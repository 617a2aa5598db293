"""The training progress (ganlab.trainer.progress): plain lines into a file, a bar that says what it is doing on a
terminal; worked by hand with a fake clock."""

from __future__ import annotations

import io

import pytest

from ganlab.trainer.progress import Progress, shown_scores


class Clock:
    """A clock the test moves: ``now`` seconds."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_plain_lines_at_each_tenth_by_hand():
    """100 steps at 4 steps a second into a file: one line per 10 steps (10 lines), no carriage return; at step 40
    after 10 s the rate is 4 step/s and the ETA (60 steps left) 00:15; losses and headline scores follow."""
    out, clock = io.StringIO(), Clock()
    with Progress(100, stream=out, clock=clock) as p:
        for step in range(1, 101):
            clock.now = step / 4
            if step == 40:
                p.set_losses(D=1.386, G=0.693)
                p.set_scores({"modes_covered": 8.0, "hq_fraction": 0.5, "not_a_headline": 1.0})
            p.update(1)
    lines = out.getvalue().splitlines()
    assert "\r" not in out.getvalue() and len(lines) == 10 == p.lines
    assert lines[0] == "train: step 10/100 (10%), 4 step/s, elapsed 00:02, ETA 00:22"
    assert lines[3].startswith("train: step 40/100 (40%), 4 step/s, elapsed 00:10, ETA 00:15; D 1.386, G 0.693; ")
    assert "modes_covered 8" in lines[3] and "not_a_headline" not in lines[3]


def test_a_resumed_run_counts_its_rate_from_where_it_started():
    """Resumed at step 50 of 100: 10 steps in 5 s is 2 step/s, so the 40 steps left take 00:20."""
    out, clock = io.StringIO(), Clock()
    with Progress(100, initial=50, stream=out, clock=clock) as p:
        clock.now = 5.0
        p.update(10)
    assert out.getvalue().splitlines() == ["train: step 60/100 (60%), 2 step/s, elapsed 00:05, ETA 00:20"]
    with pytest.raises(ValueError, match="starting step 120 is outside 0 .. 100"):
        Progress(100, initial=120, stream=out)


def test_a_long_tenth_still_writes_a_line_every_five_minutes():
    out, clock = io.StringIO(), Clock()
    with Progress(10_000, stream=out, clock=clock) as p:
        clock.now = 301.0
        p.update(1)
    assert out.getvalue().startswith("train: step 1/10000 (0%)")


def test_the_bar_says_what_the_run_is_doing_on_a_terminal():
    """On a terminal the bar's description reads 'train (evaluating)' while the work runs, shown before it starts,
    and 'train' again after; a disabled progress writes nothing."""
    out = Terminal()
    with Progress(10, stream=out) as p:
        p.update(3)
        with p.status("evaluating"):
            assert "train (evaluating)" in out.getvalue().rsplit("\r", 1)[-1]
        p.update(7)
    assert out.getvalue().rsplit("\r", 1)[-1].startswith("train: 100%")
    quiet = Terminal()
    with Progress(10, enabled=False, stream=quiet) as p:
        p.update(10)
    assert quiet.getvalue() == ""


def test_shown_scores_follow_the_headline_order_for_the_kind_of_data():
    """Mixture runs (hq_fraction present): modes covered, HQ, reverse KL first; image runs: FD first."""
    mixture = {"clusters_covered": 7, "reverse_kl": 0.1, "hq_fraction": 0.9, "modes_covered": 8, "x": 1}
    assert list(shown_scores(mixture)) == ["modes_covered", "hq_fraction", "reverse_kl"]
    assert shown_scores({"precision": 0.5, "fd": 12.0, "x": 1}) == {"fd": 12.0, "precision": 0.5}


def test_a_run_into_a_file_writes_ten_plain_lines_with_its_scores(tmp_path, capsys):
    """A 40-step ring8 run with its progress on and stderr not a terminal: lines at steps 4, 8, ..., 40, no
    carriage return, the last one with the modes covered of the final evaluation."""
    from tiny_config import RING8_RUN, train_tiny

    train_tiny([*RING8_RUN, "trainer.progress=true"], tmp_path / "run")
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("train: step")]
    assert "\r" not in err
    assert [int(line.split()[2].split("/")[0]) for line in lines] == list(range(4, 41, 4))
    assert "modes_covered" in lines[-1] and lines[-1].startswith("train: step 40/40 (100%)")


def test_log_records_go_through_the_bar_and_the_handlers_come_back():
    """On a terminal a log record is written by tqdm.write (the bar cleared, the record on its own line) with its
    handler's format; after the run the logger has its own handler again; tqdm.auto is never imported."""
    import logging
    import subprocess
    import sys

    out = Terminal()
    logger = logging.getLogger("ganlab.test_progress")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("[%(levelname)s] %(message)s"))
    logger.addHandler(handler)
    try:
        from ganlab.trainer.progress import logs_through_bar

        with Progress(10, stream=out) as p, logs_through_bar([logger]):
            p.update(2)
            assert type(logger.handlers[0]).__name__ == "_BarWriter"
            logger.handlers[0].stream = out
            logger.warning("evaluating")
        assert logger.handlers == [handler]
    finally:
        logger.removeHandler(handler)
    assert "[WARNING] evaluating\n" in out.getvalue()
    code = "import sys, ganlab.trainer.loop; print('tqdm.auto' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "False"
