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

Then each hint the notebook recorded for the exercise (an assessed release, :mod:`mhalib.hints`)
costs the rubric's ``hint_cost`` share of its points, never below 0 (by default hints are free).

Points shown to people go through :func:`format_points` (2.18, not 2.1818); stored points are
exact.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from fractions import Fraction

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


def _share_text(share: float) -> str:
    """A share as the rubric would write it: "1/20", else a rounded decimal."""
    fraction = Fraction(share).limit_denominator(100)
    return str(fraction) if abs(float(fraction) - share) < 1e-9 else f"{share:.3g}"


def with_hint_cost(credit: Credit, exercise: str, hints: int, rubric: Rubric) -> Credit:
    """``credit`` less the rubric's cost of the ``hints`` hints taken (never below 0)."""
    cost = rubric.cost_per_hint(exercise)
    if hints <= 0 or cost <= 0 or credit.share <= 0:
        return credit
    taken = f"{hints} hint{'s' if hints != 1 else ''} taken"
    why = f"less {taken} at {_share_text(cost)} of the points each, as {rubric.origin} sets"
    return replace(credit, share=max(0.0, credit.share - hints * cost),
                   basis=f"{credit.basis}; {why}" if credit.basis else why)
