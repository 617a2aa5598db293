"""The follow-up commands ``ganlab-study`` prints (report, tensorboard, collect, resume) repeat the overrides the
user typed, so pasted they act on the same folders; ``report`` fills the blocks of the page it writes wherever its
results folder is."""

from __future__ import annotations

import shlex

import pytest

from ganlab.cli import study as cli
from ganlab.cli.common import program

TYPED = ["smoke", "study.budget.steps=400", "study.runs=/tmp/nu/runs2", "study.results=/tmp/nu/res2"]
PROG = shlex.quote(program("ganlab-study"))


def test_a_follow_up_command_is_the_typed_one_with_its_action_word_replaced(monkeypatch):
    rest = "smoke study.budget.steps=400 study.runs=/tmp/nu/runs2 study.results=/tmp/nu/res2"
    monkeypatch.setattr(cli, "TYPED", TYPED)
    assert cli.study_command("report") == f"{PROG} report {rest}"
    assert cli.resume_command() == f"{PROG} {rest}"
    monkeypatch.setattr(cli, "TYPED", ["run", *TYPED])
    assert cli.study_command("tensorboard") == f"{PROG} tensorboard {rest}"
    monkeypatch.setattr(cli, "TYPED", ["study=smoke", "action=collect", "study.results=/tmp/a b"])
    assert cli.study_command("report") == f"{PROG} report study=smoke 'study.results=/tmp/a b'"
    monkeypatch.setattr(cli, "TYPED", [])
    assert cli.study_command("cost", "smoke") == f"{PROG} cost smoke"


def test_the_closing_hint_of_a_study_repeats_its_overrides(monkeypatch, capsys):
    study = cli.load_study("smoke", TYPED[1:])
    monkeypatch.setattr(cli, "TYPED", TYPED)
    monkeypatch.setattr(cli, "_run_stages", lambda study, cfg: ([], False, None))
    monkeypatch.setattr(cli, "recorded_for", lambda study: {})
    monkeypatch.setattr(cli, "write_collected", lambda study, recorded: "/tmp/nu/res2/evaluations.csv")
    cli.run_study(study, None)
    rest = "smoke study.budget.steps=400 study.runs=/tmp/nu/runs2 study.results=/tmp/nu/res2"
    assert capsys.readouterr().out == (
        "ganlab-study: 0 run(s) trained, 0 failed; every evaluation in /tmp/nu/res2/evaluations.csv; the table: "
        f"{PROG} report {rest}; the runs in TensorBoard: {PROG} tensorboard {rest}\n")


def test_the_closing_line_counts_runs_that_only_wrote_their_final_record_apart(monkeypatch):
    """Records of 4 jobs: two trained (0 -> 40, 20 -> 40), one failed, one resumed at the budget's checkpoint
    (40 -> 40: no step trained, its final record written): 3 trained, 1 failed, 1 finished from the checkpoint."""
    study = cli.load_study("smoke", TYPED[1:])
    monkeypatch.setattr(cli, "TYPED", [])
    done = [{"from_step": 0, "to_step": 40, "status": "finished", "error": None},
            {"from_step": 20, "to_step": 40, "status": "finished", "error": None},
            {"from_step": 0, "to_step": 20, "status": "failed", "error": "RuntimeError: nan"},
            {"from_step": 40, "to_step": 40, "status": "finished", "error": None}]
    assert cli.done_line(study, done, "t.csv").startswith(
        "ganlab-study: 3 run(s) trained, 1 failed, 1 finished from a checkpoint at the budget (final record only); "
        "every evaluation in t.csv; the table: ")


def smoke_rows() -> list[dict]:
    """The smoke study's table by hand: each arm tuned at lr 1e-3 and 3e-3 on seed 100 (1e-3 covers more modes),
    then seeds 0 and 1 at 1e-3; two evaluations a run."""
    rows = []
    for arm, modes in (("GAN (no strategy)", 5), ("D lr damping (x0.5)", 7)):
        runs = [("tune", 100, 1e-3, modes), ("tune", 100, 3e-3, modes - 2), ("final", 0, 1e-3, modes),
                ("final", 1, 1e-3, modes + 1)]
        rows += [{"study": "smoke", "arm": arm, "dataset": "ring8", "stage": stage, "seed": seed, "lr": lr,
                  "step": step, "finished": True, "modes_covered": m, "hq_fraction": 0.5, "wall_s": 1.0}
                 for stage, seed, lr, m in runs for step in (20, 40)]
    return rows


def test_report_fills_the_table_of_the_page_it_writes_in_any_folder(tmp_path, monkeypatch, capsys):
    from ganlab.study.collect import write_table

    res = tmp_path / "res"
    write_table(cli.load_study("smoke", [f"study.results={res}"]), smoke_rows())
    monkeypatch.chdir(tmp_path)
    argv = ["report", "smoke", f"study.results={res}", f"study.runs={tmp_path}/runs"]
    monkeypatch.setattr("sys.argv", ["ganlab-study", *argv])
    cli.main()
    assert f"wrote {res / 'README.md'}" in capsys.readouterr().out
    table = (res / "table.md").read_text()
    assert "| ring8 | D lr damping (x0.5) | 0.001 | 2 | 7.5 ± 0.7 |" in table  # seeds 0, 1 at 7 and 8
    text = (res / "README.md").read_text()
    assert f"<!-- generated:{res}/table.md -->\n{table}<!-- /generated:{res}/table.md -->" in text
    assert f"    {PROG} report smoke study.results={res} study.runs={tmp_path}/runs\n" in text
    (res / "table.md").write_text("| old |\n")  # a second report refreshes the page it did not write
    cli.main()
    assert f"-->\n{table}<!--" in (res / "README.md").read_text()


@pytest.mark.parametrize("results", ["res", "sub/res"])
def test_update_doc_reads_a_relative_block_path_from_the_root(tmp_path, results):
    from ganlab.study.blocks import update_doc

    (tmp_path / results).mkdir(parents=True)
    (tmp_path / results / "table.md").write_text("| a |\n")
    doc = tmp_path / results / "README.md"
    doc.write_text(f"x\n<!-- generated:{results}/table.md -->\n<!-- /generated:{results}/table.md -->\n")
    assert update_doc(doc, tmp_path) and not update_doc(doc, tmp_path)
    block = f"<!-- generated:{results}/table.md -->\n| a |\n<!-- /generated:{results}/table.md -->\n"
    assert doc.read_text() == f"x\n{block}"


def test_tensorboard_without_evaluations_says_the_run_command_with_the_overrides(tmp_path, monkeypatch):
    from ganlab.study.schema import StudyError

    typed = ["tensorboard", "smoke", f"study.runs={tmp_path}/runs", f"study.results={tmp_path}/res"]
    monkeypatch.setattr(cli, "TYPED", typed)
    with pytest.raises(StudyError) as err:
        cli.tensorboard(cli.load_study("smoke", typed[2:]), str(tmp_path / "tb"))
    assert str(err.value).endswith(f"train it first ({PROG} run smoke study.runs={tmp_path}/runs "
                                   f"study.results={tmp_path}/res)")
