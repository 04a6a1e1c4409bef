"""How long each solutions notebook takes to run top to bottom, as a learner's laptop would.

Each lesson runs in a fresh Jupyter kernel (nbclient, all threads, no network needed); the time
is from the first cell's start to the last cell's end, kernel start-up excluded. Prints a
Markdown section; ``--write-docs`` puts it in docs/benchmarks.md under ``## Lesson run times``
(replacing only that section)::

    .venv/bin/python benchmarks/lesson_times.py --write-docs
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

from mhalib.release import run_budget_seconds

REPO = Path(__file__).resolve().parent.parent
SECTION = "## Lesson run times"


def lesson_notebooks() -> list[Path]:
    return sorted(p for p in (REPO / "solutions").glob("*/*.ipynb") if ".ipynb_checkpoints"
                  not in p.parts)


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


def write_docs(section: str, path: Path) -> None:
    text = path.read_text() if path.exists() else "# Benchmarks\n\n"
    pattern = re.compile(rf"^{re.escape(SECTION)}\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(text):
        text = pattern.sub(lambda _: section + "\n", text)
    else:
        text = text.rstrip("\n") + "\n\n" + section
    path.write_text(text.rstrip("\n") + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write-docs", action="store_true",
                        help="replace the section in docs/benchmarks.md")
    args = parser.parse_args(argv)
    os.environ.setdefault("MPLBACKEND", "Agg")
    rows = []
    for path in lesson_notebooks():
        lesson = path.parent.name
        print(f"running {lesson} ...", file=sys.stderr, flush=True)
        seconds, slowest = run_seconds(path)
        rows.append((lesson, seconds, slowest))
    section = render(rows)
    print(section)
    if args.write_docs:
        write_docs(section, REPO / "docs" / "benchmarks.md")
    return 0 if all(s < run_budget_seconds(n) for n, s, _ in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
