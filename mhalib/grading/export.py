"""CSV exports per assignment and for the whole course: one row per student and exercise.

Scores come from the gradebook (so a hand-entered score counts, as in ``nbgrader export``);
flags come from the grader's results, so a notebook that could not be graded shows its reason
(``invalid_notebook``, ``timeout``...) next to its 0 instead of a bare 0. ``hints`` is the number
of hints an exercise's row took (recorded in an assessed release), and their sum on the total.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

from mhalib.grading.assignment import NotebookModel
from mhalib.grading.credit import format_points
from mhalib.grading.flags import needs_review, problem_flags
from mhalib.grading.gradebook import final_scores
from mhalib.grading.records import GradingResult

COLUMNS = ["student", "assignment", "notebook", "exercise", "kind", "score", "max_score",
           "flags", "needs_review", "diagnosis", "hints"]


def load_results(results_dir: Path, assignment: str) -> list[GradingResult]:
    """Every stored result of ``assignment`` (``<results>/<assignment>/<student>/*.json``);
    files that cannot be read as a result are skipped."""
    folder = Path(results_dir) / assignment
    results = []
    for path in sorted(folder.glob("*/*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            results.append(GradingResult.from_json_dict(data))
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue
    return results


def _fmt(value) -> str:
    """Points as the CSV shows them: rounded for reading (the gradebook keeps them exact)."""
    return "" if value is None else format_points(value)


def assignment_rows(results: list[GradingResult], models: dict[str, NotebookModel],
                    db_url: str) -> list[dict]:
    rows: list[dict] = []
    if not results:
        return rows
    final = final_scores(db_url, results[0].assignment)
    for result in results:
        model = models.get(result.notebook)
        if model is None:
            continue
        scores = final.get((result.student, model.name), {})
        notebook_flags = result.issue_flags()
        base = {"student": result.student, "assignment": result.assignment,
                "notebook": model.notebook}
        total, total_max, all_flags, hints = 0.0, 0.0, list(notebook_flags), 0
        for item, verdict in result.verdicts.items():
            cells = [g for g in model.grade_cells if g.item == item]
            got = [scores.get(g.grade_id, {}).get("score") for g in cells]
            score = sum(s for s in got if s is not None) if cells else verdict.points
            flags = problem_flags([*notebook_flags, *verdict.flags])
            review = needs_review(flags)
            all_flags += flags
            total += score
            total_max += verdict.max_points
            hints += verdict.hints
            diagnosis = verdict.explanation(limit=300)
            rows.append({**base, "exercise": item, "kind": verdict.kind, "score": _fmt(score),
                         "max_score": _fmt(verdict.max_points), "flags": " ".join(flags),
                         "needs_review": "yes" if review else "no",
                         "diagnosis": diagnosis,
                         "hints": verdict.hints if verdict.kind == "exercise" else ""})
        for cell in model.grade_cells:
            if cell.item is not None:
                continue
            score = scores.get(cell.grade_id, {}).get("score")
            total += score or 0.0
            total_max += cell.points
            rows.append({**base, "exercise": cell.grade_id, "kind": "manual",
                         "score": _fmt(score), "max_score": _fmt(cell.points),
                         "flags": "" if score is not None else "manual_pending",
                         "needs_review": "no", "diagnosis": "", "hints": ""})
        rows.append({**base, "exercise": "(total)", "kind": "total", "score": _fmt(total),
                     "max_score": _fmt(total_max),
                     "flags": " ".join(problem_flags(all_flags)),
                     "needs_review": "yes" if needs_review(all_flags) else "no",
                     "diagnosis": "", "hints": hints})
    return rows


def write_csv(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    return path


def export_course(results_dir: Path, exports_dir: Path, db_url: str,
                  models_by_assignment: dict[str, dict[str, NotebookModel]]) -> list[Path]:
    """``<exports>/<assignment>.csv`` for each assignment with results, and ``course.csv``."""
    written, everything = [], []
    for assignment in sorted(models_by_assignment):
        rows = assignment_rows(load_results(results_dir, assignment),
                               models_by_assignment[assignment], db_url)
        if rows:
            written.append(write_csv(Path(exports_dir) / f"{assignment}.csv", rows))
            everything += rows
    written.append(write_csv(Path(exports_dir) / "course.csv", everything))
    return written
