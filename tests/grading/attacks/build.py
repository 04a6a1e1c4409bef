"""Turn catalogue entries into a class of submissions in nbgrader's layout.

The starting point is an *assessed* release, as an instructor hands it out::

    mhalib release 06-gqa 07-flash 10-mla 11-serving --quick-checks assessed --to RELEASE

Each submission is that release notebook with the learner's answer cells (and any cells a
learner may add) changed: ``SUBMITTED/<student>/<assignment>/<notebook>.ipynb``. Answer cells a
submission does not name hold the instructor's answer (from ``solutions/``), so the rules can
look at the one exercise the entry is about. Quick-check answers are recorded in the quick
check's own cell exactly as the form records them (:func:`mhalib.quiz.record.with_answers`).
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

from tests.grading.attacks.spec import Submission

ROOT = Path(__file__).resolve().parents[3]


def make_release(assignments: list[str], target: Path) -> Path:
    """``mhalib release ASSIGNMENTS --quick-checks assessed --to TARGET`` (skipped when every
    notebook is there already)."""
    missing = [a for a in assignments if not list((target / a).glob("*.ipynb"))]
    if missing:
        command = [sys.executable, "-m", "mhalib.cli", "release", *missing, "--quick-checks",
                   "assessed", "--to", str(target)]
        subprocess.run(command, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    return target


def _grade_id(cell: dict) -> str | None:
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return meta.get("grade_id") if isinstance(meta, dict) else None


def _learner_cell(source: str, number: int) -> dict:
    return {"cell_type": "code", "id": f"learner-{number}", "metadata": {},
            "execution_count": None, "outputs": [], "source": source}


class Builder:
    """Builds submissions of the catalogue's lessons from one assessed release."""

    def __init__(self, release: Path, source: Path = ROOT / "solutions", keys: Path | None = None):
        self.release, self.source, self.keys = Path(release), Path(source), keys
        self._models: dict = {}

    def model(self, assignment: str):
        if assignment not in self._models:
            from mhalib.grading.assignment import load_assignment

            self._models[assignment] = load_assignment(assignment, self.source)[0]
        return self._models[assignment]

    def release_notebook(self, assignment: str) -> tuple[str, dict]:
        model = self.model(assignment)
        path = self.release / assignment / model.notebook
        notebook = json.loads(path.read_text(encoding="utf-8"))
        meta = notebook.get("metadata", {}).get("mhalib", {})
        if "assessed" not in json.dumps(meta) and "assessed" not in (
                self.release / assignment / "quick_checks.json").read_text(encoding="utf-8"):
            raise ValueError(f"{path} is not an assessed release")
        return model.notebook, notebook

    def right_answers(self, assignment: str) -> dict:
        """Question id -> the instructor's answer (what an honest learner who got it right
        records: an option index or the key's expression)."""
        from mhalib.quiz.keys import instructor_keys

        model = self.model(assignment)
        from mhalib.classroom.course_folder import locate

        keys = instructor_keys(assignment, self.keys or locate(ROOT).keys)
        return {q: keys[q]["answer"] for q in model.questions}

    def quick_answers(self, submission: Submission) -> dict:
        """What the submission records in its quick checks: ``"right"`` (the keys' answers),
        ``"right-rewritten"`` (the same, fill-ins written as another equal expression), or a
        dict whose ``"@right"`` values become the key's answer."""
        quick = submission.quick
        if not quick:
            return {}
        right = self.right_answers(submission.assignment)
        if quick == "right":
            return right
        if quick == "right-rewritten":
            return {q: f"1 * ({a}) + 0" if isinstance(a, str) else a for q, a in right.items()}
        return {q: right[q] if a == "@right" else a for q, a in quick.items()}

    def notebook(self, submission: Submission) -> tuple[str, dict]:
        from mhalib.grading.answered_notebook import answer_sources
        from mhalib.quiz.record import with_answers

        name, notebook = self.release_notebook(submission.assignment)
        model = self.model(submission.assignment)
        answers = dict(answer_sources(model)) if submission.filler else {}
        answers.update(submission.answers)
        quick = self.quick_answers(submission)
        if quick:
            notebook = with_answers(notebook, quick, submission.variant)
        cells, number = [], 0
        after = dict(submission.after)
        first_code = next(i for i, c in enumerate(notebook["cells"])
                          if c.get("cell_type") == "code")
        for index, cell in enumerate(notebook["cells"]):
            cell = copy.deepcopy(cell)
            grade_id = _grade_id(cell)
            if (not submission.demos and grade_id is None and index != first_code
                    and cell.get("cell_type") == "code"):
                continue  # an ungraded demo cell: a learner may delete it, and it is slow
            if grade_id in answers and cell.get("cell_type") == "code":
                cell["source"] = answers[grade_id]
            cells.append(cell)
            key = "imports" if index == first_code else grade_id
            if key in after:
                number += 1
                cells.append(_learner_cell(after.pop(key), number))
        if "end" in after:
            number += 1
            cells.append(_learner_cell(after.pop("end"), number))
        if after:
            raise ValueError(f"{submission.name}: no cell {sorted(after)} in "
                             f"{submission.assignment}")
        notebook["cells"] = cells
        if submission.mutate is not None:
            submission.mutate(notebook)
        return name, notebook

    def write_class(self, submissions: list[Submission], submitted: Path) -> dict[str, Path]:
        """Write every submission; returns student -> notebook path."""
        written: dict[str, bytes] = {}
        paths: dict[str, Path] = {}
        ordered = sorted(submissions, key=lambda s: s.copy_of is not None)
        for submission in ordered:
            if submission.copy_of:
                data = written[submission.copy_of]
                name = self.model(submission.assignment).notebook
            else:
                name, notebook = self.notebook(submission)
                data = (json.dumps(notebook, indent=1, ensure_ascii=False) + "\n").encode()
            written[submission.name] = data
            path = submitted / submission.name / submission.assignment / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            paths[submission.name] = path
        return paths
