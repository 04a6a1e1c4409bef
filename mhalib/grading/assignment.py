"""What the grader knows about one assignment notebook, read from the instructor's source.

From ``solutions/<assignment>/<notebook>.ipynb`` (nbgrader source: solutions and hidden tests
included) we derive the release cells a learner started from (nbgrader's own ClearSolutions and
ClearHiddenTests), the grade cells with their points, and which exercise or quick check each
grade cell grades (contract: test cells of exercise ``F`` have grade ids starting ``test_F``;
quick checks have ids starting ``qc_``). The model is plain data, so it travels to workers.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace
from pathlib import Path

CODE_STUB = "# YOUR CODE HERE\nraise NotImplementedError()"


@dataclass
class GradeCell:
    """One nbgrader grade cell: ``kind`` is exercise, quick_check or manual."""

    grade_id: str
    points: float
    cell_type: str
    kind: str
    item: str | None  # the exercise or quick-check id it grades (None for manual)


@dataclass
class NotebookModel:
    assignment: str
    notebook: str  # file name, e.g. single_head_attention.ipynb
    release: dict  # release notebook JSON (nbformat 4): what learners were given
    source: dict  # source notebook JSON (solutions, hidden tests): never leaves the host
    exercises: list[str] = field(default_factory=list)
    questions: list[str] = field(default_factory=list)
    grade_cells: list[GradeCell] = field(default_factory=list)
    # sources of the cells run once per class (mhalib.grading.cached_cells)
    class_cache: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        """nbgrader's notebook id: the file name without ``.ipynb``."""
        return self.notebook[:-6] if self.notebook.endswith(".ipynb") else self.notebook

    def points_of(self, item: str) -> float:
        return sum(g.points for g in self.grade_cells if g.item == item)

    def for_worker(self) -> NotebookModel:
        """The model without the source notebook (workers need only the release)."""
        return replace(self, source={})


def nbgrader_meta(cell: dict) -> dict:
    meta = cell.get("metadata", {}).get("nbgrader", {}) if isinstance(cell, dict) else {}
    return meta if isinstance(meta, dict) else {}


def is_test_cell(cell: dict) -> bool:
    """An autograder test cell: graded, not an answer (its source is locked)."""
    meta = nbgrader_meta(cell)
    return bool(meta.get("grade")) and not meta.get("solution")


def is_answer_cell(cell: dict) -> bool:
    return bool(nbgrader_meta(cell).get("solution"))


def is_locked_cell(cell: dict) -> bool:
    meta = nbgrader_meta(cell)
    return not meta.get("solution") and (bool(meta.get("grade")) or bool(meta.get("locked")))


def known_questions() -> set[str]:
    """Every quick-check id in the course's question banks (one per lesson of the manifest)."""
    from mhalib.quiz import all_questions

    return set(all_questions())


def item_of(grade_id: str, exercises: list[str], questions: set[str]) -> tuple[str, str | None]:
    """(kind, item) graded by a grade cell with id ``grade_id`` (longest matching name wins)."""
    for prefix in ("test_", ""):
        if not grade_id.startswith(prefix):
            continue
        rest = grade_id[len(prefix):]
        if prefix:
            matches = [f for f in exercises if rest == f or rest.startswith(f + "_")]
            if matches:
                return "exercise", max(matches, key=len)
        matches = [q for q in questions if rest == q or rest.startswith(q + "_")]
        if matches:
            return "quick_check", max(matches, key=len)
    return "manual", None


def release_from_source(source: dict) -> dict:
    """The learner's version of a source notebook, made by nbgrader's own preprocessors."""
    import nbformat
    from nbgrader.preprocessors import ClearHiddenTests, ClearSolutions

    notebook = nbformat.from_dict(copy.deepcopy(source))
    ClearSolutions(code_stub={"python": CODE_STUB}, enforce_metadata=True).preprocess(notebook, {})
    ClearHiddenTests().preprocess(notebook, {})
    for cell in notebook.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    return nbformat.from_dict(notebook)


def load_notebook_model(assignment: str, path: Path) -> NotebookModel:
    """Read one source notebook and classify its grade cells."""
    import nbformat

    from mhalib.checks import exercises_of
    from mhalib.grading.cached_cells import cell_source, is_cacheable

    source = nbformat.reads(Path(path).read_text(encoding="utf-8"), as_version=4)
    exercises = exercises_of(assignment)
    questions = known_questions()
    release = release_from_source(source)
    model = NotebookModel(assignment, Path(path).name, release, source, list(exercises))
    used_questions = []
    for cell in source.get("cells", []):
        meta = nbgrader_meta(cell)
        if not meta.get("grade"):
            continue
        kind, item = item_of(str(meta.get("grade_id", "")), exercises, questions)
        if kind == "quick_check" and item not in used_questions:
            used_questions.append(item)
        if kind != "manual" and cell.get("cell_type") != "code":
            kind, item = "manual", None
        model.grade_cells.append(GradeCell(str(meta["grade_id"]), float(meta.get("points", 0)),
                                           cell.get("cell_type", "code"), kind, item))
    model.questions = used_questions
    model.class_cache = [cell_source(c) for c in release.get("cells", []) if is_cacheable(c)]
    return model


def load_assignment(assignment: str, source_root: Path) -> list[NotebookModel]:
    """Models of every notebook of ``assignment`` under ``source_root/<assignment>/``."""
    folder = Path(source_root) / assignment
    notebooks = sorted(folder.glob("*.ipynb")) if folder.is_dir() else []
    if not notebooks:
        raise ValueError(f"assignment={assignment!r}: no source notebook in {folder}")
    return [load_notebook_model(assignment, path) for path in notebooks]
