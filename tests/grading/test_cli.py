"""``mhalib grade`` from the command line, and the README's quick start on grading/examples."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pytest

from mhalib.cli import main
from tests.grading.conftest import read_results

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "grading" / "examples"


def test_help_lists_the_options(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["grade", "--help"])
    assert stop.value.code == 0
    text = capsys.readouterr().out
    for option in ("--assignment", "--jobs", "--scheduler", "--sandbox", "--timeout"):
        assert option in text


@pytest.mark.parametrize("argv, message", [
    (["--assignment", "99-nothing"], "assignment='99-nothing'"),
    (["--assignment", "01-single-head", "--jobs", "0"], "--jobs=0"),
    (["--assignment", "01-single-head", "--timeout", "-1"], "notebook_seconds=-1"),
])
def test_bad_arguments_are_named(argv, message, tmp_path, capsys):
    (tmp_path / "submitted").mkdir()
    code = main(["grade", str(tmp_path / "submitted"), "--course", str(tmp_path / "course"),
                 "--source", str(REPO / "tests" / "grading" / "fixtures" / "solutions"), *argv])
    assert code == 2
    assert message in capsys.readouterr().err


def test_readme_quick_start_grades_the_demo_class(tmp_path):
    if not (REPO / "solutions" / "01-single-head").is_dir():
        pytest.skip("lesson 01 source not present")
    course, mixed = tmp_path / "course", tmp_path / "mixed"
    shutil.copytree(EXAMPLES / "submitted", mixed)  # folders and LMS zips side by side
    for archive in (EXAMPLES / "zips").glob("*.zip"):
        shutil.copy(archive, mixed)
    assert main(["grade", str(mixed), "--assignment", "01-single-head", "--source",
                 str(REPO / "solutions"), "--course", str(course), "--jobs", "2",
                 "--no-progress"]) == 0
    results = read_results(course)
    totals = {s: (sum(v["points"] for v in r["verdicts"].values()),
                  sum(v["max_points"] for v in r["verdicts"].values()))
              for s, r in results.items()}
    flags = {s: {i["flag"] for i in r["issues"]} for s, r in results.items()}
    assert totals["ada-correct"][0] == totals["ada-correct"][1] > 0
    assert totals["hana"][0] == totals["hana"][1]
    assert 0 < totals["bert-partly-wrong"][0] < totals["bert-partly-wrong"][1]
    assert totals["cleo-wrong"][0] < totals["bert-partly-wrong"][0]
    assert totals["dev-blank"][0] == 0
    assert not results["eve-hostile"]["verdicts"]["softmax"]["passed"]
    assert "integrity" in flags["eve-hostile"]
    assert "invalid_notebook" in flags["finn-broken"] and "invalid_notebook" in flags["ivan"]
    assert "kernel_died" in flags["gus-crashes"]
    rows = list(csv.DictReader(open(course / "exports" / "01-single-head.csv")))
    assert {r["student"] for r in rows} == set(results)
