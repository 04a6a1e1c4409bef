"""Repairs of the learner's own code (issue 22): one small change that makes every case right.

A reading of a wrong output (a mistake model, an edit of the answer key) says what the output
looks like, and two slips can look alike. A repair says what to change in the learner's code,
and it is checked: the learner's function, and the functions of their own that it calls (two
levels down), are compiled once with every small edit switchable
(:func:`mhalib.checks.mutant_schema.build_schema`: the edits a slip makes, and the ones that put
back what a slip leaves out, such as ``keepdims=True`` or a transpose), and an edit is a repair
only when the edited code passes **every** case of the suite, judged as the grader judges it
(:func:`mhalib.checks.output_problem.output_problem`). An edit that is not on the learner's path
for the first failing case is never tried, and none switches the learner's own options or
mends the output without being a fix anyone would write (:mod:`mhalib.checks.mutant_edits`).
When a second place mends it too (two slips that cancel), both are said; when more do, none.

It runs where the learner's code runs (the probe; never in the grader's sandbox, which has no
answer key), within a time budget (short in the visible suite, and only for short code there)
and with what the learner's code prints swallowed; the record carries what was found
(:func:`find_repair`) and the judge puts it first in the diagnosis
(:mod:`mhalib.checks.repair_sentences`).
"""

from __future__ import annotations

import ast
import contextlib
import io
import warnings

import numpy as np

from mhalib.checks.edit_nodes import HINT
from mhalib.checks.encoding import decode
from mhalib.checks.mutants import _alike, _locals_seen
from mhalib.checks.repair_alternatives import another_operand
from mhalib.checks.repair_clock import SearchClock
from mhalib.checks.repair_places import SIMPLE_STATEMENTS, bypassed, elsewhere

MAX_TRIES = 3000
MAX_PLACES = 2  # repairs found in more places than this: none is said
# a quick search (the visible suite's, while the learner waits) only reads code this short (the
# function and its own helpers): compiling every edit of it takes under 0.05 s (round J's
# wrong answers: 158 of 204 are this short; longer ones took up to 0.4 s to compile)
QUICK_BELOW_S, QUICK_MAX_CHARS = 0.5, 800
TRY_LIMIT_FACTOR = 5  # a try's call may take this many times the slowest call of the code as is
MAX_FRAGMENT = 120  # characters of a fragment a record may carry
LEAST_SAID = 12  # characters of the learner's code shown around an edit, where the line has them
# hints true of a repair too (said after it)
SAID_HINTS = ("grouped otherwise", "index times width", "keeps the reduced axis", "is XOR",
              "rounded up", "closing parenthesis", "without the early return",
              "changes nothing in place")
_LIBRARIES = ("mhalib", "numpy", "torch", "scipy", "math", "builtins", "einops", "triton")


class _OutOfTime(Exception):
    pass


def find_repair(exercise, func, cases, entries, timeout, budget_s: float,
                slowest_s: float = 1.0, spare=None) -> dict | None:
    """The first small edit of ``func`` (or of a function of the learner's that it calls) under
    which every case of ``cases`` is right, as ``{"function", "line", "lines", "old", "new",
    "places", "hint"}`` (with ``"also"``, a second one elsewhere, or ``"many"`` when more places
    mend it), or None: none fails, none found within ``budget_s`` seconds, or the code cannot be
    read
    (``entries``: the record's entries for ``cases``, from the unedited code, whose slowest call
    took ``slowest_s``: a try may take a few times that, no more). ``spare()``, when given,
    makes other cases of the exercise (another seed's): an edit found must pass them too, so
    that a change right only on the suite's own inputs is not said (round O: positions cast to
    bfloat16, which held every position the suite had)."""
    from mhalib.checks.library_contract import library_problem
    from mhalib.checks.mutant_schema import build_schema
    from mhalib.checks.output_problem import output_problem

    clock = SearchClock(budget_s)

    def right(case, entry) -> bool:
        if entry.get("status") != "ok":
            return False
        try:
            result = {"status": "ok", "output": decode(entry.get("output")),
                      "meta": entry.get("meta") or {}}
        except Exception:
            return False
        return output_problem(exercise, case, result) is None and not library_problem(
            result["meta"], getattr(exercise, "int_counts", False))

    failing = [case for case, entry in zip(cases, entries) if not right(case, entry)]
    if not failing or not callable(func):
        return None
    if budget_s < QUICK_BELOW_S and _own_code_size(func) > QUICK_MAX_CHARS:
        return None  # (compiling every edit of longer code takes longer than the learner waits)
    try:
        schema = build_schema(func, owned=_owned_by(func), repairing=True)
    except Exception:
        return None
    if schema is None:
        return None
    failing_ids = {id(case) for case in failing}
    returned = [case for case, entry in zip(cases, entries)
                if id(case) in failing_ids and entry.get("status") == "ok"]
    others = [case for case in cases if id(case) not in failing_ids]
    order = failing + others  # a try is over at its first wrong case: the failing ones first

    def passes(case) -> bool:
        left = clock.left()
        if left <= 0:
            raise _OutOfTime
        from mhalib.checks.calls import run_case

        limit = min(left, TRY_LIMIT_FACTOR * slowest_s + 0.05, timeout or left)
        entry = run_case(exercise, schema.function, case, limit)
        if entry.get("status") == "timeout" and clock() >= budget_s:
            raise _OutOfTime
        return right(case, entry)

    spared: list = []  # the spare cases, made when the first edit passes the suite's

    def _holds_on_spare(mutant) -> bool:
        """``mutant`` (active) also passes ``spare()``'s cases: checked before it counts as
        found, so that another edit of the same place still gets its try (round V: the
        whole block-table row read held on the suite's cases, rounding up held on all)."""
        if spare is None:
            return True
        if not spared:
            spared.append(_spare_cases(spare))
        try:
            return all(passes(case) for case in spared[0])
        except _OutOfTime:
            return True  # (no time left to run them all: the edit is kept, as found)

    with _quiet():
        schema.active.reached = set()
        try:
            passes(failing[0])
        except _OutOfTime:
            return None
        finally:
            reached, schema.active.reached = schema.active.reached, None
        seen = None
        tries = 0
        found: list = []  # repairs in different places (two slips that cancel are mended
        # in either: the message then says both)
        either: dict = {}  # a number changed in a place: another edit of the same place
        for mutant in _boolean_swaps_last(schema.mutants):
            if not mutant.ids & reached:
                continue
            if mutant.swap is not None and seen is None:  # (the swaps come last)
                seen = _values_seen(exercise, schema, failing[0],
                                    clock.left())
                if seen is None:
                    return None
            if mutant.swap is not None and not _alike(seen.get(mutant.where, {}),
                                                      *mutant.swap, any_shape=True):
                continue  # (x for axis in np.isinf(x): a condition that never holds)
            same_place = [other for other in found if _lines(mutant) & _lines(other)]
            if same_place and not another_operand(same_place, mutant, either, LEAST_SAID):
                continue  # a place already mended: one repair of it is enough
            tries += 1
            if tries > MAX_TRIES:
                break
            schema.active.clear()
            schema.active.update(mutant.ids)
            try:
                if all(passes(case) for case in order) and _holds_on_spare(mutant):
                    if same_place:  # the number changed there, or this: either may be the slip
                        either[id(same_place[0])] = mutant
                        continue
                    found.append(mutant)
                    if len(found) > MAX_PLACES:  # mended in many places: which one is the
                        return {**_described(schema, found[0]), "many": 1}  # slip is unknown
            except _OutOfTime:
                break
            finally:
                schema.active.clear()
    if not found:
        return None
    looked: dict = {} if seen is None else {"seen": seen}

    def first_seen() -> dict:
        """The learner's locals on the first failing case, read once (or {} out of time)."""
        if "seen" not in looked:
            looked["seen"] = _values_seen(exercise, schema, failing[0],
                                          clock.left()) or {}
        return looked["seen"]
    with _quiet():
        cancels = _cancelling(exercise, schema, failing, returned, found, first_seen,
                              clock)
    if len(found) == 2 and bool(cancels[0]) != bool(cancels[1]):
        keep = 0 if not cancels[0] else 1  # the other place only cancels the slip
        found, cancels = found[keep:keep + 1], cancels[keep:keep + 1]
    if len(found) == 2 and _works_around(schema, *found):
        found, cancels = found[:1], cancels[:1]
    elif len(found) == 2 and _works_around(schema, *reversed(found)):
        found, cancels = found[1:], cancels[1:]
    truthful = _named_for_its_value(exercise, failing[0], first_seen)
    with _quiet():
        described = [{**_described(schema, mutant, truthful), "cancels": _names(broken)}
                     for mutant, broken in zip(found, cancels)]
    if len(described) > 1:
        described[0]["also"] = described[1]
    elif id(found[0]) in either:
        with _quiet():
            described[0]["either"] = _described(schema, either[id(found[0])], truthful)
    return described[0]


def _spare_cases(spare) -> list:
    """The cases ``spare()`` makes, or none when it cannot make them."""
    try:
        return list(spare())
    except Exception:
        return []


def _cancelling(exercise, schema, failing, returned, found, first_seen,
                clock) -> list[list]:
    """For each repair of ``found``, the learner's variables (and arithmetic expressions that
    hold the edit: :func:`mhalib.checks.repair_cancels.expressions_changed`) that held a value
    the answer key computes and that the repair makes wrong
    (:func:`mhalib.checks.repair_cancels.broken_by`), on the failing case whose sizes are
    least alike (:func:`mhalib.checks.repair_cancels.least_alike`: with a 2-byte cache, a count
    without its factor 2 for K and V equals the key's elements): such a repair cancels the slip
    elsewhere. The case is one on which the learner's code returned (``returned``), where
    there is one: in a call that raised, a variable holds what it held before the statement that
    raised (round U: ``s`` the key's scores, before ``s = s - s.max(axis=-1)`` failed to
    broadcast), not what it holds once the repair lets that statement run. Empty lists when
    there is no time left to look."""
    from mhalib.checks.repair_cancels import (
        assigned_twice,
        broken_by,
        expression_values,
        expressions_changed,
        gives_the_argument,
        key_values,
        least_alike,
        without,
    )

    none = [[] for _ in found]
    trees = {where: _parsed(function) for where, function in schema.originals.items()}
    given = [gives_the_argument(trees.get(mutant.where), mutant) for mutant in found]
    if all(given):
        return none  # (a constant where an argument belongs is the slip itself)
    case, named = least_alike(exercise, returned or failing)
    pool = key_values(exercise, case)
    if pool is None or not any(pool):
        return none
    before = first_seen() if case is failing[0] else _values_seen(
        exercise, schema, case, clock.left())
    if not before:
        return none
    if not any(case is c for c in returned):  # (every failing call raised: a name assigned
        # twice may hold its first value, and the repair lets the second run)
        twice = {where: assigned_twice(trees.get(where)) for where in before}
        before = {where: {name: value for name, value in names.items()
                          if name not in twice[where]}
                  for where, names in before.items()}
    try:
        result = exercise.expected_once(case)
    except Exception:
        result = None
    broken = []
    for mutant, constant in zip(found, given):
        if constant:
            broken.append([])
            continue
        schema.active.clear()
        schema.active.update(mutant.ids)
        try:
            after = _values_seen(exercise, schema, case,
                                 clock.left())
        finally:
            schema.active.clear()
        if after is None:
            return none
        original = schema.originals.get(mutant.where)
        changed = expressions_changed(original, mutant)
        made_wrong = broken_by(before, after, pool, named)
        if not made_wrong and changed:
            # an expression that holds the edit (or is the edit) counts only when it held one
            # of the key's named values, not its result: the product a count is made of holds
            # the key's parts (2 * batch of 2 * batch * heads * n * d) and a repair makes them
            # other values; a crossover's divisor 2 * d_model is the key's N by chance
            made_wrong = broken_by(
                expression_values(before, mutant.where, original, changed, 1),
                expression_values(after, mutant.where, original, changed, 2),
                (without(pool[0], result), []), named)
        broken.append(made_wrong)
    return broken


def _names(broken: list) -> str:
    """``flops`` or ``flops`` and ``total`` (two at most; its function when not the learner's
    exercise function)."""
    said = [f"`{name}`" + (f" (in {where})" if where else "") for where, name in broken[:2]]
    return " and ".join(said)[:MAX_FRAGMENT]


def _named_for_its_value(exercise, case, first_seen):
    """``truthful(function, name)``: the learner's variable ``name`` is called after a size of
    the case (``d_model``) and held that size on the first failing case (``first_seen()``, its
    locals, read only when a name is asked about), as written: a change of the statement that
    assigns it makes the name lie, so the use may be the slip."""
    from mhalib.checks.case_inputs import sizes

    try:
        named = sizes(exercise, case)
    except Exception:
        return lambda where, name: False

    def truthful(where: str, name: str) -> bool:
        if name not in named:
            return False
        value = first_seen().get(where, {}).get(name)
        return isinstance(value, int) and not isinstance(value, bool) and value == named[name]
    return truthful


def _boolean_swaps_last(mutants: list) -> list:
    """``mutants`` with ``and`` for ``or`` (and back) tried after every other edit: where a
    guard's comparison is the slip (``val <= 0`` refusing a valid 0), the swap also mends the
    cases by making the guard refuse next to nothing (round O)."""
    def swaps(mutant) -> bool:
        return any(isinstance(node, ast.BoolOp) and isinstance(new, ast.BoolOp)
                   for node, new in mutant.edits)
    return [m for m in mutants if not swaps(m)] + [m for m in mutants if swaps(m)]


def _works_around(schema, upstream, downstream) -> bool:
    """True when ``downstream`` edits a later statement of the same function that reads a name
    ``upstream``'s statement assigns: mending there works around the value made upstream (the
    mask read elsewhere, the count replaced by another that happens to be equal), so the
    upstream place is the slip and the other is not said."""
    if upstream.where != downstream.where:
        return False
    tree = _parsed(schema.originals.get(upstream.where))
    up = {getattr(node, "lineno", 0) for node, _ in upstream.edits}
    down = {getattr(node, "lineno", 0) for node, _ in downstream.edits}
    if tree is None or min(down) <= max(up):
        return False
    assigned, read = set(), set()
    for statement in ast.walk(tree):
        if not isinstance(statement, SIMPLE_STATEMENTS):
            continue
        span = range(statement.lineno, (statement.end_lineno or statement.lineno) + 1)
        names = [n for n in ast.walk(statement) if isinstance(n, ast.Name)]
        if any(line in span for line in up):
            targets = statement.targets if isinstance(statement, ast.Assign) else (
                [getattr(statement, "target", None)])
            assigned |= {n.id for t in targets if t is not None for n in ast.walk(t)
                         if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        if any(line in span for line in down):
            read |= {n.id for n in names if isinstance(n.ctx, ast.Load)}
    return bool(assigned & read)


def _parsed(function) -> ast.FunctionDef | None:
    from mhalib.checks.mutant_schema import _parsed as parsed

    try:
        return parsed(function) if function is not None else None
    except (SyntaxError, ValueError):
        return None


def _lines(mutant) -> set:
    """``(function, line)`` of each place ``mutant`` edits."""
    return {(mutant.where, getattr(node, "lineno", 0)) for node, _ in mutant.edits}


def _values_seen(exercise, schema, case, left: float) -> dict | None:
    """The locals of the learner's functions on ``case`` (by function), or None when no time
    is left to look."""
    from mhalib.checks.calls import CallTimeout, time_limit

    if left <= 0:
        return None
    try:
        with time_limit(left):
            return _locals_seen(schema, lambda c: exercise.call(schema.function, c), case)
    except CallTimeout:
        return None


def _own_code_size(func, depth: int = 0, seen=None) -> int:
    """Characters of ``func``'s source and of its own helpers' (two levels down)."""
    import inspect

    from mhalib.checks.mutant_schema import _helpers

    seen = set() if seen is None else seen
    if func in seen:
        return 0
    seen.add(func)
    try:
        size = len(inspect.getsource(func))
    except (OSError, TypeError):
        return 0
    if depth < 2:
        size += sum(_own_code_size(helper, depth + 1, seen)
                    for _, helper in _helpers(func, _owned_by(func)))
    return size


def _owned_by(func):
    """Which called functions are the learner's own: defined where ``func`` is (its notebook or
    module), not in a library."""
    home = getattr(func, "__module__", None)

    def owned(target) -> bool:
        module = target.__module__ or ""
        return module == home and module.split(".")[0] not in _LIBRARIES
    return owned


def _described(schema, mutant, truthful=None) -> dict:
    """The record's description of ``mutant``: the function, the line (as the learner's cell
    or file numbers it), the fragments before and after, and the lines of every place; an edit
    made in several places is shown as the smallest fragments (``s`` -> ``p``), each the same."""
    node, new = mutant.edits[0]
    several = len(mutant.edits) > 1
    old_text, new_text = mutant.said(node, new, 0 if several else LEAST_SAID)
    if several and mutant.swap is not None and mutant.swap[1] is not None:
        old_text, new_text = mutant.swap  # one variable read for another, wherever it is read
    elif several and any(mutant.said(n, e) != (old_text, new_text) for n, e in mutant.edits):
        old_text, new_text, merged = _whole_statement(mutant)
        several = not merged  # (edits nested in one expression: said as one change)
    original = schema.originals.get(mutant.where)
    first = getattr(getattr(original, "__code__", None), "co_firstlineno", 1)
    hints = [getattr(e, HINT, "") for _, e in mutant.edits]
    lines = sorted({first + getattr(n, "lineno", 1) - 1 for n, _ in mutant.edits})
    said = 2 * MAX_FRAGMENT if len(mutant.edits) > 1 else MAX_FRAGMENT  # (every place's pair)
    tree = _parsed(original)
    which = {} if several else _occurrence(tree, node, old_text)
    return {"function": mutant.where, "line": lines[0], "lines": lines[:8],
            "old": old_text[:said], "new": new_text[:said], **which,
            "places": len(mutant.edits) if several else 1,
            "hint": next((h for h in hints if any(word in h for word in SAID_HINTS)), ""),
            "bypasses": bypassed(tree, mutant, first)[:2 * MAX_FRAGMENT],
            "elsewhere": elsewhere(tree, mutant, first,
                                   lambda name: truthful is not None and truthful(
                                       mutant.where, name))[:2 * MAX_FRAGMENT]}


def _occurrence(tree, node, old_text: str) -> dict:
    """``{"occurrence": k, "of": n}`` when ``old_text`` stands ``n > 1`` times on the edited
    line and the edit is in the ``k``-th (round Z: `out_a.to(ct)` twice on one line, where only
    the second was the slip), else {}."""
    line = getattr(node, "lineno", None)
    if tree is None or line is None:
        return {}
    same = sorted((n for n in ast.walk(tree) if getattr(n, "lineno", None) == line
                   and getattr(n, "end_lineno", None) == line and _unparsed(n) == old_text),
                  key=lambda n: n.col_offset)
    if len(same) < 2:
        return {}
    inside = [i for i, n in enumerate(same)
              if n.col_offset <= getattr(node, "col_offset", -1) < n.end_col_offset]
    return {"occurrence": inside[0] + 1, "of": len(same)} if len(inside) == 1 else {}


def _unparsed(node) -> str:
    try:
        return ast.unparse(node)
    except Exception:
        return ""


def _whole_statement(mutant) -> tuple[str, str, bool]:
    """Several different edits: each place's fragments, joined (``a`` -> ``b``; ``c`` -> ``d``
    reads as two fragments each side). Every place is said, as many as the lines listed: a
    place left out of the text would leave its slip in the code. Fragments that overlap (one
    edit inside another's fragment) are said as one expression holding both, both applied."""
    pairs = [mutant.said(n, e) for n, e in sorted(mutant.edits[:8], key=lambda edit: (
        getattr(edit[0], "lineno", 0), getattr(edit[0], "col_offset", 0)))]  # (in line order)
    olds = [old for old, _ in pairs]
    if any(a != b and a in b for a in olds for b in olds):
        together = mutant.said(None, None, together=list(mutant.edits[:8]))
        if together[0] and together[1] and max(map(len, together)) <= 2 * MAX_FRAGMENT:
            return together[0], together[1], True
    return "; ".join(olds), "; ".join(new for _, new in pairs), False


@contextlib.contextmanager
def _quiet():
    """The learner's prints and the edited code's warnings, swallowed."""
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()), \
            warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        yield
