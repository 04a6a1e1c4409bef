"""The one writer to nbgrader's gradebook: backups, assignment rows, automatic scores.

Only the grading process writes here (workers and sandboxes never see the file). Writes go
through nbgrader's own ``Gradebook`` API, so the formgrader and ``nbgrader export`` read the
result as if ``nbgrader autograde`` had produced it. Only ``auto_score``, ``auto_comment`` and
``needs_manual_grade`` are written: a score or comment entered by hand is never changed.
"""

from __future__ import annotations

import copy
import os
import sqlite3
import sys
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

from mhalib.grading.assignment import NotebookModel, nbgrader_meta
from mhalib.grading.flags import needs_review
from mhalib.grading.records import GradingResult


def open_gradebook(db_url: str):
    """nbgrader's ``Gradebook``.

    Creating a new one runs ``alembic`` from PATH, so while nbgrader opens it this Python's
    scripts folder (the virtual environment's bin/, which need not be activated) comes first
    on PATH; afterwards PATH is what it was.
    """
    from nbgrader.api import Gradebook

    with _scripts_first_on_path():
        return Gradebook(db_url)


@contextmanager
def _scripts_first_on_path():
    """PATH with this interpreter's folder first, for the duration of the ``with`` block."""
    tools = os.path.dirname(sys.executable)
    before = os.environ.get("PATH")
    if tools in (before or "").split(os.pathsep):
        yield
        return
    os.environ["PATH"] = os.pathsep.join([tools, before or ""])
    try:
        yield
    finally:
        if before is None:
            del os.environ["PATH"]
        else:
            os.environ["PATH"] = before


def db_path(db_url: str) -> Path | None:
    return Path(db_url[len("sqlite:///"):]) if db_url.startswith("sqlite:///") else None


def backup(db_url: str, backups: Path) -> Path | None:
    """Copy the gradebook (consistently, with SQLite's backup API) before a run."""
    path = db_path(db_url)
    if path is None or not path.is_file():
        return None
    backups.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
    target = backups / f"gradebook-{stamp}.db"
    with sqlite3.connect(path) as source, sqlite3.connect(target) as copy_db:
        source.backup(copy_db)
    return target


def integrity_check(db_url: str) -> str:
    """SQLite's ``PRAGMA integrity_check`` answer ("ok" when the file is sound)."""
    path = db_path(db_url)
    with sqlite3.connect(path) as connection:
        return str(connection.execute("PRAGMA integrity_check").fetchone()[0])


def _gradebook_notebook(model: NotebookModel):
    """The source notebook as nbgrader's generate_assignment stores it (checksums included)."""
    import nbformat
    from nbgrader.preprocessors import ClearOutput, ClearSolutions, ComputeChecksums, LockCells

    from mhalib.grading.assignment import CODE_STUB

    notebook = nbformat.from_dict(copy.deepcopy(model.source))
    for step in (LockCells(), ClearSolutions(code_stub={"python": CODE_STUB}), ClearOutput(),
                 ComputeChecksums()):
        notebook, _ = step.preprocess(notebook, {})
    return notebook


def ensure_assignment(db_url: str, model: NotebookModel) -> None:
    """Create the assignment and notebook rows from the source if the gradebook lacks them."""
    from nbgrader.api import MissingEntry
    from nbgrader.preprocessors import SaveCells

    with open_gradebook(db_url) as gradebook:
        gradebook.update_or_create_assignment(model.assignment)
        try:
            existing = gradebook.find_notebook(model.name, model.assignment)
        except MissingEntry:
            existing = None
        if existing is not None:
            have = sorted(cell.name for cell in existing.grade_cells)
            want = sorted(cell.grade_id for cell in model.grade_cells)
            if have != want:
                raise ValueError(
                    f"the gradebook's notebook {model.assignment}/{model.name} has grade cells "
                    f"{have}, the source has {want}; regenerate the assignment first")
            return
    resources = {"nbgrader": {"notebook": model.name, "assignment": model.assignment,
                              "db_url": db_url}}
    SaveCells().preprocess(_gradebook_notebook(model), resources)


class GradebookWriter:
    """Writes results one at a time (the single writer of a grading run)."""

    def __init__(self, db_url: str):
        self.gradebook = open_gradebook(db_url)

    def write(self, result: GradingResult, model: NotebookModel) -> None:
        import warnings

        from sqlalchemy.exc import SAWarning

        with warnings.catch_warnings():  # nbgrader's add_submission trips SQLAlchemy warnings
            warnings.simplefilter("ignore", SAWarning)
            self._write(result, model)

    def _write(self, result: GradingResult, model: NotebookModel) -> None:
        gradebook = self.gradebook
        student = result.student
        gradebook.update_or_create_student(student)
        stamp = result.timestamp
        try:
            submission = gradebook.update_or_create_submission(
                model.assignment, student, **({"timestamp": stamp} if stamp else {}))
        except Exception:  # an unparsable timestamp must not lose the grades
            submission = gradebook.update_or_create_submission(model.assignment, student)
        notebook_review = needs_review(result.issue_flags())
        grades = {g.name: g for nb in submission.notebooks if nb.name == model.name
                  for g in nb.grades}
        for cell in model.grade_cells:
            grade = grades.get(cell.grade_id)
            if grade is None:
                continue
            grade.auto_score = result.grade_cells.get(cell.grade_id)  # exact, not rounded
            verdict = result.verdicts.get(cell.item) if cell.item else None
            review = notebook_review or (verdict is not None and needs_review(verdict.flags))
            grade.needs_manual_grade = bool(grade.manual_score is not None
                                            or grade.auto_score is None or review)
        comments = {c.name: c for nb in submission.notebooks if nb.name == model.name
                    for c in nb.comments}
        self._comment(comments, result, model)
        gradebook.db.commit()

    @staticmethod
    def _comment(comments: dict, result: GradingResult, model: NotebookModel) -> None:
        notes = "; ".join(f"[{i.flag}] {i.message}" for i in result.issues)
        graded = result.graded_notebook or {"cells": []}
        sources = {nbgrader_meta(c).get("grade_id"): c.get("source") for c in graded["cells"]}
        release = {nbgrader_meta(c).get("grade_id"): c.get("source")
                   for c in model.release.get("cells", [])}
        for name, comment in comments.items():
            verdict = result.verdicts.get(name)
            if verdict is not None:
                text = verdict.explanation()
                text += f" (flags: {', '.join(verdict.flags)})" if verdict.flags else ""
                comment.auto_comment = (text + (f" Notebook: {notes}" if notes else ""))[:4000]
            elif sources.get(name) is None or sources.get(name) == release.get(name):
                comment.auto_comment = "No response."
            else:
                comment.auto_comment = None

    def close(self) -> None:
        self.gradebook.close()


def final_scores(db_url: str, assignment: str) -> dict[tuple[str, str], dict[str, dict]]:
    """{(student, notebook id): {grade cell: {score, max_score, manual}}} as nbgrader scores it
    (a hand-entered score replaces the automatic one)."""
    from nbgrader.api import MissingEntry

    out: dict[tuple[str, str], dict[str, dict]] = {}
    with open_gradebook(db_url) as gradebook:
        try:
            assignment_row = gradebook.find_assignment(assignment)
        except MissingEntry:
            return out
        for submission in assignment_row.submissions:
            for notebook in submission.notebooks:
                cells = out.setdefault((submission.student.id, notebook.name), {})
                for grade in notebook.grades:
                    chosen = grade.manual_score if grade.manual_score is not None \
                        else grade.auto_score
                    score = None if chosen is None else chosen + (grade.extra_credit or 0.0)
                    cells[grade.name] = {"score": score, "max_score": grade.max_score,
                                         "manual": grade.manual_score is not None}
    return out
