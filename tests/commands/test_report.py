"""``mhalib report`` from the command line (on a small synthetic class of two lessons)."""

from __future__ import annotations

import json

import pytest

from mhalib.cli import main

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    from tests.classroom.report.synthetic_class import synthetic_class
    from tests.classroom.report.synthetic_plan import make_plan

    root = tmp_path_factory.mktemp("report-command") / "course"
    synthetic_class(root, make_plan(24, ["01-single-head", "05-flops"]))
    return root


def test_help_lists_the_options(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["report", "--help"])
    assert stop.value.code == 0
    text = capsys.readouterr().out
    for option in ("--assignment", "--course", "--names", "--out", "--lesson-url", "--rubric",
                   "--top"):
        assert option in text


def test_every_graded_assignment_by_default(course, capsys):
    assert main(["report", "--course", str(course), "--no-progress"]) == 0
    out = capsys.readouterr().out
    folder = course / "reports"
    assert f"report: {folder / 'class.html'}" in out
    assert "class report of 24 student(s), 2 assignment(s)" in out
    assert out.count("  re-teach: ") == 5
    data = json.loads((folder / "class.json").read_text())
    assert [a["assignment"] for a in data["assignments"]] == ["01-single-head", "05-flops"]
    assert sorted(p.name for p in folder.glob("class-*.csv")) == [
        f"class-{name}.csv" for name in sorted(("choices", "exercises", "grid", "mistakes",
                                                "quick-checks", "reteach", "scores",
                                                "unnamed"))]


def test_chosen_assignments_and_options(course, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["report", "--course", str(course), "-a", "05-flops", "-a", "01-single-head",
                 "--out", str(out), "--top", "2", "--lesson-url", "http://lab/tree",
                 "--no-progress"]) == 0
    assert capsys.readouterr().out.count("  re-teach: ") == 2
    data = json.loads((out / "05-flops+01-single-head.json").read_text())
    assert [a["assignment"] for a in data["assignments"]] == ["05-flops", "01-single-head"]
    assert data["reteach"][0]["section"]["url"].startswith("http://lab/tree/")
    assert main(["report", "--course", str(course), "-a", "05-flops", "--out", str(out),
                 "--no-progress"]) == 0
    assert (out / "05-flops.html").is_file()


@pytest.mark.parametrize("argv, message", [
    (["-a", "02-multi-head"], "assignment='02-multi-head' has no graded results"),
    (["-a", "99-nothing"], "graded assignments: 01-single-head, 05-flops"),
    (["--top", "-1"], "--top=-1 must be at least 0"),
    (["--rubric", "/nonexistent/rubric.toml"], "rubric=/nonexistent/rubric.toml: cannot be read"),
])
def test_bad_arguments_are_named(course, argv, message, capsys):
    assert main(["report", "--course", str(course), "--no-progress", *argv]) == 2
    assert message in capsys.readouterr().err


def test_a_course_without_results_or_gradebook(tmp_path, capsys):
    assert main(["report", "--course", str(tmp_path), "--no-progress"]) == 2
    assert "no graded assignment" in capsys.readouterr().err
    results = tmp_path / "mhalib-results" / "01-single-head"
    results.mkdir(parents=True)
    assert main(["report", "--course", str(tmp_path), "--no-progress"]) == 2
    assert "no gradebook at" in capsys.readouterr().err


def test_grading_writes_the_report_unless_told_not_to(monkeypatch, tmp_path, capsys):
    """``mhalib grade`` ends with the class report (the demo-class test sees it written); a
    report that fails is said, and the grading still succeeds."""
    from types import SimpleNamespace

    from mhalib.classroom.report import build
    from mhalib.commands import grade

    with pytest.raises(SystemExit):
        main(["grade", "--help"])
    assert "--no-report" in capsys.readouterr().out

    def broken(options):
        raise RuntimeError("disk full")

    monkeypatch.setattr(build, "build_report", broken)
    grading = SimpleNamespace(course=tmp_path, assignment="01-single-head", db_url=None,
                              source=tmp_path, keys=None, rubric=None)
    grade._class_report(grading, None)
    err = capsys.readouterr().err
    assert "class report not written (RuntimeError: disk full)" in err
    assert f"mhalib report --course {tmp_path}" in err
