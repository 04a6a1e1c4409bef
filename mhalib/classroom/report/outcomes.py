"""What happened to one student on one exercise, in the words of the report.

Each (student, exercise) gets exactly one outcome, decided from the grader's verdict (the
diagnosis, not a hand-changed score), in this order:

- ``passed``: every check passed;
- ``partial``: wrong, but the rubric gave some of the points (a named mistake it prices);
- ``blank``: the answer cell is still the release's stub (``response["blank"]``), or the
  function is missing and nothing else was written;
- ``not_graded``: nothing could be judged (the notebook stopped before the exercise, was
  unreadable, its record was malformed, or the grader failed);
- ``failed``: any other wrong answer (0 points).

``flagged`` is separate: the verdict or the notebook carries a flag that asks for the
instructor's look (:data:`mhalib.grading.flags.REVIEW`).
"""

from __future__ import annotations

from mhalib.grading.credit import MISTAKE_PREFIX
from mhalib.grading.flags import needs_review
from mhalib.grading.records import ItemVerdict

OUTCOMES = ("passed", "partial", "failed", "blank", "not_graded")
NOT_JUDGED = frozenset({"no_record", "bad_record", "grader_error"})


def named_mistake(verdict: ItemVerdict) -> str | None:
    """The mistake the checker named (flag ``mistake:<name>``), if any."""
    return next((f[len(MISTAKE_PREFIX):] for f in verdict.flags if f.startswith(MISTAKE_PREFIX)),
                None)


def is_blank(verdict: ItemVerdict) -> bool:
    if verdict.response.get("blank") is True:
        return True
    return "missing" in verdict.flags and not verdict.response.get("answer")


def outcome(verdict: ItemVerdict) -> str:
    """One of :data:`OUTCOMES` (module docstring)."""
    if verdict.passed:
        return "passed"
    if verdict.points > 0:
        return "partial"
    if is_blank(verdict):
        return "blank"
    if NOT_JUDGED & set(verdict.flags):
        return "not_graded"
    return "failed"


def is_flagged(verdict: ItemVerdict, issue_flags: list[str]) -> bool:
    """True when the item or its notebook asks for the instructor's look."""
    return needs_review([*issue_flags, *verdict.flags])


def mistake_message(verdict: ItemVerdict) -> str:
    """The named mistake's sentence: the checker puts it, after ``<exercise>: ``, as the
    verdict's diagnosis (:mod:`mhalib.checks.judge`)."""
    prefix = f"{verdict.item}: "
    text = verdict.diagnosis
    return text[len(prefix):] if text.startswith(prefix) else text
