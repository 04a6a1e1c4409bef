"""A repair that turns a right value wrong only cancels the slip (issue 22, round Q).

A repair is found by its output: the edited code passes every case. Where the slip leaves out a
factor the edits cannot put back (a count's bytes missing the 2 for keys and values), the
search can still find a change that undoes the factor somewhere else (the FLOPs counted for
one batch instead of every one), and the change is then not the slip. What tells the two apart
is the learner's own values on the way: the answer key computes its FLOPs, and the learner's
``flops`` held exactly that before the change and no longer does after it. A change that makes
a value the key also computes wrong is not where the slip is; the judge says so instead of
presenting it as the fix (:func:`broken_by`). Where no variable holds the value, an arithmetic
expression that holds the edit may (:func:`expressions_changed`: ``(scores + mix) / k_bytes``
mended by dropping ``mix``).

Only distinctive values count as the key's: arrays of four or more values, not all equal;
floats other than 0 and +-1 (and, when whole, as an int would be); ints of 10 or more that are
not a size of the case (a learner's ``n_rep`` of 2 equals many things by chance).
"""

from __future__ import annotations

import ast
import inspect
import math
import sys
import textwrap
import warnings
from fractions import Fraction
from pathlib import Path

import numpy as np

MAX_POOLED = 600  # values of the key kept (a tiled key's loop makes many blocks)
MAX_ELEMENTS = 200_000  # larger arrays are not compared
_CHECKS = str(Path(__file__).resolve().parent)
_PACKAGE = str(Path(__file__).resolve().parent.parent)


def key_values(exercise, case) -> tuple[list, list] | None:
    """``(named, parts)``: the values the answer key's own functions hold when they return on
    ``case`` (their locals, and the parts of what they return), and the values of their
    arithmetic sub-expressions, as float64 arrays and Python numbers; None when the key cannot
    be run on it."""
    from mhalib.checks.answer_key import answer_key

    try:
        key = answer_key(exercise.name)
    except Exception:
        return None
    pooled: list = []
    parts: list = []

    def watch(frame, event, arg):
        name = frame.f_code.co_filename
        if event != "return" or not name.startswith(_PACKAGE) or name.startswith(_CHECKS):
            return
        for value in [*frame.f_locals.values(), arg]:
            _pool(value, pooled)
        for expression in _arithmetic(frame.f_code):
            try:
                _pool(eval(expression, frame.f_globals, dict(frame.f_locals)), parts)
            except Exception:
                continue

    previous = sys.getprofile()
    sys.setprofile(watch)
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            exercise.call(key, case)
    except Exception:
        return None
    finally:
        sys.setprofile(previous)
    return pooled, parts


def least_alike(exercise, cases: list) -> tuple:
    """``(case, its named sizes)``: of ``cases``, the first whose sizes take the most distinct
    values, counting none of 1 and 2 (sizes that equal each other or a factor of the count make
    a wrong value equal a right one by chance)."""
    from mhalib.checks.case_inputs import sizes

    def score(case) -> tuple[int, dict]:
        try:
            named = sizes(exercise, case)
        except Exception:
            return -1, {}
        listed = [v for v in named.values() if isinstance(v, int)]
        values = set(listed)
        repeated = len(listed) - len(values)  # (H == G: a GQA slip is invisible)
        return len(values - {0, 1, 2}) - len(values & {1, 2}) - 2 * repeated, named

    scored = [(score(case), i, case) for i, case in enumerate(cases)]
    (_, named), _, case = max(scored, key=lambda item: (item[0][0], -item[1]))
    return case, named


_ARITHMETIC: dict = {}  # compiled sub-expressions by code object (a key's code never changes)


def _arithmetic(code) -> list:
    """The compiled arithmetic sub-expressions of ``code``'s function (names, constants and
    ``+ - * / // **`` only, so evaluating them again has no effect): a count's key written as
    one product holds no local for the learner's ``elements``, but its left part is it."""
    if code not in _ARITHMETIC:
        found = []
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(code)))
        except (OSError, TypeError, SyntaxError):
            tree = None
        plain = (ast.BinOp, ast.Name, ast.Constant, ast.operator, ast.Load, ast.UnaryOp,
                 ast.unaryop)
        for node in ast.walk(tree) if tree is not None else ():
            if isinstance(node, ast.BinOp) and all(isinstance(n, plain) for n in ast.walk(node)):
                found.append(compile(ast.Expression(node), "<key>", "eval"))
        _ARITHMETIC[code] = found[:64]
    return _ARITHMETIC[code]


def broken_by(before: dict, after: dict, pool: tuple[list, list],
              sizes: dict) -> list[tuple[str, str]]:
    """``(function, name)`` of the learner's variables that held one of the key's values
    (``pool``: :func:`key_values`, its named values or their arithmetic parts) before a change
    (``before``: locals by function) and, changed by it, hold none of its named values after
    (``after``). (A part is not enough after: half the key's FLOPs is its scores' FLOPs, and
    a change that halves the learner's right FLOPs makes them that.)"""
    named, parts = pool
    small = {int(v) for v in sizes.values() if isinstance(v, int)}
    broken = []
    for where, names in before.items():
        for name, old in names.items():
            if name.startswith("__") or where not in after or name not in after[where]:
                continue
            was = _plain(old)
            if was is None or not _distinctive(was, small) or not (
                    _in(was, named) or _in(was, parts) and not _simple_fraction(was)):
                continue
            now = _plain(after[where][name])
            if now is None or _same(was, now) or _in(now, named):
                continue
            broken.append((where, name))
    return broken


_PURE = (ast.BinOp, ast.UnaryOp, ast.Name, ast.Constant, ast.operator, ast.unaryop, ast.Load)


def expressions_changed(original, mutant) -> list[tuple[str, object, object]]:
    """``(text, before, after)`` for the arithmetic expressions of the learner's ``original``
    function that ``mutant`` (one edit) changes: the edited expression itself and those that
    hold it (names, constants and ``+ - * / // **`` only), compiled as written (``before``)
    and with the edit made (``after``). A change inside one expression cancels a slip as one
    of a variable does (``(scores + mix) / k_bytes`` mended by dropping ``mix`` where the bytes
    miss V's), and no variable holds the sum."""
    from mhalib.checks.edit_sayings import _replaced, parents_of
    from mhalib.checks.mutant_schema import _parsed

    if len(mutant.edits) != 1:
        return []
    node, new = mutant.edits[0]
    try:
        tree = _parsed(original)
    except (SyntaxError, ValueError):
        return []
    if tree is None:
        return []
    twin = next((n for n in ast.walk(tree) if type(n) is type(node) and _at(n) == _at(node)),
                None)
    if twin is None:
        return []
    parents = parents_of(tree)
    found, shown = [], twin
    while isinstance(shown, (ast.BinOp, ast.UnaryOp, ast.Name, ast.Constant)):
        after = _replaced(shown, twin, new)
        holder = parents.get(id(shown))
        assigned = isinstance(holder, ast.Return) or (
            isinstance(holder, (ast.Assign, ast.AnnAssign)) and all(
                isinstance(target, ast.Name) for target in getattr(
                    holder, "targets", [getattr(holder, "target", None)])))
        if isinstance(shown, ast.BinOp) and not assigned and _pure(shown) and _pure(after):
            # (a value assigned to a name is that variable's, compared as such; what the
            # function returns is its output, wrong on a failing case)
            try:
                found.append((ast.unparse(shown),
                              compile(ast.Expression(shown), "<learner>", "eval"),
                              compile(ast.fix_missing_locations(ast.Expression(after)),
                                      "<learner>", "eval")))
            except (SyntaxError, ValueError, TypeError):
                pass
        shown = parents.get(id(shown))
    return found[:8]


def expression_values(seen: dict, where: str, function, compiled: list, index: int) -> dict:
    """``{where: {text: value}}``: the values of ``compiled`` (:func:`expressions_changed`;
    ``index`` 1 evaluates the code as written, 2 as edited) in ``where``'s locals of ``seen``
    (locals by function)."""
    if where not in seen or not compiled:
        return {where: {}}
    names = {}
    scope = getattr(function, "__globals__", {})
    for item in compiled:
        try:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                names[item[0]] = eval(item[index], scope, dict(seen[where]))
        except Exception:
            continue
    return {where: names}


def without(values: list, result) -> list:
    """``values`` (the key's, as pooled) less those equal to ``result`` (the key's output)."""
    plain = _plain(result)
    if plain is None:
        return list(values)
    return [v for v in values if isinstance(v, np.ndarray) != isinstance(plain, np.ndarray)
            or not _same(v, plain)]


def _at(node) -> tuple:
    return (getattr(node, "lineno", None), getattr(node, "col_offset", None),
            getattr(node, "end_lineno", None), getattr(node, "end_col_offset", None))


def _pure(node) -> bool:
    return all(isinstance(n, _PURE) for n in ast.walk(node))


def _pool(value, pooled: list, depth: int = 0) -> None:
    if len(pooled) >= MAX_POOLED or depth > 2:
        return
    if isinstance(value, dict):
        for part in list(value.values())[:32]:
            _pool(part, pooled, depth + 1)
        return
    if isinstance(value, (tuple, list)) and len(value) <= 8:
        for part in value:
            _pool(part, pooled, depth + 1)
        return
    plain = _plain(value)
    if plain is not None:
        pooled.append(plain)


def _plain(value):
    """``value`` as a Python int or float, or a float64 array; None for anything else."""
    if isinstance(value, (bool, np.bool_)):
        return None
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value)
    if type(value).__module__.startswith("torch") and hasattr(value, "detach"):
        try:
            if value.is_complex() or value.numel() > MAX_ELEMENTS:
                return None
            value = value.detach().cpu().double().numpy()
        except Exception:
            return None
    if isinstance(value, np.ndarray) and value.dtype.kind in "fiu" and \
            value.size <= MAX_ELEMENTS:
        if value.ndim == 0:
            return _plain(value.item())
        return value.astype(np.float64)
    return None


def _distinctive(value, small: set) -> bool:
    if isinstance(value, int):
        return abs(value) >= 10 and value not in small
    if isinstance(value, float):  # (an int's value as a float is no more distinctive)
        return np.isfinite(value) and value not in (0.0, 1.0, -1.0) and not (
            value.is_integer() and (abs(value) < 10 or int(value) in small))
    finite = value[np.isfinite(value)]
    return value.size >= 4 and finite.size > 0 and np.ptp(finite) > 0


def _simple_fraction(value) -> bool:
    """True for a float that is a ratio of two small ints (0.5, 0.25, 2/3): a sub-expression of
    the key's sizes takes such values by chance (round AF: the key's ``n / page_size``, 2 / 4,
    was the learner's 1/sqrt(page_size) of 4)."""
    if not isinstance(value, float) or not np.isfinite(value):
        return False
    near = Fraction(value).limit_denominator(16)
    return abs(near.numerator) <= 16 and math.isclose(float(near), value, rel_tol=1e-9)


def _same(a, b) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)) or a.shape != b.shape:
            return False
        scale = float(np.max(np.abs(a[np.isfinite(a)]), initial=0.0))
        return bool(np.allclose(a, b, rtol=1e-4, atol=1e-5 * scale + 1e-12, equal_nan=True))
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    return bool(np.isclose(float(a), float(b), rtol=1e-6, atol=0.0))


def _in(value, pool: list) -> bool:
    return any(_same(value, other) for other in pool
               if isinstance(other, np.ndarray) == isinstance(value, np.ndarray))


def gives_the_argument(tree: ast.FunctionDef | None, mutant) -> bool:
    """Every edit of ``mutant`` puts one of the function's parameters where its code (``tree``)
    has a constant (a number, or a name assigned a number once): a value hard-coded where the
    contract passes one is the slip itself, wherever the repair finds it, never a cancellation
    (round AS: `bf16 = 2` read for bytes_per_element; a K that held the key's elements of K and
    V by that 2 had been said to be made wrong by the repair)."""
    if tree is None or not mutant.edits:
        return False
    parameters = {a.arg for a in tree.args.args + tree.args.kwonlyargs}
    constants = {t.id for node in ast.walk(tree) if isinstance(node, ast.Assign)
                 and isinstance(node.value, ast.Constant)
                 and type(node.value.value) in (int, float)
                 for t in node.targets if isinstance(t, ast.Name)} - assigned_twice(tree)
    return all(isinstance(new, ast.Name) and new.id in parameters and (
        isinstance(old, ast.Constant) or isinstance(old, ast.Name) and old.id in constants)
        for old, new in mutant.edits)


def assigned_twice(tree: ast.FunctionDef | None) -> set:
    """The names ``tree`` assigns in more than one statement (or as a loop's variable, or with
    ``+=``)."""
    if tree is None:
        return set()
    counts: dict = {}
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, (ast.AugAssign, ast.AnnAssign, ast.For)) else []
        for target in targets:
            for name in ast.walk(target):
                if isinstance(name, ast.Name):
                    more = 2 if isinstance(node, (ast.AugAssign, ast.For)) else 1
                    counts[name.id] = counts.get(name.id, 0) + more
    return {name for name, count in counts.items() if count > 1}
