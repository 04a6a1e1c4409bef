"""What a repair of the learner's code says (issue 22), read from the record the probe wrote.

:func:`repair_of` takes the record's repair only when it is well formed (a record is not
trusted); :func:`with_repair` puts it first in the judge's diagnosis, then what the output
shows. When the result is a constant factor away from the right one (:func:`scalar_factor`),
the change found is only one place where that factor can be undone, and the message says so
(rounds M and N: a ratio's bytes mended in its FLOPs).
"""

from __future__ import annotations

import ast

from mhalib.checks.repairs import MAX_FRAGMENT


def repair_of(record) -> dict | None:
    """The record's repair, when it is well formed (a record is not trusted: only short strings
    and small ints are kept), else None; a second repair elsewhere under ``also``, another of
    the same place under ``either``."""
    repair = _checked(record.get("repair") if isinstance(record, dict) else None)
    for key in ("also", "either"):
        if repair is not None and isinstance(record["repair"].get(key), dict):
            other = _checked(record["repair"][key])
            if other is not None:
                repair[key] = other
    return repair


def _checked(repair) -> dict | None:
    if not isinstance(repair, dict):
        return None
    texts = {k: repair.get(k) for k in ("function", "old", "new", "hint")}
    texts["elsewhere"] = repair.get("elsewhere", "")  # (records of older versions have none)
    texts["cancels"] = repair.get("cancels", "")
    texts["bypasses"] = repair.get("bypasses", "")
    numbers = {k: repair.get(k) for k in ("line", "places")}
    which = {k: repair[k] for k in ("occurrence", "of")
             if type(repair.get(k)) is int and 0 < repair[k] <= 20}
    if repair.get("many") not in (None, 1):
        return None
    texts["function"] = texts["function"] if texts["function"] is not None else ""
    if not all(isinstance(v, str) and len(v) <= 2 * MAX_FRAGMENT for v in texts.values()) or not \
            all(type(v) is int and 0 < v < 10**6 for v in numbers.values()):
        return None
    if not texts["old"] or not texts["new"] or texts["old"] == texts["new"]:
        return None
    lines = repair.get("lines", [numbers["line"]])
    if not (isinstance(lines, list) and 0 < len(lines) <= 8 and all(
            type(v) is int and 0 < v < 10**6 for v in lines)):
        return None
    return {**texts, **numbers, **(which if len(which) == 2 else {}), "lines": lines,
            "many": repair.get("many") == 1}


def repair_sentence(repair: dict) -> str:
    """How the learner's code becomes right, in one sentence (two, when a change in either of
    two places does it)."""
    if "also" in repair:
        return ("a change in either of two places makes every case right (two slips may "
                f"cancel out, so look at both): {_change(repair)}; or {_change(repair['also'])}.")
    if repair.get("cancels"):
        return (f"one change makes every case right, but it is not where the slip is: "
                f"{_change(repair)}.")
    if repair.get("bypasses"):
        return (f"one change makes every case right, but it reads around a value rather than "
                f"mending it: {_change(repair)}. {repair['bypasses'][0].upper()}"
                f"{repair['bypasses'][1:]}.")
    if "either" in repair:
        return ("one change makes every case right, in either of two ways (a factor undone at "
                "one operand may have been slipped at another: mend it where the slip is): "
                f"{_change(repair['either'])}; or {_change(repair)}.")
    return f"one change makes every case right: {_change(repair)}."


def _change(repair: dict) -> str:
    lines = repair["lines"]
    where = (f"line {lines[0]}" if len(lines) == 1 else
             "lines " + ", ".join(str(n) for n in lines[:-1]) + f" and {lines[-1]}")
    where += f" (in {repair['function']})" if repair["function"] else ""
    each = "" if repair["places"] < 2 else (
        " (one per place, in order)" if "; " in repair["old"] else " in each place")
    hint = f": {repair['hint']}" if repair["hint"] else ""
    other = f" ({repair['elsewhere']}: mend it where the slip is)" if repair.get(
        "elsewhere") else ""
    cancels = (f" (that change makes {repair['cancels']} wrong, which held the value the answer "
               "key computes: it only cancels a slip elsewhere, in a value combined with it or "
               "computed after it)") if repair.get("cancels") else ""
    which = ""
    if repair.get("occurrence") and repair.get("of"):
        nth = {1: "first", 2: "second", 3: "third"}.get(repair["occurrence"],
                                                        f"number {repair['occurrence']}")
        which = f" (the {nth} of the {repair['of']} on that line)"
    return (f"at {where}, write `{repair['new']}` where your code has `{repair['old']}`{which}"
            f"{each}{hint}{other}{cancels}")


def scalar_factor(cases, results, exercise, repair: dict | None = None) -> float | str | None:
    """``k`` when every failing output is a number ``k`` times the right one (the same ``k`` on
    every failing case), or the name of a size of the case (``"batch_size"``, ``"1/batch_size"``)
    when the factor is that size on every failing case, else None: a result off by a factor is
    mended by undoing it at any of the factors of the result (a ratio's numerator or
    denominator, a count's other coefficient), and where the repair makes it need not be where
    the slip is (round N: a count's bytes counted twice mended at its keys-and-values 2). An int
    count off by a divisor is found up to the rounding of ``//`` (``6 * d // 4`` mended as
    ``// 3`` where the 6 should be 8)."""
    ratios, pairs, named = set(), [], []
    for case, result in zip(cases, results):
        got = result.get("output") if result.get("status") == "ok" else None
        if isinstance(got, bool) or not isinstance(got, (int, float)):
            continue
        try:
            want = exercise.expected_once(case)
        except Exception:
            return None
        if isinstance(want, bool) or not isinstance(want, (int, float)) or got == want:
            continue
        if not want:
            return None
        ratios.add(float(f"{got / want:.9g}"))  # (9 significant digits: 2**-30 is no 1e-09)
        pairs.append((got, want))
        named.append((got / want, case))
    counts = bool(pairs) and all(isinstance(x, int) for pair in pairs for x in pair)
    if len(ratios) == 1 and (not counts or _simple_ratio(next(iter(ratios)), len(pairs))):
        return next(iter(ratios))
    size = _size_factor(exercise, named)
    if size is not None:
        return size
    if counts and repair and _edits_a_divisor(repair):
        got, want = max(pairs, key=lambda pair: abs(pair[1]))  # ints: // rounds each case
        factor = got / want
        if all(abs(g - factor * w) <= 1 for g, w in pairs):
            return round(factor, 4)
    return None


def _simple_ratio(ratio: float, cases: int) -> bool:
    """A count's ratio read as a factor: positive, a fraction of small integers, on two failing
    cases or more (one case's ratio may be anything: an int32 product that wrapped around)."""
    from fractions import Fraction

    if cases < 2 or ratio <= 0:
        return False
    near = Fraction(ratio).limit_denominator(16)
    return abs(float(near) - ratio) <= 1e-9 * ratio and near.numerator <= 64


def _size_factor(exercise, named: list) -> str | None:
    """The name of a size of the cases (or its inverse) that every failing case's ratio equals
    (at least two failing cases, the size not 1 on all of them)."""
    from mhalib.checks.case_inputs import sizes

    if len(named) < 2:
        return None
    try:
        each = [(ratio, sizes(exercise, case)) for ratio, case in named]
    except Exception:
        return None
    for name in each[0][1]:
        values = [found.get(name) for _, found in each]
        if any(not isinstance(v, int) or v < 1 for v in values) or all(v == 1 for v in values):
            continue
        if all(abs(ratio - v) <= 1e-9 * v for (ratio, _), v in zip(each, values)):
            return name
        if all(abs(ratio * v - 1) <= 1e-9 for (ratio, _), v in zip(each, values)):
            return f"1/{name}"
    return None


def _edits_a_divisor(repair: dict) -> bool:
    """True when the repair's change starts inside the right operand of a ``/`` or ``//``
    (``/ 4``, ``/ (4 * d)``, ``// (d * 4)``)."""
    old, new = str(repair.get("old", "")), str(repair.get("new", ""))
    common = 0
    while common < min(len(old), len(new)) and old[common] == new[common]:
        common += 1
    try:
        tree = ast.parse(old)
    except SyntaxError:  # a fragment that is not code of its own: read the text before it
        return old[:common].rstrip().rstrip("(").rstrip().endswith("/")
    return any(isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Div, ast.FloorDiv))
               and node.right.lineno == node.right.end_lineno == 1
               and node.right.col_offset <= common < node.right.end_col_offset
               for node in ast.walk(tree))


# what names a result's factor before a change that undoes it is said
FACTOR_READINGS = ("mistake:", "count:", "change:", "form:factor", "units:")


def _times(factor: float | str) -> str:
    return f"{factor} times" if isinstance(factor, str) else f"{factor:g} times"


def with_repair(verdict, repair: dict, factor: float | str | None = None):
    """``verdict`` (failing) with the repair said first, then what the output shows; when the
    result is only a constant ``factor`` off, the repair is one place that factor can be
    mended, and the message says so."""
    name = verdict.exercise
    reading = verdict.diagnosis.removeprefix(f"{name}: ")
    shows = "" if any(f.startswith("mutant:") for f in verdict.flags) else (
        f" What the output shows: {reading}")  # (an edit of the key only says it the other way)
    if repair["many"] and factor is None:
        return verdict  # several places mend it, and the result is not one factor off
    if factor is not None and "also" not in repair and any(
            f.startswith(FACTOR_READINGS) for f in verdict.flags):
        # a model or a reading says which factor is off; the one change found may undo it
        # elsewhere (rounds M and N: a ratio's bytes mended in its FLOPs)
        verdict.diagnosis = (
            f"{name}: {reading} (Your result is {_times(factor)} the right one on every failing "
            f"case. One change that undoes the factor: {_change(repair)}; a factor can be undone "
            "in more than one place, so mend it where the slip is.)")
        verdict.flags = sorted(set(verdict.flags) | {"repair"})
        return verdict
    if factor is not None and "also" not in repair:
        does = "undoes" if repair.get("cancels") else "mends"
        verdict.diagnosis = (
            f"{name}: your result is {_times(factor)} the right one on every failing case, and "
            f"one change {does} it: {_change(repair)}. A result off by a constant factor can "
            f"often be mended in more than one place: check that this is where the slip is, not "
            f"another factor of the same result.{shows}")
        verdict.flags = sorted(set(verdict.flags) | {"repair"})
        return verdict
    if _regrouping_beside_a_model(verdict, repair):
        verdict.diagnosis = (
            f"{name}: {reading} (One change also makes every case right: "
            f"{_change({**repair, 'hint': ''})}, the same operands grouped otherwise. Either the "
            "parentheses are the slip, or that grouping is what you meant and the maths just "
            "said is.)")
        verdict.flags = sorted(set(verdict.flags) | {"repair"})
        return verdict
    verdict.diagnosis = f"{name}: {repair_sentence(repair)}{shows}"
    verdict.flags = sorted(set(verdict.flags) | {"repair"})
    return verdict


def _regrouping_beside_a_model(verdict, repair: dict) -> bool:
    """True when the repair only regroups operands and a mistake model also reproduces the
    output: the learner may have written the grouping they meant, from the wrong algebra (round
    Z: ``2 * d_model ** 2`` from N^2 = 2 d^2, mended as ``(2 * d_model) ** 2``)."""
    from mhalib.checks.edit_regroupings import REGROUPED

    return (repair.get("hint") == REGROUPED and "also" not in repair and "either" not in repair
            and not repair.get("cancels")
            and any(f.startswith("mistake:") for f in verdict.flags))
