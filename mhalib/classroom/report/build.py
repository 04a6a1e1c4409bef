"""Building the class report: read once, summarise every exercise and quick check, rank.

:func:`build_report` is the whole computation behind ``mhalib report``; what it returns is
plain data (dataclasses) that the page, the CSV files and the JSON file all show
(:mod:`~mhalib.classroom.report.page`, :mod:`~mhalib.classroom.report.tables`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from mhalib import course
from mhalib.classroom.report.exercises import ExerciseSummary, summarise_exercise
from mhalib.classroom.report.grid import GridRow, build_grid, grid_columns, pseudonyms
from mhalib.classroom.report.quick_checks import QuickCheckSummary, summarise_quick_check
from mhalib.classroom.report.reading import GradedAssignment, check_assignments, read_class
from mhalib.classroom.report.reteach import DEFAULT_TOP, ReteachItem, reteach
from mhalib.classroom.report.sections import default_base_url, lesson_sections
from mhalib.grading.rubric import Rubric, load_rubric


@dataclass
class ReportOptions:
    """What ``mhalib report`` asks for (``assignments`` None or empty: every graded one)."""

    course: Path = Path("grading/course")
    assignments: list[str] | None = None
    db_url: str | None = None
    source: Path = Path("solutions")
    keys: Path | None = None
    rubric: Rubric | Path | None = None
    rubric_name: str | None = None  # how the page names a Rubric given as an object
    names: bool = False
    lesson_url: str | None = None
    top: int = DEFAULT_TOP
    progress: bool = False


@dataclass
class ScoreDistribution:
    """Assignment totals: summary numbers and histogram bins ``(low, high, count)``."""

    students: int
    max_points: float
    mean: float
    median: float
    minimum: float
    maximum: float
    bins: list[tuple[float, float, int]]


@dataclass
class AssignmentReport:
    assignment: str
    title: str
    students: int
    scores: ScoreDistribution
    exercises: list[ExerciseSummary]
    quick_checks: list[QuickCheckSummary]


@dataclass
class ClassReport:
    generated: str
    course: str
    names_shown: bool
    rubric: str
    students: int
    assignments: list[AssignmentReport]
    reteach: list[ReteachItem]
    grid_columns: list[tuple[str, str]]
    grid: list[GridRow]
    notes: list[str] = field(default_factory=list)


def score_distribution(totals: list[float], max_points: float) -> ScoreDistribution:
    """Summary of ``totals``; bins one point wide up to 20 points, else a tenth of the
    maximum (the last bin includes the maximum)."""
    values = np.asarray(totals, dtype=float)
    top = max(max_points, float(values.max()) if values.size else 0.0, 1.0)
    width = 1.0 if top <= 20 else top / 10
    edges = np.arange(0.0, top + width * 0.5, width)
    if edges[-1] < top:
        edges = np.append(edges, top)
    counts, _ = np.histogram(values, bins=edges) if values.size else (
        np.zeros(len(edges) - 1, dtype=int), edges)
    bins = [(float(lo), float(hi), int(n)) for lo, hi, n in zip(edges[:-1], edges[1:], counts)]
    if not values.size:
        return ScoreDistribution(0, max_points, 0.0, 0.0, 0.0, 0.0, bins)
    return ScoreDistribution(int(values.size), max_points, float(values.mean()),
                             float(np.median(values)), float(values.min()), float(values.max()),
                             bins)


def _keys(assignment: str, folder: Path | None, questions: dict, notes: list[str]) -> dict:
    """Parsed instructor keys of the lesson's quick checks ({} with a note when unreadable)."""
    from mhalib.classroom.course_folder import locate
    from mhalib.quiz.keys import BadKeys, instructor_keys, parse_key

    try:
        raw = instructor_keys(assignment, folder or locate().keys)
    except (FileNotFoundError, BadKeys, OSError) as error:
        notes.append(f"{assignment}: quick-check keys not read ({error}); keys and known slips "
                     "are inferred from the answers")
        return {}
    parsed = {}
    for question_id, entry in raw.items():
        if question_id in questions:
            try:
                parsed[question_id] = parse_key(questions[question_id], entry)
            except (BadKeys, TypeError) as error:
                notes.append(f"{assignment}: key of {question_id} not used ({error})")
    return parsed


def _assignment_report(graded: GradedAssignment, options: ReportOptions, rubric: Rubric,
                       labels: dict[str, str], questions: dict,
                       notes: list[str]) -> AssignmentReport:
    base = options.lesson_url or default_base_url(options.source)
    sections = lesson_sections(graded.assignment, options.source, base)
    if not sections:
        notes.append(f"{graded.assignment}: no lesson sections to link to (no source notebook "
                     f"under {options.source}; see --source)")
    keys = _keys(graded.assignment, options.keys, questions, notes) if graded.quick_checks \
        else {}
    exercises = [summarise_exercise(graded, name, labels, rubric, sections.get(name))
                 for name in graded.exercises]
    checks = [summarise_quick_check(graded, qid, questions[qid], keys.get(qid),
                                    sections.get(qid))
              for qid in graded.quick_checks if qid in questions]
    max_points = max((w.max_total for w in graded.students), default=0.0)
    scores = score_distribution([w.total for w in graded.students], max_points)
    return AssignmentReport(graded.assignment, course.lesson(graded.assignment).title,
                            len(graded.students), scores, exercises, checks)


def build_report(options: ReportOptions) -> ClassReport:
    """Read the class and compute everything the report shows (no re-grading)."""
    chosen = check_assignments(options.assignments, Path(options.course))
    graded = read_class(Path(options.course), chosen, options.db_url, options.progress)
    return summarise_class(graded, options)


def summarise_class(graded: list[GradedAssignment], options: ReportOptions) -> ClassReport:
    """Every summary, statistic, the ranking and the grid of a class already read."""
    from mhalib.quiz import all_questions

    rubric = options.rubric if isinstance(options.rubric, Rubric) else load_rubric(
        options.rubric)
    rubric_name = options.rubric_name or (
        f"the rubric {options.rubric} over the course rubric"
        if isinstance(options.rubric, (str, Path)) else rubric.origin)
    students = sorted({w.student for g in graded for w in g.students})
    labels = pseudonyms(students, options.names)
    questions = all_questions()
    notes: list[str] = []
    reports = [_assignment_report(g, options, rubric, labels, questions, notes) for g in graded]
    ranked = reteach([e for r in reports for e in r.exercises],
                     [q for r in reports for q in r.quick_checks], options.top)
    return ClassReport(
        generated=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        course=str(Path(options.course).resolve()), names_shown=options.names,
        rubric=rubric_name, students=len(students), assignments=reports, reteach=ranked,
        grid_columns=grid_columns(graded), grid=build_grid(graded, labels), notes=notes)
