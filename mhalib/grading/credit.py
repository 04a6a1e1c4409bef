"""Credit from the verdict: how many of an exercise's points a judged answer earns, and why.

- every check passes: all the points;
- a named mistake (flag ``mistake:<name>``) that reproduces most (more than half) of the
  failing cases: the share the rubric gives that mistake (0 when it lists none), or the
  smallest share of the known mistakes shown when other cases show another one (a softmax
  that overflows inside an attention that also lacks the scale);
- any other wrong answer (no name, or a name that explains only a few failing cases): the
  share of the
  *general* cases passed, capped by the rubric's ``unnamed_cap`` (0 by default, so 0). Cases
  marked ``degenerate`` (a single key, a size-1 axis...) never count towards it, so passing
  only those earns nothing;
- nothing judged (no record, missing function, tampering, errors on every case): 0, and the
  diagnosis already says why.

Points shown to people go through :func:`format_points` (2.18, not 2.1818); stored points are
exact.
"""

from __future__ import annotations

from dataclasses import dataclass

from mhalib.checks.verdict import Verdict
from mhalib.grading.rubric import Rubric

MISTAKE_PREFIX = "mistake:"


def format_points(value: float | None) -> str:
    """Points for people: at most two decimals, no trailing zeros ("2.18", "1", "0.5")."""
    if value is None:
        return "pending"
    text = f"{round(float(value), 2):.2f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


@dataclass(frozen=True)
class Credit:
    """``share`` of the points (0..1) and ``basis``: why, to follow "N of M points, "."""

    share: float
    basis: str = ""

    def note(self, max_points: float) -> str:
        """ "1 of 3 points, as the course rubric sets for this mistake." ("" without basis)."""
        if not self.basis:
            return ""
        return (f"{format_points(self.share * max_points)} of {format_points(max_points)} "
                f"points, {self.basis}.")


def named_mistake(verdict: Verdict) -> str | None:
    return next((f[len(MISTAKE_PREFIX):] for f in verdict.flags
                 if f.startswith(MISTAKE_PREFIX)), None)


STATUS_FLAGS = ("error", "timeout", "too_large", "bad_record")


def exercise_credit(verdict: Verdict, rubric: Rubric) -> Credit:
    """The :class:`Credit` a checker's verdict earns under ``rubric``."""
    if verdict.passed:
        return Credit(1.0)
    mistake = named_mistake(verdict)
    crashed = any(flag in STATUS_FLAGS for flag in verdict.flags)
    if verdict.cases_total == 0 or (verdict.cases_passed == 0 and mistake is None and crashed):
        return Credit(0.0)  # nothing judged, or it failed to run: the diagnosis says why
    failing = verdict.cases_total - verdict.cases_passed
    if mistake is not None and 2 * verdict.mistake_cases > failing:
        names = [mistake, *verdict.other_mistakes]
        share = min(rubric.mistake_share(verdict.exercise, name) for name in names)
        also = [f"together with {', '.join(verdict.other_mistakes)} on other cases"
                ] if verdict.other_mistakes else []
        if verdict.unexplained_cases:
            also.append(f"{verdict.unexplained_cases} more failing case(s) match no known "
                        "mistake")
        return Credit(share, f"as {rubric.origin} sets for this mistake ({mistake})"
                      + "".join(f"; {text}" for text in also))
    if mistake is None:
        what = "a wrong answer that matches no known mistake"
    else:
        what = (f"a wrong answer that shows this mistake on only {verdict.mistake_cases} of "
                f"its {failing} failing cases")
    cap = rubric.cap_for_unnamed(verdict.exercise)
    if cap <= 0:
        return Credit(0.0, f"as {rubric.origin} sets for {what}")
    general = verdict.general_total
    if general == 0 or verdict.general_passed == 0:
        return Credit(0.0, f"for {what} that passed no general case (passing only edge cases "
                           "such as a single key earns no credit)")
    share = min(cap, verdict.general_passed / general)
    return Credit(share, f"for {what}: {verdict.general_passed} of {general} general cases "
                         f"passed, capped at {cap:.0%} by {rubric.origin}")
