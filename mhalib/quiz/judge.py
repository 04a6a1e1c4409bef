"""Judging one quick-check answer against its key: right or wrong, and a message saying why.

Used in two places: by the form in a practice release (instant feedback, the right answer never
shown) and by the grader (``reveal=True``: the returned feedback also says what was expected).
A fill-in is judged by value in every binding of its names; a known slip gets its own
explanation, and a malformed expression a message about what is wrong with it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from mhalib.quiz.expression import ExpressionError, evaluate
from mhalib.quiz.keys import ChoiceKey, FillInKey
from mhalib.quiz.question import FillIn, MultipleChoice

LETTERS = "abcdefgh"


@dataclass
class Feedback:
    """``slip``: the key's known-slip expression a wrong fill-in matched (None otherwise)."""

    correct: bool
    message: str
    slip: str | None = None


def fill(text: str, values: dict) -> str:
    """Replace ``{name}`` fields of ``text`` that ``values`` has (other braces are left)."""
    return re.sub(r"\{([A-Za-z_][A-Za-z0-9_]*)\}",
                  lambda m: _number(values[m.group(1)]) if m.group(1) in values else m.group(0),
                  text)


def judge(question, key, answer, numbers: dict | None = None, reveal: bool = False) -> Feedback:
    """Feedback on ``answer`` (an expression string, or a canonical option index)."""
    if isinstance(question, MultipleChoice) and isinstance(key, ChoiceKey):
        return _judge_choice(question, key, answer, reveal)
    if isinstance(question, FillIn) and isinstance(key, FillInKey):
        return _judge_fill_in(question, key, answer, dict(numbers or {}), reveal)
    raise TypeError(f"{getattr(question, 'id', question)!r}: question and key do not match "
                    f"({type(question).__name__}, {type(key).__name__})")


def _judge_choice(question: MultipleChoice, key: ChoiceKey, answer, reveal: bool) -> Feedback:
    index = question.index_of(answer)
    if index is None:
        return Feedback(False, "No option was chosen.")
    if index == key.answer:
        return Feedback(True, f"Right. {key.explanation}")
    message = f"Not this one. {(key.why_wrong or {}).get(index, '')}".strip()
    if reveal:
        message += (f" The right option: \u201c{question.options[key.answer]}\u201d. "
                    f"{key.explanation}")
    return Feedback(False, message)


def _matches(value, want, rtol: float) -> bool:
    try:
        value = np.asarray(value, dtype=float)
        want = np.asarray(want, dtype=float)
    except (TypeError, ValueError):
        return False
    if value.shape != want.shape and value.size != 1:
        return False
    with np.errstate(all="ignore"):
        return bool(np.all(np.isfinite(value) == np.isfinite(want))
                    and np.allclose(value, want, rtol=rtol, atol=1e-12, equal_nan=False))


def _judge_fill_in(question: FillIn, key: FillInKey, answer, numbers: dict,
                   reveal: bool) -> Feedback:
    if answer is None or answer is Ellipsis or (isinstance(answer, str) and not answer.strip()):
        return Feedback(False, f"No answer was recorded. {question.names_line()}")
    if isinstance(answer, bool) or not isinstance(answer, (str, int, float)):
        return Feedback(False, f"The answer must be an expression, got a "
                               f"{type(answer).__name__}.")
    text = str(answer)
    bindings = question.bindings(numbers)
    wants = [evaluate(key.answer, b) for b in bindings]
    got = []
    for binding in bindings:
        try:
            got.append(evaluate(text, binding))
        except ExpressionError as error:
            return Feedback(False, f"Could not use {text!r}: {error}. "
                                   f"{question.names_line()}")
    expected = wants[0]
    details = {**numbers, "value": expected} if numbers else {"value": expected}
    if all(_matches(g, w, question.rtol) for g, w in zip(got, wants)):
        return Feedback(True, f"Right. {fill(key.explanation, details)}")
    matched = None
    for slip, why in (key.mistakes or {}).items():
        slip_values = [evaluate(slip, b) for b in bindings]
        if all(_matches(g, s, question.rtol) for g, s in zip(got, slip_values)):
            message, matched = f"Not quite. {fill(why, details)}", slip
            break
    else:
        message = f"Not quite: {_where(bindings[0], numbers)}your blank is " \
                  f"{_short(got[0])}. {fill(key.hint, details)}".strip()
    if reveal:
        message += (f" Expected {key.answer} (= {_short(expected)} here). "
                    f"{fill(key.explanation, details)}")
    return Feedback(False, message, matched)


def _where(binding: dict, numbers: dict) -> str:
    if numbers:
        return ""
    shown = []
    for name, value in binding.items():
        if isinstance(value, np.ndarray):
            shown.append(f"{name} of shape {value.shape}")
        else:
            shown.append(f"{name} = {value!r}")
    return f"with {', '.join(shown)}, " if shown else ""


def _number(value) -> str:
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return f"{int(value):,}"
    if isinstance(value, (float, np.floating)):
        value = float(value)
        if value.is_integer() and abs(value) < 1e15:
            return f"{int(value):,}"
        return f"{value:.4g}"
    if isinstance(value, np.ndarray) and value.size == 1:
        return _number(value.item())
    return str(value)


def _short(value) -> str:
    if isinstance(value, np.ndarray):
        if value.size == 1:
            return _number(value.item())
        return f"an array of shape {value.shape}"
    text = _number(value)
    return text if len(text) < 60 else text[:57] + "..."
