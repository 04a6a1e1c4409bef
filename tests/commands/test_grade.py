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


# points of the demo class (of 11: softmax 3, attention 3, five quick checks) under the course's
# default rubric, and under grading/examples/rubric.toml (README, "The rubric"). Quick-check
# answers are data saved in the notebook: gus's kernel dies, but his recorded answers count.
DEFAULT_TOTALS = {"ada-correct": 11.0, "bert-partly-wrong": 8.0, "cleo-wrong": 2.5,
                  "dev-blank": 0.0, "eve-hostile": 5.0, "finn-broken": 0.0, "gus-crashes": 5.0,
                  "hana": 11.0, "ivan": 0.0}
EXAMPLE_RUBRIC_TOTALS = {**DEFAULT_TOTALS, "bert-partly-wrong": 7.5}


def _totals(results: dict) -> dict[str, float]:
    return {s: round(sum(v["points"] for v in r["verdicts"].values()), 6)
            for s, r in results.items()}


def test_readme_quick_start_grades_the_demo_class(tmp_path, monkeypatch):
    """As the README runs it: in the course's top folder, which gives the sources and keys."""
    if not (REPO / "solutions" / "01-single-head").is_dir():
        pytest.skip("lesson 01 source not present")
    course, mixed = tmp_path / "course", tmp_path / "mixed"
    shutil.copytree(EXAMPLES / "submitted", mixed)  # folders and LMS zips side by side
    for archive in (EXAMPLES / "zips").glob("*.zip"):
        shutil.copy(archive, mixed)
    monkeypatch.delenv("MHALIB_COURSE_ROOT", raising=False)
    monkeypatch.delenv("MHALIB_QUICK_CHECK_KEYS", raising=False)
    monkeypatch.chdir(REPO)
    assert main(["grade", str(mixed), "--assignment", "01-single-head", "--course",
                 str(course), "--jobs", "2", "--no-progress"]) == 0
    results = read_results(course)
    assert _totals(results) == DEFAULT_TOTALS
    assert all(sum(v["max_points"] for v in r["verdicts"].values()) == 11
               for r in results.values())
    cleo_quick = [v for v in results["cleo-wrong"]["verdicts"].values()
                  if v["kind"] == "quick_check"]
    assert cleo_quick and all(not v["passed"] and "your answer" in v["diagnosis"]
                              for v in cleo_quick)  # the slip, then the explanation
    flags = {s: {i["flag"] for i in r["issues"]} for s, r in results.items()}
    cleo = results["cleo-wrong"]["verdicts"]["attention"]
    assert "mistake:no_scale" in cleo["flags"]
    assert cleo["credit"].startswith("1 of 3 points, as the course rubric sets for this "
                                     "mistake (no_scale)")
    eve = results["eve-hostile"]["verdicts"]
    assert not eve["softmax"]["passed"] and eve["attention"]["points"] == 0  # was 0.375
    assert "integrity" in flags["eve-hostile"]
    assert "invalid_notebook" in flags["finn-broken"] and "invalid_notebook" in flags["ivan"]
    assert "kernel_died" in flags["gus-crashes"]
    rows = list(csv.DictReader(open(course / "exports" / "01-single-head.csv")))
    assert {r["student"] for r in rows} == set(results)
    bert = next(r for r in rows if r["student"] == "bert-partly-wrong"
                and r["exercise"] == "softmax")
    assert bert["score"] == "1.5" and "1.5 of 3 points" in bert["diagnosis"]
    page = (course / "feedback" / "cleo-wrong" / "01-single-head" /
            "single_head_attention.html").read_text()
    assert "1 of 3 points, as the course rubric sets for this mistake" in page

    rubric_course = tmp_path / "rubric-course"
    assert main(["grade", str(mixed), "--assignment", "01-single-head", "--root",
                 str(REPO), "--course", str(rubric_course), "--jobs", "2",
                 "--no-progress", "--no-feedback", "--rubric",
                 str(EXAMPLES / "rubric.toml")]) == 0
    assert _totals(read_results(rubric_course)) == EXAMPLE_RUBRIC_TOTALS


def test_an_unknown_mistake_in_the_rubric_is_named(tmp_path, capsys):
    rubric = tmp_path / "rubric.toml"
    rubric.write_text("[attention.mistakes]\nforgot_scale = 0.5\n")
    (tmp_path / "submitted").mkdir()
    code = main(["grade", str(tmp_path / "submitted"), "--assignment", "01-single-head",
                 "--course", str(tmp_path / "course"), "--rubric", str(rubric), "--source",
                 str(REPO / "tests" / "grading" / "fixtures" / "solutions")])
    assert code == 2
    assert "exercise 'attention' has no mistake 'forgot_scale'" in capsys.readouterr().err
