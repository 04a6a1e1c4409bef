"""The graded notebook nbgrader's formgrader shows: merged cells, outputs, the grader's verdicts.

Test cells hold the release version (no hidden tests); the first test cell of each exercise or
quick check gets one more output with the verdict, so an instructor reading the notebook sees the
diagnosis where nbgrader would have shown a failing assert. A quick check's cell shows the answer
recorded in the submission (what was scored), not what its form printed in the grader's run.
"""

from __future__ import annotations

import copy

from mhalib.grading.assignment import NotebookModel, nbgrader_meta
from mhalib.grading.credit import format_points
from mhalib.grading.records import Issue, ItemVerdict


def _points(verdict: ItemVerdict) -> str:
    return f"{format_points(verdict.points)}/{format_points(verdict.max_points)}"


def verdict_output(verdict: ItemVerdict) -> dict:
    """The verdict of one item as a notebook output (an error output when it failed)."""
    head = f"mhalib grader: {verdict.item}: {_points(verdict)} points"
    if verdict.passed:
        return {"output_type": "stream", "name": "stdout",
                "text": f"{head}. {verdict.diagnosis}\n"}
    lines = [head, verdict.diagnosis, *([verdict.credit] if verdict.credit else []),
             *verdict.details[:10]]
    if verdict.flags:
        lines.append("flags: " + ", ".join(verdict.flags))
    return {"output_type": "error", "ename": "GradingFailed", "evalue": verdict.diagnosis,
            "traceback": lines}


def summary_cell(issues: list[Issue], verdicts: dict[str, ItemVerdict]) -> dict:
    lines = ["**Graded by mhalib** (scores were decided outside this notebook).", ""]
    for verdict in verdicts.values():
        mark = "passed" if verdict.passed else "FAILED"
        lines.append(f"- `{verdict.item}`: {_points(verdict)} ({mark})")
    if issues:
        lines += ["", "Issues found:"]
        lines += [f"- **{issue.flag}**: {issue.message}" for issue in issues]
    return {"cell_type": "markdown", "id": "mhalib-grading-summary", "metadata": {},
            "source": "\n".join(lines)}


def build_graded_notebook(model: NotebookModel, cells: list[dict], outputs: dict[int, list],
                          counts: dict[int, int], verdicts: dict[str, ItemVerdict],
                          issues: list[Issue], answers: dict | None = None) -> dict:
    """nbformat-4 JSON of the graded notebook (``answers``: the recorded quick-check answers)."""
    from mhalib.quiz.record import bundle

    item_of = {g.grade_id: g.item for g in model.grade_cells if g.item}
    questions = set(model.questions)
    annotated: set[str] = set()
    out_cells = [summary_cell(issues, verdicts)]
    for index, cell in enumerate(cells):
        new = {"cell_type": cell["cell_type"], "id": f"graded-{index:04d}",
               "metadata": copy.deepcopy(cell.get("metadata", {})), "source": cell["source"]}
        if cell["cell_type"] == "code":
            new["outputs"] = list(outputs.get(index, []))
            new["execution_count"] = counts.get(index)
            item = item_of.get(nbgrader_meta(cell).get("grade_id"))
            if cell.get("origin") == "release" and item in questions:
                found = (answers or {}).get(item)
                new["outputs"] = [{"output_type": "display_data", "metadata": {}, "data": bundle(
                    item, found.answer if found else None, found.variant if found else None)}]
            if cell.get("origin") == "release" and item in verdicts and item not in annotated:
                annotated.add(item)
                new["outputs"].append(verdict_output(verdicts[item]))
        out_cells.append(new)
    metadata = copy.deepcopy(model.release.get("metadata", {}))
    return {"cells": out_cells, "metadata": metadata, "nbformat": 4, "nbformat_minor": 5}
