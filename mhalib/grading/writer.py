"""Where a grading run's products go, and the single writer that puts them there.

Course folder layout (nbgrader's, so the formgrader finds everything)::

    <course>/gradebook.db                                   nbgrader gradebook
    <course>/autograded/<student>/<assignment>/<nb>.ipynb   graded notebooks
    <course>/feedback/<student>/<assignment>/<nb>.html      learner feedback
    <course>/mhalib-results/<assignment>/<student>/<nb>.json  verdicts, issues, seeds
    <course>/exports/<assignment>.csv, course.csv           exports
    <course>/backups/gradebook-<time>.db                    copy taken before each run
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from mhalib.grading.assignment import NotebookModel
from mhalib.grading.feedback import write_feedback
from mhalib.grading.gradebook import GradebookWriter, final_scores
from mhalib.grading.records import GradingResult


@dataclass(frozen=True)
class CourseLayout:
    root: Path
    db_url: str

    @classmethod
    def at(cls, root: Path, db_url: str | None = None) -> CourseLayout:
        root = Path(root).resolve()
        return cls(root, db_url or f"sqlite:///{root / 'gradebook.db'}")

    def autograded(self, student: str, assignment: str, notebook: str) -> Path:
        return self.root / "autograded" / student / assignment / notebook

    def feedback(self, student: str, assignment: str, notebook: str) -> Path:
        return self.root / "feedback" / student / assignment / (Path(notebook).stem + ".html")

    def result(self, student: str, assignment: str, notebook: str) -> Path:
        return self.root / "mhalib-results" / assignment / student / (Path(notebook).stem
                                                                      + ".json")

    @property
    def results(self) -> Path:
        return self.root / "mhalib-results"

    @property
    def exports(self) -> Path:
        return self.root / "exports"

    @property
    def backups(self) -> Path:
        return self.root / "backups"


class ResultWriter:
    """Receives results as workers finish them; the only process that writes."""

    def __init__(self, layout: CourseLayout, models: dict[str, NotebookModel]):
        self.layout = layout
        self.models = models
        self.gradebook = GradebookWriter(layout.db_url)
        self.written: list[GradingResult] = []

    def write(self, result: GradingResult) -> None:
        """Graded notebook, gradebook rows and result file of one notebook (the graded
        notebook is dropped from ``result`` afterwards: it can be large)."""
        model = self.models[result.notebook]
        student, assignment = result.student, result.assignment
        target = self.layout.autograded(student, assignment, model.notebook)
        target.parent.mkdir(parents=True, exist_ok=True)
        if result.graded_notebook is not None:
            target.write_text(json.dumps(result.graded_notebook, indent=1, ensure_ascii=False)
                              + "\n", encoding="utf-8")
        elif target.exists():
            target.unlink()  # an unreadable resubmission must not keep an old graded copy
        self.gradebook.write(result, model)
        result.graded_notebook = None
        stored = self.layout.result(student, assignment, model.notebook)
        stored.parent.mkdir(parents=True, exist_ok=True)
        stored.write_text(json.dumps(result.to_json_dict(), indent=1, ensure_ascii=False)
                          + "\n", encoding="utf-8")
        self.written.append(result)

    def write_feedback(self) -> list[Path]:
        """Feedback pages of every result written (after all grades are in the gradebook)."""
        if not self.written:
            return []
        final = final_scores(self.layout.db_url, self.written[0].assignment)
        pages = []
        for result in self.written:
            model = self.models[result.notebook]
            scores = final.get((result.student, model.name), {})
            path = self.layout.feedback(result.student, result.assignment, model.notebook)
            pages.append(write_feedback(path, result, model, scores))
        return pages

    def close(self) -> None:
        self.gradebook.close()
