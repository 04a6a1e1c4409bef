"""A release notebook with answers filled in, as a learner would submit it.

The class run grades the release with the instructor's answers (:mod:`mhalib.grading.class_run`);
the demo class, the tests and the benchmarks build their submissions the same way:
:func:`submission` puts answers into the answer cells and records quick-check answers as the
form records them.
"""

from __future__ import annotations

import copy
import json

from mhalib.grading.assignment import NotebookModel, is_answer_cell, nbgrader_meta

_MARKERS = ("### BEGIN SOLUTION", "### END SOLUTION")


def strip_markers(source: str) -> str:
    """A source cell's text without nbgrader's solution markers (the instructor's answer)."""
    return "\n".join(line for line in source.split("\n") if line.strip() not in _MARKERS)


def answer_sources(model: NotebookModel) -> dict[str, str]:
    """grade_id -> the instructor's answer, for every code answer cell of the source."""
    return {nbgrader_meta(c)["grade_id"]: strip_markers(c["source"])
            for c in model.source["cells"]
            if is_answer_cell(c) and c.get("cell_type") == "code"}


def quick_check_answers(model: NotebookModel, keys: dict) -> dict:
    """question id -> the right answer, for every quick check of the notebook (``keys``: the
    instructor's quick-check keys of its assignment, :func:`mhalib.quiz.keys.instructor_keys`)."""
    return {qid: keys[qid]["answer"] for qid in model.questions}


def submission(model: NotebookModel, answers: dict[str, str] | None = None,
               after: dict[str, str] | None = None, drop: tuple[str, ...] = (),
               quick_checks: dict | None = None) -> dict:
    """The release notebook with ``answers`` put into answer cells (by grade id), quick-check
    answers recorded as the form records them (``quick_checks``: question id -> answer),
    ``after`` sources inserted as new cells after the named cells, and cells in ``drop``
    removed."""
    from mhalib.quiz.record import with_answers

    notebook = with_answers(dict(model.release), quick_checks or {})
    cells = []
    for cell in notebook["cells"]:
        grade_id = nbgrader_meta(cell).get("grade_id")
        if grade_id in drop:
            continue
        cell = copy.deepcopy(dict(cell))
        if answers and grade_id in answers:
            cell["source"] = answers[grade_id]
        cells.append(cell)
        if after and grade_id in after:
            cells.append({"cell_type": "code", "id": f"learner-{len(cells)}", "metadata": {},
                          "execution_count": None, "outputs": [], "source": after[grade_id]})
    notebook["cells"] = cells
    return notebook


def to_bytes(notebook: dict) -> bytes:
    """A notebook as the bytes of its file."""
    return (json.dumps(notebook, indent=1, ensure_ascii=False) + "\n").encode("utf-8")
