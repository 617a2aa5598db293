"""Labels holding Markdown's or CSV's delimiters (``|``, ``,``, ``"``, a line break) keep their table's shape."""

from __future__ import annotations

import csv
import io
import re

import pytest

from ganlab.analysis.table import csv_table, markdown_table
from ganlab.io import md_cell, md_row


def cells(line: str) -> list[str]:
    """A Markdown table row's cells, split at the bars that are not escaped (as GFM's table parser does)."""
    assert line.startswith("|") and line.endswith("|"), line
    return [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]


def test_md_cell_escapes_bars_and_line_breaks_once():
    assert md_cell("a|b") == r"a\|b" and md_cell(r"a\|b") == r"a\|b"  # an escaped bar is not escaped twice
    assert md_cell("two\nlines\r\nthree") == "two<br>lines<br>three" and md_cell(0.5) == "0.5"
    assert cells(md_row(["a|b", "c", "|"])) == [r"a\|b", "c", r"\|"]


def test_compare_table_row_of_a_label_with_a_bar_has_every_cell():
    summary = {"ring8 [a|b]": {"modes_covered": (8.0, 0.0, 2)}, "ring8 [plain]": {"modes_covered": (6.0, 1.0, 2)}}
    lines = markdown_table(summary, ["modes_covered"]).splitlines()
    assert [len(cells(x)) for x in lines[:4]] == [3, 3, 3, 3]  # run, seeds, modes_covered
    assert cells(lines[2])[0] == r"ring8 [a\|b]"


def test_study_table_row_of_an_arm_named_with_a_bar_has_every_cell():
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    import ganlab
    from ganlab.study.report import main_table
    from ganlab.study.schema import register

    register()
    with initialize_config_dir(config_dir=str(ganlab.CONFIG_DIR), version_base="1.3"):
        cfg = compose("ganlab_study", overrides=["study=smoke", "study.endpoint.last=1", "study.columns=[]",
                                                 "study.arms=[{name: ctrl}, {name: B}]", "study.control=ctrl"])
    s = OmegaConf.to_object(cfg.study)
    s.arms[1].name = "a|b"
    rows = [{"arm": arm, "dataset": "ring8", "stage": "final", "lr": 1e-3, "seed": seed, "step": 40,
             "modes_covered": m, "data/modes_covered": 8.0}
            for arm, finals in (("ctrl", [8, 6]), ("a|b", [7, 5])) for seed, m in enumerate(finals)]
    lines = main_table(s, rows, {(a, "ring8"): 1e-3 for a in ("ctrl", "a|b")}).text.splitlines()
    width = len(cells(lines[0]))
    assert [len(cells(x)) for x in lines[1:4]] == [width] * 3
    assert cells(lines[3])[:2] == ["ring8", r"a\|b"]


@pytest.mark.parametrize("label", ['a,"b"', 'ring8 [x="1,2"]\nsecond line', "a|b"])
def test_csv_round_trips_a_label_with_commas_quotes_and_line_breaks(label):
    text = csv_table({label: {"modes_covered": (8.0, 0.5, 2)}}, ["modes_covered"])
    head, row = list(csv.reader(io.StringIO(text)))
    assert head == ["run", "seeds", "modes_covered_mean", "modes_covered_std", "modes_covered_best"]
    assert row[0] == label and row[1:3] == ["2", "8.0"]
