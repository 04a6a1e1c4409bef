"""``check``: what a notebook's test cell calls for instant feedback."""

from __future__ import annotations

import random

from mhalib.checks.integrity import tampering
from mhalib.checks.judge import judge_record
from mhalib.checks.probe import probe
from mhalib.checks.record import grading_mode
from mhalib.checks.registry import get_exercise
from mhalib.checks.report import show
from mhalib.checks.verdict import Verdict


class CheckFailed(AssertionError):
    """A test cell's check did not pass; the message is the diagnosis."""

    def _render_traceback_(self) -> list[str]:
        """IPython shows this instead of a traceback: the verdict above already explains."""
        return [f"\x1b[0;31mCheckFailed\x1b[0m: {self}"]


def check(exercise: str, func, suite: str = "visible", seed: int | None = None,
          quiet: bool = False) -> Verdict | None:
    """Probe ``func`` as exercise ``exercise`` on fresh inputs, judge it, show the verdict.

    Raises :class:`CheckFailed` (an AssertionError) when it does not pass, so nbgrader gives the
    test cell no points. In the grader's sandbox it only says that grading happens elsewhere.
    """
    checker = get_exercise(exercise)
    if grading_mode():
        print(f"{exercise}: recorded for grading (scores are decided outside this notebook).")
        return None
    if not callable(func):
        raise CheckFailed(f"{exercise}: expected a function, got {type(func).__name__}; "
                          f"run the cell that defines {exercise} first.")
    problems = tampering()
    if problems:
        verdict = Verdict.failure(
            exercise,
            f"{exercise}: this kernel was altered ({'; '.join(problems)}), so it cannot be "
            "checked here. Restart the kernel and run the notebook from the top.",
            "integrity",
        )
    else:
        seed = random.SystemRandom().randrange(2**31) if seed is None else seed
        record = probe(checker, func, seed, suite)
        # the learner's function may have altered the kernel while it ran: look again
        problems = tampering()
        verdict = (judge_record(exercise, record, seed, suite) if not problems else
                   Verdict.failure(exercise, f"{exercise}: your function altered this kernel "
                                   f"while it ran ({'; '.join(problems)}), so it scores 0 here. "
                                   "Restart the kernel and remove that code.", "integrity"))
    if not quiet:
        show(verdict)
    if not verdict.passed:
        raise CheckFailed(verdict.diagnosis)
    return verdict
