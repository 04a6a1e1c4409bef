"""An instructor's rubric file changes the catalogue's scores exactly where it says."""

from __future__ import annotations

import pytest

from mhalib.cli import main
from tests.checkout import COURSE
from tests.grading.conftest import ASSIGNMENT, SOURCE, TEST_LIMITS, read_results

RUBRIC = """
unnamed_cap = "1/2"
[attention.mistakes]
no_scale = "1/2"
softmax_over_queries = "1/4"
[softmax.mistakes]
no_max_shift = 0
"""
# student -> {item: (points under the default rubric, points under RUBRIC)}
CHANGES = {
    "partly-wrong": {"softmax": (1.0, 0.0), "attention": (1.5, 1.5)},
    "no-scale": {"softmax": (2.0, 2.0), "attention": (1.0, 1.5)},
    "softmax-over-queries": {"attention": (0.0, 0.75)},
    "uniform-weights": {"attention": (0.0, 0.0)},  # wrong_scale (a scale of 0): rated 0
    "position-weights": {"attention": (0.0, 0.0)},  # unnamed, right on one key only: no cap
}


@pytest.fixture(scope="module")
def rubric_results(catalogue_run, tmp_path_factory):
    root = tmp_path_factory.mktemp("rubric")
    (root / "rubric.toml").write_text(RUBRIC, encoding="utf-8")
    students = [arg for student in CHANGES for arg in ("--student", student)]
    code = main(["grade", "--assignment", ASSIGNMENT, str(catalogue_run["submitted"]),
                 "--source", str(SOURCE), "--keys", str(COURSE.keys),
                 "--course", str(root / "course"), "--seed", "1234",
                 "--no-progress", "--no-feedback", "--rubric", str(root / "rubric.toml"),
                 *students, *TEST_LIMITS])
    assert code == 0
    return read_results(root / "course")


@pytest.mark.parametrize("student", CHANGES)
def test_the_rubric_file_changes_scores_as_documented(student, catalogue_run, rubric_results):
    for item, (default, instructed) in CHANGES[student].items():
        before = catalogue_run["results"][student]["verdicts"][item]
        after = rubric_results[student]["verdicts"][item]
        assert before["points"] == pytest.approx(default), before["credit"]
        assert after["points"] == pytest.approx(instructed), after["credit"]
        assert before["flags"] == after["flags"]  # same diagnosis, other credit
