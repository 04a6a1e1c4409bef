"""The learner's kernel side of the quick checks: which mode, which keys, whose numbers.

The mode comes from the release: ``quick_checks.json`` beside the notebook (the kernel's working
folder) says ``practice`` (with the lesson's keys) or ``assessed`` (no keys). Without that file
the checks only record, as in assessed mode, except for an instructor running the master: a
kernel in ``<course>/solutions/<assignment>/`` gets practice feedback from the course's keys
(``<course>/grading/quick_checks``), and one in any folder named after its assignment from the
keys folder ``MHALIB_QUICK_CHECK_KEYS`` names (set for the instructor on a class hub). Answers
already recorded are taken from this kernel's memory, else from the last saved copy of the
notebook, so re-running a cell or restarting the kernel loses nothing.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from mhalib import course
from mhalib.quiz import keys as key_files
from mhalib.quiz import record, variant


class QuizSession:
    """State of the quick checks in one kernel."""

    def __init__(self, folder: Path | None = None):
        self.folder = Path(folder or Path.cwd())
        self.release = key_files.read_release_file(self.folder)
        self.answers: dict[str, object] = {}
        self._variant: str | None = None
        self._saved: dict | None = None
        self._instructor_keys: dict | None = None

    def key_data(self, question_id: str, assignment: str) -> dict | None:
        """The raw key of a question where this kernel may see it (practice only)."""
        if self.release is not None:
            if self.release["mode"] != "practice":
                return None
            keys = self.release.get("keys", {})
            return keys.get(question_id) if isinstance(keys, dict) else None
        folder = self._instructor_keys_folder(assignment)
        if folder is not None:
            if self._instructor_keys is None:
                try:
                    self._instructor_keys = key_files.instructor_keys(assignment, folder)
                except (OSError, key_files.BadKeys):
                    self._instructor_keys = {}
            return self._instructor_keys.get(question_id)
        return None

    def _instructor_keys_folder(self, assignment: str) -> Path | None:
        """The instructor's keys folder when this kernel runs the master of ``assignment``
        (see the module docstring), else None."""
        if self.folder.name != assignment or assignment not in course.assignments():
            return None
        configured = os.environ.get(key_files.KEYS_VARIABLE)
        if configured:
            folder = Path(configured)
        elif self.folder.parent.name == course.SOURCE_DIR:
            folder = self.folder.parent.parent / course.KEYS_DIR
        else:
            return None
        return folder if folder.is_dir() else None

    @property
    def variant(self) -> str:
        if self._variant is None:
            student = variant.known_student()
            if student is not None:
                self._variant = variant.for_student(student)
            else:
                self._variant = self._saved_seed() or variant.fresh_seed()
        return self._variant

    def saved_notebook(self) -> dict:
        """The last saved copy of this kernel's notebook ({} when it cannot be found)."""
        if self._saved is None:
            self._saved = {}
            name = os.environ.get("JPY_SESSION_NAME", "")
            for path in (Path(name), self.folder / Path(name).name) if name else ():
                try:
                    if path.is_file() and path.suffix == ".ipynb":
                        self._saved = json.loads(path.read_text(encoding="utf-8"))
                        break
                except (OSError, ValueError):
                    continue
        return self._saved

    def _saved_seed(self) -> str | None:
        for cell in self.saved_notebook().get("cells", []):
            found = record.recorded_in_cell(cell, record.cell_grade_id(cell))
            if found is not None and (found.variant or "").startswith("seed:"):
                return found.variant
        return None

    def previous_answer(self, question_id: str):
        if question_id in self.answers:
            return self.answers[question_id]
        for cell in self.saved_notebook().get("cells", []):
            if record.cell_grade_id(cell) == question_id:
                found = record.recorded_in_cell(cell, question_id)
                if found is not None and found.variant in (None, self.variant):
                    return found.answer
        return None


_SESSION: QuizSession | None = None


def current() -> QuizSession:
    """This kernel's session (made at the first quick check)."""
    global _SESSION
    if _SESSION is None or _SESSION.folder != Path.cwd():
        _SESSION = QuizSession()
    return _SESSION
