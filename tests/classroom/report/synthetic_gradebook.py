"""Writing many students into nbgrader's gradebook quickly, exactly as the grader would.

The grader's writer (:class:`mhalib.grading.gradebook.GradebookWriter`) goes through nbgrader's
ORM and commits three times per notebook: about 0.1 s each, 10 minutes for 500 students x 11
lessons. Here the same writer's own logic decides every value (its ``_write`` runs against a
stand-in for nbgrader's ``Gradebook`` that only records what it is given: automatic score,
needs-manual-grade and comment of each cell), and the rows nbgrader's ``add_submission`` would
create (student, submitted assignment and notebook, a grade per grade cell, a comment per
solution cell) are inserted in one SQLite transaction. The assignment rows come from the real
:func:`~mhalib.grading.gradebook.ensure_assignment`. ``test_synthetic_class.py`` checks that a
class written both ways gives the same gradebook.
"""

from __future__ import annotations

import sqlite3
import uuid
from contextlib import closing
from types import SimpleNamespace

from mhalib.grading.assignment import NotebookModel
from mhalib.grading.gradebook import GradebookWriter, db_path
from mhalib.grading.records import GradingResult

_CELLS = """
SELECT n.id, n.name, bc.id, bc.name, bc.type FROM base_cell AS bc
JOIN notebook AS n ON bc.notebook_id = n.id JOIN assignment AS a ON n.assignment_id = a.id
WHERE a.name = ?
"""


class _RecordingGradebook:
    """Stands in for nbgrader's ``Gradebook`` in ``GradebookWriter._write``: hands out fresh
    grade and comment objects shaped like nbgrader's and keeps them."""

    def __init__(self, cells: dict[str, list[tuple[str, str, str]]]):
        self.cells = cells  # notebook name -> [(cell id, cell name, type)]
        self.submission = None
        self.db = SimpleNamespace(commit=lambda: None)

    def update_or_create_student(self, student: str) -> None:
        return None

    def update_or_create_submission(self, assignment: str, student: str, **kwargs):
        notebooks = []
        for name, cells in self.cells.items():
            grades = [SimpleNamespace(name=cell_name, cell_id=cell_id, auto_score=None,
                                      manual_score=None, needs_manual_grade=False)
                      for cell_id, cell_name, kind in cells if kind in ("GradeCell", "TaskCell")]
            comments = [SimpleNamespace(name=cell_name, cell_id=cell_id, auto_comment=None)
                        for cell_id, cell_name, kind in cells
                        if kind in ("SolutionCell", "TaskCell")]
            notebooks.append(SimpleNamespace(name=name, grades=grades, comments=comments))
        self.submission = SimpleNamespace(notebooks=notebooks, timestamp=kwargs.get("timestamp"))
        return self.submission


def write_gradebook(db_url: str, assignment: str, model: NotebookModel,
                    results: list[GradingResult]) -> None:
    """Add every result of ``assignment`` (one notebook each) to the gradebook at ``db_url``
    (sqlite; its assignment rows already made by ``ensure_assignment``)."""
    path = db_path(db_url)
    with closing(sqlite3.connect(path)) as connection:
        cells: dict[str, list[tuple[str, str, str]]] = {}
        notebook_ids: dict[str, str] = {}
        assignment_id = connection.execute("SELECT id FROM assignment WHERE name = ?",
                                           (assignment,)).fetchone()[0]
        for notebook_id, notebook, cell_id, name, kind in connection.execute(_CELLS,
                                                                             (assignment,)):
            notebook_ids[notebook] = notebook_id
            cells.setdefault(notebook, []).append((cell_id, name, kind))
        rows = {"student": [], "submitted_assignment": [], "submitted_notebook": [],
                "grade": [], "comment": []}
        for result in results:
            recorder = _RecordingGradebook(cells)
            writer = SimpleNamespace(gradebook=recorder, _comment=GradebookWriter._comment)
            GradebookWriter._write(writer, result, model)  # the grader's own decisions
            submission_id = uuid.uuid4().hex
            rows["student"].append((result.student,))
            rows["submitted_assignment"].append((submission_id, assignment_id, result.student))
            for notebook in recorder.submission.notebooks:
                notebook_row = uuid.uuid4().hex
                rows["submitted_notebook"].append((notebook_row, submission_id,
                                                   notebook_ids[notebook.name]))
                rows["grade"] += [(uuid.uuid4().hex, notebook_row, g.cell_id, g.auto_score,
                                   bool(g.needs_manual_grade)) for g in notebook.grades]
                rows["comment"] += [(uuid.uuid4().hex, notebook_row, c.cell_id, c.auto_comment)
                                    for c in notebook.comments]
        with connection:
            connection.executemany("INSERT OR IGNORE INTO student (id) VALUES (?)",
                                   rows["student"])
            connection.executemany(
                "INSERT INTO submitted_assignment (id, assignment_id, student_id) "
                "VALUES (?, ?, ?)", rows["submitted_assignment"])
            connection.executemany(
                "INSERT INTO submitted_notebook (id, assignment_id, notebook_id, flagged) "
                "VALUES (?, ?, ?, 0)", rows["submitted_notebook"])
            connection.executemany(
                "INSERT INTO grade (id, notebook_id, cell_id, auto_score, needs_manual_grade) "
                "VALUES (?, ?, ?, ?, ?)", rows["grade"])
            connection.executemany(
                "INSERT INTO comment (id, notebook_id, cell_id, auto_comment) "
                "VALUES (?, ?, ?, ?)", rows["comment"])
