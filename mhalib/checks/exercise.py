"""What every checker is made of: test cases, a reference, mistake models and a comparison.

A checker is an :class:`Exercise` subclass. The probe side uses ``cases`` and ``call``; the judge
side uses ``cases``, ``expected``, ``judge_case`` and ``mistakes``. Cases hold only numpy arrays
and Python values so that the judge can rebuild them from the seed in a clean process.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mhalib.checks.compare import describe, difference

SUITES = ("visible", "hidden", "grading")


@dataclass
class Case:
    """One call of the learner's function: positional and keyword arguments plus a label."""

    label: str
    args: tuple
    kwargs: dict = field(default_factory=dict)

    def signature(self) -> str:
        parts = [describe(a) if isinstance(a, np.ndarray) else repr(a) for a in self.args]
        parts += [f"{k}={describe(v) if isinstance(v, np.ndarray) else repr(v)}"
                  for k, v in self.kwargs.items()]
        return "(" + ", ".join(parts) + ")"


@dataclass
class Mistake:
    """A known wrong answer: the reference with one thing wrong, and what to tell the learner."""

    name: str
    message: str
    compute: Callable[[Case], Any]


class Exercise:
    """Base class of the checkers. Subclasses set ``name`` and ``assignment`` and fill in cases."""

    name: str = ""
    assignment: str = ""
    # rtol/atol overrides for this exercise's comparisons (None: by dtype, see compare.py)
    rtol: float | None = None
    atol: float | None = None
    # names of mhalib functions (reference, accounting, kernels, nn) that compute this answer:
    # reaching any of them from the learner's function scores 0
    answer_key_names: tuple[str, ...] = ()
    # seconds one call of the learner's function may take
    call_timeout: float = 20.0

    # -- cases ---------------------------------------------------------------------------------
    def cases(self, seed: int, suite: str) -> list[Case]:
        """The cases of ``suite`` for ``seed``: deterministic, so probe and judge agree."""
        if suite not in SUITES:
            raise ValueError(f"suite={suite!r} is not one of {SUITES}")
        rng = np.random.default_rng([seed, sum(map(ord, self.name))])
        cases = self.visible_cases(rng)
        if suite != "visible":
            cases += self.hidden_cases(rng)
        return cases

    def visible_cases(self, rng: np.random.Generator) -> list[Case]:
        raise NotImplementedError

    def hidden_cases(self, rng: np.random.Generator) -> list[Case]:
        return []

    # -- probe side ----------------------------------------------------------------------------
    def call(self, func, case: Case):
        """Call the learner's function on one case; returns (output, measured work)."""
        return func(*case.args, **case.kwargs), {}

    # -- judge side ----------------------------------------------------------------------------
    def expected(self, case: Case):
        """The reference output (plain numpy / Python data) for one case."""
        raise NotImplementedError

    def mistakes(self) -> list[Mistake]:
        return []

    def judge_case(self, case: Case, received, meta: dict) -> str | None:
        """None if ``received`` is right for ``case``; otherwise why not (one sentence)."""
        return difference(self.expected(case), received, self.rtol, self.atol)

    def matches(self, case: Case, mistake: Mistake, received) -> bool:
        try:
            wrong = mistake.compute(case)
        except Exception:
            return False
        if difference(self.expected(case), wrong, self.rtol, self.atol) is None:
            return False  # this mistake makes no difference on this case
        return difference(wrong, received, self.rtol, self.atol) is None
