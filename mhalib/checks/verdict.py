"""The verdict a judge returns for one exercise."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Verdict:
    """Outcome of judging one exercise.

    score is the fraction of the exercise's points earned (0..1); diagnosis is one or two
    sentences for the learner naming the likely mistake; flags mark anything an instructor
    should look at (``missing``, ``error``, ``timeout``, ``integrity``, ``called_answer_key``...).
    ``general_passed``/``general_total`` count only the cases not marked degenerate;
    ``mistake_cases`` counts the failing cases the named mistake reproduces, ``other_mistakes``
    names the known mistakes shown by failing cases that the named mistake
    (flag ``mistake:<name>``) does not reproduce, and ``unexplained_cases`` counts the failing
    cases no known mistake reproduces: what the grader's credit rules read
    (mhalib/grading/credit.py).
    """

    exercise: str
    passed: bool
    score: float
    diagnosis: str
    details: list[str] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)
    cases_passed: int = 0
    cases_total: int = 0
    general_passed: int = 0
    general_total: int = 0
    mistake_cases: int = 0
    other_mistakes: list[str] = field(default_factory=list)
    unexplained_cases: int = 0

    @classmethod
    def failure(cls, exercise: str, diagnosis: str, *flags: str) -> Verdict:
        """A zero-score verdict that only carries a reason (missing function, bad record...)."""
        return cls(exercise, passed=False, score=0.0, diagnosis=diagnosis, flags=list(flags))
