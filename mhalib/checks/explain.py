"""Diagnoses that generalise (issue 22): what the judge says when no mistake model matches.

Tried in order on the failing cases, each only when the checker's own models named nothing:

0. the right values returned as a tuple in another order (``(weights, out)`` for ``(out,
   weights)``);
1. the exercise's **search over single changes** of its answer key (``search_space()``, see
   :mod:`mhalib.checks.search`): the change that reproduces most failing outputs is named;
2. for a count, the failing cases read together as the right count **times a ratio of sizes or
   plus one term** (:mod:`mhalib.checks.explain_counts`);
3. the answer key's **mutants** (:mod:`mhalib.checks.mutants`): every single small edit of the
   key's own code and of the answer-key helpers it calls (an operator, a constant, a keyword,
   a transpose, a variable, a bound), each kind also in every place at once; the edit that
   reproduces every failing output is named by the fragment it changes (within
   :data:`~mhalib.checks.mutants.QUICK_BUDGET_S` on the visible suite), then the key on
   **inputs read another way** (:mod:`mhalib.checks.input_edits`: -inf as 0, a mask inverted or
   transposed, heads taken strided instead of as contiguous blocks);
4. what the output **reads back** (:mod:`mhalib.checks.readbacks`): an attention output's
   weights (which keys each query used, whether rows sum to 1, the scores' scale, whose values
   were averaged), a merge's shares, a softmax gradient's row term, RoPE's exponents and pairing,
   the entries a head score averaged;
5. its **properties** (``properties()``, see :mod:`mhalib.checks.properties`): the first one a
   failing output breaks, with the input and what it implies about the code;
6. the **output's form**: values of the right set in the wrong places (the order of axes they
   were read in, :mod:`mhalib.checks.explain_axes`), a whole axis reversed,
   one constant factor away (named by the case's sizes), NaN only where rows have no key,
   extra or mis-sized axes (named by the case's sizes), a float count where an int is due;
7. an **exception**, explained (a shape mismatch: which sizes disagree and what they are in the
   case; numpy's transpose(1, 2); a float size from '/'; .view on a non-contiguous tensor;
   None used as a number), then the exception's own last line.

Every function here returns ``(flag, message)`` or None and never raises.
"""

from __future__ import annotations

import re
import time

import numpy as np

from mhalib.checks.case_inputs import sizes
from mhalib.checks.explain_errors import explain_error
from mhalib.checks.explain_forms import explain_form, half_precision

FLOAT_COUNT = "is the float"
NUMPY_COUNT = "is a numpy scalar"


def float_count_problem(received) -> str | None:
    """For an exercise with ``int_counts``: why a right-valued count fails (a float, even 2.0 *
    d, where the contract wants a plain int), or None."""
    values = received.items() if isinstance(received, dict) else [(None, received)]
    for key, value in values:
        if isinstance(value, (float, np.floating)):
            where = f"[{key!r}]" if key is not None else ""
            return (f"the count{where} {FLOAT_COUNT} {value!r}: FLOP, parameter and byte counts "
                    "are plain Python ints, and '/', math.pow, a float literal (0.0, 2.0) or a "
                    "float factor makes a float; use //, ** and int literals and factors")
    return None


def explain_failures(exercise, cases, results, failures, quick: bool = False,
                     until: float | None = None) -> tuple[str, str] | None:
    """``(flag, message)`` for the failing cases of ``exercise`` or None (see the module);
    ``quick`` (the visible suite, answered while the learner waits) keeps the search of the
    answer key's mutants within ``QUICK_BUDGET_S`` and the inputs read another way within half
    of that; past ``until`` (a ``time.perf_counter()`` value: the visible suite's time for the
    judge) only the readings of an exception and of the output's form are tried."""
    if failures and all(FLOAT_COUNT in problem or NUMPY_COUNT in problem
                        for _, problem in failures):
        return "contract:plain_int", failures[0][1] + "."
    from mhalib.checks.library_contract import WRONG_LIBRARY

    wrong_library = [(label, problem) for label, problem in failures if WRONG_LIBRARY in problem]
    if wrong_library:  # true whatever else is wrong, and the first thing to fix
        label, problem = wrong_library[0]
        return "contract:library", f"{problem} (case '{label}')."
    refused = {case.label for case in cases if getattr(case, "must_raise", "")}
    if failures and all(label in refused for label, _ in failures):
        label, problem = failures[0]
        return "contract:must_raise", f"{problem} (case '{label}')."
    failing = [(case, result) for case, result in zip(cases, results)
               if _failed(case, failures)]
    recorded = [(c, r) for c, r in failing if r.get("status") == "ok"]
    from mhalib.checks.mutants import (
        GRADING_BUDGET_S,
        QUICK_BUDGET_S,
        mutant_diagnosis,
        passing_cases,
    )

    budget = QUICK_BUDGET_S if quick else GRADING_BUDGET_S
    if until is not None:
        budget = max(0.0, min(budget, until - time.perf_counter()))
    # a reading of the code must also get right the cases the learner got right
    passing = passing_cases(cases, results, {label for label, _ in failures})

    def from_search(exercise, recorded):
        return _from_search(exercise, recorded, passing)

    def from_mutants(exercise, recorded):
        return mutant_diagnosis(exercise, recorded, budget, passing=passing)

    def from_input_edits(exercise, recorded):
        from mhalib.checks.input_edits import input_edit_diagnosis

        return input_edit_diagnosis(exercise, recorded, budget / 2, passing=passing)

    from mhalib.checks.explain_pairs import from_other_weights

    for step in (_from_tuple_order, from_search, _from_count_terms, from_mutants,
                 from_input_edits, from_other_weights, _from_readbacks, _from_properties):
        if until is not None and time.perf_counter() > until:
            break
        try:
            found = step(exercise, recorded)
        except Exception:  # a diagnosis must never crash the judge
            found = None
        if found:
            return found
    forms = {id(case): _form(exercise, case, result) for case, result in recorded}
    consistent = _same_factor_everywhere([(case, forms[id(case)]) for case, _ in recorded])
    for case, result in failing:
        try:
            if result.get("status") == "error":
                found = explain_error(exercise, case, str(result.get("error") or ""),
                                      confirmed_sizes(exercise, case, result, failing),
                                      same_error(exercise, case, result, failing))
            elif result.get("status") == "ok" and not getattr(case, "must_raise", ""):
                found = forms[id(case)]
            else:
                found = None
        except Exception:
            found = None
        if found and found[0] == "form:factor" and not consistent:
            continue  # one factor on this case, another (or none) on the others: a coincidence
        if found and found[0] == "form:shape":
            case, found = _clearest_shape_reading(exercise, case, found, recorded, forms)
        if found:
            return found[0], f"{found[1]} (case '{case.label}')"
    return None


def _clearest_shape_reading(exercise, case, found, recorded, forms):
    """``(case, reading)``: of the failing cases whose output's shape is read, the one whose
    sizes coincide least (round Y: a d of 8 equal to G * n_rep = 8 named an axis of G * n_rep
    copies "x.shape[3]"; a case with other sizes names it by what it is, or not at all)."""
    outputs = {id(c): r.get("output") for c, r in recorded}
    shaped = [(c, forms[id(c)]) for c, _ in recorded
              if forms[id(c)] and forms[id(c)][0] == "form:shape"]
    return min([(case, found)] + shaped, key=lambda pair: _coincidences(sizes(
        exercise, pair[0])) + _empty(outputs.get(id(pair[0]))))


def _empty(output) -> int:
    """1 for an array with an axis of 0 entries, which many slips give alike (round AE: the
    square case of ``np.tri(n_q, n_k - n_q)``; the others' sizes said what the 0 was)."""
    return int(isinstance(output, np.ndarray) and 0 in output.shape)


def _coincidences(named: dict) -> int:
    """How many of the case's sizes (above 1) equal another, or the product of two others;
    and how many are 1 (an axis of one entry reads as any size's slip)."""
    ones = sum(v == 1 for v in named.values() if isinstance(v, int))
    values = [v for v in named.values() if isinstance(v, int) and v > 1]
    equal = ones + sum(a == b for i, a in enumerate(values) for b in values[i + 1:])
    products = sum(values[k] == values[i] * values[j] for i in range(len(values))
                   for j in range(i + 1, len(values)) for k in range(len(values))
                   if k not in (i, j))
    return equal + products


_FACTOR = re.compile(r"is (\S+(?: = \S+)*) times the right")


def _form(exercise, case, result) -> tuple[str, str] | None:
    """What the form of a recorded output says (:func:`explain_form`), or None."""
    try:
        return explain_form(exercise, case, result.get("output"), result.get("meta") or {},
                            sizes(exercise, case))
    except Exception:
        return None


def _same_factor_everywhere(forms) -> bool:
    """True when every failing case with an output (``(case, form)`` pairs) is off by a constant
    factor that one name fits on all of them (a factor read on one case alone can be a
    coincidence of its sizes, e.g. d_model = 1; ``1/4 = 1/sqrt(d)`` on a case where d = 16 and
    ``1/sqrt(d)`` on another share a name). A half-precision case, whose rounding can hide the
    factor, may show none."""
    shared = None
    for case, found in forms:
        match = _FACTOR.search(found[1]) if found and found[0] == "form:factor" else None
        if match is None:
            if half_precision(case):
                continue
            return False
        names = set(match.group(1).split(" = "))
        shared = names if shared is None else shared & names
    return bool(shared)


_NUMBER = re.compile(r"(?<![\d.])(?<!dimension )(?<!dim )\d+")  # (an axis index is kept)


def confirmed_sizes(exercise, case, result, failing) -> dict:
    """The sizes of ``case`` (by name) an error may name a number by: those no other failing
    case contradicts. Another case that raised the same error (the same text, its numbers
    aside) has its numbers at the same places; a name whose size is at a place on this case
    and not at that place on another (whose arguments have as many axes, and which has a size
    of that name) equals it by chance (round U: a cache concatenated along the heads gave 8
    heads where the case had N = 8 tokens; the next case had N = 10 and 8 heads again)."""
    named = sizes(exercise, case)
    numbers = [int(n) for n in _NUMBER.findall(str(result.get("error") or ""))]
    others = [([int(n) for n in _NUMBER.findall(text)], their)
              for their, text in same_error(exercise, case, result, failing)]
    kept = {}
    for name, value in named.items():
        places = [i for i, n in enumerate(numbers) if n == value]
        if places and any(name in their and not any(found[i] == their[name] for i in places)
                          for found, their in others):
            continue  # (another case's number at these places is not its size of this name)
        kept[name] = value
    return kept


def same_error(exercise, case, result, failing) -> list[tuple[dict, str]]:
    """``(sizes, error text)`` of each other failing case that raised the error ``case`` raised
    (the same text, its numbers aside) with array arguments of as many axes (of other ranks,
    the same error may compare other axes)."""
    template = _NUMBER.sub("#", str(result.get("error") or ""))
    others = []
    for other, other_result in failing:
        text = str(other_result.get("error") or "")
        if other is case or other_result.get("status") != "error" or \
                _NUMBER.sub("#", text) != template or _ranks(other) != _ranks(case):
            continue
        try:
            others.append((sizes(exercise, other), text))
        except Exception:
            continue
    return others


def _ranks(case) -> tuple:
    """How many axes each array argument of ``case`` has (numbers and flags left out)."""
    return tuple(n for n in (int(np.ndim(a)) for a in [*case.args, *case.kwargs.values()]) if n)


def _failed(case, failures) -> bool:
    return any(label == case.label for label, _ in failures)


def _from_tuple_order(exercise, recorded):
    """When every failing output is the right tuple in another order: which goes where."""
    import itertools

    from mhalib.checks.compare import difference, tolerance_of

    orders = None
    for case, result in recorded:
        output = result.get("output")
        expected = exercise.expected_once(case)
        if not (isinstance(output, tuple) and isinstance(expected, tuple)
                and len(output) == len(expected) > 1):
            return None
        tolerance = tolerance_of(exercise, case)
        fitting = {order for order in itertools.permutations(range(len(expected)))
                   if order != tuple(range(len(expected)))
                   and all(difference(expected[j], output[i], *tolerance) is None
                           for i, j in enumerate(order))}
        orders = fitting if orders is None else orders & fitting
        if not orders:
            return None
    if not orders or len(orders) > 1:
        return None
    order = next(iter(orders))
    moved = ", ".join(f"output[{i}] is the right output[{j}]" for i, j in enumerate(order)
                      if i != j)
    return "form:tuple_order", (f"the right values, returned in another order: {moved}. Return "
                                "them in the order the contract gives.")


def _from_search(exercise, recorded, passing=()):
    space = getattr(exercise, "search_space", None)
    if space is None or not recorded:
        return None
    from mhalib.checks.search import search_changes

    return search_changes(exercise, space(), recorded[:3], passing=passing)


def _from_count_terms(exercise, recorded):
    from mhalib.checks.explain_counts import explain_count_terms, explain_off_by_one

    if getattr(exercise, "search_space_for", None) is None:
        return explain_off_by_one(exercise, recorded)  # not a count exercise: a number?
    return explain_count_terms(exercise, recorded)


def _from_readbacks(exercise, recorded):
    from mhalib.checks.readbacks import readback_diagnosis

    return readback_diagnosis(exercise, recorded)


def _from_properties(exercise, recorded):
    from mhalib.checks.lesson_properties import PROPERTIES
    from mhalib.checks.properties import first_broken

    own = getattr(exercise, "properties", None)
    properties = (own() if own is not None else []) + PROPERTIES.get(exercise.name, [])
    if not properties or not recorded:
        return None
    return first_broken(exercise, properties, recorded)


def number_in(text: str) -> list[int]:
    return [int(n) for n in re.findall(r"\d+", text)]
