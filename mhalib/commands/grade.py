"""``mhalib grade``: autograde a whole class into the nbgrader gradebook, in parallel, sandboxed.

    mhalib grade --assignment 01-single-head grading/course/submitted --jobs 4

SUBMITTED_DIR holds nbgrader's ``<student>/<assignment>/<notebook>.ipynb`` folders or one zip
per student as downloaded from an LMS. Results go to the course folder (``--course``,
default ``grading/course`` of the course's top folder): the gradebook (backed up first), graded
notebooks, HTML feedback and CSV exports. The top folder is ``--root``, else
``MHALIB_COURSE_ROOT``, else the working directory (:mod:`mhalib.classroom.course_folder`).
Learner code runs in a bubblewrap sandbox; scores are decided outside it.
"""

from __future__ import annotations

import sys
from pathlib import Path

HELP = "grade a class's submissions in parallel, sandboxed, into the nbgrader gradebook"


def add_arguments(parser) -> None:
    from mhalib.grading.sandbox.limits import Limits

    defaults = Limits()
    parser.add_argument("submitted", metavar="SUBMITTED_DIR", type=Path,
                        help="nbgrader submitted/ folder, or a folder of one zip per student")
    parser.add_argument("--assignment", "-a", required=True,
                        help="assignment id, e.g. 01-single-head")
    parser.add_argument("--jobs", "-j", type=int, default=1,
                        help="worker processes (each grades many students; default 1)")
    parser.add_argument("--scheduler", metavar="ADDRESS",
                        help="grade on a Dask distributed cluster, e.g. tcp://host:8786")
    parser.add_argument("--root", type=Path,
                        help="the course's top folder (default: MHALIB_COURSE_ROOT, else the "
                             "working directory)")
    parser.add_argument("--source", type=Path,
                        help="folder of the nbgrader source notebooks (default: solutions of "
                             "the course)")
    parser.add_argument("--course", type=Path,
                        help="course folder for gradebook and outputs (default: grading/course "
                             "of the course)")
    parser.add_argument("--db", dest="db_url",
                        help="gradebook URL (default: sqlite:///<course>/gradebook.db)")
    parser.add_argument("--sandbox", choices=("auto", "bwrap", "none"), default="auto",
                        help="auto: bubblewrap if usable, else no isolation (with a warning)")
    parser.add_argument("--student", dest="students", action="append",
                        help="grade only this student (repeatable)")
    parser.add_argument("--seed", type=int,
                        help="derive the grading inputs from this seed (default: fresh ones)")
    parser.add_argument("--rubric", type=Path, metavar="FILE",
                        help="instructor's rubric (TOML): points for diagnosed mistakes, changing "
                             "the course's default rubric (see grading/README.md)")
    parser.add_argument("--keys", type=Path, metavar="DIR",
                        help="folder of the instructor's quick-check keys (default: "
                             "MHALIB_QUICK_CHECK_KEYS, else grading/quick_checks of the course)")
    parser.add_argument("--timeout", type=float, default=defaults.notebook_seconds,
                        help=f"seconds per notebook (default {defaults.notebook_seconds:g})")
    parser.add_argument("--cell-timeout", type=float, default=defaults.cell_seconds,
                        help=f"seconds per cell (default {defaults.cell_seconds:g})")
    parser.add_argument("--call-timeout", type=float, default=defaults.call_seconds,
                        help=f"seconds per graded function call (default "
                             f"{defaults.call_seconds:g})")
    parser.add_argument("--memory-mb", type=int, default=defaults.memory_mb,
                        help=f"memory per notebook in MB (default {defaults.memory_mb})")
    parser.add_argument("--output-bytes", type=int, default=defaults.output_bytes,
                        help=f"output kept per notebook (default {defaults.output_bytes})")
    parser.add_argument("--max-notebook-bytes", type=int, default=defaults.notebook_bytes,
                        help=f"larger notebook files are not graded (default "
                             f"{defaults.notebook_bytes})")
    parser.add_argument("--no-feedback", dest="feedback", action="store_false",
                        help="do not write HTML feedback")
    parser.add_argument("--no-class-cache", dest="class_cache", action="store_false",
                        help="run every notebook's instructor cells marked for the class cache "
                             "(lesson 08's training) instead of once per class")
    parser.add_argument("--no-progress", dest="progress", action="store_false",
                        help="no progress bar")
    parser.add_argument("--no-report", dest="class_report", action="store_false",
                        help="do not write the class report (mhalib report) after grading")


def _limits(args):
    from mhalib.grading.sandbox.limits import Limits

    cell_output = min(Limits().cell_output_bytes, args.output_bytes)
    return Limits(notebook_seconds=args.timeout, cell_seconds=min(args.cell_timeout, args.timeout),
                  call_seconds=args.call_timeout, memory_mb=args.memory_mb,
                  output_bytes=args.output_bytes, cell_output_bytes=cell_output,
                  notebook_bytes=args.max_notebook_bytes)


def _report(summary, run) -> None:
    from mhalib.grading.flags import problem_flags

    print(f"\ngraded {summary.graded} notebook(s) of {run.assignment} in {summary.seconds:.1f} s "
          f"(sandbox: {summary.sandbox}, jobs: {run.jobs if not run.scheduler else 'dask'})")
    width = max([len(r.student) for r in summary.results] + [7])
    for result in sorted(summary.results, key=lambda r: r.student):
        flags = problem_flags(result.all_flags())
        hints = sum(verdict.hints for verdict in result.verdicts.values())
        print(f"  {result.student:<{width}}  {result.points():6.2f} / {result.max_points():<6g} "
              f"{' '.join(flags)}" + (f"  hints taken: {hints}" if hints else ""))
    if summary.flagged:
        print(f"needs review: {', '.join(sorted(summary.flagged))}")
    if summary.backup:
        print(f"gradebook backup: {summary.backup}")
    print(f"gradebook integrity: {summary.integrity}")
    for path in summary.exports:
        print(f"export: {path}")
    if summary.similarity:
        print(f"similarity: {summary.similar_pairs} pair(s) to look at in "
              f"{summary.similarity[-1]}")
    if summary.feedback:
        print(f"feedback: {len(summary.feedback)} page(s) under "
              f"{summary.feedback[0].parents[2]}")


def run(args) -> int:
    from mhalib.classroom.course_folder import locate
    from mhalib.grading.pipeline import GradingRun, grade_class
    from mhalib.grading.rubric import load_rubric
    from mhalib.grading.sandbox_host import SandboxError

    if args.jobs < 1:
        print(f"error: --jobs={args.jobs} must be at least 1", file=sys.stderr)
        return 2
    try:
        limits = _limits(args)
        rubric = load_rubric(args.rubric)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    files = locate(args.root, solutions=args.source, course=args.course, keys=args.keys)
    grading = GradingRun(
        assignment=args.assignment, submitted=args.submitted, source=files.solutions,
        course=files.course, keys=files.keys, db_url=args.db_url, jobs=args.jobs,
        scheduler=args.scheduler, sandbox=args.sandbox, seed=args.seed, students=args.students,
        limits=limits, rubric=rubric, class_cache=args.class_cache, feedback=args.feedback,
        progress=args.progress)
    try:
        summary = grade_class(grading, echo=lambda text: print(text, file=sys.stderr))
    except (ValueError, SandboxError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    _report(summary, grading)
    if args.class_report:
        _class_report(grading, args.rubric)
    return 0 if summary.integrity == "ok" else 1


def _class_report(grading, rubric_file: Path | None) -> None:
    """The class report of the assignment just graded (``mhalib report``, names hidden)."""
    from mhalib.classroom.report.build import ReportOptions, build_report
    from mhalib.classroom.report.output import reports_dir, write_report

    options = ReportOptions(course=grading.course, assignments=[grading.assignment],
                            db_url=grading.db_url, source=grading.source, keys=grading.keys,
                            rubric=grading.rubric, rubric_name=rubric_file and
                            f"the rubric {rubric_file} over the course rubric")
    try:
        files = write_report(build_report(options), reports_dir(grading.course),
                             grading.assignment)
    except Exception as error:  # the grades are written; a report problem must not hide that
        print(f"class report not written ({type(error).__name__}: {error}); run `mhalib "
              f"report --course {grading.course}` to retry", file=sys.stderr)
        return
    print(f"class report: {files.html}")
