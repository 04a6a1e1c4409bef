"""The recorded answer of a quick check: one output of its cell, saved with the notebook.

The form writes the learner's answer as a display (mime type :data:`MIME`) below itself and
updates it in place at every Check or Record, so the saved notebook holds the last answer, its
variant and nothing else: no key. Graders read it from the submitted file, outside the learner's
kernel; :func:`with_answers` writes records into a notebook (tests, demo class).
"""

from __future__ import annotations

import copy
import html
from dataclasses import dataclass

from mhalib.quiz.variant import is_variant

MIME = "application/vnd.mhalib.quick-check+json"
MAX_ANSWER_CHARS = 500


@dataclass(frozen=True)
class Recorded:
    question: str
    answer: str | int | None
    variant: str | None


def bundle(question_id: str, answer, variant: str | None, shown: str = "") -> dict:
    """The display data of a record: the JSON the graders read, and what the learner sees."""
    data = {"question": question_id, "answer": answer, "variant": variant, "version": 1}
    if answer is None:
        text = "No answer recorded yet."
    else:
        text = f"Recorded answer: {shown or answer} (saved with the notebook when you save it)."
    return {MIME: data, "text/plain": text,
            "text/html": f'<div class="mhalib-quiz-record">{html.escape(text)}</div>'}


def parse(data) -> Recorded | None:
    """A record from its JSON (None when it is not a well-formed record)."""
    if not isinstance(data, dict) or not isinstance(data.get("question"), str):
        return None
    answer = data.get("answer")
    if isinstance(answer, bool) or not (answer is None or isinstance(answer, (str, int))):
        return None
    if isinstance(answer, str):
        answer = answer[:MAX_ANSWER_CHARS]
    variant = data.get("variant")
    if variant is not None and not is_variant(variant):
        variant = None
    return Recorded(data["question"][:100], answer, variant)


def cell_grade_id(cell: dict) -> str:
    meta = cell.get("metadata", {}) if isinstance(cell, dict) else {}
    nbgrader = meta.get("nbgrader", {}) if isinstance(meta, dict) else {}
    return str(nbgrader.get("grade_id", "")) if isinstance(nbgrader, dict) else ""


def recorded_in_cell(cell: dict, question_id: str) -> Recorded | None:
    """The last record of ``question_id`` among the outputs of ``cell``."""
    found = None
    outputs = cell.get("outputs", []) if isinstance(cell, dict) else []
    for output in outputs if isinstance(outputs, list) else []:
        data = output.get("data", {}) if isinstance(output, dict) else {}
        record = parse(data.get(MIME)) if isinstance(data, dict) else None
        if record is not None and record.question == question_id:
            found = record
    return found


def recorded_answers(notebook: dict, question_ids) -> dict[str, Recorded]:
    """The record of each quick check in its own cell (grade_id == question id) of a notebook
    given as JSON; a record anywhere else does not count."""
    wanted = set(question_ids)
    found: dict[str, Recorded] = {}
    cells = notebook.get("cells", []) if isinstance(notebook, dict) else []
    for cell in cells if isinstance(cells, list) else []:
        grade_id = cell_grade_id(cell)
        if grade_id in wanted:
            record = recorded_in_cell(cell, grade_id)
            if record is not None:
                found[grade_id] = record
    return found


def with_answers(notebook: dict, answers: dict, variant: str | None = None) -> dict:
    """A copy of ``notebook`` (JSON) whose quick-check cells record ``answers``
    ({question id: answer}), as the form would have after Check and a save."""
    notebook = copy.deepcopy(notebook)
    for cell in notebook.get("cells", []):
        grade_id = cell_grade_id(cell)
        if grade_id in answers:
            data = bundle(grade_id, answers[grade_id], variant)
            cell["outputs"] = [{"output_type": "display_data", "data": data, "metadata": {}}]
    return notebook
