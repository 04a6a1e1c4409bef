"""Grading throughput, every lesson: ``mhalib grade`` against plain serial ``nbgrader autograde``.

For each lesson it writes a synthetic class from the instructor's source (cycling through
correct, correct, wrong, blank and hostile notebooks), then times on the same submissions

1. plain ``nbgrader autograde`` (serial, one kernel per notebook; optionally on the first
   ``--nbgrader-students`` only, for lessons where that takes very long),
2. ``mhalib grade --jobs J`` for each J asked for (class run included),

and reads the CPU seconds each graded notebook used (``run.cpu_seconds`` of the results), plus
the class run's (lesson 08 trains its model once per class, :mod:`mhalib.grading.class_run`).
It prints a Markdown section; ``--write-docs`` puts it in docs/benchmarks.md under
``## Grading throughput`` (replacing only that section)::

    .venv/bin/python benchmarks/grading_throughput.py --students 40 --jobs 1 2 --write-docs
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
KEYS = REPO / "grading" / "quick_checks"  # the instructor's quick-check keys of this checkout
SECTION = "## Grading throughput"
KINDS = ("correct", "correct", "wrong", "blank", "hostile")
HOSTILE = '''import numpy as np, os, ast
np.allclose = lambda *args, **kwargs: True
class _DropAsserts(ast.NodeTransformer):
    def visit_Assert(self, node):
        return ast.Pass()
get_ipython().ast_transformers.append(_DropAsserts())
get_ipython().showtraceback = lambda *args, **kwargs: None
for _path in ["../../../../solutions", "/work", "/root", "gradebook.db"]:
    try:
        print(_path, os.listdir(_path)[:3])
    except OSError as error:
        print(_path, "not reachable:", type(error).__name__)
'''
WRONG = '''
_right_{name} = {name}
def {name}(*args, **kwargs):
    out = _right_{name}(*args, **kwargs)
    return (out[0] + 1, *out[1:]) if isinstance(out, tuple) else out + 1
'''


def timed(command: list[str], **kwargs) -> tuple[subprocess.CompletedProcess, float, float]:
    """(result, wall seconds, CPU seconds of the whole process tree it reaped)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, env=tool_env(), capture_output=True, text=True, **kwargs)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return done, wall, cpu


def tool_env() -> dict:
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
    return env


def notebook_of(model, kind: str) -> dict:
    """One synthetic submission of ``kind`` for the lesson ``model``."""
    from mhalib.grading.answered_notebook import answer_sources, quick_check_answers, submission
    from mhalib.quiz.keys import instructor_keys

    right = answer_sources(model)
    # answered in their forms, as recorded on saving
    quick = quick_check_answers(model, instructor_keys(model.assignment, KEYS))
    first = model.exercises[0]
    if kind == "blank":
        return submission(model)
    if kind == "wrong":  # the first exercise returns its answer plus one; blanks say 0
        slips = {qid: "0" if isinstance(a, str) else (a + 1) % 2 for qid, a in quick.items()}
        return submission(model, {**right, first: right[first] + WRONG.format(name=first)},
                          quick_checks=slips)
    if kind == "hostile":
        return submission(model, right, after={first: HOSTILE}, quick_checks=quick)
    return submission(model, right, quick_checks=quick)


def write_class(model, submitted: Path, students: int) -> None:
    from mhalib.grading.answered_notebook import to_bytes

    for number in range(students):
        kind = KINDS[number % len(KINDS)]
        folder = submitted / f"{kind}{number:03d}" / model.assignment
        folder.mkdir(parents=True)
        (folder / model.notebook).write_bytes(to_bytes(notebook_of(model, kind)))


def nbgrader_serial(assignment: str, source: Path, submitted: Path, scratch: Path,
                    students: int) -> tuple[float, float]:
    """(wall, CPU) seconds of ``nbgrader autograde`` on the first ``students`` submissions."""
    course = scratch / f"nbgrader-{assignment}"
    (course / "source").mkdir(parents=True)
    shutil.copytree(source / assignment, course / "source" / assignment)
    for folder in sorted(submitted.iterdir())[:students]:
        shutil.copytree(folder, course / "submitted" / folder.name)
    db = f"--db=sqlite:///{course / 'gradebook.db'}"
    common = [f"--CourseDirectory.root={course}", db, "--log-level=ERROR"]
    subprocess.run([sys.executable, "-m", "nbgrader", "generate_assignment", assignment,
                    *common], cwd=course, env=tool_env(), check=True, capture_output=True)
    done, wall, cpu = timed([sys.executable, "-m", "nbgrader", "autograde", assignment, *common,
                             "--ExecutePreprocessor.timeout=600"], cwd=course)
    if done.returncode:
        raise RuntimeError(f"nbgrader autograde failed:\n{done.stderr[-2000:]}")
    return wall, cpu


def mhalib_run(assignment: str, source: Path, submitted: Path, scratch: Path, jobs: int,
               extra: tuple[str, ...] = ()) -> dict:
    """Wall and CPU seconds of one grading run, CPU seconds per graded notebook (its sandboxed
    processes), the class run's CPU, and the sandbox."""
    course = scratch / f"mhalib-{assignment}-{jobs}{'-'.join(extra)}"
    done, seconds, total_cpu = timed(
        [sys.executable, "-m", "mhalib", "grade", "--assignment", assignment, str(submitted),
         "--source", str(source), "--course", str(course), "--keys", str(KEYS), "--jobs",
         str(jobs), "--no-progress", "--no-feedback", *extra])
    if done.returncode:
        raise RuntimeError(f"mhalib grade failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    by_kind: dict[str, list[float]] = {}
    for path in (course / "mhalib-results" / assignment).glob("*/*.json"):
        kind = path.parent.name.rstrip("0123456789")  # student folders are <kind><number>
        by_kind.setdefault(kind, []).append(
            json.loads(path.read_text())["run"].get("cpu_seconds") or 0.0)
    cpu = [value for values in by_kind.values() for value in values]
    class_cpu = re.search(r"class run: .*\(([\d.]+) s CPU\)", done.stderr)
    sandbox = re.search(r"sandbox: (\w+)", done.stdout)
    return {"seconds": seconds, "cpu": total_cpu, "notebooks": len(cpu),
            "cpu_per_notebook": sum(cpu) / len(cpu),
            "cpu_by_kind": {kind: sum(v) / len(v) for kind, v in sorted(by_kind.items())},
            "class_run_cpu": float(class_cpu.group(1)) if class_cpu else 0.0,
            "sandbox": sandbox.group(1) if sandbox else "?"}


def measure_lesson(assignment: str, args, scratch: Path) -> dict:
    from mhalib.grading.assignment import load_assignment

    model = load_assignment(assignment, args.source)[0]
    submitted = scratch / f"submitted-{assignment}"
    write_class(model, submitted, args.students)
    capped = args.nbgrader_cap.get(assignment, args.students)
    row = {"assignment": assignment, "students": args.students,
           "nbgrader_students": min(capped, args.students), "mhalib": {}}
    row["nbgrader_s"], row["nbgrader_cpu"] = nbgrader_serial(
        assignment, args.source, submitted, scratch, row["nbgrader_students"])
    for jobs in args.jobs:
        row["mhalib"][str(jobs)] = mhalib_run(assignment, args.source, submitted, scratch, jobs)
    if model.class_cache and args.uncached_students:
        few = scratch / f"uncached-{assignment}"
        few.mkdir()
        for folder in sorted(submitted.iterdir())[:args.uncached_students]:
            shutil.copytree(folder, few / folder.name)
        row["uncached"] = mhalib_run(assignment, args.source, few, scratch, 1,
                                     ("--no-class-cache",))
    print(json.dumps(row), file=sys.stderr, flush=True)
    return row


def render(numbers: dict) -> str:
    rows = numbers["lessons"]
    counts = sorted({r["students"] for r in rows})
    lines = [SECTION, "",
             f"Measured by `benchmarks/grading_throughput.py` on {numbers['machine']} "
             f"({numbers['cores']} cores shared with other work, no GPU) on "
             f"{numbers['date']}, sandbox: {numbers['sandbox']}. Each lesson's class: "
             f"{', '.join(map(str, counts))} synthetic submissions cycling through correct, "
             "correct, wrong (the first exercise off by one), blank and hostile (patches "
             "numpy, strips asserts, hides tracebacks, pokes at the file system). "
             "Per notebook: wall time of the whole command (start-up, and lesson 08's class "
             "run, included); CPU of nbgrader's whole process tree (kernels included); CPU of "
             "one notebook graded by mhalib (its sandboxed processes: `run.cpu_seconds` of the "
             "results), with the class run's CPU spread over the class in brackets. Load "
             "average of the machine (other sessions' work included): "
             f"{numbers['load_before']:.1f} before, {numbers['load_after']:.1f} after; wall "
             "times are the noisy ones, and at a few notebooks per lesson mhalib's start-up "
             "(a warm sandbox per worker, a few seconds) weighs on them.", "",
             "| lesson | nbgrader serial: wall / CPU s/nb | `--jobs 1` wall s/nb | "
             "`--jobs 2` wall s/nb | wall speed-up, jobs 2 | notebook CPU s/nb |",
             "|---|---:|---:|---:|---:|---:|"]
    for row in rows:
        n_serial = row["nbgrader_students"]
        serial = row["nbgrader_s"] / n_serial
        one, two = row["mhalib"].get("1"), row["mhalib"].get("2")
        first = one or two
        cpu = f"{first['cpu_per_notebook']:.2f}"
        if first["class_run_cpu"]:
            cpu += f" (+{first['class_run_cpu'] / row['students']:.2f})"
        note = "" if n_serial == row["students"] else f" (first {n_serial})"
        jobs1 = f"{one['seconds'] / row['students']:.2f}" if one else "–"
        jobs2 = f"{two['seconds'] / row['students']:.2f}" if two else "–"
        best = (two or one)["seconds"] / row["students"]
        lines.append(f"| {row['assignment']} | {serial:.2f} / "
                     f"{row['nbgrader_cpu'] / n_serial:.2f}{note} | {jobs1} | {jobs2} | "
                     f"{serial / best:.2f}x | {cpu} |")
    lines.append("")
    for row in rows:
        first = row["mhalib"].get("1") or row["mhalib"].get("2")
        if first.get("class_run_cpu") and first.get("cpu_by_kind"):
            kinds = ", ".join(f"{kind} {cpu:.2f} s" for kind, cpu in first["cpu_by_kind"].items())
            lines.append(f"{row['assignment']}, CPU per notebook by kind of submission: "
                         f"{kinds}.")
    for row in rows:
        if "uncached" in row:
            run = row["uncached"]
            lines.append(
                f"{row['assignment']} without the class cache (`--no-class-cache`, every "
                f"notebook trains its own model; first {run['notebooks']} submissions, "
                f"`--jobs 1`): {run['seconds'] / run['notebooks']:.2f} s wall and "
                f"{run['cpu_per_notebook']:.2f} s CPU per notebook.")
    for assignment, reason in numbers.get("failed", {}).items():
        lines.append(f"{assignment}: not measured ({reason.splitlines()[-1][:200]}).")
    lines.append("")
    return "\n".join(lines)


def write_docs(section: str, path: Path) -> None:
    text = path.read_text(encoding="utf-8") if path.exists() else "# Benchmarks\n"
    pattern = re.compile(rf"^{re.escape(SECTION)}\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(text):
        text = pattern.sub(lambda _: section + "\n", text)
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    path.write_text(text, encoding="utf-8")


def _caps(text: str) -> dict[str, int]:
    """``08-heads=5,07-flash=10`` -> {assignment: students}."""
    pairs = [item.split("=") for item in text.split(",") if item]
    return {name: int(count) for name, count in pairs}


def main(argv: list[str] | None = None) -> int:
    from mhalib import course

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--students", type=int, default=40)
    parser.add_argument("--jobs", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--lessons", nargs="+", help="default: every lesson with a source",
                        default=[lesson.assignment for lesson in course.LESSONS
                                 if (REPO / "solutions" / lesson.assignment).is_dir()])
    parser.add_argument("--nbgrader-cap", type=_caps, default={},
                        help="grade only the first N with nbgrader, e.g. 08-heads=5")
    parser.add_argument("--uncached-students", type=int, default=3,
                        help="also grade this many with --no-class-cache (lessons with one)")
    parser.add_argument("--source", type=Path, default=REPO / "solutions")
    parser.add_argument("--write-docs", action="store_true")
    parser.add_argument("--json", type=Path, help="also write the numbers as JSON here")
    parser.add_argument("--render", type=Path, metavar="JSON",
                        help="only print (and --write-docs) the section of numbers saved before")
    args = parser.parse_args(argv)
    if args.render:
        section = render(json.loads(args.render.read_text(encoding="utf-8")))
        print(section)
        if args.write_docs:
            write_docs(section, REPO / "docs" / "benchmarks.md")
        return 0
    numbers = {"cores": os.cpu_count(), "load_before": os.getloadavg()[0],
               "machine": f"{platform.system()} {platform.machine()}",
               "date": time.strftime("%Y-%m-%d"), "lessons": []}
    with tempfile.TemporaryDirectory(prefix="mhalib-bench-") as scratch:
        for assignment in args.lessons:
            try:
                numbers["lessons"].append(measure_lesson(assignment, args, Path(scratch)))
            except (RuntimeError, ValueError, OSError, subprocess.CalledProcessError) as error:
                numbers.setdefault("failed", {})[assignment] = str(error)[-500:]
                print(f"{assignment}: not measured ({str(error)[-300:]})", file=sys.stderr)
    numbers["load_after"] = os.getloadavg()[0]
    numbers["sandbox"] = next(iter(numbers["lessons"][0]["mhalib"].values()))["sandbox"]
    section = render(numbers)
    print(section)
    if args.json:
        args.json.write_text(json.dumps(numbers, indent=1), encoding="utf-8")
    if args.write_docs:
        write_docs(section, REPO / "docs" / "benchmarks.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
