"""Feedback for a learner as one self-contained HTML page per notebook.

It says, per exercise and quick check, the points, whether it passed and the checker's
diagnosis (and the hints taken, where the notebook recorded them), plus everything the grader
noticed about the notebook. It is built only from the verdicts, the issues and the gradebook's
scores: it never contains test cells (visible or hidden), the answer key, or any source code,
and every string is HTML-escaped.
"""

from __future__ import annotations

import html
from pathlib import Path

from mhalib.grading.assignment import NotebookModel
from mhalib.grading.credit import format_points
from mhalib.grading.flags import MEANING
from mhalib.grading.records import GradingResult

_STYLE = """
body{font-family:system-ui,sans-serif;max-width:52em;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;width:100%}th,td{border:1px solid #ccc;padding:.4em;
vertical-align:top;text-align:left}.pass{color:#176b2c;font-weight:600}
.fail{color:#a11;font-weight:600}.issue{background:#fff6e0;border-left:4px solid #e0a000;
padding:.5em;margin:.4em 0}details{margin-top:.3em}code{background:#f3f3f3}
"""


def _e(text) -> str:
    return html.escape(str(text), quote=True)


_points = format_points  # rounded for reading (2.18); the gradebook keeps the exact value


def render_feedback(result: GradingResult, model: NotebookModel,
                    final: dict[str, dict]) -> str:
    """HTML feedback; ``final`` maps grade cell -> {score, max_score, manual} (gradebook)."""
    rows = []
    for item, verdict in result.verdicts.items():
        cells = [g for g in model.grade_cells if g.item == item]
        scored = [final.get(g.grade_id, {}).get("score") for g in cells]
        points = sum(s for s in scored if s is not None) if cells else verdict.points
        by_hand = any(final.get(g.grade_id, {}).get("manual") for g in cells)
        mark = ('<span class="pass">passed</span>' if verdict.passed
                else '<span class="fail">not passed</span>')
        details = "".join(f"<li>{_e(d)}</li>" for d in verdict.details[:12])
        problems = [f for f in verdict.flags if f in MEANING]
        notes = "".join(f"<li><code>{_e(f)}</code>: {_e(MEANING[f])}</li>" for f in problems)
        extra = ""
        if details or notes:
            extra = f"<details><summary>details</summary><ul>{notes}{details}</ul></details>"
        credit = f"<p><i>{_e(verdict.credit)}</i></p>" if verdict.credit and not by_hand else ""
        if verdict.hints:
            credit += f'<p class="hints">Hints taken: {int(verdict.hints)}.</p>'
        rows.append(
            f"<tr><td><code>{_e(item)}</code></td>"
            f"<td>{_e(_points(points))} / {_e(_points(verdict.max_points))}"
            f"{' (graded by hand)' if by_hand else ''}</td><td>{mark}</td>"
            f"<td>{_e(verdict.diagnosis)}{credit}{extra}</td></tr>")
    for cell in model.grade_cells:
        if cell.item is None:
            score = final.get(cell.grade_id, {}).get("score")
            rows.append(f"<tr><td><code>{_e(cell.grade_id)}</code></td>"
                        f"<td>{_e(_points(score))} / {_points(cell.points)}</td>"
                        "<td>graded by hand</td>"
                        f"<td>{'not graded yet' if score is None else 'see your instructor'}"
                        "</td></tr>")
    total = sum(v["score"] for v in final.values() if v.get("score") is not None)
    maximum = sum(g.points for g in model.grade_cells)
    issues = "".join(
        f'<div class="issue"><b>{_e(i.flag)}</b>: {_e(i.message)}</div>'
        for i in result.issues)
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>Feedback: {_e(model.assignment)} / {_e(model.notebook)}</title>"
        f"<style>{_STYLE}</style></head><body>"
        f"<h1>Feedback on {_e(model.notebook)}</h1>"
        f"<p>Assignment <b>{_e(model.assignment)}</b>, student <b>{_e(result.student)}</b>. "
        f"Total: <b>{_points(total)} / {_points(maximum)}</b> points.</p>"
        "<p>Your functions were called on inputs chosen when grading and compared with the "
        "course's reference outside your notebook.</p>"
        + (f"<h2>About your notebook</h2>{issues}" if issues else "")
        + "<h2>Exercises</h2><table><tr><th>item</th><th>points</th><th>result</th>"
        f"<th>what the checker found</th></tr>{''.join(rows)}</table></body></html>\n")


def write_feedback(path: Path, result: GradingResult, model: NotebookModel,
                   final: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_feedback(result, model, final), encoding="utf-8")
    return path
