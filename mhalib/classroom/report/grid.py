"""The per-student x per-exercise grid, and the names students are shown under.

Names are hidden unless the instructor asks for them (``--names``): each student gets a
pseudonym ``S001``, ``S002``... numbered in the order of a hash of their id, so the numbering
says nothing about the roster's (alphabetical) order but the same class gets the same labels
every time. Rows are sorted by total points over the report's assignments, best first.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from mhalib.classroom.report.outcomes import is_flagged, named_mistake, outcome
from mhalib.classroom.report.reading import GradedAssignment


def pseudonyms(students: list[str], names: bool = False) -> dict[str, str]:
    """student id -> what the report shows (the id itself when ``names``)."""
    unique = sorted(set(students))
    if names:
        return {student: student for student in unique}
    ranked = sorted(unique, key=lambda s: (hashlib.sha256(s.encode()).hexdigest(), s))
    width = max(3, len(str(len(ranked))))
    return {student: f"S{index:0{width}d}" for index, student in enumerate(ranked, start=1)}


@dataclass
class GridCell:
    outcome: str
    mistake: str | None
    points: float
    max_points: float
    flagged: bool


@dataclass
class GridRow:
    """One student: a cell per (assignment, exercise) column (None: no verdict), and
    ``totals``: assignment -> (points, max points) from the gradebook."""

    label: str
    cells: list[GridCell | None]
    totals: dict[str, tuple[float, float]] = field(default_factory=dict)

    @property
    def points(self) -> float:
        return sum(points for points, _ in self.totals.values())


def grid_columns(graded: list[GradedAssignment]) -> list[tuple[str, str]]:
    return [(g.assignment, exercise) for g in graded for exercise in g.exercises]


def build_grid(graded: list[GradedAssignment], labels: dict[str, str]) -> list[GridRow]:
    """Every student of any of the assignments, best total first."""
    columns = grid_columns(graded)
    rows: dict[str, GridRow] = {}
    for label in labels.values():
        rows[label] = GridRow(label, [None] * len(columns))
    position = {column: index for index, column in enumerate(columns)}
    for assignment in graded:
        for work in assignment.students:
            row = rows[labels[work.student]]
            row.totals[assignment.assignment] = (work.total, work.max_total)
            for exercise in assignment.exercises:
                verdict = work.verdicts.get(exercise)
                if verdict is not None:
                    row.cells[position[(assignment.assignment, exercise)]] = GridCell(
                        outcome(verdict), named_mistake(verdict), verdict.points,
                        verdict.max_points, is_flagged(verdict, work.issue_flags))
    return sorted(rows.values(), key=lambda row: (-row.points, row.label))
