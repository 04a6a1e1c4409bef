"""The small edits a slip makes to code (issue 22), found in the answer key's own syntax tree.

:func:`sites` lists, for every node of a function's computing statements, the nodes that could
stand in its place after one slip:

- an operator changed (``+`` for ``*``, ``/`` for ``//``, ``@`` with its operands swapped, ``<``
  for ``<=``), or one term or factor of it dropped;
- a sign dropped;
- a constant moved by one, doubled, halved, negated or set to 1 (an axis, a scale, an
  exponent), a flag flipped;
- a keyword left out (``keepdims=True``), a call left out (``sqrt(d)`` as ``d``, a transpose
  or a softmax skipped), two neighbouring arguments swapped, ``.T`` left out;
- one variable used where another belongs, or an int variable hard-coded (0, 1, -1); for a
  count, a size off by one;
- a reshape straight to the final shape where the key reshapes and then transposes (heads
  split without a transpose); an accumulation (``+=``) that overwrites instead;
- a slice bound off by one, or left out;
- the same operands grouped otherwise (a matter of parentheses): the parentheses of an operand
  left out and the expression read by Python's precedence (``base ** -2.0 * i / d`` for
  ``base ** (-2.0 * i / d)``), or put around other operands (``(layers * rank) + rope`` for
  ``layers * (rank + rope)``); an integer constant squared along with a size (``(4 * d) ** 2``
  for ``4 * d * d``).

Argument checks (statements that raise, and calls of :mod:`mhalib.validate`), docstrings and
``while`` loops (an edit could make them endless) are never edited. How an edit is said is
:mod:`mhalib.checks.edit_sayings`.
"""

from __future__ import annotations

import ast

from mhalib.checks.edit_nodes import (
    _BLOCK,
    _RESHAPES,
    ADDED,
    _block_of_index,
    _hinted,
    _in_a_copy,
    _int_of,
    _shifted,
)
from mhalib.checks.edit_regroupings import _regroupings
from mhalib.checks.edit_sayings import _size, _validator, parents_of

# (% and // taken for one another: an index's group h // n_rep written h % n_rep, round AN)
_OPERATOR_SWAPS = {
    ast.Add: (ast.Sub, ast.Mult), ast.Sub: (ast.Add,), ast.Mult: (ast.Add, ast.Div),
    ast.Div: (ast.Mult, ast.FloorDiv), ast.FloorDiv: (ast.Div, ast.Mult, ast.Mod),
    ast.Pow: (ast.Mult,), ast.Mod: (ast.FloorDiv,),
}
_COMPARE_SWAPS = {
    ast.Lt: (ast.LtE, ast.Gt), ast.LtE: (ast.Lt, ast.GtE), ast.Gt: (ast.GtE, ast.Lt),
    ast.GtE: (ast.Gt, ast.LtE), ast.Eq: (ast.NotEq,), ast.NotEq: (ast.Eq,),
}
_UNWRAPPED_METHODS = ("transpose", "swapaxes", "permute", "movedim", "moveaxis", "t", "contiguous",
                      "float", "double", "to")
# library functions taken for one another (round AC: log1p as "a stable log", where log(x)
# belongs; log1p(x) is log(1 + x); round AQ: np.maximum(x, axis), an elementwise maximum with
# the number axis, where the reduction np.max(x, axis) belongs)
_LOOKALIKES = {"log": ("log1p",), "log1p": ("log",), "exp": ("expm1",), "expm1": ("exp",),
               "logaddexp": ("logaddexp2",), "logaddexp2": ("logaddexp",),
               "maximum": ("max",), "minimum": ("min",)}  # (np's: axis= and keepdims=)
PINNED = (0, 1, -1)  # what an int variable may be hard-coded as (an axis, a count)
SHORTCUT_DROPPED = ("that is, without the early return: on the failing cases it fires and "
                    "returns what the contract does not want there")
_INT_LITERAL = ("a float literal makes the count a float wherever it is used: the contract wants "
                "a plain int")
_SQUARED = "a constant squared along with a size, as `(4 * d) ** 2` is 16 d^2, not 4 d^2"


def sites(tree: ast.FunctionDef, module_globals: dict, repairing: bool = False,
          helper: bool = False) -> dict[int, list[ast.AST]]:
    """``id(node) -> [alternative nodes]`` for every editable node of ``tree``'s computing
    statements (alternatives share the original's children; never mutate them). A
    ``repairing`` search (of a learner's code, :mod:`mhalib.checks.repairs`) also edits the
    conditions of the function's own guards and puts back what a slip leaves out
    (:func:`_additions`), but never switches the learner's options (:func:`_options`; in a
    ``helper`` of theirs, any parameter tested as a condition is one)."""
    from mhalib.checks.repair_edits import (
        ROUNDED_UP,
        _additions,
        _call_closed_elsewhere,
        _einsum_spelled_otherwise,
        _guard_conditions,
        _hollow,
        _loop_assignments,
        _options,
        _own_call,
        _result_kept,
        _rounded_up,
        _switches_an_option,
        _written_at_the_offset,
    )

    variables = _variables(tree)
    counting = _is_count(tree)
    found: dict[int, list[ast.AST]] = {}
    roots = list(computing_statements(tree)) + (_guard_conditions(tree) if repairing else [])
    options = _options(tree, helper) if repairing else set()
    looped, offsets = _loop_assignments(tree) if repairing else (set(), {})
    parents = parents_of(tree)
    loops = _loop_spans(tree)
    shortcuts = _early_return_tests(tree) if repairing else {}
    for statement in roots:
        pending = [statement]
        while pending:
            node = pending.pop()
            if isinstance(node, ast.Call) and _validator(node.func, module_globals):
                continue  # an argument check (and what it returns) is never edited
            alternatives = [a for a in _replacements(node, variables, counting)
                            if not _left_over_from_a_loop(node, a, loops)]
            if isinstance(node, ast.BinOp) and not isinstance(parents.get(id(node)), ast.BinOp):
                alternatives += list(_regroupings(node))  # (a whole expression's parentheses)
            if repairing and isinstance(node, ast.Constant) and _in_a_copy(node, parents):
                alternatives = []  # (one copy reweighted: a term missing, said by the models)
            if repairing and shortcuts.get(id(node)) == "inside" and isinstance(node,
                                                                              ast.Constant):
                alternatives = []  # (x.numel() == 1 for == 0: a shortcut made never to fire)
            if repairing and shortcuts.get(id(node)) == "test":
                alternatives.insert(0, _hinted(ast.Constant(False), SHORTCUT_DROPPED))
            if repairing:
                if isinstance(node, ast.Constant) and type(node.value) is float and \
                        node.value.is_integer() and abs(node.value) < 2 ** 53:
                    alternatives.insert(0, _hinted(ast.Constant(int(node.value)), _INT_LITERAL))
                    # (0.0 started a count that the contract wants a plain int)
                if id(node) in looped:  # overwritten in a loop where it should accumulate
                    target = node.targets[0]
                    alternatives.append(ast.AugAssign(
                        ast.Name(target.id, ast.Store()) if isinstance(target, ast.Name)
                        else target, ast.Add(), node.value))
                alternatives += _written_at_the_offset(node, offsets.get(id(node)))
                alternatives += _rounded_up(node)
                alternatives += _result_kept(node)
                alternatives += _call_closed_elsewhere(node)
                alternatives += _einsum_spelled_otherwise(node)
                alternatives = sorted(
                    (a for a in alternatives + list(_additions(node))
                     if not _switches_an_option(node, a, options, module_globals)
                     and not _hollow(node, a)),
                    key=lambda a: (hasattr(a, ADDED), not hasattr(a, ROUNDED_UP), _size(a)))
                # (the simplest first; a count rounded up before its divisor left out, which
                # can mend a count by making it too large for a slice that clamps it)
            if alternatives:
                found[id(node)] = alternatives
            if repairing and _own_call(node, module_globals):  # (not the options it passes)
                pending.extend(a for a in node.args if not isinstance(a, ast.Constant))
            else:
                pending.extend(ast.iter_child_nodes(node))
    return found


def _early_return_tests(tree: ast.FunctionDef) -> dict[int, str]:
    """``id -> "test"`` for the condition of each ``if ...: return ...`` shortcut (no else) and
    ``id -> "inside"`` for every node within it."""
    found: dict[int, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and not node.orelse and node.body and \
                isinstance(node.body[-1], ast.Return):
            for inner in ast.walk(node.test):
                found[id(inner)] = "inside"
            found[id(node.test)] = "test"
    return found


def computing_statements(tree: ast.FunctionDef):
    """The body's statements that compute (not the docstring, raises, asserts or whiles)."""
    for statement in tree.body:
        if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
            continue
        if any(isinstance(n, (ast.Raise, ast.While, ast.Assert)) for n in ast.walk(statement)):
            continue
        yield statement


def _variables(tree) -> list[str]:
    """The function's parameters and the names it assigns (candidates for a mix-up)."""
    names = [a.arg for a in tree.args.args + tree.args.kwonlyargs]
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and node.id not in names:
            names.append(node.id)
    return names


def _loop_spans(tree) -> dict[str, list[range]]:
    """The lines of each ``for`` loop, by the names its target binds."""
    spans: dict[str, list[range]] = {}
    for loop in ast.walk(tree):
        if isinstance(loop, (ast.For, ast.comprehension)) and hasattr(loop, "lineno"):
            lines = range(loop.lineno, (loop.end_lineno or loop.lineno) + 1)
            for name in ast.walk(loop.target):
                if isinstance(name, ast.Name):
                    spans.setdefault(name.id, []).append(lines)
    return spans


def _left_over_from_a_loop(node, new, loops) -> bool:
    """True for a variable read in place of another outside the loop that binds it: after
    ``for i in range(1, N)``, ``i`` is N - 1 by accident, not a count anyone means (round S:
    ``total / N`` mended as ``total / i``)."""
    if not (isinstance(new, ast.Name) and isinstance(node, ast.Name) and new.id in loops):
        return False
    line = getattr(node, "lineno", 0)
    return not any(line in lines for lines in loops[new.id])


def _is_count(tree) -> bool:
    """True for a function that returns a count (annotated ``-> int``, ``float`` or ``dict``)."""
    text = ast.unparse(tree.returns) if tree.returns is not None else ""
    return any(word in text for word in ("int", "float", "dict"))


def _replacements(node, variables, counting):
    """Every small edit of one node (new nodes sharing the original's children)."""
    if isinstance(node, ast.AugAssign):
        yield ast.Assign([node.target], node.value)  # overwritten where it should accumulate
        return
    if isinstance(node, ast.BinOp):
        # (a term dropped first: where it and an operator swap both fit, the term changes
        # nothing either way, and dropping it is the slip; round AF's `s + scale` under a
        # softmax, which ignores a constant shift, for a scale left out)
        yield node.left  # the right term or factor dropped
        yield node.right  # the left one dropped
        for op in _OPERATOR_SWAPS.get(type(node.op), ()):
            yield ast.BinOp(node.left, op(), node.right)
        if isinstance(node.op, ast.Mult) and isinstance(node.right, ast.Constant) and \
                node.right.value in (2, 3) and type(node.right.value) is int:
            yield ast.BinOp(node.left, ast.Pow(), node.right)  # d * 2 typed for d ** 2
            if isinstance(node.left, ast.BinOp) and isinstance(node.left.op, ast.Mult):
                yield ast.BinOp(node.left.left, ast.Mult(),  # 4 * d * 2 for 4 * d ** 2
                                ast.BinOp(node.left.right, ast.Pow(), node.right))
        if isinstance(node.op, (ast.MatMult, ast.Sub, ast.Div, ast.FloorDiv)):
            yield ast.BinOp(node.right, type(node.op)(), node.left)  # operands swapped
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        yield node.operand
    elif isinstance(node, ast.Compare) and len(node.ops) == 1:
        for op in _COMPARE_SWAPS.get(type(node.ops[0]), ()):
            yield ast.Compare(node.left, [op()], node.comparators)
    elif isinstance(node, ast.Constant):
        yield from (ast.Constant(v) for v in _constant_edits(node.value))
        if type(node.value) is int and abs(node.value) >= 3:  # (2 squared is 2 doubled)
            yield _hinted(ast.Constant(node.value * node.value), _SQUARED)
    elif isinstance(node, ast.Call):
        yield from _call_edits(node)
    elif isinstance(node, ast.Attribute) and node.attr in ("T", "mT") and isinstance(
            node.ctx, ast.Load):
        yield node.value
    elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
        yield from _slice_edits(node)
    elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in variables:
        yield from (ast.Name(other, ast.Load()) for other in variables if other != node.id)
        yield from (ast.Constant(value) for value in PINNED)  # a hard-coded axis or size
        if counting:
            for op in (ast.Add, ast.Sub):
                yield ast.BinOp(ast.Name(node.id, ast.Load()), op(), ast.Constant(1))


def _constant_edits(value):
    if isinstance(value, bool):
        yield not value
        return
    if not isinstance(value, (int, float)):
        return
    found = [value + 1, value - 1, 2 * value, -value, 1]
    if isinstance(value, float):
        found += [value / 2] + ([1 / value] if value else [])
    elif value % 2 == 0:
        found.append(value // 2)
    seen = {value}
    for new in found:
        if new not in seen:
            seen.add(new)
            yield new


def _reshaped_straight(node: ast.Call):
    """``x.reshape(a, b, c, d).transpose(1, 2)`` as ``x.reshape(a, c, b, d)``: the reshape
    straight to the final shape that a missing transpose makes (heads split without one)."""
    func = node.func
    if not (isinstance(func, ast.Attribute) and func.attr in ("transpose", "swapaxes", "permute")
            and isinstance(func.value, ast.Call) and isinstance(func.value.func, ast.Attribute)
            and func.value.func.attr in _RESHAPES):
        return None
    inner = func.value
    shape = list(inner.args[0].elts) if (len(inner.args) == 1 and isinstance(
        inner.args[0], (ast.Tuple, ast.List))) else list(inner.args)
    axes = [_int_of(a) for a in node.args]
    if not shape or any(a is None for a in axes) or any(isinstance(s, ast.Starred)
                                                         for s in shape):
        return None
    n = len(shape)
    axes = [a % n for a in axes]
    if func.attr == "permute" or (func.attr == "transpose" and len(axes) == n > 2):
        if sorted(axes) != list(range(n)):
            return None
        order = axes
    else:
        if len(axes) != 2:
            return None
        order = list(range(n))
        order[axes[0]], order[axes[1]] = order[axes[1]], order[axes[0]]
    return ast.Call(ast.Attribute(inner.func.value, inner.func.attr, ast.Load()),
                    [shape[i] for i in order], [])


def _call_edits(node: ast.Call):
    straight = _reshaped_straight(node)
    if straight is not None:
        yield straight
    for i, keyword in enumerate(node.keywords):
        if keyword.arg is not None:
            yield ast.Call(node.func, node.args, node.keywords[:i] + node.keywords[i + 1:])
    if node.args and not any(isinstance(a, ast.Starred) for a in node.args) and not (
            isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)) \
            and not (isinstance(node.func, ast.Name) and node.func.id == "len"):
        yield node.args[0]  # the call left out: sqrt(d) as d, a softmax skipped (a string
        # is no value: 'batch_size' * n would build a string of n copies; nor is len()'s
        # list: names * n builds n copies of it in one uninterruptible step)
    if isinstance(node.func, ast.Attribute) and node.func.attr in _UNWRAPPED_METHODS:
        yield node.func.value  # a transpose (or cast) left out
    for i in range(len(node.args) - 1):
        swapped = list(node.args)
        swapped[i], swapped[i + 1] = swapped[i + 1], swapped[i]
        yield ast.Call(node.func, swapped, node.keywords)
    if isinstance(node.func, ast.Attribute):  # (torch.log, np.log, x.log(), math.log)
        for other in _LOOKALIKES.get(node.func.attr, ()):
            func = ast.Attribute(node.func.value, other, ast.Load())
            if node.func.attr in ("maximum", "minimum") and len(node.args) == 2:
                # (the reduction meant: along the axis given, kept for the broadcast)
                yield ast.Call(func, node.args[:1], [
                    ast.keyword("axis", node.args[1]), ast.keyword("keepdims", ast.Constant(True))])
                continue
            yield ast.Call(func, node.args, node.keywords)


def _slice_edits(node: ast.Subscript):
    """A bound of one of the subscript's slices moved by one, or left out."""
    parts = list(node.slice.elts) if isinstance(node.slice, ast.Tuple) else [node.slice]
    for position, bounds in enumerate(parts):
        if not isinstance(bounds, ast.Slice):
            continue
        block = _block_of_index(bounds)
        if block is not None:
            yield _hinted(_subscript(node, parts, position, block), _BLOCK)
        if bounds.lower is None and bounds.upper is not None and bounds.step is None:
            last = ast.Slice(_shifted(bounds.upper, -1), bounds.upper)
            yield _subscript(node, parts, position, last)  # only the last entry kept
        for field in ("lower", "upper"):
            bound = getattr(bounds, field)
            if bound is None:
                continue
            for new_bound in (_shifted(bound, 1), _shifted(bound, -1), None):
                changed = ast.Slice(bounds.lower, bounds.upper, bounds.step)
                setattr(changed, field, new_bound)
                yield _subscript(node, parts, position, changed)


def _subscript(node: ast.Subscript, parts, position, changed) -> ast.Subscript:
    """``node`` with its index ``position`` (of ``parts``) replaced by ``changed``."""
    new_parts = parts[:position] + [changed] + parts[position + 1:]
    index = ast.Tuple(new_parts, ast.Load()) if isinstance(node.slice, ast.Tuple) else changed
    return ast.Subscript(node.value, index, ast.Load())
