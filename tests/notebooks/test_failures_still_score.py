"""A failed check no longer stops Run All, and still scores 0 with all three graders.

In a Jupyter kernel a failed check shows its report as the test cell's error output and does
not raise (mhalib/checks/api.py), so JupyterLab's Run All goes on (tests/browser/
test_lab_run_all.py). Here, on lesson 02's release with no answers ("blank") and with one wrong
answer ("wrong": ``merge_heads`` gives the heads back in the wrong order, so the right
``multi_head_attention`` built on it fails too; ``split_heads`` is right):

- ``nbgrader validate`` (the learner's Validate button) reports exactly the failing test cells;
- nbgrader's autograde path (its ``Execute`` preprocessor, then ``determine_grade``, the
  function its ``SaveAutoGrades`` scores with) gives those cells 0 and the others full marks;
- ``mhalib grade`` (in its sandbox, where checks only record) fails the same exercises.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import nbformat
import pytest

from mhalib.classroom.release import tool_env
from tests.checkout import REPO

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("notebook_order")]

ASSIGNMENT = "02-multi-head"
NOTEBOOK = "multi_head_attention.ipynb"
EXERCISES = ("split_heads", "merge_heads", "multi_head_attention")
WRONG_MERGE = '''def merge_heads(x):
    """The heads come back in reverse order: a wrong answer."""
    batch, heads, n, d_head = x.shape
    return x[:, ::-1].transpose(0, 2, 1, 3).reshape(batch, n, heads * d_head)
'''


def _answers() -> dict[str, str]:
    """grade_id -> the instructor's answer cell, without nbgrader's markers."""
    source = nbformat.read(REPO / "solutions" / ASSIGNMENT / NOTEBOOK, as_version=4)
    found = {}
    for cell in source.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id in EXERCISES:
            found[grade_id] = re.sub(r"\s*### (BEGIN|END) SOLUTION\n?", "\n", cell.source)
    return found


def _submission(kind: str):
    notebook = nbformat.read(REPO / "notebooks" / ASSIGNMENT / NOTEBOOK, as_version=4)
    if kind == "wrong":
        answers = {**_answers(), "merge_heads": WRONG_MERGE}
        for cell in notebook.cells:
            grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
            if grade_id in answers:
                cell.source = answers[grade_id]
    return notebook


def _failing(kind: str) -> set[str]:
    """The test cells (visible) that must fail for this submission (the right
    ``multi_head_attention`` calls the wrong ``merge_heads``, so it fails too)."""
    if kind == "blank":
        return {f"test_{e}" for e in EXERCISES}
    return {"test_merge_heads", "test_multi_head_attention"}


def _env() -> dict:
    env = tool_env()
    env.pop("MHALIB_GRADING", None)
    env["MPLBACKEND"] = "Agg"
    env["PYTHONPATH"] = str(REPO)
    return env


@pytest.fixture(scope="module")
def submissions(tmp_path_factory):
    root = tmp_path_factory.mktemp("failures")
    paths = {}
    for kind in ("blank", "wrong"):
        folder = root / "submitted" / kind / ASSIGNMENT
        folder.mkdir(parents=True)
        nbformat.write(_submission(kind), folder / NOTEBOOK)
        paths[kind] = folder / NOTEBOOK
    return root, paths


@pytest.mark.parametrize("kind", ["blank", "wrong"])
def test_nbgrader_validate_reports_the_failing_test_cells(kind, submissions):
    _, paths = submissions
    done = subprocess.run([sys.executable, "-m", "nbgrader", "validate", str(paths[kind])],
                          capture_output=True, text=True, env=_env(), cwd=paths[kind].parent,
                          timeout=600)
    said = done.stdout + done.stderr
    assert "VALIDATION FAILED" in said, said[-3000:]
    for exercise in EXERCISES:
        shown = f'check("{exercise}", {exercise});' in said
        assert shown == (f"test_{exercise}" in _failing(kind)), (exercise, said[-3000:])


@pytest.mark.parametrize("kind", ["blank", "wrong"])
def test_nbgrader_autograde_scores_failed_checks_zero(kind, submissions, monkeypatch,
                                                     tmp_path_factory):
    from jupyter_client.manager import KernelManager
    from nbgrader.preprocessors import Execute
    from nbgrader.utils import determine_grade

    for name, value in _env().items():
        monkeypatch.setenv(name, value)
    _, paths = submissions
    notebook = nbformat.read(paths[kind], as_version=4)
    # IPC sockets, not TCP ports: a kernel started beside others once lost its replies to a
    # race for the same free port, and the run waited out its timeout (as in test_any_order)
    ipc = tmp_path_factory.mktemp(f"ipc-{kind}")
    kernel = KernelManager(kernel_name="python3", transport="ipc", ip=str(ipc / "ipc"),
                           connection_file=str(ipc / "kernel.json"))
    try:
        Execute(timeout=300).preprocess(notebook,
                                        {"metadata": {"path": str(paths[kind].parent)}},
                                        km=kernel)
    finally:  # a kernel manager passed in is not the client's to shut down: it outlived the test
        if kernel.has_kernel:
            kernel.shutdown_kernel(now=True)
    scores = {}
    for cell in notebook.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade") and meta.get("grade_id", "").startswith("test_"):
            scores[meta["grade_id"]] = determine_grade(cell)
    visible = {f"test_{e}" for e in EXERCISES}
    assert visible <= set(scores)
    for grade_id in visible:
        score, max_score = scores[grade_id]
        expected = 0 if grade_id in _failing(kind) else max_score
        assert score == expected, (grade_id, score, max_score)


def test_mhalib_grade_fails_unfinished_and_wrong_exercises(submissions):
    from mhalib.cli import main

    root, _ = submissions
    course = root / "course"
    code = main(["grade", str(root / "submitted"), "--assignment", ASSIGNMENT, "--root",
                 str(REPO), "--course", str(course), "--jobs", "1",
                 "--no-progress", "--seed", "7"])
    assert code == 0
    results = {path.parent.name: json.loads(path.read_text(encoding="utf-8"))
               for path in (course / "mhalib-results" / ASSIGNMENT).glob("*/*.json")}
    assert set(results) == {"blank", "wrong"}
    for kind, result in results.items():
        passed = {name for name, verdict in result["verdicts"].items() if verdict["passed"]}
        failing = {g.removeprefix("test_") for g in _failing(kind)}
        assert not passed & failing, (kind, passed)
        assert set(EXERCISES) - failing <= passed, (kind, passed)
