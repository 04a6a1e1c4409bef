"""``mhalib report``: what did the class get wrong? The misconception report of a graded class.

    mhalib report --course /tmp/demo --assignment 01-single-head
    mhalib report --course grading/course                # every graded assignment

Reads the gradebook and the grader's stored results (nothing is graded again) and writes one
self-contained HTML page, a JSON file and CSV tables with the same numbers to
``<course>/reports/`` (``--out``): per exercise, the outcomes and the named mistakes ranked with
examples; per quick check, facility, discrimination and choices; what to re-teach first; and
a student x exercise grid, names hidden unless ``--names``.
"""

from __future__ import annotations

import sys
from pathlib import Path

HELP = "report what a graded class got wrong: mistakes, quick-check statistics, what to re-teach"


def add_arguments(parser) -> None:
    from mhalib.classroom.report.reteach import DEFAULT_TOP

    parser.add_argument("--assignment", "-a", dest="assignments", action="append",
                        help="assignment id (repeatable; default: every graded assignment)")
    parser.add_argument("--root", type=Path,
                        help="the course's top folder (default: MHALIB_COURSE_ROOT, else the "
                             "working directory)")
    parser.add_argument("--course", type=Path,
                        help="course folder `mhalib grade` wrote (default: grading/course of "
                             "the course)")
    parser.add_argument("--db", dest="db_url",
                        help="gradebook URL (default: sqlite:///<course>/gradebook.db)")
    parser.add_argument("--out", type=Path,
                        help="folder for the report's files (default: <course>/reports)")
    parser.add_argument("--source", type=Path,
                        help="folder of the source notebooks, for links to the lesson "
                             "sections (default: solutions of the course)")
    parser.add_argument("--lesson-url", metavar="URL",
                        help="base URL of the lesson notebooks for those links, e.g. "
                             "http://localhost:8888/lab/tree (default: file URLs of --source)")
    parser.add_argument("--keys", type=Path, metavar="DIR",
                        help="folder of the instructor's quick-check keys (default: "
                             "MHALIB_QUICK_CHECK_KEYS, else grading/quick_checks of the course)")
    parser.add_argument("--rubric", type=Path, metavar="FILE",
                        help="the instructor's rubric the class was graded with, for the price "
                             "of each mistake (default: the course rubric)")
    parser.add_argument("--names", action="store_true",
                        help="show student ids (default: pseudonyms S001, S002...)")
    parser.add_argument("--top", type=int, default=DEFAULT_TOP,
                        help=f"misconceptions in 'what to re-teach' (default {DEFAULT_TOP})")
    parser.add_argument("--no-progress", dest="progress", action="store_false",
                        help="no progress bar")


def run(args) -> int:
    from mhalib.classroom.course_folder import locate
    from mhalib.classroom.report.build import ReportOptions, build_report
    from mhalib.classroom.report.output import report_stem, reports_dir, write_report

    if args.top < 0:
        print(f"error: --top={args.top} must be at least 0", file=sys.stderr)
        return 2
    course = locate(args.root, solutions=args.source, course=args.course, keys=args.keys)
    options = ReportOptions(course=course.course, assignments=args.assignments,
                            db_url=args.db_url, source=course.solutions, keys=course.keys,
                            rubric=args.rubric, names=args.names, lesson_url=args.lesson_url,
                            top=args.top, progress=args.progress and sys.stderr.isatty())
    try:
        report = build_report(options)
    except (ValueError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    stem = report_stem([a.assignment for a in report.assignments], not args.assignments)
    files = write_report(report, args.out or reports_dir(course.course), stem)
    print(f"class report of {report.students} student(s), "
          f"{len(report.assignments)} assignment(s)")
    for entry in report.reteach:
        print(f"  re-teach: {entry.name} ({entry.item}): {entry.students} of {entry.of}")
    print(f"report: {files.html}")
    print(f"data: {files.json} and {len(files.csv)} CSV table(s) beside it")
    return 0
