"""Mistake models shared by several checkers: one slip that learners write in more than one form.

A :class:`WrongAnswers` is a :class:`~mhalib.checks.exercise.WrongAnswer` (``compute`` is the
slip's usual form, what the generic tests call) with ``variants(case)``: other outputs the same
slip gives (softmax along each wrong axis, the size in GiB or in GB, the stable and the
overflowing way of negating the logits...). It is detected where the learner's output equals
any of them, so it is still named only when a model of the slip reproduces the output.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mhalib.checks.exercise import Case, WrongAnswer

# the message of a per-head scale left out, where the scale is 1/sqrt(d_head): dividing by the
# square root of a size that is 1 on the case (a batch of one, read from the wrong axis) gives
# the same output
NO_HEAD_SCALE = ("the scores were not divided by sqrt(d_head) (or were divided by the square "
                 "root of a size that is 1 in this case: read the head width from the last "
                 "axis, q.shape[-1]; or the scale was applied where it changes nothing, added "
                 "to every score)")


def _no_variants(case: Case) -> list:
    return []


@dataclass(frozen=True)
class WrongAnswers(WrongAnswer):
    """A slip with several forms: ``compute(case)`` the usual one, ``variants(case)`` a list of
    the other outputs the same slip gives on that case."""

    variants: Callable[[Case], list] = _no_variants

    def detect(self, exercise, case: Case, received: Any, meta: dict) -> bool:
        if super().detect(exercise, case, received, meta):
            return True
        try:
            forms = self.variants(case)
        except Exception:
            return False
        return any(exercise.reproduces(case, lambda _case, form=form: form, received)
                   for form in forms)
