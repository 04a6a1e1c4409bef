"""Every answer path closed: nothing in the sandbox's copy of mhalib computes a graded answer.

For each assignment, the copy the grader would put in its sandbox is written, and every function
in it that accepts an exercise's arguments is called on that exercise's visible and hidden cases
in a fresh interpreter that sees only the copy (tests/grading/answer_search.py: a child forked
from one server process that has imported the libraries but no mhalib); the grader's
full checker judges the outputs here. A function that is right on a case that wrong answers
cannot pass by accident, and never wrong where it returns, is an answer a learner's cell could
call (around a guard for the cases where it raises). Cases that want an error (``expects_error``,
``must_raise``)
are left out: any function that raises there would pass them. The same search on the package as
installed finds plenty (the answer key, the mistake models with default settings, the demos'
oracles), which shows it can fail.
"""

from __future__ import annotations

import json
import os
import pickle
import selectors
import signal
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
SEARCH_TIMEOUT_S = 900


class SearchServer:
    """``answer_search.py --serve``: each search runs in a child forked from one interpreter
    that has imported torch and numpy but no mhalib, which is a fresh ``answer_search.py``
    run with the copy on its PYTHONPATH, less the interpreter's start and those imports."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.process: subprocess.Popen | None = None

    def _start(self) -> subprocess.Popen:
        env = {**os.environ, "MHALIB_GRADING": "1", "MPLBACKEND": "Agg", "OMP_NUM_THREADS": "1"}
        env.pop("PYTHONPATH", None)  # each search sets its own (a child of the server)
        with open(self.folder / "server.log", "ab") as log:
            return subprocess.Popen([sys.executable, str(SEARCH), "--serve"], cwd=self.folder,
                                    env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=log, text=True, start_new_session=True)

    def run(self, pythonpath: str | None, cases_file: Path, out_file: Path,
            cwd: Path) -> tuple[int, str]:
        """Search as ``answer_search.py - CASES OUT`` would in ``cwd`` with ``pythonpath``
        (None: PYTHONPATH unset); returns its exit status and what it wrote on stderr and
        stdout."""
        if self.process is None or self.process.poll() is not None:
            self.process = self._start()
        log = cwd / "search.log"
        request = {"pythonpath": pythonpath, "cases": str(cases_file), "out": str(out_file),
                   "cwd": str(cwd), "log": str(log)}
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        with selectors.DefaultSelector() as selector:
            selector.register(self.process.stdout, selectors.EVENT_READ)
            ready = selector.select(timeout=SEARCH_TIMEOUT_S)
        reply = self.process.stdout.readline() if ready else ""
        if not reply:
            self.close()
            server_log = (self.folder / "server.log").read_text(errors="replace")[-3000:]
            raise AssertionError(f"the search server gave no answer within "
                                 f"{SEARCH_TIMEOUT_S} s:\n{server_log}")
        said = log.read_text(errors="replace") if log.exists() else ""
        return json.loads(reply)["returncode"], said

    def close(self) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.stdin.close()  # the server's loop ends
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.process = None


@pytest.fixture(scope="module")
def search_server(tmp_path_factory):
    """One search server for the module's searches (13 interpreter starts and torch imports
    were a third of their time); the tests share one xdist worker for it (tests/conftest.py)."""
    server = SearchServer(tmp_path_factory.mktemp("answer-search"))
    try:
        yield server
    finally:
        server.close()


def _search(server: SearchServer, package_dir: Path | None, exercises: list[str],
            tmp_path: Path) -> dict:
    cases = {name: get_exercise(name).cases(SEED, "hidden") for name in exercises}
    cases_file, out_file = tmp_path / "cases.pkl", tmp_path / "found.pkl"
    cases_file.write_bytes(pickle.dumps(cases))
    pythonpath = str(package_dir) if package_dir is not None else os.environ.get("PYTHONPATH")
    returncode, said = server.run(pythonpath, cases_file, out_file, tmp_path)
    assert returncode == 0, said[-3000:]
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
def test_the_sandbox_copy_computes_no_answer(assignment, search_server, tmp_path):
    copy = write_answer_free_copy(tmp_path / "package", assignment)
    right = _search(search_server, copy, list(course.lesson(assignment).exercises), tmp_path)
    assert right == {}, f"answer paths in the sandbox's copy for {assignment}: {right}"


@pytest.mark.slow
def test_the_search_finds_the_answers_of_the_installed_package(search_server, tmp_path):
    right = _search(search_server, None, ["grouped_query_attention", "online_softmax_attention",
                           "decode_with_cache"], tmp_path)
    assert set(right) == {"grouped_query_attention", "online_softmax_attention",
                          "decode_with_cache"}, right
    assert any("viz.lesson06" in f for f in right["grouped_query_attention"])
    assert any("checks" in f for f in right["online_softmax_attention"])
