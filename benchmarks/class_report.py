"""Time ``mhalib report`` on a large synthetic class: 500 students x all 11 lessons by default.

The class is written the way ``mhalib grade`` writes one (result files and gradebook rows) from
the course's own fixture answers and quick-check slips, with known proportions
(tests/classroom/report/synthetic_plan.py and synthetic_class.py: every distinct answer judged
by the grader's own judges, nothing run in a sandbox); building it is timed apart. Then:

1. ``mhalib report`` as an instructor runs it (a new Python process: start-up and imports
   included), every graded assignment, ``--repeat`` times (median and all runs shown);
2. the same work in this process, split into reading (result files and gradebook), computing
   the report, and writing the HTML, JSON and CSV files (CPU seconds, median of ``--repeat``).

It prints a Markdown section; ``--write-docs`` puts it in docs/benchmarks.md under
``## Class report`` (replacing only that section)::

    .venv/bin/python benchmarks/class_report.py --students 500 --write-docs
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from datetime import date
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
SECTION = "## Class report"


def build_class(course: Path, students: int, assignments: list[str]) -> dict[str, float]:
    """Write the synthetic class into ``course``; seconds per step."""
    from tests.classroom.report.synthetic_class import build_results, load_models, write_results
    from tests.classroom.report.synthetic_plan import make_plan

    seconds = {}
    started = time.perf_counter()
    plan = make_plan(students, assignments)
    models = load_models(assignments)
    seconds["plan and lesson models"] = time.perf_counter() - started
    started = time.perf_counter()
    with warnings.catch_warnings():  # the fixtures' overflowing softmaxes warn, as meant
        warnings.simplefilter("ignore", RuntimeWarning)
        results = build_results(plan, models)
    seconds["judging the answers"] = time.perf_counter() - started
    started = time.perf_counter()
    write_results(course, results, models)
    seconds["writing results and gradebook"] = time.perf_counter() - started
    return seconds


def time_command(course: Path, out: Path, repeat: int) -> tuple[list[float], list[float]]:
    """Wall and CPU seconds (user + system) of ``mhalib report`` in a fresh process, ``repeat``
    times: on a shared machine the CPU time is the steadier number."""
    command = [str(Path(sys.executable).parent / "mhalib"), "report", "--course", str(course),
               "--source", str(REPO / "solutions"), "--out", str(out), "--no-progress"]
    walls, cpus = [], []
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True, cwd=REPO)
        walls.append(time.perf_counter() - started)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return walls, cpus


def time_in_process(course: Path, out: Path, repeat: int) -> dict[str, float]:
    """CPU seconds of reading, computing and writing in this process (imports done), each the
    median of ``repeat`` runs: CPU time, not wall time, so that other work on a shared machine
    does not inflate it."""
    from mhalib.classroom.report.build import ReportOptions, summarise_class
    from mhalib.classroom.report.output import write_report
    from mhalib.classroom.report.reading import check_assignments, read_class

    options = ReportOptions(course=course, source=REPO / "solutions")
    assignments = check_assignments(None, course)
    runs: dict[str, list[float]] = {"reading": [], "computing": [], "writing": []}
    for _ in range(repeat):
        started = time.process_time()
        graded = read_class(course, assignments)
        runs["reading"].append(time.process_time() - started)
        started = time.process_time()
        report = summarise_class(graded, options)
        runs["computing"].append(time.process_time() - started)
        started = time.process_time()
        files = write_report(report, out, "class")
        runs["writing"].append(time.process_time() - started)
    return {**{name: statistics.median(values) for name, values in runs.items()},
            "html_bytes": files.html.stat().st_size, "grid_cells": sum(
                1 for row in report.grid for cell in row.cells if cell is not None)}


def section(numbers: dict) -> str:
    walls, cpus = numbers["command"]
    runs = ", ".join(f"{t:.2f}" for t in walls)
    build = "; ".join(f"{name} {secs:.1f} s" for name, secs in numbers["build"].items())
    return "\n".join([
        SECTION, "",
        f"Measured by `benchmarks/class_report.py` on {numbers['machine']} ({numbers['cores']} "
        f"cores shared with other work, no GPU) on {numbers['date']}; load average "
        f"{numbers['load']:.1f} when the timing started, {numbers['load_after']:.1f} when it "
        f"ended (the machine's other work included). The class: {numbers['students']} "
        f"students x "
        f"{numbers['lessons']} lessons, written as `mhalib grade` writes one "
        f"({numbers['results']:,} result files, a {numbers['gradebook_mb']:.1f} MB "
        "gradebook) from the fixture answers and quick-check slips of the tests"
        + (f" (building it took {sum(numbers['build'].values()):.0f} s: {build})"
           if build else "") + ".", "",
        "```",
        f".venv/bin/python benchmarks/class_report.py --students {numbers['students']} "
        "--write-docs",
        "```", "",
        "| what | seconds |", "|---|---|",
        f"| `mhalib report` (every graded assignment), new process, wall, median of "
        f"{len(walls)} | **{statistics.median(walls):.2f}** ({runs}) |",
        f"| ... its CPU time (user + system), median | {statistics.median(cpus):.2f} |",
        f"| ... in process (CPU, median): reading {numbers['results']:,} results and the "
        "gradebook | "
        f"{numbers['in_process']['reading']:.2f} |",
        f"| ... computing every summary, statistic and the grid | "
        f"{numbers['in_process']['computing']:.2f} |",
        f"| ... writing the HTML ({numbers['in_process']['html_bytes'] / 2**20:.1f} MiB, "
        f"{numbers['in_process']['grid_cells']:,} grid cells), JSON and CSV files | "
        f"{numbers['in_process']['writing']:.2f} |", "",
        "The in-process rows are the same work without Python's start-up and the imports "
        "(numpy, nbgrader's gradebook helpers, the quiz banks); on a shared machine every "
        "number moves with the other work (load average above), the wall time most. Nothing "
        "is graded again: the report reads the grader's stored results and the gradebook "
        "(one SQL query).", ""])


def write_docs(text: str, path: Path) -> None:
    current = path.read_text(encoding="utf-8") if path.exists() else "# Benchmarks\n"
    pattern = re.compile(rf"^{re.escape(SECTION)}\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(current):
        current = pattern.sub(lambda _: text + "\n", current)
    else:
        current = current.rstrip("\n") + "\n\n" + text + "\n"
    path.write_text(current, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    from mhalib import course as course_manifest

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--students", type=int, default=500)
    parser.add_argument("--lessons", type=int, default=len(course_manifest.LESSONS),
                        help="the first N lessons of the course (default: all)")
    parser.add_argument("--course", type=Path,
                        help="build the class here and keep it (reused when it is there)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args(argv)
    assignments = course_manifest.assignments()[:args.lessons]
    scratch = Path(tempfile.mkdtemp(prefix="mhalib-report-bench-"))
    course = args.course or scratch / "course"
    try:
        built = course / "benchmark-build.json"  # how long building took, for a reused class
        if not (course / "gradebook.db").exists():
            print(f"building {args.students} students x {len(assignments)} lessons in {course}",
                  file=sys.stderr)
            built.parent.mkdir(parents=True, exist_ok=True)
            built.write_text(json.dumps({"students": args.students, "lessons": len(assignments),
                                         "seconds": build_class(course, args.students,
                                                                assignments)}))
        kept = json.loads(built.read_text()) if built.exists() else {}
        if kept and (kept["students"], kept["lessons"]) != (args.students, len(assignments)):
            parser.error(f"--course={course} holds {kept['students']} students x "
                         f"{kept['lessons']} lessons, not {args.students} x {len(assignments)}")
        build = kept.get("seconds", {})
        load = os.getloadavg()[0]
        numbers = {
            "machine": f"{platform.machine()} Linux, Python {platform.python_version()}",
            "cores": os.cpu_count(), "date": date.today().isoformat(), "load": load,
            "students": args.students, "lessons": len(assignments), "build": build,
            "results": sum(1 for _ in (course / "mhalib-results").glob("*/*/*.json")),
            "gradebook_mb": (course / "gradebook.db").stat().st_size / 2**20,
            "command": time_command(course, scratch / "out-command", args.repeat),
            "in_process": time_in_process(course, scratch / "out-process", args.repeat),
            "load_after": os.getloadavg()[0]}
        text = section(numbers)
        print(text)
        if args.write_docs:
            write_docs(text, REPO / "docs" / "benchmarks.md")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
