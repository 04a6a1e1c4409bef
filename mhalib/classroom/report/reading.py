"""Reading a graded class: the grader's stored results and the gradebook's final scores.

Nothing is graded again. Per assignment, every ``<course>/mhalib-results/<assignment>/
<student>/<notebook>.json`` (what :class:`~mhalib.grading.records.GradingResult` wrote: each
item's verdict, flags, points and the learner's response) is read once, and the gradebook gives
each student's final scores (hand grades included) for totals and rest scores.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

from mhalib import course
from mhalib.classroom.report.scores import CellScore, read_scores
from mhalib.grading.assignment import item_of
from mhalib.grading.records import GradingResult, ItemVerdict
from mhalib.grading.writer import CourseLayout


@dataclass
class StudentWork:
    """One student's graded work on one assignment (all its notebooks).

    ``verdicts``: item -> the grader's verdict; ``issue_flags``: notebook-level flags;
    ``item_scores``: item -> final points in the gradebook; ``total``/``max_total``: the
    assignment's final points (every grade cell, hand-graded ones included).
    """

    student: str
    assignment: str
    verdicts: dict[str, ItemVerdict] = field(default_factory=dict)
    issue_flags: list[str] = field(default_factory=list)
    item_scores: dict[str, float] = field(default_factory=dict)
    total: float = 0.0
    max_total: float = 0.0
    notebooks: list[str] = field(default_factory=list)

    def rest_score(self, item: str) -> float:
        """The total without what ``item`` earned (what its discrimination is measured on)."""
        return self.total - self.item_scores.get(item, 0.0)


@dataclass
class GradedAssignment:
    """Every student's work on one assignment, and its items in notebook order."""

    assignment: str
    students: list[StudentWork]
    exercises: list[str]
    quick_checks: list[str]


def graded_assignments(course_root: Path) -> list[str]:
    """Course assignments with stored results under ``course_root``, in course order."""
    results = CourseLayout.at(course_root).results
    present = {p.name for p in results.iterdir() if p.is_dir()} if results.is_dir() else set()
    return [a for a in course.assignments() if a in present]


def check_assignments(wanted: list[str] | None, course_root: Path) -> list[str]:
    """``wanted`` (or every graded assignment when None/empty), each known to have results;
    an unknown one raises ValueError naming the assignments that have results."""
    graded = graded_assignments(course_root)
    if not wanted:
        if not graded:
            raise ValueError(f"course={course_root}: no graded assignment (nothing under "
                             f"{CourseLayout.at(course_root).results}); run `mhalib grade` "
                             "first")
        return graded
    chosen = []
    for assignment in wanted:
        if assignment not in graded:
            raise ValueError(f"assignment={assignment!r} has no graded results in "
                             f"{course_root}; graded assignments: "
                             f"{', '.join(graded) or '(none)'}")
        if assignment not in chosen:
            chosen.append(assignment)
    return chosen


def _progress(total: int, enabled: bool):
    from tqdm import tqdm

    return tqdm(total=total, unit="result", desc="reading", disable=not enabled,
                file=sys.stderr, dynamic_ncols=True)


def _read_result(path: Path) -> GradingResult | None:
    try:
        return GradingResult.from_json_dict(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None  # not a result (a stray file): skipped, as the exports skip it


def _item_scores(cells: dict[tuple[str, str], CellScore], item_of_cell: dict[str, str | None]
                 ) -> tuple[dict[str, float], float, float]:
    """Final points per item, the total and its maximum, from a student's grade cells."""
    per_item: dict[str, float] = {}
    total = max_total = 0.0
    for (_, cell), value in cells.items():
        points = value.score or 0.0
        total += points
        max_total += value.max_score
        item = item_of_cell.get(cell)
        if item is not None:
            per_item[item] = per_item.get(item, 0.0) + points
    return per_item, total, max_total


def result_files(course_root: Path, assignment: str) -> list[Path]:
    """The stored result files of ``assignment`` (``<results>/<assignment>/<student>/*.json``).
    """
    return sorted((CourseLayout.at(course_root).results / assignment).glob("*/*.json"))


def read_assignment(assignment: str, files: list[Path], scores: dict,
                    bar=None) -> GradedAssignment:
    """Every result in ``files`` of ``assignment`` joined with its gradebook ``scores``."""
    exercises = list(course.lesson(assignment).exercise_names)
    work: dict[str, StudentWork] = {}
    questions: list[str] = []
    for path in files:
        result = _read_result(path)
        if bar is not None:
            bar.update(1)
        if result is None or result.assignment != assignment:
            continue
        student = work.setdefault(result.student, StudentWork(result.student, assignment))
        student.notebooks.append(result.notebook)
        student.issue_flags += [f for f in result.issue_flags() if f not in student.issue_flags]
        student.verdicts.update(result.verdicts)
        questions += [v.item for v in result.verdicts.values()
                      if v.kind == "quick_check" and v.item not in questions]
    item_of_cell: dict[str, str | None] = {}
    for student in work.values():
        cells = scores.get((assignment, student.student))
        if cells:
            for _, cell in cells:
                if cell not in item_of_cell:
                    item_of_cell[cell] = item_of(cell, exercises, set(questions))[1]
            student.item_scores, student.total, student.max_total = _item_scores(
                cells, item_of_cell)
        else:  # not in the gradebook (yet): the grader's own points
            student.item_scores = {k: v.points for k, v in student.verdicts.items()}
            student.total = sum(student.item_scores.values())
            student.max_total = sum(v.max_points for v in student.verdicts.values())
    present = [e for e in exercises if any(e in s.verdicts for s in work.values())]
    return GradedAssignment(assignment, sorted(work.values(), key=lambda s: s.student),
                            present, questions)


def read_class(course_root: Path, assignments: list[str], db_url: str | None = None,
               progress: bool = False) -> list[GradedAssignment]:
    """The graded work of ``assignments`` (checked by :func:`check_assignments`)."""
    layout = CourseLayout.at(course_root, db_url)
    scores = read_scores(layout.db_url, assignments)
    files = {a: result_files(layout.root, a) for a in assignments}
    bar = _progress(sum(map(len, files.values())), progress)
    try:
        return [read_assignment(a, files[a], scores, bar) for a in assignments]
    finally:
        bar.close()
