"""How long each solutions notebook takes to run top to bottom, and how long each visible test
cell takes to answer, as a learner's laptop would.

Run times: each lesson runs in a fresh Jupyter kernel (nbclient, all threads, no network
needed); the time is from the first cell's start to the last cell's end, kernel start-up
excluded. Section ``## Lesson run times``.

Instant feedback (``--feedback``): every visible test cell (an exercise's ``check(...)`` cell and
each quick check's ``ask(...)`` cell, which builds its form) gets a fresh kernel of its own,
which runs the lesson's import cell and the answer cells up to that test cell, then the test
cell alone: the time is that cell's first call in a fresh kernel, the slowest case a learner
meets. Section
``## Instant feedback``; the target is at most 1 s per cell on a 2-core machine.

Prints Markdown; ``--write-docs`` puts it in docs/benchmarks.md, replacing only its section::

    .venv/bin/python benchmarks/lesson_times.py --write-docs
    .venv/bin/python benchmarks/lesson_times.py --feedback --write-docs
    .venv/bin/python benchmarks/lesson_times.py --feedback --lessons 06-gqa 07-flash
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from mhalib.classroom.release import run_budget_seconds

REPO = Path(__file__).resolve().parent.parent
SECTION = "## Lesson run times"
FEEDBACK_SECTION = "## Instant feedback"
FEEDBACK_TARGET_S = 1.0
IMPORT_CELL = "imports"


def lesson_notebooks() -> list[Path]:
    return sorted(p for p in (REPO / "solutions").glob("*/*.ipynb") if ".ipynb_checkpoints"
                  not in p.parts)


def _nbgrader(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def visible_test_cells(notebook) -> list[tuple[int, str]]:
    """(index, grade_id) of every visible test cell: graded, locked, not a hidden test."""
    found = []
    for index, cell in enumerate(notebook.cells):
        meta = _nbgrader(cell)
        if (cell.cell_type == "code" and meta.get("grade") and not meta.get("solution")
                and "BEGIN HIDDEN TESTS" not in cell.source):
            found.append((index, meta["grade_id"]))
    return found


def setup_cells(notebook, before: int) -> list[int]:
    """The cells a test cell needs: the import cell and the answer cells above it."""
    needed = []
    for index, cell in enumerate(notebook.cells[:before]):
        if cell.cell_type != "code":
            continue
        if cell.get("id") == IMPORT_CELL or _nbgrader(cell).get("solution"):
            needed.append(index)
    return needed


def first_call_seconds(path: Path, index: int) -> tuple[float, float]:
    """(wall, kernel CPU) seconds of test cell ``index`` run first in a fresh kernel (after its
    setup). The CPU seconds hardly depend on what else the machine runs; the wall time does."""
    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(notebook, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    start_clock = nbformat.v4.new_code_cell("import time as _bench_time\n"
                                            "_bench_cpu = _bench_time.process_time()")
    read_clock = nbformat.v4.new_code_cell("print(_bench_time.process_time() - _bench_cpu)")
    notebook.cells += [start_clock, read_clock]  # nbclient stores each cell at its index
    with client.setup_kernel():
        for needed in setup_cells(notebook, index):
            client.execute_cell(notebook.cells[needed], needed)
        client.execute_cell(start_clock, len(notebook.cells) - 2)
        started = time.perf_counter()
        client.execute_cell(notebook.cells[index], index)
        seconds = time.perf_counter() - started
        client.execute_cell(read_clock, len(notebook.cells) - 1)
    cpu = float("".join(o.get("text", "") for o in read_clock.outputs).split()[-1])
    errors = [o for o in notebook.cells[index].get("outputs", [])
              if o.get("output_type") == "error"]
    if errors:
        raise RuntimeError(f"{path.parent.name}: test cell {index} failed: "
                           f"{errors[0].get('ename')}: {errors[0].get('evalue', '')[:200]}")
    return seconds, cpu


def render_feedback(rows: list[tuple[str, str, float, float]], load_before: float) -> str:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    slowest = max((seconds for _, _, seconds, _ in rows), default=0.0)
    slowest_cpu = max((cpu for _, _, _, cpu in rows), default=0.0)
    lines = [FEEDBACK_SECTION, "",
             f"Measured by `benchmarks/lesson_times.py --feedback` on {platform.system()} "
             f"{platform.machine()} ({os.cpu_count()} cores, no GPU), Python "
             f"{platform.python_version()}; load average {load_before:.2f} before and "
             f"{load:.2f} after (other work on the machine included). Each visible test cell "
             "runs first in a fresh kernel that has run only the lesson's import cell and its "
             "answer cells: the first call, the slowest a learner meets. Wall time is what the "
             "learner waits; kernel CPU time is what the cell costs, and hardly depends on "
             f"other load. Target: at most {FEEDBACK_TARGET_S:g} s per cell. Slowest: "
             f"{slowest:.2f} s wall, {slowest_cpu:.2f} s CPU.", "",
             "| lesson | test cell | first call (wall) | kernel CPU |", "|---|---|---:|---:|"]
    for lesson, grade_id, seconds, cpu in rows:
        mark = "" if seconds <= FEEDBACK_TARGET_S else " (over)"
        lines.append(f"| {lesson} | `{grade_id}` | {seconds:.2f} s{mark} | {cpu:.2f} s |")
    return "\n".join(lines) + "\n"


def run_seconds(path: Path) -> tuple[float, float]:
    """(seconds for all cells, seconds of the slowest cell) of one fresh-kernel run."""
    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(notebook, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    slowest = 0.0
    with client.setup_kernel():
        started = time.perf_counter()
        for index, cell in enumerate(notebook.cells):
            if cell.cell_type != "code":
                continue
            cell_started = time.perf_counter()
            client.execute_cell(cell, index)
            slowest = max(slowest, time.perf_counter() - cell_started)
        return time.perf_counter() - started, slowest


def render(rows: list[tuple[str, float, float]]) -> str:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    lines = [SECTION, "",
             f"Measured by `benchmarks/lesson_times.py` on {platform.system()} "
             f"{platform.machine()} ({os.cpu_count()} cores, no GPU, all threads), Python "
             f"{platform.python_version()}; load average {load:.2f} at the end. Each solutions "
             "notebook runs top to bottom in a fresh kernel (start-up not counted).", "",
             "| lesson | run time | slowest cell | budget |", "|---|---:|---:|---:|"]
    for lesson, seconds, slowest in rows:
        budget = run_budget_seconds(lesson)
        mark = "" if seconds < budget else " (over)"
        lines.append(f"| {lesson} | {seconds:.1f} s{mark} | {slowest:.1f} s | {budget:.0f} s |")
    return "\n".join(lines) + "\n"


def write_docs(section: str, path: Path, heading: str = SECTION) -> None:
    text = path.read_text() if path.exists() else "# Benchmarks\n\n"
    pattern = re.compile(rf"^{re.escape(heading)}\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(text):
        text = pattern.sub(lambda _: section + "\n", text)
    else:
        text = text.rstrip("\n") + "\n\n" + section
    path.write_text(text.rstrip("\n") + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write-docs", action="store_true",
                        help="replace the section in docs/benchmarks.md")
    parser.add_argument("--feedback", action="store_true",
                        help="time every visible test cell's first call in a fresh kernel")
    parser.add_argument("--lessons", nargs="*", default=None,
                        help="only these lessons (e.g. 06-gqa 07-flash)")
    args = parser.parse_args(argv)
    if args.write_docs and args.lessons is not None:
        parser.error("--write-docs rewrites the whole table: run it without --lessons")
    os.environ.setdefault("MPLBACKEND", "Agg")
    paths = [p for p in lesson_notebooks()
             if args.lessons is None or p.parent.name in args.lessons]
    if args.feedback:
        return feedback_main(paths, args.write_docs)
    rows = []
    for path in paths:
        lesson = path.parent.name
        print(f"running {lesson} ...", file=sys.stderr, flush=True)
        seconds, slowest = run_seconds(path)
        rows.append((lesson, seconds, slowest))
    section = render(rows)
    print(section)
    if args.write_docs:
        write_docs(section, REPO / "docs" / "benchmarks.md")
    return 0 if all(s < run_budget_seconds(n) for n, s, _ in rows) else 1


def feedback_main(paths: list[Path], write: bool) -> int:
    load_before = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    rows = []
    for path in paths:
        notebook = nbformat.read(path, as_version=4)
        for index, grade_id in visible_test_cells(notebook):
            print(f"{path.parent.name} {grade_id} ...", file=sys.stderr, flush=True)
            rows.append((path.parent.name, grade_id, *first_call_seconds(path, index)))
    section = render_feedback(rows, load_before)
    print(section)
    if write:
        write_docs(section, REPO / "docs" / "benchmarks.md", FEEDBACK_SECTION)
    return 0 if all(s <= FEEDBACK_TARGET_S for _, _, s, _ in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
