"""From a submitted notebook (untrusted JSON) to the cells that run and the issues found.

The learner's answer cells and own cells are kept; test and read-only cells are taken from the
release (edited ones are put back, deleted ones restored where they stood); hidden tests never
enter the sandbox. Where each exercise's first test cell stands, the plan records the learner's
function on grader-chosen inputs, as nbgrader would have run the test there. A learner's cell
whose source is exactly a class-cached instructor cell's is marked for replay
(:mod:`mhalib.grading.sandbox.class_cache`). Every deviation becomes an :class:`Issue` the
learner and the instructor can read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from mhalib.grading.assignment import (
    NotebookModel,
    is_answer_cell,
    is_locked_cell,
    is_test_cell,
    nbgrader_meta,
)
from mhalib.grading.records import Issue
from mhalib.grading.sandbox.class_cache import cache_key

_CELL_TYPES = ("code", "markdown", "raw")
_META_KEYS = ("grade", "solution", "locked", "points", "task")


@dataclass
class Plan:
    """``cells``: merged notebook cells; ``steps``: what the sandbox runs, in order."""

    cells: list[dict] = field(default_factory=list)
    steps: list[dict] = field(default_factory=list)
    issues: list[Issue] = field(default_factory=list)
    runnable: bool = True


class NotebookUnreadable(ValueError):
    """The submission is not a notebook at all (the message says why)."""


def parse_notebook(data: bytes) -> dict:
    """Parse submitted bytes into a notebook dict or raise :class:`NotebookUnreadable`."""
    try:
        notebook = json.loads(data.decode("utf-8-sig"))
    except UnicodeDecodeError as error:
        raise NotebookUnreadable(f"the file is not UTF-8 text ({error.reason})") from None
    except (ValueError, RecursionError) as error:
        raise NotebookUnreadable(f"the file is not valid JSON ({str(error)[:120]})") from None
    if not isinstance(notebook, dict) or not isinstance(notebook.get("cells"), list):
        raise NotebookUnreadable("the JSON has no list of cells, so it is not a notebook")
    if notebook.get("nbformat") != 4:
        raise NotebookUnreadable(f"nbformat={notebook.get('nbformat')!r} is not 4")
    return notebook


def _text(source) -> str | None:
    if isinstance(source, str):
        return source
    if isinstance(source, list) and all(isinstance(line, str) for line in source):
        return "".join(source)
    return None


def _clean_cell(raw, issues: list[Issue], position: int) -> dict | None:
    """A learner cell reduced to type, source and nbgrader metadata (None if malformed)."""
    source = _text(raw.get("source")) if isinstance(raw, dict) else None
    kind = raw.get("cell_type") if isinstance(raw, dict) else None
    if source is None or kind not in _CELL_TYPES:
        issues.append(Issue("invalid_cell", f"cell {position + 1} is malformed and was skipped."))
        return None
    meta = nbgrader_meta(raw)
    cell = {"cell_type": kind, "source": source, "metadata": {}}
    if meta:
        cell["metadata"]["nbgrader"] = dict(meta)
    return cell


def release_cell_copy(cell: dict) -> dict:
    text = _text(cell.get("source")) or ""
    return {"cell_type": cell.get("cell_type", "code"), "source": text,
            "metadata": {"nbgrader": dict(nbgrader_meta(cell))}, "origin": "release"}


def _merge(learner_cells: list, model: NotebookModel, issues: list[Issue]) -> list[dict]:
    release = [c for c in model.release["cells"] if nbgrader_meta(c).get("grade_id")]
    by_id = {nbgrader_meta(c)["grade_id"]: c for c in release}
    merged: list[dict] = []
    placed: dict[str, int] = {}
    for position, raw in enumerate(learner_cells):
        cell = _clean_cell(raw, issues, position)
        if cell is None:
            continue
        grade_id = nbgrader_meta(cell).get("grade_id")
        original = by_id.get(grade_id) if isinstance(grade_id, str) else None
        if grade_id is not None and (original is None or grade_id in placed):
            flag = "duplicate_cell_id" if grade_id in placed else "unknown_cell_id"
            issues.append(Issue(flag, f"cell {position + 1} has the id {str(grade_id)[:60]!r}, "
                                      "which is not (or no longer) a cell of the assignment; "
                                      "it ran as an ordinary cell."))
            cell["metadata"] = {}
        if original is None or "nbgrader" not in cell["metadata"]:
            cell["origin"] = "learner"
            merged.append(cell)
            continue
        kept = release_cell_copy(original)
        if is_locked_cell(original):
            if cell["source"].strip() != kept["source"].strip():
                issues.append(Issue("edited_test_cell", f"cell {grade_id!r} was edited; the "
                                                        "original was graded instead."))
        else:
            kept["source"], kept["origin"] = cell["source"], "learner"
        if cell["cell_type"] != kept["cell_type"]:
            issues.append(Issue("changed_cell_type", f"cell {grade_id!r} was changed to a "
                                f"{cell['cell_type']} cell; it was graded as {kept['cell_type']}."))
        learner_meta = nbgrader_meta(cell)
        if any(learner_meta.get(k) != nbgrader_meta(original).get(k) for k in _META_KEYS):
            issues.append(Issue("changed_metadata", f"the grading metadata of cell {grade_id!r} "
                                                    "was changed; the original was used."))
        placed[grade_id] = len(merged)
        merged.append(kept)
    return _restore_missing(merged, release, placed, issues)


def _restore_missing(merged, release, placed, issues) -> list[dict]:
    """Put back deleted locked/test cells after the nearest earlier release cell present."""
    for index, original in enumerate(release):
        grade_id = nbgrader_meta(original)["grade_id"]
        if grade_id in placed:
            continue
        if is_answer_cell(original):
            issues.append(Issue("missing_answer_cell", f"the answer cell {grade_id!r} is missing "
                                "(deleted, or its id was changed); anything it should define "
                                "is graded if the notebook defines it elsewhere."))
            continue
        after = -1
        for earlier in reversed(release[:index]):
            earlier_id = nbgrader_meta(earlier)["grade_id"]
            if earlier_id in placed:
                after = placed[earlier_id]
                break
        merged.insert(after + 1, release_cell_copy(original))
        for key, value in placed.items():
            if value > after:
                placed[key] = value + 1
        placed[grade_id] = after + 1
        if is_test_cell(original):
            issues.append(Issue("restored_cell", f"the test cell {grade_id!r} was deleted; it "
                                                 "was restored and graded."))
    return merged


def build_plan(notebook: dict, model: NotebookModel) -> Plan:
    """Merge ``notebook`` with the release and lay out the sandbox's steps."""
    issues: list[Issue] = []
    kernel = notebook.get("metadata", {}).get("kernelspec", {}) if isinstance(
        notebook.get("metadata"), dict) else {}
    wanted = model.release.get("metadata", {}).get("kernelspec", {}).get("name", "python3")
    if isinstance(kernel, dict) and kernel.get("name", wanted) != wanted:
        issues.append(Issue("changed_kernel", f"the notebook asks for kernel "
                                              f"{str(kernel.get('name'))[:40]!r}; it was graded "
                                              f"with the course's Python kernel."))
    cells = _merge(notebook["cells"], model, issues)
    item_of = {g.grade_id: g.item for g in model.grade_cells if g.item}
    kind_of = {g.item: g.kind for g in model.grade_cells if g.item}
    steps: list[dict] = []
    pending = list(model.exercises)  # quick checks are read from the submitted file
    cacheable = {source.strip(): cache_key(source) for source in model.class_cache}
    for index, cell in enumerate(cells):
        if cell["cell_type"] != "code":
            continue
        steps.append({"kind": "cell", "index": index, "source": cell["source"]})
        if len(steps) == 1:  # the set-up cell: a physical check runs it again whole
            steps[0]["setup"] = True
        key = cacheable.pop(cell["source"].strip(), None) if cell["origin"] == "learner" \
            and "nbgrader" not in cell["metadata"] else None
        if key is not None:  # the release's own source: the class run's results may stand in
            steps[-1]["class_cache"] = key
        item = item_of.get(nbgrader_meta(cell).get("grade_id")) if cell["origin"] == "release" \
            else None
        if item in pending:
            pending.remove(item)
            steps.append(_record_step([item], kind_of))
    if pending:
        steps.append(_record_step(pending, kind_of))
    return Plan(cells, steps, issues)


def _record_step(items: list[str], kind_of: dict) -> dict:
    return {"kind": "record",
            "exercises": [i for i in items if kind_of.get(i, "exercise") == "exercise"]}


def sandbox_plan(plan: Plan, seed: int | None, limits: dict) -> dict:
    """What is sent into the sandbox: steps, limits and, for a reproducible run only, the seed
    the warden derives every exercise's inputs from (no cells, no hidden tests). Without it the
    warden draws each exercise's inputs when the notebook reaches its test."""
    return {"seed": None if seed is None else int(seed), "limits": dict(limits),
            "steps": plan.steps}
