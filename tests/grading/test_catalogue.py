"""Every broken or hostile submission of the catalogue gets the right score and flags, the class
is graded, and the gradebook stays sound."""

from __future__ import annotations

import json
import os

import pytest

from mhalib.grading.gradebook import integrity_check
from tests.grading.grading_catalogue import CATALOGUE, MARKER, student_of


def _flags(result: dict) -> set[str]:
    flags = {issue["flag"] for issue in result["issues"]}
    return flags | {f for v in result["verdicts"].values() for f in v["flags"]}


@pytest.mark.parametrize("case", CATALOGUE, ids=lambda c: c.student)
def test_case_scored_and_flagged(case, catalogue_run):
    if case not in catalogue_run["cases"]:
        pytest.skip("needs bubblewrap isolation")
    result = catalogue_run["results"][student_of(case)]
    for item, want in case.expect.items():
        verdict = result["verdicts"][item]
        got, top = verdict["points"], verdict["max_points"]
        described = f"{item}: {got}/{top} ({verdict['diagnosis']})"
        if isinstance(want, float):
            assert got == pytest.approx(want), described
        elif want == "full":
            assert got == top, described
        elif want == "zero":
            assert got == 0, described
        else:
            assert got < top, described
        assert verdict["diagnosis"].startswith(item), described
    missing = case.flags - _flags(result)
    assert not missing, f"flags {missing} absent; got {_flags(result)}: {result['issues']}"


def test_whole_class_graded_and_gradebook_sound(catalogue_run):
    assert catalogue_run["code"] == 0
    assert set(catalogue_run["results"]) == {student_of(c) for c in catalogue_run["cases"]}
    db_url = f"sqlite:///{catalogue_run['course'] / 'gradebook.db'}"
    assert integrity_check(db_url) == "ok"


def test_clean_submissions_carry_no_problem_flags(catalogue_run):
    from mhalib.grading.flags import REVIEW

    for student in ("correct", "partly-wrong", "zip-correct", "deleted-tests", "sys-exit"):
        assert not (_flags(catalogue_run["results"][student]) & REVIEW), student


def test_no_learner_process_survives_grading(catalogue_run):
    survivors = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                command = handle.read().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        if MARKER in command or "sleep 613" in command:
            survivors.append(command)
    assert not survivors


def test_sandbox_saw_nothing_outside(catalogue_run):
    case = next((c for c in catalogue_run["cases"] if c.student == "reads-outside"), None)
    if case is None:
        pytest.skip("needs bubblewrap isolation")
    graded = catalogue_run["course"] / "autograded" / "reads-outside" / "01-single-head"
    notebook = json.loads(next(graded.glob("*.ipynb")).read_text(encoding="utf-8"))
    text = json.dumps([c.get("outputs", []) for c in notebook["cells"]])
    for path in catalogue_run["context"]["paths"]:
        assert f"BLOCKED {path}" in text, path
    assert "READ " not in text and "WROTE gradebook" not in text
    assert "BLOCKED network" in text and "NETWORK open" not in text


def test_output_flood_kept_small(catalogue_run):
    graded = catalogue_run["course"] / "autograded" / "output-flood" / "01-single-head"
    size = next(graded.glob("*.ipynb")).stat().st_size
    assert size < 2_000_000


def test_zip_paths_never_leave_the_sandbox(catalogue_run):
    assert not (catalogue_run["root"] / "escape.py").exists()
    assert not (catalogue_run["root"].parent / "escape.py").exists()
    result = catalogue_run["results"]["zip-traversal"]
    graded = json.dumps(result)
    assert "escape.py" not in graded
