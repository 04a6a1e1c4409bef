"""Per quick check: facility, discrimination, what the class chose, and whether it looks broken.

Over the students who recorded an answer (``answered``; the others are counted apart): the
facility, the point-biserial correlation and the upper-lower 27% index against the rest of the
assignment (:mod:`mhalib.classroom.report.statistics`), and the choices:

- multiple choice: how many picked each option (the options in the bank's canonical order; an
  answer that names no option, or a wrong one in a result written before the grader kept the
  option, is "unrecognised"); distractors nobody picked are listed (unless some answers are
  unrecognised: what those picked is unknown);
- fill-in: the right answers, each known slip of the key (``mistakes`` in the instructor's
  keys: MB instead of MiB, K and V forgotten...) and the other wrong answers.

A question looks broken when its discrimination is negative (either index), or when a
distractor or known slip was chosen more often than the key in the upper group.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from mhalib.classroom.report.reading import GradedAssignment
from mhalib.classroom.report.sections import Section
from mhalib.classroom.report.statistics import (
    facility,
    point_biserial,
    upper_group_counts,
    upper_lower_index,
)
from mhalib.quiz.keys import ChoiceKey, FillInKey
from mhalib.quiz.question import MultipleChoice

RIGHT, OTHER, UNRECOGNISED = "right", "other", "unrecognised"


@dataclass
class Choice:
    """One thing students answered: an option, a known slip, the right answer or the rest.

    ``choice`` is the option's canonical index (multiple choice) or the slip's expression, or
    :data:`RIGHT` / :data:`OTHER` / :data:`UNRECOGNISED`; ``upper``: how many of the upper 27%
    group chose it (weighted at ties).
    """

    choice: int | str
    label: str
    key: bool
    count: int
    share: float
    upper: float
    explanation: str = ""


@dataclass
class QuickCheckSummary:
    assignment: str
    question: str
    kind: str  # "multiple_choice" or "fill_in"
    prompt: str
    students: int
    answered: int
    right: int
    facility: float | None
    point_biserial: float | None
    upper_lower: float | None
    choices: list[Choice]
    unpicked: list[str] = field(default_factory=list)
    broken: list[str] = field(default_factory=list)
    section: Section | None = None


def plain(text: str) -> str:
    """A key's explanation without the ``{fields}`` of a learner's numbers."""
    return re.sub(r"\{([A-Za-z_][A-Za-z0-9_]*)\}", r"\1", text or "")


NOT_ANSWERED = frozenset({"no_record", "no_key", "invalid_answer", "bad_record",
                          "grader_error"})


def answered(verdict) -> bool:
    """A recorded answer was judged (results written before the grader kept responses have
    none: their verdict's flags say it)."""
    if "answer" in verdict.response:
        return verdict.response["answer"] is not None
    return not NOT_ANSWERED & set(verdict.flags)


def _choice_of(question, response: dict, passed: bool, key_option):
    if isinstance(question, MultipleChoice):
        option = response.get("option")
        if not isinstance(option, int) and passed and key_option is not None \
                and "answer" not in response:
            return key_option  # an older result: right, so the key
        return option if isinstance(option, int) else UNRECOGNISED
    if passed:
        return RIGHT
    return response.get("slip") or OTHER


def _labels(question, key) -> tuple[list, dict, dict, object]:
    """(choices in display order, label of each, explanation of each, the key's choice)."""
    if isinstance(question, MultipleChoice):
        order = list(range(len(question.options)))
        labels = {i: question.options[i] for i in order}
        answer = key.answer if isinstance(key, ChoiceKey) else None
        notes = ({i: plain(key.explanation if i == key.answer else key.why_wrong.get(i, ""))
                  for i in order} if isinstance(key, ChoiceKey) else {})
        return order, labels, notes, answer
    slips = list(key.mistakes or {}) if isinstance(key, FillInKey) else []
    labels = {RIGHT: f"right ({key.answer})" if isinstance(key, FillInKey) else "right",
              **{slip: slip for slip in slips}, OTHER: "other wrong answers"}
    notes = {slip: plain(key.mistakes[slip]) for slip in slips} if slips else {}
    if isinstance(key, FillInKey):
        notes[RIGHT] = plain(key.explanation)
    return [RIGHT, *slips, OTHER], labels, notes, RIGHT


def summarise_quick_check(graded: GradedAssignment, question_id: str, question, key=None,
                          section: Section | None = None) -> QuickCheckSummary:
    """The summary of one quick check (``key``: its parsed instructor key, or None)."""
    order, labels, notes, answer = _labels(question, key)
    chosen, right, rest = [], [], []
    students = 0
    for work in graded.students:
        verdict = work.verdicts.get(question_id)
        if verdict is None:
            continue
        students += 1
        if not answered(verdict):
            continue  # no recorded answer, or one that could not be judged
        chosen.append(_choice_of(question, verdict.response, verdict.passed, answer))
        right.append(bool(verdict.passed))
        rest.append(work.rest_score(question_id))
    counts = Counter(chosen)
    if answer is None:  # no key: the option the right answers picked
        answer = next((c for c, ok in zip(chosen, right) if ok and c != UNRECOGNISED), None)
    upper = upper_group_counts(chosen, rest)
    extra = [c for c in counts if c not in order]
    count = len(chosen)
    choices = [Choice(c, labels.get(c, str(c)), c == answer, counts.get(c, 0),
                      counts.get(c, 0) / count if count else 0.0, upper.get(c, 0.0),
                      notes.get(c, "")) for c in [*order, *extra]]
    if not counts.get(OTHER) and not isinstance(question, MultipleChoice):
        choices = [c for c in choices if c.choice != OTHER or c.count]
    summary = QuickCheckSummary(
        graded.assignment, question_id,
        "multiple_choice" if isinstance(question, MultipleChoice) else "fill_in",
        question.prompt, students, count, sum(right), facility(right),
        point_biserial(right, rest), upper_lower_index(right, rest), choices, section=section)
    _judge_question(summary, answer)
    return summary


def _judge_question(summary: QuickCheckSummary, answer) -> None:
    """Fill in ``unpicked`` and ``broken`` (module docstring)."""
    multiple = summary.kind == "multiple_choice"
    unknown = any(c.choice == UNRECOGNISED and c.count for c in summary.choices)
    if multiple and summary.answered and not unknown:
        summary.unpicked = [c.label for c in summary.choices
                            if not c.key and c.count == 0 and c.choice != UNRECOGNISED]
    negative = [f"{name} {value:+.2f}" for name, value in (
        ("point-biserial", summary.point_biserial), ("upper-lower index", summary.upper_lower))
        if value is not None and value < 0]
    if negative:
        summary.broken.append(f"negative discrimination ({', '.join(negative)}): students who "
                              "did well on the rest of the assignment got it wrong more often")
    key_upper = next((c.upper for c in summary.choices if c.choice == answer), 0.0)
    for choice in summary.choices:
        named = multiple or choice.choice not in (RIGHT, OTHER, UNRECOGNISED)
        if named and not choice.key and choice.choice != UNRECOGNISED \
                and choice.upper > key_upper:
            summary.broken.append(f"\u201c{choice.label}\u201d was chosen more often than the "
                                  f"key in the upper group ({choice.upper:g} against "
                                  f"{key_upper:g})")
