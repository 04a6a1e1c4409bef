"""The edits only a repair of the learner's own code tries (issue 22), beside the slips of
:mod:`mhalib.checks.mutant_edits`: what a slip leaves out put back (``keepdims=True``, a
transpose, ``**`` for ``^``, a row-wise product for a matrix product, the transpose that
splits or merges heads), a guard's conditions, an accumulation for an overwrite in a loop, a
count rounded up, a write at the loop's offset, an einsum spelled otherwise; and the edits a
repair never makes: switching the learner's own options, or mending the output without being
a fix anyone would write (:func:`_hollow`).
"""

from __future__ import annotations

import ast
import re
import types

from mhalib.checks.edit_nodes import (
    _BLOCK,
    _CLOSED,
    _RESHAPES,
    ADDED,
    _block_of_index,
    _hinted,
    _int_of,
    _power_for_xor,
    _shifted,
)


def _loop_assignments(tree: ast.FunctionDef) -> tuple[set[int], dict[int, str]]:
    """One walk of the function's ``for`` loops: the ``id``s of the ``name = ...`` and
    ``x[...] = ...`` statements inside a loop's body, and for each ``x[...] = ...`` statement
    inside a ``for name in ...`` loop, that loop's variable (the innermost loop's)."""
    assigned, offsets = set(), {}
    for loop in ast.walk(tree):
        if not isinstance(loop, ast.For):
            continue
        for statement in ast.walk(loop):
            if statement is loop or not isinstance(statement, ast.Assign) or \
                    len(statement.targets) != 1:
                continue
            if isinstance(statement.targets[0], ast.Name):
                assigned.add(id(statement))
            elif isinstance(statement.targets[0], ast.Subscript):
                assigned.add(id(statement))  # (a block of an accumulator, round AA: dK[k0:k1])
                if isinstance(loop.target, ast.Name):
                    offsets[id(statement)] = loop.target.id  # (inner loops are walked later)
    return assigned, offsets


def _call_closed_elsewhere(node) -> list[ast.AST]:
    """A call's closing parenthesis moved across one operator: ``f(a) - b`` for ``f(a - b)``
    (``np.diag(p - np.outer(p, p))``), and ``f(a - b)`` for ``f(a) - b``."""
    def one_argument(call) -> bool:  # (never len(): len(names * n) builds n copies of the
        # list in one uninterruptible step, 8 s in a visible check of round P)
        return isinstance(call, ast.Call) and len(call.args) == 1 and not call.keywords \
            and not isinstance(call.args[0], ast.Starred) and not (
                isinstance(call.func, ast.Name) and call.func.id == "len")

    if one_argument(node) and isinstance(node.args[0], ast.BinOp):
        inner = node.args[0]
        return [_hinted(ast.BinOp(ast.Call(node.func, [inner.left], []), inner.op, inner.right),
                        _CLOSED)]
    if isinstance(node, ast.BinOp) and one_argument(node.left):
        return [_hinted(ast.Call(node.left.func, [ast.BinOp(node.left.args[0], node.op,
                                                            node.right)], []), _CLOSED)]
    return []


ROUNDED_UP = "_mhalib_rounded_up"




def _result_kept(node) -> list[ast.AST]:
    """``x = x.masked_fill(...)`` for the statement ``x.masked_fill(...)``: a method that returns
    a new array called for its effect, its result dropped (round AD: masked_fill, which changes
    nothing in place; masked_fill_ would)."""
    if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Attribute)
            and isinstance(node.value.func.value, ast.Name)
            and not node.value.func.attr.endswith("_")
            and node.value.func.attr not in _IN_PLACE):
        return []
    kept = ast.Assign([ast.Name(node.value.func.value.id, ast.Store())], node.value)
    return [_hinted(kept, f"{node.value.func.attr} returns a new array and changes nothing in "
                          "place, so its result was dropped")]


# methods that change their object and return None (their call alone is the whole statement)
_IN_PLACE = {"append", "extend", "insert", "update", "sort", "fill", "resize", "setdefault",
             "add", "discard", "remove", "clear", "pop", "write", "put", "itemset", "shuffle",
             "fill_diagonal", "backward"}  # (and every name ending in _: torch's in-place)


def _rounded_up(node) -> list[ast.AST]:
    """``(a + b - 1) // b`` for ``a // b``: a count of pages (blocks, chunks) rounded down."""
    if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.FloorDiv)):
        return []
    numerator = ast.BinOp(ast.BinOp(node.left, ast.Add(), node.right), ast.Sub(),
                          ast.Constant(1))
    items, size = ast.unparse(node.left), ast.unparse(node.right)
    if isinstance(node.left, ast.BinOp):
        items = f"({items})"
    if isinstance(node.right, ast.BinOp):
        size = f"({size})"
    new = _hinted(ast.BinOp(numerator, ast.FloorDiv(), node.right),
                  f"rounded up: {items} items fill {items} // {size} whole pieces of size "
                  f"{size} and part of one more when it does not divide: "
                  f"({items} + {size} - 1) // {size} pieces hold them")
    setattr(new, ROUNDED_UP, True)
    return [new]


def _written_at_the_offset(node, offset: str | None):
    """``cache[:, :, t:t + n] = ...`` for ``cache[:, :, :n] = ...`` inside ``for t in ...``
    (and ``[t]`` for ``[0]``): a write at the start of a buffer where the loop's offset
    belongs."""
    if offset is None or not isinstance(node, ast.Assign):
        return
    target = node.targets[0]
    parts = list(target.slice.elts) if isinstance(target.slice, ast.Tuple) else [target.slice]

    def written(position, changed, hint):  # the assignment with one part of its index changed
        new = list(parts)
        new[position] = changed
        index = ast.Tuple(new, ast.Load()) if isinstance(target.slice, ast.Tuple) else changed
        return _hinted(ast.Assign([ast.Subscript(target.value, index, ast.Store())],
                                  node.value), hint)

    for position, part in enumerate(parts):
        moved = None
        block = _block_of_index(part)
        if block is not None:
            yield written(position, block, _BLOCK)
        if isinstance(part, ast.Slice) and part.step is None and part.upper is not None and (
                part.lower is None or _int_of(part.lower) == 0):
            moved = ast.Slice(ast.Name(offset, ast.Load()),
                              ast.BinOp(ast.Name(offset, ast.Load()), ast.Add(), part.upper))
        elif _int_of(part) == 0:
            moved = ast.Name(offset, ast.Load())
        if moved is not None:
            yield written(position, moved, _AT_OFFSET)


_AT_OFFSET = "written at the loop's offset, not at the start of the buffer"


def _own_call(node, module_globals) -> bool:
    """True for a call of a function defined where the code being edited is (the learner's)."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
        return False
    target = module_globals.get(node.func.id)
    return isinstance(target, types.FunctionType) and \
        target.__module__ == module_globals.get("__name__")


def _options(tree: ast.FunctionDef, helper: bool) -> set[str]:
    """The parameters with a constant default (``causal=True``, ``axis=-1``) and, in a
    ``helper``, the parameters tested as conditions (``if stable:``, ``a if exact else b``,
    ``causal and honour``): the learner's options."""
    arguments = tree.args
    positional = arguments.posonlyargs + arguments.args
    pairs = list(zip(positional[len(positional) - len(arguments.defaults):],
                     arguments.defaults)) + list(zip(arguments.kwonlyargs, arguments.kw_defaults))
    found = {a.arg for a, default in pairs if isinstance(default, ast.Constant)}
    if helper:
        names = {a.arg for a in positional + arguments.kwonlyargs}
        for node in ast.walk(tree):
            tested = [node.test] if isinstance(node, (ast.If, ast.IfExp)) else list(
                node.values) if isinstance(node, ast.BoolOp) else [node.operand] if isinstance(
                node, ast.UnaryOp) and isinstance(node.op, ast.Not) else []
            found |= {t.id for t in tested if isinstance(t, ast.Name) and t.id in names}
    return found


def _switches_an_option(node, new, options, module_globals) -> bool:
    """True for an edit that only switches one of the learner's own options, which is their
    design, not a slip to repair: an option read as another variable or a constant, or a
    keyword argument of a call of one of their own functions left out (its default used)."""
    if isinstance(node, ast.Name) and node.id in options:
        return True
    if isinstance(node, ast.BoolOp) and any(
            isinstance(v, ast.Name) and v.id in options for v in node.values):
        return True
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not) and isinstance(
            node.operand, ast.Name) and node.operand.id in options:
        return True
    if isinstance(node, ast.Compare) and any(  # (row_term == "p": an option's value tested)
            isinstance(side, ast.Name) and side.id in options
            for side in [node.left, *node.comparators]):
        return True
    if isinstance(node, (ast.If, ast.IfExp)) and isinstance(node.test, ast.Name) and \
            node.test.id in options:
        return True
    return isinstance(node, ast.Call) and isinstance(new, ast.Call) and new.func is node.func \
        and len(new.keywords) < len(node.keywords) and _own_call(node, module_globals)


_KEEPS_ITS_LEFT = (ast.Div, ast.FloorDiv, ast.Sub, ast.Mod, ast.Pow, ast.MatMult)


def _hollow(node, new) -> bool:
    """True for an edit that would mend the output without being a fix anyone would write: a
    variable replaced by a literal (``d // -1`` lets reshape infer a size), a call's first
    argument made a literal (``np.where(0.0, ...)``, a condition that never holds), or only the
    right operand of a quotient, difference, power or product of matrices kept (``a // b`` as
    ``b``: the answer written in place of the learner's formula)."""
    if isinstance(node, ast.Name) and isinstance(new, ast.Constant):
        return True
    if isinstance(node, ast.Call) and isinstance(new, ast.Call) and new.args and node.args \
            and isinstance(new.args[0], ast.Constant) and not isinstance(node.args[0],
                                                                         ast.Constant) \
            and ast.dump(new.func) == ast.dump(node.func):  # (not another call put around it)
        return True
    return isinstance(node, ast.BinOp) and isinstance(node.op, _KEEPS_ITS_LEFT) and \
        new is node.right


def _guard_conditions(tree: ast.FunctionDef) -> list[ast.AST]:
    """The conditions of the body's guards: ``if <condition>: raise ...`` and ``assert``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and any(isinstance(s, ast.Raise) for s in node.body):
            found.append(node.test)
        elif isinstance(node, ast.Assert):
            found.append(node.test)
    return found


_EINSUM = re.compile(r"^[A-Za-z.]+(,[A-Za-z.]+)*->[A-Za-z.]*$")


def _einsum_spelled_otherwise(node) -> list[ast.AST]:
    """An einsum subscript string (``"...ij,...id->...id"``) with one index letter written as
    another of its letters, or two letters of one operand swapped: the index of the wrong axis
    (v indexed by the query, ``i``, where its key index ``j`` belongs) or a transposed term."""
    if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
        return []
    spec = node.value.replace(" ", "")
    if not _EINSUM.match(spec) or len(spec) > 40:
        return []
    letters = sorted({c for c in spec if c.isalpha()})
    found: list[str] = []
    for i, c in enumerate(spec):
        if c.isalpha():
            found += [spec[:i] + other + spec[i + 1:] for other in letters if other != c]
    for term in re.finditer(r"[A-Za-z]+", spec):
        start, text = term.start(), term.group()
        for a in range(len(text) - 1):
            for b in range(a + 1, len(text)):
                swapped = list(text)
                swapped[a], swapped[b] = swapped[b], swapped[a]
                found.append(spec[:start] + "".join(swapped) + spec[start + len(text):])
    return [ast.Constant(text) for text in dict.fromkeys(found) if text != spec]


_REDUCTIONS = ("sum", "mean", "max", "min", "amax", "amin", "logsumexp", "var", "std", "prod",
               "norm", "nansum")


_KEPT = "keeps the reduced axis, so the result lines up against the rows it came from"


_REDUCTION_SWAPS = {"sum": ("mean",), "mean": ("sum", "max"), "max": ("min", "sum", "mean"),
                    "min": ("max",), "amax": ("amin", "mean"), "amin": ("amax",),
                    "argmax": ("max",), "argmin": ("min",), "nansum": ("nanmean",),
                    "nanmean": ("nansum",)}


def _additions(node):
    """What a slip leaves out, put back (for repairs only); a transpose put back is marked
    :data:`ADDED` (tried after every other edit: a ``.T`` too many is better taken out)."""
    for new in _put_back(node):
        if isinstance(new, ast.BinOp):
            setattr(new, ADDED, True)
        yield new


def _put_back(node):
    """``keepdims=True`` (or torch's ``keepdim=True``) in a reduction, another reduction (a sum
    for a mean, a max for an argmax...), a transpose of a matrix product's operand (``.mT``),
    one more or one fewer in a ``range``, ``and`` for ``or`` (and back), a ``not`` left
    out, ``**`` for ``^``, ``torch.diag_embed`` for ``torch.diag``, the last two axes for a
    ``transpose``'s or ``swapaxes``' leading ones (and, in :func:`sites`, ``+=`` for ``=`` in a
    loop)."""
    if isinstance(node, ast.Call):
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(
            node.func, "id", "")
        given = {k.arg for k in node.keywords}
        if name in _REDUCTIONS and not given & {"keepdims", "keepdim"}:
            for word in ("keepdims", "keepdim"):
                yield _hinted(ast.Call(node.func, node.args, node.keywords + [
                    ast.keyword(word, ast.Constant(True))]), _KEPT)
        for other in _REDUCTION_SWAPS.get(name, ()):  # a mean where a sum belongs...
            func = ast.Attribute(node.func.value, other, ast.Load()) if isinstance(
                node.func, ast.Attribute) else ast.Name(other, ast.Load())
            yield ast.Call(func, node.args, node.keywords)
        if name == "diag" and isinstance(node.func, ast.Attribute):  # torch.diag of a batch
            yield ast.Call(ast.Attribute(node.func.value, "diag_embed", ast.Load()), node.args,
                           node.keywords)
        axes = [_int_of(a) for a in node.args[-2:]]  # x.transpose(0, 1), np.swapaxes(x, 0, 1)
        if name in ("transpose", "swapaxes") and len(node.args) in (2, 3) and None not in axes \
                and not set(axes) & {-1, -2}:  # the leading axes swapped, not the last two
            yield ast.Call(node.func, node.args[:-2] + [ast.Constant(-2), ast.Constant(-1)],
                           node.keywords)
        yield from _heads_moved(node, name)
        if name == "range":
            for i, argument in enumerate(node.args[:2]):
                for delta in (1, -1):
                    arguments = list(node.args)
                    arguments[i] = _shifted(argument, delta)
                    yield ast.Call(node.func, arguments, node.keywords)
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
        yield ast.BinOp(node.left, node.op, ast.Attribute(node.right, "mT", ast.Load()))
        yield ast.BinOp(ast.Attribute(node.left, "mT", ast.Load()), node.op, node.right)
        inner = _transposed_last_two(node.right)
        if inner is not None:  # g @ p.T where a row-wise product is meant: (g * p).sum(-1)
            product = ast.BinOp(node.left, ast.Mult(), inner)
            yield ast.Call(ast.Attribute(product, "sum", ast.Load()), [ast.Constant(-1)],
                           [ast.keyword("keepdims", ast.Constant(True))])
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitXor):
        yield ast.BinOp(node.left, ast.Pow(), node.right)  # ^ is XOR in Python, ** the power
        read = _power_for_xor(node)  # ... and binds tighter: 6 * n * d ^ 2 is (6 * n * d) ^ 2
        if read is not None:
            yield read
    elif isinstance(node, ast.BoolOp):
        other = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        yield ast.BoolOp(other, node.values)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        yield node.operand


def _transposed_last_two(node) -> ast.AST | None:
    """``p`` of ``p.T``, ``p.mT``, ``p.transpose(-2, -1)`` or ``p.swapaxes(-1, -2)``, else None."""
    if isinstance(node, ast.Attribute) and node.attr in ("T", "mT"):
        return node.value
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            node.func.attr in ("transpose", "swapaxes") and len(node.args) == 2 and \
            {_int_of(a) for a in node.args} == {-1, -2}:
        return node.func.value
    return None


def _heads_moved(node: ast.Call, name: str):
    """A reshape that splits or merges heads, with the transpose it needs put back:
    ``t.reshape(B, H, N, d)`` as ``t.reshape(B, N, H, d).swapaxes(1, 2)`` (heads split
    without one), ``t.reshape(B, N, D)`` as ``t.swapaxes(1, 2).reshape(B, N, D)`` (merged
    without one). ``swapaxes`` is numpy's and torch's alike."""
    if name not in _RESHAPES or not isinstance(node.func, ast.Attribute) or node.keywords:
        return
    sizes = list(node.args[0].elts) if len(node.args) == 1 and isinstance(
        node.args[0], (ast.Tuple, ast.List)) else list(node.args)
    if any(isinstance(size, ast.Starred) for size in sizes):
        return
    receiver = node.func.value
    if len(sizes) == 4:
        split = ast.Call(ast.Attribute(receiver, node.func.attr, ast.Load()),
                         [sizes[0], sizes[2], sizes[1], sizes[3]], [])
        yield ast.Call(ast.Attribute(split, "swapaxes", ast.Load()),
                       [ast.Constant(1), ast.Constant(2)], [])
    if len(sizes) == 3:
        moved = ast.Call(ast.Attribute(receiver, "swapaxes", ast.Load()),
                         [ast.Constant(1), ast.Constant(2)], [])
        yield ast.Call(ast.Attribute(moved, node.func.attr, ast.Load()), node.args, [])
