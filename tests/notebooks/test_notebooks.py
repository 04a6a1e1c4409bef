"""Every lesson in solutions/ runs, nbgrader grades it right, and its release gives nothing away.

Parametrized over the assignment folders present in solutions/, so new lessons are covered as
soon as they appear. Tests marked ``nbgrader`` share one batched autograde run (conftest.py).
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path

import nbformat
import pytest

from mhalib.checks import LESSONS, NOTEBOOKS, exercises_of
from mhalib.classroom.release import assignments, normalise, run_budget_seconds
from tests.checkout import COURSE, REPO

ASSIGNMENTS = assignments(COURSE.solutions)

nbgrader_run = pytest.mark.nbgrader
# One xdist worker runs this module: the batched nbgrader run (conftest.py) is a session fixture,
# and every worker that had some of these tests would grade the whole course again.
pytestmark = pytest.mark.xdist_group("nbgrader")


def notebook_name(assignment: str) -> str:
    return NOTEBOOKS[assignment]


def read(path: Path):
    return nbformat.read(str(path), as_version=4)


def meta(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def errors(notebook) -> list[tuple]:
    """(cell, ename, evalue) for every error output."""
    return [(cell, out.get("ename"), out.get("evalue", "")) for cell in notebook.cells
            if cell.cell_type == "code" for out in cell.get("outputs", [])
            if out.get("output_type") == "error"]


def solution_blocks(source: str) -> list[str]:
    return re.findall(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", source, flags=re.S)


# -- the source notebooks follow the contract --------------------------------------------------
@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_source_follows_the_contract(assignment):
    assert assignment in LESSONS, f"{assignment} is not an assignment of the contract"
    folder = REPO / "solutions" / assignment
    assert sorted(p.name for p in folder.glob("*.ipynb")) == [notebook_name(assignment)]
    notebook = read(folder / notebook_name(assignment))
    nbformat.validate(notebook)
    assert notebook.metadata["kernelspec"]["name"] == "python3"
    answers = [meta(c)["grade_id"] for c in notebook.cells if meta(c).get("solution")]
    exercises = exercises_of(assignment)
    # ungraded practice answers (grade_id "practice_...", no test cell, no points) are free
    practice = [c for c in notebook.cells if meta(c).get("grade_id", "").startswith("practice_")]
    assert all(meta(c).get("solution") and not meta(c).get("grade") for c in practice)
    assert [a for a in answers if not a.startswith("practice_")] == exercises
    tests = [meta(c)["grade_id"] for c in notebook.cells if meta(c).get("grade")]
    for name in exercises:
        graded = [t for t in tests if t.startswith(f"test_{name}")]
        assert f"test_{name}" in graded and f"test_{name}_hidden" in graded, graded
    # a quick check is one locked grade cell: its form records the answer (mhalib.quiz)
    quick = [c for c in notebook.cells if meta(c).get("grade_id", "").startswith("qc_")]
    assert 3 <= len(quick) <= 5, [meta(c)["grade_id"] for c in quick]
    for cell in quick:
        grade_id = meta(cell)["grade_id"]
        assert cell.source == f'ask("{grade_id}")', cell.source
        assert meta(cell)["grade"] and meta(cell)["locked"] and not meta(cell)["solution"]
        assert meta(cell)["points"] == 1 and not cell.metadata.get("tags")
    hidden = [c for c in notebook.cells if "### BEGIN HIDDEN TESTS" in c.source]
    assert {meta(c)["grade_id"] for c in hidden} == {f"test_{n}_hidden" for n in exercises}
    ids = [c.get("id") for c in notebook.cells]
    assert all(ids) and len(set(ids)) == len(ids), "every cell needs its own fixed id"


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
@pytest.mark.parametrize("folder", ["solutions", "notebooks"])
def test_committed_without_outputs(assignment, folder):
    notebook = read(REPO / folder / assignment / notebook_name(assignment))
    for cell in notebook.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, cell.get("id")


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_release_contains_no_solution_or_hidden_tests(assignment):
    source = read(REPO / "solutions" / assignment / notebook_name(assignment))
    release_text = (REPO / "notebooks" / assignment / notebook_name(assignment)).read_text()
    release = read(REPO / "notebooks" / assignment / notebook_name(assignment))
    for marker in ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS",
                   'suite="hidden"', "suite='hidden'"):
        assert marker not in release_text
    # a line of a solution is secret unless the source shows it outside the solutions too
    public = "\n".join(re.sub(r"### BEGIN SOLUTION\n.*?### END SOLUTION", "", c.source,
                              flags=re.S) for c in source.cells)
    public_lines = {line.strip() for line in public.splitlines()}
    secret = {line.strip() for c in source.cells for block in solution_blocks(c.source)
              for line in block.splitlines()}
    secret = {line for line in secret if line and line not in public_lines}
    assert secret, "the source notebook has no solution lines"
    release_lines = {line.strip() for c in release.cells for line in c.source.splitlines()}
    leaked = sorted(secret & release_lines)
    assert not leaked, f"solution lines in the release: {leaked}"
    for cell in release.cells:
        if meta(cell).get("solution") and cell.cell_type == "code":
            assert "raise NotImplementedError()" in cell.source


# -- one batched nbgrader run -----------------------------------------------------------------
@nbgrader_run
@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_release_is_in_sync_with_solutions(assignment, graded_course):
    name = notebook_name(assignment)
    assert (REPO / "notebooks" / assignment / name).is_file(), (
        f"notebooks/{assignment}/{name} is missing: run `mhalib release {assignment}`")
    fresh = normalise(json.loads(graded_course.generated_release(assignment, name).read_text()),
                      "practice")  # the committed release is the practice one
    committed = (REPO / "notebooks" / assignment / name).read_text(encoding="utf-8")
    assert fresh == committed, f"notebooks/{assignment} drifted: run `mhalib release {assignment}`"


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_committed_release_is_practice_with_the_current_keys(assignment):
    from mhalib.classroom.release import release_data
    from mhalib.quiz.keys import RELEASE_FILE

    committed = json.loads((REPO / "notebooks" / assignment / RELEASE_FILE).read_text())
    fresh = json.loads(json.dumps(release_data(assignment, "practice", COURSE.keys)))  # as JSON keeps it
    assert committed == fresh, (
        f"notebooks/{assignment}/{RELEASE_FILE} is stale: run `mhalib release {assignment}`")
    release = read(REPO / "notebooks" / assignment / notebook_name(assignment))
    assert release.metadata["mhalib"] == {"quick_checks": "practice"}


@nbgrader_run
@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_nbgrader_scores_quick_checks_from_the_saved_answers(assignment, graded_course):
    """With the course's nbgrader config, a quick check's cell ends with the grader's verdict:
    the solver's recorded answers are right (with the explanation), the blank release's are
    missing (an error output, hence no points)."""
    for student, passed in (("solver", True), ("blank", False)):
        notebook = read(graded_course.autograded(student, assignment, notebook_name(assignment)))
        quick = [c for c in notebook.cells if meta(c).get("grade_id", "").startswith("qc_")]
        assert quick
        for cell in quick:
            verdict = cell.outputs[-1]
            if passed:
                assert verdict.output_type == "stream" and "Right." in verdict.text, verdict
            else:
                assert verdict.output_type == "error" and "no answer was recorded" in \
                    verdict.evalue, verdict


@nbgrader_run
@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_solutions_execute_without_error(assignment, graded_course):
    notebook = read(graded_course.autograded("solver", assignment, notebook_name(assignment)))
    found = [(cell.get("id"), ename, value[:200]) for cell, ename, value in errors(notebook)]
    assert not found, found


@nbgrader_run
@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_solutions_run_within_the_time_budget(assignment, graded_course):
    """The solutions need less CPU than the lesson's budget.

    Judged on the CPU seconds of the kernel (start-up included, one BLAS thread), not on wall
    time: in this suite other tests share the two cores, and a notebook that needs 15 s once
    waited 133 s here. Wall times on a quiet machine, all threads, are recorded by
    benchmarks/lesson_times.py in docs/benchmarks.md.
    """
    notebook = read(graded_course.autograded("solver", assignment, notebook_name(assignment)))
    cpu = graded_course.kernel_cpu[("solver", assignment)]
    assert cpu > 0.5, f"{assignment}: the kernel's CPU time was not seen ({cpu} s)"
    budget = run_budget_seconds(assignment)  # here on CPU seconds, start-up included
    cells = [(cell, cell.metadata["execution"]) for cell in notebook.cells
             if cell.cell_type == "code" and cell.metadata.get("execution")]
    slowest = sorted(((datetime.fromisoformat(s["shell.execute_reply"])
                       - datetime.fromisoformat(s["iopub.execute_input"])).total_seconds(),
                      cell.get("id"), cell.source.splitlines()[0][:60] if cell.source else "")
                     for cell, s in cells)[::-1][:4]
    assert cpu < budget, (
        f"{assignment} used {cpu:.1f} CPU seconds (budget {budget:.0f} s); slowest cells "
        "(wall): " + "; ".join(f"{t:.1f} s {cid} {line!r}" for t, cid, line in slowest))


@nbgrader_run
@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_solutions_get_full_marks(assignment, graded_course):
    result = graded_course.scores.get(("solver", assignment))
    assert result, f"nbgrader did not grade the solutions of {assignment}"
    assert result["max_score"] > 0
    assert result["score"] == result["max_score"], result


@nbgrader_run
@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_untouched_release_scores_zero(assignment, graded_course):
    result = graded_course.scores.get(("blank", assignment))
    assert result, f"nbgrader did not grade the release of {assignment}: is notebooks/ missing?"
    assert result["max_score"] > 0
    assert result["score"] == 0, result


@nbgrader_run
@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_release_fails_only_where_answers_are_missing(assignment, graded_course):
    """Test cells fail because the answers are missing (an error output each, which is what
    gives them no points), quick checks have no recorded answer (the grader's verdict is an
    error output); demos that need an unwritten exercise say so in one line (``needs``) and raise
    nothing; nothing else has an error."""
    notebook = read(graded_course.autograded("blank", assignment, notebook_name(assignment)))
    unexpected = []
    for cell, ename, value in errors(notebook):
        is_test = bool(meta(cell).get("grade")) and not meta(cell).get("solution")
        is_stub = bool(meta(cell).get("solution")) and ename == "NotImplementedError"
        if not (is_test or is_stub):
            unexpected.append((cell.get("id"), ename, value[:200]))
    assert not unexpected, unexpected
    failed_tests = {meta(cell).get("grade_id") for cell, _, _ in errors(notebook)}
    graded = {meta(c)["grade_id"] for c in notebook.cells
              if meta(c).get("grade") and not meta(c).get("solution")}
    passed_anyway = graded - failed_tests
    assert not passed_anyway, f"test cells that passed without answers: {passed_anyway}"


@nbgrader_run
@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_run_all_goes_past_every_error_of_the_release(assignment, graded_course):
    """In JupyterLab, Run All stops at the first cell whose execution fails. A failed check does
    not fail its cell (it shows its verdict as the cell's error output, mhalib/checks/api.py:
    ename CheckFailed); every other error of the untouched release must be in a cell tagged
    ``raises-exception``, which JupyterLab
    runs without stopping the queue behind it."""
    notebook = read(graded_course.autograded("blank", assignment, notebook_name(assignment)))
    source = read(REPO / "solutions" / assignment / notebook_name(assignment))
    tagged = {c.get("id") for c in source.cells
              if "raises-exception" in c.get("metadata", {}).get("tags", [])}
    # a quick check's error output is the grader's verdict (ScoreQuickChecks), not something
    # its cell raised: ask() raises nowhere but in an autograde run
    stopping = sorted({cell.get("id") for cell, ename, _ in errors(notebook)
                       if ename != "CheckFailed" and cell.get("id") not in tagged
                       and not meta(cell).get("grade_id", "").startswith("qc_")})
    assert not stopping, f"Run All would stop at {stopping}: tag them raises-exception"


@nbgrader_run
@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_lesson_has_an_interactive_control(assignment, graded_course):
    notebook = read(graded_course.autograded("solver", assignment, notebook_name(assignment)))
    widget_cells = [cell.get("id") for cell in notebook.cells if cell.cell_type == "code"
                    and not meta(cell).get("grade_id", "").startswith("qc_")
                    for out in cell.get("outputs", [])
                    if "application/vnd.jupyter.widget-view+json" in out.get("data", {})]
    assert widget_cells, "no ipywidgets control outside the quick checks"
