"""The two kinds of quick check: fill in the blank (judged by meaning) and multiple choice."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from mhalib.quiz.expression import ExpressionError, evaluate


@dataclass
class Feedback:
    correct: bool
    message: str


def option_digest(question_id: str, index: int) -> str:
    """How the bank stores a multiple-choice key, so it is not readable as plain text."""
    return hashlib.sha256(f"mhalib-quiz:{question_id}:{index}".encode()).hexdigest()[:20]


@dataclass
class FillIn:
    """A blank whose answer is a Python expression, judged by its value in several scenarios.

    ``scenarios`` are name->value dicts; ``expected(scenario)`` gives the right value there.
    """

    id: str
    prompt: str
    template: str  # the line with the blank, e.g. "scores = q @ k.T / ____"
    scenarios: list[dict]
    expected: Callable[[dict], object]
    explanation: str
    hint: str = ""
    examples: list[str] = field(default_factory=list)  # accepted answers, shown by tests only

    def judge(self, answer) -> Feedback:
        if answer is None or answer is Ellipsis:
            return Feedback(False, "No answer yet: type an expression into the blank.")
        text = str(answer)
        for scenario in self.scenarios:
            try:
                value = evaluate(text, scenario)
            except ExpressionError as error:
                return Feedback(False, f"Could not use that answer: {error}.")
            want = self.expected(scenario)
            try:
                good = np.allclose(np.asarray(value, dtype=float), want, rtol=1e-9, atol=0)
            except (TypeError, ValueError):
                good = False
            if not good:
                return Feedback(False, f"Not quite: with {_show(scenario)} your blank is "
                                       f"{_short(value)}. {self.hint}".strip())
        return Feedback(True, f"Right. {self.explanation}")


@dataclass
class MultipleChoice:
    """Pick one option; the right one is stored only as a digest (see :func:`option_digest`)."""

    id: str
    prompt: str
    options: list[str]
    key: str  # option_digest(id, right_index)
    explanation: str
    why_wrong: dict[int, str] = field(default_factory=dict)

    def index_of(self, answer) -> int | None:
        """Accept an index (0-based int), a letter ('b'), or the option's text."""
        if isinstance(answer, bool):
            return None
        if isinstance(answer, (int, np.integer)):
            return int(answer) if 0 <= answer < len(self.options) else None
        if isinstance(answer, str):
            text = answer.strip()
            if len(text) == 1 and text.lower() in "abcdefgh":
                index = "abcdefgh".index(text.lower())
                return index if index < len(self.options) else None
            for index, option in enumerate(self.options):
                if text.lower().rstrip(".") == option.lower().rstrip("."):
                    return index
        return None

    def judge(self, answer) -> Feedback:
        index = self.index_of(answer)
        if index is None:
            letters = ", ".join(f"'{'abcdefgh'[i]}'" for i in range(len(self.options)))
            return Feedback(False, f"Pick one option: {letters} (or its text).")
        if option_digest(self.id, index) == self.key:
            return Feedback(True, f"Right. {self.explanation}")
        reason = self.why_wrong.get(index, "Think again about what changes and what stays fixed.")
        return Feedback(False, f"Not this one. {reason}")


def _show(scenario: dict) -> str:
    parts = []
    for name, value in scenario.items():
        shown = f"shape {value.shape}" if isinstance(value, np.ndarray) else repr(value)
        parts.append(f"{name} = {shown}" if not isinstance(value, np.ndarray) else
                     f"{name} of {shown}")
    return ", ".join(parts)


def _short(value) -> str:
    text = repr(value)
    return text if len(text) < 60 else text[:57] + "..."
