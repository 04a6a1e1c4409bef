"""Every answer path closed: nothing in the sandbox's copy of mhalib computes a graded answer.

For each assignment, the copy the grader would put in its sandbox is written, and every function
in it that accepts an exercise's arguments is called on that exercise's visible and hidden cases
in a fresh interpreter that sees only the copy (tests/grading/answer_search.py); the grader's
full checker judges the outputs here. A function that is right on a case that wrong answers
cannot pass by accident, and never wrong where it returns, is an answer a learner's cell could
call (around a guard for the cases where it raises). Cases that want an error (``expects_error``,
``must_raise``)
are left out: any function that raises there would pass them. The same search on the package as
installed finds plenty (the answer key, the mistake models with default settings, the demos'
oracles), which shows it can fail.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from mhalib import course
from mhalib.checks.encoding import decode
from mhalib.checks.registry import get_exercise
from mhalib.grading.sandbox_package import write_answer_free_copy

SEARCH = Path(__file__).with_name("answer_search.py")
SEED = 5


def _search(package_dir: Path | None, exercises: list[str], tmp_path: Path) -> dict:
    cases = {name: get_exercise(name).cases(SEED, "hidden") for name in exercises}
    cases_file, out_file = tmp_path / "cases.pkl", tmp_path / "found.pkl"
    cases_file.write_bytes(pickle.dumps(cases))
    env = {**os.environ, "MHALIB_GRADING": "1", "MPLBACKEND": "Agg", "OMP_NUM_THREADS": "1"}
    if package_dir is not None:
        env["PYTHONPATH"] = str(package_dir)
    done = subprocess.run([sys.executable, str(SEARCH), "-", str(cases_file), str(out_file)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    found = pickle.loads(out_file.read_bytes())
    right = {}
    for name, outputs_by_function in found.items():
        checker = get_exercise(name)
        for function, outputs in outputs_by_function.items():
            ran = [(case, decode(output)) for case, output in zip(cases[name], outputs)
                   if output is not None and not getattr(case, "expects_error", False)
                   and not getattr(case, "must_raise", "")]
            judged = [(case, checker.judge_case(case, output, {})) for case, output in ran]
            if all(problem is None for _, problem in judged) and any(
                    not getattr(case, "degenerate", False) for case, _ in judged):
                right.setdefault(name, []).append(function)
    return right


@pytest.mark.slow
@pytest.mark.parametrize("assignment", course.assignments())
def test_the_sandbox_copy_computes_no_answer(assignment, tmp_path):
    copy = write_answer_free_copy(tmp_path / "package", assignment)
    right = _search(copy, list(course.lesson(assignment).exercises), tmp_path)
    assert right == {}, f"answer paths in the sandbox's copy for {assignment}: {right}"


@pytest.mark.slow
def test_the_search_finds_the_answers_of_the_installed_package(tmp_path):
    right = _search(None, ["grouped_query_attention", "online_softmax_attention",
                           "decode_with_cache"], tmp_path)
    assert set(right) == {"grouped_query_attention", "online_softmax_attention",
                          "decode_with_cache"}, right
    assert any("viz.lesson06" in f for f in right["grouped_query_attention"])
    assert any("checks" in f for f in right["online_softmax_attention"])
