"""Run nbgrader on a scratch copy of the course: generate every release, then autograde jobs
taken from a shared queue until none is left.

Usage: ``python nbgrader_worker.py COURSE_ROOT QUEUE_DIR``. COURSE_ROOT is laid out like the
repo (``solutions/<assignment>/`` and ``grading/course/submitted/<student>/<assignment>/``);
QUEUE_DIR/pending holds one ``<priority>.json`` file per job ``{"student", "assignment"}``.
Workers claim a job by renaming its file into QUEUE_DIR/claimed, so each job runs once and a
worker that finishes early takes more. The course configuration is the repo's
grading/nbgrader_config.py with only the root and the gradebook moved into COURSE_ROOT. One
process per worker, so nbgrader is imported once. Writes COURSE_ROOT/scores.json (the jobs this
worker graded: ``[{"student", "assignment", "score", "max_score"}]``) and seconds.json: wall
seconds of each autograde and, under "kernel_cpu", the CPU seconds its kernel used (the
kernel is this process's child, reaped when autograde shuts it down).
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def course_config(root: Path):
    from traitlets.config import Config, PyFileConfigLoader

    loader = PyFileConfigLoader("nbgrader_config.py", path=str(REPO / "grading"))
    config = loader.load_config()
    overrides = Config()
    overrides.CourseDirectory.root = str(root)
    overrides.CourseDirectory.db_url = f"sqlite:///{root / 'gradebook.db'}"
    overrides.Application.log_level = "WARN"
    config.merge(overrides)
    return config


def children_cpu_seconds() -> float:
    """User + system CPU seconds of this process's children that have ended (the kernels)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def claim_jobs(queue: Path):
    """Yield jobs from queue/pending, each claimed by an atomic rename (skips lost races)."""
    claimed = queue / "claimed"
    while True:
        pending = sorted((queue / "pending").glob("*.json"))
        if not pending:
            return
        for path in pending:
            target = claimed / f"{path.stem}.{os.getpid()}.json"
            try:
                os.rename(path, target)
            except FileNotFoundError:
                continue  # another worker took it
            yield json.loads(target.read_text())
            break


def main(root: Path, queue: Path) -> int:
    from nbgrader.api import Gradebook
    from nbgrader.apps import NbGraderAPI

    from mhalib.classroom.nbgrader_schema import stamp_schema_in_process

    stamp_schema_in_process()
    config = course_config(root)
    api = NbGraderAPI(config=config)
    seconds = {"autograde": {}, "kernel_cpu": {}}
    start = time.perf_counter()
    result = api.generate_assignment("*")
    seconds["generate_assignment"] = round(time.perf_counter() - start, 1)
    if not result["success"]:
        print(f"nbgrader generate_assignment failed:\n{result.get('error')}\n"
              f"{result.get('log')}", file=sys.stderr)
        return 1
    graded = []
    for job in claim_jobs(queue):
        start, cpu_start = time.perf_counter(), children_cpu_seconds()
        result = api.autograde(job["assignment"], job["student"])
        key = f"{job['student']}/{job['assignment']}"
        seconds["autograde"][key] = round(time.perf_counter() - start, 1)
        seconds["kernel_cpu"][key] = round(children_cpu_seconds() - cpu_start, 2)
        if not result["success"]:
            print(f"nbgrader autograde {job} failed:\n{result.get('error')}\n"
                  f"{result.get('log')}", file=sys.stderr)
            return 1
        graded.append(job)
    scores = []
    with Gradebook(config.CourseDirectory.db_url) as gradebook:
        for job in graded:
            submission = gradebook.find_submission(job["assignment"], job["student"])
            scores.append({**job, "score": submission.score, "max_score": submission.max_score})
    (root / "scores.json").write_text(json.dumps(scores, indent=1))
    (root / "seconds.json").write_text(json.dumps(seconds))
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()))
