"""How an edit of code is said, and which edits are one slip made in several places (issue 22).

The slips and repairs of :mod:`mhalib.checks.mutant_edits` and :mod:`mhalib.checks.repair_edits`
are nodes of a syntax tree put where others were. :func:`say` shows one as the smallest readable
fragment around it, before and after, in the contract's argument names (a local that only checks
an argument, ``rank = positive_int("kv_lora_rank", kv_lora_rank)``, is shown as that argument:
:func:`aliases_of`); :func:`say_together` shows edits nested in one expression as one change;
:func:`kind_of` tells which edits are the same change, so that a slip made in every place at once
is tried as one.
"""

from __future__ import annotations

import ast
import copy
import types

from mhalib.checks.edit_nodes import _RESHAPES, POWER_FOR_XOR

VALIDATOR_MODULE = "mhalib.validate"
MAX_SAID = 90  # characters of a fragment before the edited node alone is shown


def _validator(func: ast.AST, module_globals: dict):
    """The :mod:`mhalib.validate` function ``func`` names (``positive_int`` imported from it,
    or ``validate.positive_int``), else None."""
    if isinstance(func, ast.Name):
        target = module_globals.get(func.id)
    elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        module = module_globals.get(func.value.id)
        target = getattr(module, func.attr, None) if isinstance(module, types.ModuleType) \
            and module.__name__ == VALIDATOR_MODULE else None
    else:
        return None
    return target if getattr(target, "__module__", "") == VALIDATOR_MODULE else None


def kind_of(node: ast.AST, new: ast.AST) -> tuple | None:
    """What kind of edit ``node -> new`` is, when the same slip could be made in several
    places at once: an operator, a constant, a variable or a keyword changed the same way."""
    if getattr(new, POWER_FOR_XOR, False):  # (apart from the plain operator change: one of
        return ("power_for_xor",)  # the two in each place, not both)
    if isinstance(node, ast.BinOp) and isinstance(new, ast.BinOp) and node.left is new.left:
        return ("operator", type(node.op).__name__, type(new.op).__name__)
    if isinstance(node, ast.Constant) and isinstance(new, ast.Constant):
        return ("constant", repr(node.value), repr(new.value))
    if isinstance(node, ast.Name) and isinstance(new, ast.Name):
        return ("variable", node.id, new.id)
    if isinstance(node, ast.Name) and isinstance(new, ast.Constant):
        return ("pinned", node.id, repr(new.value))
    if isinstance(node, ast.Subscript) and isinstance(new, ast.Subscript):
        return _slice_kind(node.slice, new.slice)
    if isinstance(node, ast.Attribute) and new is node.value:
        return ("left_out", node.attr)  # ``.T`` left out
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        if new is node.func.value:
            return ("left_out", node.func.attr)  # a transpose (or cast) left out
        if isinstance(new, ast.Call) and isinstance(new.func, ast.Attribute) and \
                new.func.attr in _RESHAPES and node.func.attr in ("transpose", "swapaxes",
                                                                  "permute"):
            return ("reshape_straight",)
    if isinstance(node, ast.Call) and isinstance(new, ast.Call) and node.func is new.func \
            and len(new.keywords) < len(node.keywords):
        dropped = {k.arg for k in node.keywords} - {k.arg for k in new.keywords}
        return ("keyword", *sorted(dropped))
    if isinstance(node, ast.Assign) and isinstance(new, ast.Assign) and new.value is node.value:
        return ("written_at", ast.dump(new.targets[0].slice))
    return _call_kind(node, new)


def _call_kind(node: ast.AST, new: ast.AST) -> tuple | None:
    """A repair's call edits that a slip repeats in several places: another method on the same
    object (``torch.diag`` -> ``torch.diag_embed``, a sum for a mean), or the same constant
    arguments (``transpose(0, 1)`` -> ``transpose(-2, -1)`` on two different tensors)."""
    if not (isinstance(node, ast.Call) and isinstance(new, ast.Call)):
        return None
    if isinstance(node.func, ast.Attribute) and isinstance(new.func, ast.Attribute) and \
            node.func.value is new.func.value and node.func.attr != new.func.attr and \
            node.args is new.args:
        return ("method", node.func.attr, new.func.attr)
    if node.func is new.func and len(node.args) == len(new.args):
        changed = [b for a, b in zip(node.args, new.args) if a is not b]
        if changed and all(isinstance(b, ast.Constant) for b in changed):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(
                node.func, "id", "")
            return ("arguments", name, *(repr(b.value) for b in changed))
    return None


def say(tree: ast.FunctionDef, node: ast.AST, new: ast.AST, aliases: dict[str, str],
        parents: dict[int, ast.AST], least: int = 0) -> tuple[str, str]:
    """``(old, new)`` fragments for the edit: the edited node's readable surroundings (its
    call, product or subscript) before and after, at least ``least`` characters of it where
    the statement has them (enough to find the place on its line)."""
    shown = node
    while id(shown) in parents and (_too_small(shown) or isinstance(
            parents[id(shown)], (ast.keyword, ast.UnaryOp, ast.Slice))):
        shown = parents[id(shown)]
    def subscript_tuple(node) -> bool:  # (`(:, h % n_rep)` is no code: round AN)
        return isinstance(node, ast.Tuple) and isinstance(parents[id(node)], ast.Subscript)

    while id(shown) in parents and (isinstance(shown, (ast.keyword, ast.Slice))
                                    or subscript_tuple(shown)):
        shown = parents[id(shown)]  # a bound or an index shown with what it indexes
    while id(shown) in parents and len(_render(shown, aliases)) < least and not isinstance(
            parents[id(shown)], (ast.stmt, ast.comprehension, ast.arguments)):
        shown = parents[id(shown)]
    while id(shown) in parents and subscript_tuple(shown):  # (grown into one: `x[:, h % n]`)
        shown = parents[id(shown)]
    old, new_text = _render(shown, aliases), _render(_replaced(shown, node, new), aliases)
    if len(old) > MAX_SAID or len(new_text) > MAX_SAID:
        old, new_text, shown = _render(node, aliases), _render(new, aliases), node
    return old, _bracketed_in_place(shown, old, new_text, node, new, aliases, parents)


def _bracketed_in_place(shown, old: str, new_text: str, node, new, aliases, parents) -> str:
    """``new_text`` in parentheses when the expression around it needs them: ``2 * (r + p)``
    mended as ``r + p`` inside ``2 * (r + p) * b`` is ``(r + p) * b``, not ``r + p * b``
    (round V: pasted as said, the change gave another count)."""
    parent = parents.get(id(shown))
    if not isinstance(parent, (ast.BinOp, ast.UnaryOp, ast.Attribute, ast.Subscript)) or (
            new_text.startswith("(") and new_text.endswith(")")):
        return new_text
    around = _render(_replaced(parent, node, new), aliases)
    if f"({new_text})" in around and f"({old})" not in _render(parent, aliases):
        return f"({new_text})"
    return new_text


def say_together(edits, aliases: dict[str, str], parents: dict[int, ast.AST]
                 ) -> tuple[str, str]:
    """``(old, new)`` of the smallest expression holding every edited node of ``edits``
    (``(node, new)`` pairs), with all of them applied: edits nested in one another
    (``head_dim // 2 + 1`` inside ``torch.arange(1, head_dim // 2 + 1)``) cannot be said as
    fragments applied one after the other (round P)."""
    nodes = [node for node, _ in edits]
    shown = nodes[0]
    while id(shown) in parents and not all(
            any(n is inner for inner in ast.walk(shown)) for n in nodes) and not isinstance(
            parents[id(shown)], ast.stmt):
        shown = parents[id(shown)]
    holder = ast.Expression(body=shown)
    copied = copy.deepcopy(holder)
    twins = dict(zip((id(n) for n in ast.walk(holder)), ast.walk(copied)))
    if not all(id(n) in twins for n in nodes):
        return "", ""
    replace = {id(twins[id(node)]): new for node, new in edits}
    for parent in ast.walk(copied):
        for field, value in ast.iter_fields(parent):
            if id(value) in replace:
                setattr(parent, field, replace[id(value)])
            elif isinstance(value, list):
                value[:] = [replace.get(id(item), item) for item in value]
    return _render(shown, aliases), _render(copied.body, aliases)


def parents_of(tree: ast.AST) -> dict[int, ast.AST]:
    return {id(child): parent for parent in ast.walk(tree)
            for child in ast.iter_child_nodes(parent)}


def aliases_of(tree: ast.FunctionDef, module_globals: dict) -> dict[str, str]:
    """``local -> argument`` for locals that only check or copy an argument."""
    arguments = {a.arg for a in tree.args.args + tree.args.kwonlyargs}
    aliases = {}
    for statement in tree.body:
        if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1
                and isinstance(statement.targets[0], ast.Name)):
            continue
        local, value = statement.targets[0].id, statement.value
        if local in arguments:
            continue
        if isinstance(value, ast.Name) and value.id in arguments:
            aliases[local] = value.id
        elif isinstance(value, ast.Call):
            names = [a.id for a in value.args if isinstance(a, ast.Name) and a.id in arguments]
            if len(names) == 1 and _validator(value.func, module_globals) is not None:
                aliases[local] = names[0]
    return aliases


def _slice_kind(old, new) -> tuple | None:
    """How one bound of a subscript's slices changed: ``("slice", "upper-1")``, ``("slice",
    "last_only")``, ``("slice", "lower_dropped")``..."""
    olds = old.elts if isinstance(old, ast.Tuple) else [old]
    news = new.elts if isinstance(new, ast.Tuple) else [new]
    for before, after in zip(olds, news):
        if before is after or not isinstance(after, ast.Slice):
            continue
        if before.lower is None and after.lower is not None:
            return ("slice", "last_only")
        for field in ("lower", "upper"):
            was, now = getattr(before, field), getattr(after, field)
            if was is now:
                continue
            if now is None:
                return ("slice", f"{field}_dropped")
            sign = "+" if isinstance(now, ast.BinOp) and isinstance(now.op, ast.Add) else "-"
            return ("slice", f"{field}{sign}1")
    return None


def _size(node) -> int:
    """How many nodes ``node`` holds (what "simpler" means between two alternatives)."""
    return sum(1 for _ in ast.walk(node))


def _too_small(node) -> bool:
    return isinstance(node, (ast.Constant, ast.Name))


def _replaced(tree, node, new):
    """A copy of ``tree`` with ``node`` replaced by ``new`` (for showing only)."""
    if tree is node:
        return new
    holder = ast.Expression(body=tree)
    copied = copy.deepcopy(holder)
    originals = list(ast.walk(holder))
    copies = list(ast.walk(copied))
    where = originals.index(node)
    twin = copies[where]
    for parent in copies:
        for field, value in ast.iter_fields(parent):
            if value is twin:
                setattr(parent, field, new)
            elif isinstance(value, list):
                for i, item in enumerate(value):
                    if item is twin:
                        value[i] = new
    return copied.body


def _render(node, aliases) -> str:
    shown = copy.deepcopy(node)
    for inner in ast.walk(shown):
        if isinstance(inner, ast.Name) and inner.id in aliases:
            inner.id = aliases[inner.id]
    try:
        return ast.unparse(shown)
    except Exception:
        return "?"
