"""Scores decided outside the learner's kernel: records in, verdicts and points out.

Runs in the grader's own process (never in the sandbox). Every exercise's record is judged by
``mhalib.checks.judge_record``, which re-generates the inputs from the seed and compares with
the answer key; quick-check answers are judged by ``mhalib.quiz``. A missing, unreadable or
hostile record gives 0 for that exercise with the reason, never an exception.
"""

from __future__ import annotations

import json

from mhalib.grading.assignment import NotebookModel

MAX_RECORD_CHARS = 24 * 1024 * 1024


def _failure(kind: str, item: str, diagnosis: str, *flags: str) -> dict:
    return {"kind": kind, "item": item, "passed": False, "score": 0.0, "diagnosis": diagnosis,
            "details": [], "flags": list(flags)}


def _parse(text: str | None) -> dict | None:
    if text is None or len(text) > MAX_RECORD_CHARS:
        return None
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def judge_exercise(name: str, text: str | None, present: bool, seed: int,
                   not_reached: str | None) -> dict:
    """Verdict (as a dict) of exercise ``name`` from its record text."""
    from mhalib.checks import judge_record

    if not present:
        reason = not_reached or "no record was written for it"
        return _failure("exercise", name, f"{name}: not graded: {reason}.", "no_record")
    record = _parse(text)
    if record is None:
        return _failure("exercise", name, f"{name}: the grading record was too large or "
                                          "unreadable.", "bad_record")
    try:
        verdict = judge_record(name, record, seed).to_dict()
    except Exception as error:  # the judge promises not to raise; belt and braces
        return _failure("exercise", name, f"{name}: the record could not be judged "
                                          f"({type(error).__name__}).", "bad_record")
    score = verdict.get("score")
    if not isinstance(score, (int, float)) or not 0.0 <= float(score) <= 1.0:
        return _failure("exercise", name, f"{name}: the judge returned no valid score.",
                        "bad_record")
    diagnosis = str(verdict.get("diagnosis", ""))
    if not diagnosis.startswith(f"{name}:"):
        diagnosis = f"{name}: {diagnosis}"
    return {"kind": "exercise", "item": name, "passed": bool(verdict.get("passed")),
            "score": float(score), "diagnosis": diagnosis,
            "details": [str(d) for d in verdict.get("details", [])][:20],
            "flags": [str(f) for f in verdict.get("flags", [])]}


def judge_question(question: str, text: str | None, present: bool,
                   not_reached: str | None) -> dict:
    """Verdict of a quick check from the recorded answer variable."""
    from mhalib.quiz import get_question

    if not present:
        reason = not_reached or "no answer was recorded"
        return _failure("quick_check", question, f"{question}: not graded: {reason}.",
                        "no_record")
    entry = _parse(text)
    if entry is None or entry.get("question") != question:
        return _failure("quick_check", question, f"{question}: the answer record is unreadable.",
                        "bad_record")
    if entry.get("status") == "missing":
        return _failure("quick_check", question, f"{question}: no variable named {question} "
                                                 "was defined.", "missing")
    if entry.get("status") != "ok":
        kind = str(entry.get("type", "?"))[:80]
        return _failure("quick_check", question, f"{question}: the answer must be a string or "
                                                 f"a number, not {kind}.", "error")
    try:
        feedback = get_question(question).judge(entry.get("value"))
    except Exception as error:
        return _failure("quick_check", question, f"{question}: the answer could not be judged "
                                                 f"({type(error).__name__}).", "error")
    return {"kind": "quick_check", "item": question, "passed": bool(feedback.correct),
            "score": 1.0 if feedback.correct else 0.0,
            "diagnosis": f"{question}: {feedback.message}", "details": [], "flags": []}


def score_notebook(model: NotebookModel, records: dict, answers: dict, seed: int,
                   not_reached: dict[str, str]) -> dict[str, dict]:
    """Verdicts of every exercise and quick check, with points and max points added.

    ``records``/``answers`` map item -> record text (None: present but too large);
    ``not_reached`` maps items whose recording step never ran -> the reason.
    """
    verdicts: dict[str, dict] = {}
    for name in model.exercises:
        verdicts[name] = judge_exercise(name, records.get(name), name in records, seed,
                                        not_reached.get(name))
    for question in model.questions:
        verdicts[question] = judge_question(question, answers.get(question),
                                            question in answers, not_reached.get(question))
    for item, verdict in verdicts.items():
        verdict["max_points"] = model.points_of(item)
        verdict["points"] = round(verdict["score"] * verdict["max_points"], 4)
    return verdicts


def grade_cell_scores(model: NotebookModel, verdicts: dict[str, dict]) -> dict[str, float | None]:
    """nbgrader auto_score of every grade cell (None: left for manual grading)."""
    scores: dict[str, float | None] = {}
    for cell in model.grade_cells:
        verdict = verdicts.get(cell.item) if cell.item else None
        scores[cell.grade_id] = None if verdict is None else round(
            verdict["score"] * cell.points, 4)
    return scores
