"""One batched nbgrader run for every notebook test in the session.

The run covers only the assignments whose tests were selected. Every assignment is submitted
twice: "solver" hands in the instructor's solutions notebook, "blank" the untouched release
from notebooks/. Two worker processes (one per core, see nbgrader_worker.py) each hold a
scratch copy of the course and take autograde jobs from a shared queue, the slowest (the
solutions, latest lessons first) first. Each notebook is executed exactly once, by nbgrader
autograde; the tests read its outputs (errors, timings), its scores, and the releases nbgrader
generated on the way.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from mhalib import course
from mhalib.classroom.release import tool_env
from tests.checkout import REPO, keys_of

WORKER = Path(__file__).with_name("nbgrader_worker.py")
WORKERS = 2
WORKER_TIMEOUT_S = 900
SHM = "/dev/shm"


@dataclass
class GradedCourse:
    roots: dict  # (student, assignment) -> scratch course root that graded it
    scores: dict  # (student, assignment) -> {"score", "max_score"}
    kernel_cpu: dict  # (student, assignment) -> CPU seconds its kernel used

    def autograded(self, student: str, assignment: str, notebook: str) -> Path:
        root = self.roots.get((student, assignment))
        path = (root / "grading" / "course" / "autograded" / student / assignment / notebook
                if root else None)
        if path is None or not path.is_file():
            what = "solutions" if student == "solver" else "release (notebooks/)"
            pytest.fail(f"nbgrader did not grade the {what} of {assignment}: is it missing?")
        return path

    def generated_release(self, assignment: str, notebook: str) -> Path:
        return self.roots["generated"] / "notebooks" / assignment / notebook


def pytest_configure(config):
    config.addinivalue_line("markers", "nbgrader: needs the batched nbgrader autograde run")


def selected_assignments(session) -> list[str]:
    found = set()
    for item in session.items:
        callspec = getattr(item, "callspec", None)
        if callspec and "assignment" in callspec.params and item.get_closest_marker("nbgrader"):
            found.add(callspec.params["assignment"])
    return sorted(found)


def _submission(student: str, assignment: str) -> Path:
    return REPO / ("solutions" if student == "solver" else "notebooks") / assignment


def _jobs(assignments: list[str]) -> list[tuple[str, str]]:
    """Jobs whose submission exists, slowest first: solutions before releases, later lessons
    (torch, training) before earlier ones."""
    ordered = [("solver", a) for a in reversed(assignments)]
    ordered += [("blank", a) for a in reversed(assignments)]
    return [job for job in ordered if _submission(*job).is_dir()]


def _prepare(root: Path, assignments: list[str], jobs: list[tuple[str, str]]) -> None:
    ignore = shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__")
    for assignment in assignments:
        shutil.copytree(REPO / "solutions" / assignment, root / "solutions" / assignment,
                        ignore=ignore)
    for student, assignment in jobs:
        target = root / "grading" / "course" / "submitted" / student / assignment
        shutil.copytree(_submission(student, assignment), target, ignore=ignore)
        if student == "solver":  # the solver also answers every quick check in its form
            _record_right_answers(target / course.lesson(assignment).notebook, assignment,
                                  student)


def _record_right_answers(path: Path, assignment: str, student: str) -> None:
    from mhalib.quiz.record import with_answers

    keys = keys_of(assignment)
    notebook = json.loads(path.read_text(encoding="utf-8"))
    answers = {qid: key["answer"] for qid, key in keys.items()}
    path.write_text(json.dumps(with_answers(notebook, answers, f"student:{student}")),
                    encoding="utf-8")


def _queue(path: Path, jobs: list[tuple[str, str]]) -> Path:
    (path / "pending").mkdir(parents=True)
    (path / "claimed").mkdir()
    for priority, (student, assignment) in enumerate(jobs):
        job = {"student": student, "assignment": assignment}
        (path / "pending" / f"{priority:03d}.json").write_text(json.dumps(job))
    return path


def _worker_env() -> dict:
    env = tool_env()
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.pop("MHALIB_GRADING", None)  # the test cells must judge in the kernel
    env.setdefault("MPLBACKEND", "Agg")
    # Two nbgrader workers run beside the pytest workers: one BLAS/OpenMP thread per kernel
    # keeps the cores from being oversubscribed (spinning BLAS threads made a 6 s lesson take
    # 120 s once). Full-thread run times are in docs/benchmarks.md (benchmarks/lesson_times.py).
    for variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env[variable] = "1"
    return env


@pytest.fixture(scope="session")
def scratch_dir(tmp_path_factory):
    """Memory-backed scratch space when there is some: nbgrader commits to SQLite after
    every cell, and on a disk each commit waits for a sync."""
    if os.path.isdir(SHM) and os.access(SHM, os.W_OK):
        path = Path(tempfile.mkdtemp(prefix="mhalib-notebooks-", dir=SHM))
        yield path
        shutil.rmtree(path, ignore_errors=True)
    else:
        yield tmp_path_factory.mktemp("courses")


@pytest.fixture(scope="session")
def graded_course(request, scratch_dir) -> GradedCourse:
    assignments = selected_assignments(request.session)
    if not assignments:
        pytest.skip("no notebook assignment selected")
    jobs = _jobs(assignments)
    queue = _queue(scratch_dir / "queue", jobs)
    processes = []
    for index in range(WORKERS):
        root = scratch_dir / f"course{index}"
        _prepare(root, assignments, jobs)
        log = open(root / "worker.log", "w")
        process = subprocess.Popen([sys.executable, str(WORKER), str(root), str(queue)],
                                   stdout=log, stderr=subprocess.STDOUT, env=_worker_env(),
                                   cwd=root)
        processes.append((root, process, log))
    roots, scores, kernel_cpu = {"generated": processes[0][0]}, {}, {}
    for root, process, log in processes:
        try:
            code = process.wait(timeout=WORKER_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            code = "timeout"
        log.close()
        if code != 0:
            text = (root / "worker.log").read_text()[-4000:]
            pytest.fail(f"nbgrader worker in {root} ended with {code}:\n{text}")
        seconds = json.loads((root / "seconds.json").read_text())
        print(f"\nnbgrader worker {root.name}: {seconds}")
        for entry in json.loads((root / "scores.json").read_text()):
            key = (entry["student"], entry["assignment"])
            roots[key] = root
            scores[key] = {"score": entry["score"], "max_score": entry["max_score"]}
        for job, cpu in seconds["kernel_cpu"].items():
            kernel_cpu[tuple(job.split("/"))] = cpu
    return GradedCourse(roots, scores, kernel_cpu)
