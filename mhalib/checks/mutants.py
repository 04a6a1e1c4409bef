"""Mutants of the answer key (issue 22): the search over small changes, made from the key's own
code instead of a hand-written list.

Every small edit a slip makes (:mod:`mhalib.checks.mutant_edits`: an operator changed, a term
dropped, a constant moved by one, a keyword or a transpose left out, two arguments swapped, one
variable used for another, a bound off by one) is tried on the answer key
(``mhalib.reference.<name>``) and on the answer-key helpers it calls (``softmax`` inside
``attention``, ``repeat_kv`` inside grouped-query attention), one at a time, and each kind of
edit also in every place it applies at once (``keepdims=True`` left out of both reductions).

The key is compiled once, as a schema in which every edit is a switch
(:mod:`mhalib.checks.mutant_schema`), so one mutant is one call, not one compilation. A mutant
is named only when it reproduces the learner's output on every failing case given (several
sizes, so one case's coincidence does not count); when two edits in different places fit, both
are said, and when more fit none is. Messages show the edited fragment in the contract's
argument names, never the key's whole statement.
"""

from __future__ import annotations

import copy
import time
import warnings

import numpy as np

from mhalib.checks.exercise import expected_of
from mhalib.checks.mutant_schema import Mutant, build_in_background, built, schema

# The grader tries at most MAX_TRIED mutants (after the ones a case cannot tell apart are
# skipped), so that the same submission always gets the same diagnosis, with a time limit that
# only a machine in trouble reaches; the visible judge answers while the learner waits (within
# 0.25 s in all), so it stops after QUICK_BUDGET_S seconds (the schema's first build included).
# On the wrong answers of rounds E-I every edit that was named came within the first 671 tries
# (the blockwise keys try up to about 1250), so tries past 800 only cost time.
MAX_TRIED = 800
QUICK_BUDGET_S = 0.07
BUILD_IN_BACKGROUND_BELOW_S = 1.0  # a judge with less time never builds a schema itself
GRADING_BUDGET_S = 30.0


def mutant_diagnosis(exercise, recorded, budget_s: float = GRADING_BUDGET_S,
                     max_tried: int = MAX_TRIED, passing=()) -> tuple[str, str] | None:
    """``(flag, message)`` naming the edit of the answer key that reproduces every recorded
    failing ``(case, result)`` (at most three) and stays right on the ``passing`` cases (the
    cases the learner got right, :func:`passing_cases`), or None; tries at most ``max_tried``
    mutants in order, and none after ``budget_s`` seconds (the schema's first build
    included)."""
    rest = [pair for pair in recorded if not refuses(pair[0]) and not extreme_inputs_only(
        [pair]) and not only_non_finite_differ(exercise, [pair])][3:]  # (once a mutant fits)
    recorded = to_explain(exercise, recorded)
    if not recorded or budget_s <= 0:
        return None
    from mhalib.checks.answer_key import answer_key

    started = time.perf_counter()
    key = answer_key(exercise.name)
    if budget_s < BUILD_IN_BACKGROUND_BELOW_S and not built(key):
        build_in_background(key)  # ready for the next check; this one goes on without it
        return None
    found = schema(key)
    if found is None or time.perf_counter() - started > budget_s:
        return None
    compute = _computer(exercise, found.function)
    recorded.sort(key=lambda pair: _size(pair[0]))  # the smallest case first: cheapest to try
    found.active.reached = set()
    try:  # (the visible suite skips the mix-ups of variables: watching every call of the
        # key for its locals took most of its 0.07 s on round AC's chunked prefill)
        seen_values = _locals_seen(found, compute, recorded[0][0]) if \
            budget_s >= BUILD_IN_BACKGROUND_BELOW_S else _run_quietly(compute, recorded[0][0])
    finally:
        reached, found.active.reached = found.active.reached, None
    fits: list[Mutant] = []
    for mutant in found.mutants:
        if not mutant.ids & reached:
            continue  # an edit of code this case never runs changes nothing
        if mutant.swap is not None and not _alike(seen_values.get(mutant.where, {}),
                                                  *mutant.swap):
            continue
        max_tried -= 1
        if max_tried < 0 or time.perf_counter() - started > budget_s:
            break
        found.active.clear()
        found.active.update(mutant.ids)
        try:
            if not reproduces_all(exercise, compute, recorded) or \
                    not stays_right_on_all(exercise, compute, passing) or \
                    not reproduces_all(exercise, compute, rest):
                continue  # (every failing case: 1/sqrt(d_model) is 0.5/sqrt(d_head) only
                # while there are 4 heads)
        finally:
            found.active.clear()
        if any(mutant.nodes & seen.nodes for seen in fits):
            continue  # the same place said another way (keepdims left out, or set False)
        fits.append(mutant)
        if len(fits) > 2:
            return None  # too many readings: none of them can be trusted to be the slip
    if not fits:
        return None
    lead = ("your output is exactly what the right computation gives with one change: "
            if len(fits) == 1 else "two single changes of the right computation give exactly "
            "your output: ")
    flag = f"mutant:{fits[0].where or 'key'}:{min(fits[0].ids)}"
    return flag, lead + " Or: ".join(m.sentence for m in fits) + "."


def to_explain(exercise, recorded, extreme: bool = False) -> list:
    """The failing ``(case, result)`` pairs (at most three, no refusal cases) that an edit of the
    answer key or of its inputs may explain, or ``[]`` when none should be tried: the expected
    output is not the key's alone, the output ignores its inputs (:func:`degenerate`), or the
    slip is one of numerical care (:func:`only_non_finite_differ`,
    :func:`extreme_inputs_only`). With ``extreme``, the pairs only when every one has inputs of
    magnitude 80 or more (and finite outputs that depend on them): what only a cap of the
    inputs, a reading that changes no small value, may explain."""
    recorded = [(c, r) for c, r in recorded if not refuses(c)][:3]
    if not recorded or not default_expected(exercise) or degenerate(recorded) or \
            only_non_finite_differ(exercise, recorded) or \
            extreme_inputs_only(recorded) != extreme:
        return []
    return recorded


def reproduces_all(exercise, compute, recorded) -> bool:
    """True when ``compute`` reproduces every recorded output (warnings of the wrong answers'
    arithmetic silenced)."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return all(exercise.reproduces(case, compute, result.get("output"))
                   for case, result in recorded)


def stays_right_on_all(exercise, compute, passing) -> bool:
    """True when ``compute`` gives the right output on every case of ``passing``: a reading of
    the learner's code that gets wrong a case the learner got right is not their code (an edit
    that fits the failing cases by a coincidence of their sizes, say)."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return all(exercise.stays_right(case, compute) for case in passing)


def passing_cases(cases, results, failed_labels, most: int = 3) -> list:
    """The ``most`` smallest cases the learner got right (an output, no refusal expected)."""
    right = [case for case, result in zip(cases, results)
             if case.label not in failed_labels and result.get("status") == "ok"
             and not refuses(case)]
    return sorted(right, key=_size)[:most]


def only_non_finite_differ(exercise, recorded) -> bool:
    """True when, on every recorded case, the output is right wherever it is finite (it fails
    by NaN or inf alone): an overflow, which edits that overflow the same way would "explain"."""
    for case, result in recorded:
        output, expected = result.get("output"), expected_of(exercise, case)
        pairs = zip(output, expected) if isinstance(output, tuple) and isinstance(
            expected, tuple) else [(output, expected)]
        for got, want in pairs:
            if not isinstance(got, np.ndarray) or not isinstance(want, np.ndarray) or \
                    got.shape != want.shape:
                return False
            got, want = got.astype(np.float64), want.astype(np.float64)
            finite = np.isfinite(got)
            if finite.all() or not np.allclose(got[finite], want[finite], rtol=1e-3, atol=1e-5):
                return False
    return True


def extreme_inputs_only(recorded) -> bool:
    """True when every failing case has inputs of magnitude 80 or more (exp overflows past 88
    in float32): a slip of numerical care, which edits that overflow or underflow the same way
    would "explain"; the output's form says it better."""
    def largest(case):
        found = 0.0
        for value in list(case.args) + list(case.kwargs.values()):
            if isinstance(value, np.ndarray) and value.dtype.kind == "f" and value.size:
                finite = np.abs(value[np.isfinite(value)])
                found = max(found, float(finite.max()) if finite.size else 0.0)
        return found
    return all(largest(case) >= 80 for case, _ in recorded)


def degenerate(recorded) -> bool:
    """True when every output holds the same value all along its last axis (a constant, all
    zeros, a uniform softmax): an output that ignores its inputs is reproduced by edits that
    throw the inputs away (the max shift computed as x itself), which name nothing."""
    arrays = []
    for _, result in recorded:
        output = result.get("output")
        parts = output if isinstance(output, tuple) else (output,)
        arrays += [np.asarray(p, dtype=np.float64) for p in parts
                   if isinstance(p, np.ndarray) and p.ndim and p.shape[-1] > 1]
    return bool(arrays) and all(
        np.allclose(a, a[..., :1], rtol=1e-9, atol=1e-12, equal_nan=True) for a in arrays)


def _size(case) -> int:
    """How many values the case's inputs hold."""
    return sum(int(np.size(a)) for a in list(case.args) + list(case.kwargs.values())
               if hasattr(a, "shape"))


def _locals_seen(found, compute, case) -> dict[str, dict]:
    """The key's and its helpers' local variables when they return on ``case`` (the last
    call's), by function name ("" for the key), to tell which variables could be mixed up."""
    import sys

    codes = {code: where for where, code in found.codes.items()}
    seen: dict[str, dict] = {}

    def watch(frame, event, arg):
        if event == "return" and frame.f_code in codes:
            seen[codes[frame.f_code]] = dict(frame.f_locals)

    previous = sys.getprofile()
    sys.setprofile(watch)
    try:
        _run_quietly(compute, case)
    finally:
        sys.setprofile(previous)
    return seen


def _run_quietly(compute, case) -> dict:
    """Run the key on ``case`` once (for the edits it reaches) without watching its locals:
    {} (no variable may then be mixed up with another)."""
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            compute(case)
    except Exception:
        pass
    return {}


def _alike(values: dict, name: str, other: str | None, any_shape: bool = False) -> bool:
    """True when ``other`` could stand where ``name`` is: both arrays (or tensors) of one
    shape (of any shape when ``any_shape``: a repair's ``q.shape`` for ``x.shape``), or both
    ints, or both floats, or both bools; ``other`` None (hard-coded): ``name`` is an int."""
    if other is None:  # hard-coded: only an int variable (an axis, a count) is
        value = values.get(name)
        return isinstance(value, int) and not isinstance(value, bool)
    if name not in values or other not in values:
        return False
    a, b = values[name], values[other]
    shape_a, shape_b = getattr(a, "shape", None), getattr(b, "shape", None)
    if shape_a is not None or shape_b is not None:
        if any_shape:
            return shape_a is not None and shape_b is not None
        return shape_a is not None and tuple(shape_a) == tuple(shape_b or (None,))
    for kind in (bool, int, float):
        if isinstance(a, kind) or isinstance(b, kind):
            return isinstance(a, kind) and isinstance(b, kind)
    return False


def refuses(case) -> bool:
    """True for a case whose arguments the contract refuses (a raise is the right answer)."""
    return bool(getattr(case, "must_raise", "") or getattr(case, "expects_error", False))


def default_expected(exercise) -> bool:
    """True when the exercise's expected output is its answer key on the case's inputs (apart
    from the cases it refuses: ``expected_is_the_key``)."""
    from mhalib.checks.exercise import Exercise
    from mhalib.checks.torch_exercise import TorchExercise

    return type(exercise).expected in (Exercise.expected, TorchExercise.expected) or getattr(
        exercise, "expected_is_the_key", False)


def _computer(exercise, function):
    from mhalib.checks.torch_exercise import TorchExercise, torch_model

    if isinstance(exercise, TorchExercise):
        return torch_model(function)

    def compute(case):
        return function(*copy.deepcopy(case.args), **copy.deepcopy(case.kwargs))
    return compute
