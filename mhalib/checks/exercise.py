"""What every checker is made of: test cases, a reference, mistake models and a comparison.

A checker is an :class:`Exercise` subclass. The probe side uses ``cases`` and ``call``; the judge
side uses ``cases``, ``expected``, ``judge_case`` and ``mistakes`` (each a :class:`Mistake`:
a :class:`WrongAnswer` recomputed from the case, or a :class:`Symptom` read off the output and
the measured work). Cases hold only numpy arrays
and Python values so that the judge can rebuild them from the seed in a clean process.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from mhalib.checks.compare import describe, difference, nan_where_empty

SUITES = ("visible", "hidden", "grading")


@dataclass
class Case:
    """One call of the learner's function: positional and keyword arguments plus a label.

    ``degenerate`` marks a case that wrong answers can pass by accident (a single key, a size-1
    axis, all-equal inputs, an empty row): it still counts as a check, but passing only such
    cases never earns partial credit when grading (see mhalib/grading/credit.py).

    ``must_raise`` marks arguments the contract refuses: the sentence says why (``"d_model=10 is
    not divisible by num_heads=4"``); the probe records the exception raised as the output
    ``"raised <Type>: <message>"`` and the judge wants one of ``raise_types``.
    """

    label: str
    args: tuple
    kwargs: dict = field(default_factory=dict)
    degenerate: bool = False
    must_raise: str = ""
    raise_types: tuple[str, ...] = ("ValueError", "TypeError")

    @property
    def refusal_values(self) -> tuple[str, ...]:
        """The numbers a refusal's message must name: the ``name=value`` pairs of
        ``must_raise`` (``("10", "4")`` for ``"d_model=10 is not divisible by num_heads=4"``)."""
        return tuple(value for _, value in re.findall(r"(\w+)=(-?\d+)", self.must_raise))

    def arguments(self, names: tuple[str, ...], defaults: dict | None = None) -> dict:
        """The case's arguments by name: positional ones in the order of ``names``, then the
        keyword ones, then ``defaults`` for those not given."""
        values = dict(zip(names, self.args))
        values.update(self.kwargs)
        for name, value in (defaults or {}).items():
            values.setdefault(name, value)
        return values

    def signature(self) -> str:
        parts = [describe(a) if isinstance(a, np.ndarray) else repr(a) for a in self.args]
        parts += [f"{k}={describe(v) if isinstance(v, np.ndarray) else repr(v)}"
                  for k, v in self.kwargs.items()]
        return "(" + ", ".join(parts) + ")"


class Mistake(Protocol):
    """A known slip and what to tell the learner; ``detect`` says whether a failing output shows
    it. The judge calls ``detect`` only on cases the output got wrong, and keeps no state
    between calls: everything a mistake needs is in its arguments."""

    name: str
    message: str

    def detect(self, exercise: Exercise, case: Case, received: Any, meta: dict) -> bool:
        """True when ``received`` (and the work ``meta`` the probe measured) shows this slip."""
        ...


@dataclass(frozen=True)
class WrongAnswer:
    """A slip modelled by recomputing its wrong answer: the reference with one thing wrong.

    Detected where the wrong answer differs from the right one and the learner's output equals
    it, by the exercise's own comparison (:meth:`Exercise.reproduces`).
    """

    name: str
    message: str
    compute: Callable[[Case], Any]

    def detect(self, exercise: Exercise, case: Case, received: Any, meta: dict) -> bool:
        return exercise.reproduces(case, self.compute, received)


@dataclass(frozen=True)
class Symptom:
    """A slip recognised from what the output or the measured work looks like, not by
    recomputing it: the right output built with N x N memory, FLOPs of a recomputed prefix, a
    count that fits one head of any width. ``test(case, received, meta)`` says whether it shows.
    """

    name: str
    message: str
    test: Callable[[Case, Any, dict], bool]
    # True for a symptom that says where the slip is but not what it is (the blocks are
    # combined wrongly): the judge prefers a diagnosis that reproduces the output exactly
    vague: bool = False

    def detect(self, exercise: Exercise, case: Case, received: Any, meta: dict) -> bool:
        try:
            return bool(self.test(case, received, meta))
        except Exception:  # a malformed output never shows a slip, and never crashes the judge
            return False


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
    # the large case run where the operating system measures the work (measured exercises
    # only; see mhalib.checks.physical)
    physical = None

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

    def spare_cases(self, seed: int, suite: str) -> list[Case]:
        """Cases a repair of the learner's code must pass beside the suite's own (another
        seed's): an edit right only on the suite's inputs is not said. An exercise whose
        contract leaves some inputs arbitrary makes them unusable here, so that a repair that
        reads them is not said either."""
        return self.cases(seed + 1, suite)

    def visible_cases(self, rng: np.random.Generator) -> list[Case]:
        raise NotImplementedError

    def hidden_cases(self, rng: np.random.Generator) -> list[Case]:
        return []

    # -- probe side ----------------------------------------------------------------------------
    def call(self, func, case: Case):
        """Call the learner's function on one case; returns (output, measured work). A numpy
        exercise notes a torch tensor in the output (the lesson's contract is np.ndarray). The
        function gets copies of the case's arrays: code that writes into its input (x[...] = 0)
        must not change the case the answer is then judged on (round R: a repair that dropped
        a copy made the case's -inf entries 0, and so agreed with its own output)."""
        output = func(*(_fresh(a) for a in case.args),
                     **{name: _fresh(value) for name, value in case.kwargs.items()})
        meta = {"torch_output": True} if _holds_torch(output) else {}
        numpy_scalar = _numpy_scalar(output)
        if numpy_scalar:
            meta["numpy_scalar"] = numpy_scalar  # recorded as a plain number: say so here
        return output, meta

    # -- judge side ----------------------------------------------------------------------------
    def expected(self, case: Case):
        """The reference output (plain numpy / Python data) for one case: by default the answer
        key of this exercise (``mhalib.reference.<name>``, imported when the judge asks) on the
        case's arguments."""
        from mhalib.checks.answer_key import answer_key

        return answer_key(self.name)(*case.args, **case.kwargs)

    def mistakes(self) -> list[Mistake]:
        return []

    def judge_case(self, case: Case, received, meta: dict) -> str | None:
        """None if ``received`` is right for ``case``; otherwise why not (one sentence)."""
        return difference(self.expected(case), received, self.rtol, self.atol)

    def refusal_problem(self, case: Case, received) -> str | None:
        """For a ``must_raise`` case: None when the call raised ValueError or TypeError whose
        message names every number of ``case.must_raise`` (the contract's refusal), else why
        not (a vaguer error such as numpy's reshape error, or a result returned)."""
        return refusal_problem(case, received)

    def expected_once(self, case: Case):
        """``expected(case)``, computed once per case object (the judge asks many times: once
        per mutant of the answer key it tries)."""
        cache = self.__dict__.setdefault("_expected_cache", {})
        hit = cache.get(id(case))
        if hit is None or hit[0] is not case:
            if len(cache) > 64:
                cache.clear()
            hit = cache[id(case)] = (case, self._expected_now(case))
        return hit[1]

    def _expected_now(self, case: Case):
        return self.expected(case)

    def reproduces(self, case: Case, compute: Callable[[Case], Any], received) -> bool:
        """True when ``compute`` (a wrong answer) differs from the reference on ``case`` and
        ``received`` equals it."""
        if getattr(case, "must_raise", ""):
            return False
        try:
            wrong = compute(case)
        except Exception:
            return False
        if difference(self.expected_once(case), wrong, self.rtol, self.atol) is None:
            return False  # this mistake makes no difference on this case
        return difference(wrong, nan_where_empty(wrong, received), self.rtol, self.atol) is None

    def stays_right(self, case: Case, compute: Callable[[Case], Any]) -> bool:
        """True when ``compute`` (a reading of the learner's code) gives the reference output on
        ``case``: a case the learner got right must come out right from the reading too."""
        try:
            output = compute(case)
        except Exception:
            return False
        return difference(self.expected_once(case), output, self.rtol, self.atol) is None


def _numpy_scalar(output) -> str | None:
    """The type name of a numpy scalar in ``output`` (a number, or a dict of them), else None."""
    values = output.values() if isinstance(output, dict) else (output,)
    for value in values:
        if isinstance(value, np.generic) and not isinstance(value, np.bool_):
            return type(value).__name__
    return None


def _holds_torch(output) -> bool:
    """True when ``output`` (or an item of a tuple or list of it) is a torch tensor."""
    items = output if isinstance(output, (tuple, list)) else (output,)
    return any(type(item).__module__.startswith("torch") for item in items)


REFUSED_WITHOUT_VALUES = "refusal_without_values"
REFUSED_WITH_ASSERT = "refusal_by_assert"
NOT_REFUSED = "no_argument_check"


def _raised(received) -> tuple[str, str] | None:
    """``(type, message)`` of a must_raise case's record (``"raised <Type>: <message>"``)."""
    if not (isinstance(received, str) and received.startswith("raised ")):
        return None
    kind, _, message = received[len("raised "):].partition(":")
    return kind.strip(), message.strip()


def _names_values(message: str, values: tuple[str, ...]) -> bool:
    return all(re.search(rf"(?<![\d.]){re.escape(v)}(?![\d])", message) for v in values)


def refusal_kind(case: Case, received) -> str | None:
    """None for the contract's refusal; :data:`NOT_REFUSED` when the call returned;
    :data:`REFUSED_WITH_ASSERT` for an ``assert``; :data:`REFUSED_WITHOUT_VALUES` for another
    exception, or one whose message lacks the numbers."""
    raised = _raised(received)
    if raised is None:
        return NOT_REFUSED
    kind, message = raised
    allowed = getattr(case, "raise_types", ("ValueError", "TypeError"))
    if kind in allowed and _names_values(message, case.refusal_values):
        return None
    if kind == "AssertionError" and "AssertionError" not in allowed:
        return REFUSED_WITH_ASSERT
    return REFUSED_WITHOUT_VALUES


def _wanted(case: Case) -> str:
    names = " and ".join(f"{n}={v}" for n, v in re.findall(r"(\w+)=(-?\d+)", case.must_raise))
    return f"ValueError whose message names {names}" if names else "ValueError"


def refusal_problem(case: Case, received) -> str | None:
    """Why a ``must_raise`` case failed (one sentence), or None (see :func:`refusal_kind`)."""
    kind = refusal_kind(case, received)
    if kind is None:
        return None
    if kind == NOT_REFUSED:
        return (f"{case.must_raise}, so the contract wants {_wanted(case)}; your function "
                f"returned {describe(received)} without checking")
    raised_kind, message = _raised(received)
    return (f"{case.must_raise}, so the contract wants {_wanted(case)}; your function raised "
            f"{raised_kind}: {message[:120]!s}, which does not say which argument is wrong")


@dataclass(frozen=True)
class Refusal:
    """A contract refusal gone wrong on a ``must_raise`` case: ``kind`` is
    :data:`NOT_REFUSED` (the function returned) or :data:`REFUSED_WITHOUT_VALUES` (it raised
    something vaguer). Detected only on must_raise cases."""

    name: str
    message: str

    def detect(self, exercise: Exercise, case: Case, received: Any, meta: dict) -> bool:
        return bool(getattr(case, "must_raise", "")) and refusal_kind(case, received) == self.name


def refusal_mistakes(check: str, raise_line: str) -> list[Refusal]:
    """The two refusal mistakes of an exercise whose contract refuses some arguments, in the
    lesson's words: ``check`` says what to test, ``raise_line`` the statement to add."""
    return [
        Refusal(NOT_REFUSED,
                f"no check of the arguments: when {check}, the contract wants the function to "
                f"refuse them before computing anything; add `{raise_line}`."),
        Refusal(REFUSED_WITH_ASSERT,
                f"when {check} your function stops at an `assert`: an AssertionError is not the "
                f"contract's refusal (and asserts vanish under python -O); raise the error "
                f"yourself, naming the values: `{raise_line}`."),
        Refusal(REFUSED_WITHOUT_VALUES,
                f"when {check} your function fails with an error that does not name the "
                f"argument and its value (numpy's or torch's own shape error, or a bare "
                f"message); the contract wants the check up front: `{raise_line}`."),
    ]


def expected_of(exercise, case):
    """The right output for ``case``, computed once per case object when ``exercise`` can
    (:meth:`Exercise.expected_once`): the readings of a failure ask for it again and again, and
    for a long sequence one answer of the key takes a good part of the visible suite's time."""
    once = getattr(exercise, "expected_once", None)
    return once(case) if once is not None else exercise.expected(case)


def _fresh(value):
    """A copy of an array argument (a learner may write into it); anything else as it is."""
    return value.copy() if isinstance(value, np.ndarray) else value
