"""An index that raised, explained (issue 22): an index past the end of an axis (and of a
pool of pages), one meant for another axis of the same argument, and a boolean mask whose shape
is not the shape it indexes."""

from __future__ import annotations

import ast
import re

from mhalib.checks.case_inputs import answer_defaults, parameter_names
from mhalib.checks.explain_sizes import as_many_as as _say
from mhalib.checks.explain_sizes import names_of


def index(exercise, case, last, line, named):
    match = re.search(r"index (-?\d+) is out of bounds for (?:dimension|axis) (\d+) with size "
                      r"(\d+)", last)
    if not match:
        return None
    index, axis, size = (int(g) for g in match.groups())
    plain, other_axis = _index_for_another_axis(exercise, case, line, index, axis, named)
    if plain:
        return ("index_axis", f"{other_axis}.")
    pool = any(name.endswith("_pages.shape[0]") for name in names_of(size, named))
    return ("index", f"an index your code computed ({index}) is past the end of an axis of "
            f"{_say(size, named)} entries: check the formula that makes the indices (which size "
            "it divides or multiplies by, and whether it counts from 0)" + (
                f". That axis is the pool's {size} pages, so a page number was computed where it "
                "must be read: key t's page is block_table[b, t // page_size] (a sequence's "
                "pages can be anywhere in the pool; counting on from its first page, first + 1, "
                "first + 2..., runs past the pool)" if pool else "") + (
                f"; or {other_axis}" if other_axis else "") + ".")


def _index_for_another_axis(exercise, case, line, index, axis,
                            named) -> tuple[bool, str | None]:
    """``(plain, reading)`` of an index that ran past axis ``axis`` of an argument while
    another axis of that argument is long enough for it: said as an index meant for that axis,
    with the subscript that puts it there (round AM: ``block_table[:, b]``, the sequence b's
    column where its row block_table[b] was meant). ``plain``: the index is a plain name (a
    loop's counter), which no formula made too large."""
    try:
        tree = ast.parse(line.strip().rstrip(":"))
    except SyntaxError:
        return False, None
    names = parameter_names(exercise)
    arguments = case.arguments(names, answer_defaults(exercise)) if names else {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name)):
            continue
        shape = tuple(getattr(arguments.get(node.value.id), "shape", ()) or ())
        parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if len(shape) < 2 or len(parts) <= axis or any(
                isinstance(p, ast.Constant) and p.value is Ellipsis for p in parts):
            continue
        at = parts[axis]
        if isinstance(at, (ast.Slice, ast.Constant, ast.List, ast.Tuple)):
            continue
        others = [j for j, n in enumerate(shape) if j != axis and n > index]
        if len(others) != 1:
            continue
        j, tensor = others[0], node.value.id
        moved = list(parts) + [ast.Slice()] * (j + 1 - len(parts))
        moved[j], moved[axis] = moved[axis], moved[j]
        fixed, said = ", ".join(ast.unparse(part) for part in moved), ast.unparse(at)
        return isinstance(at, ast.Name), (
            f"the index `{said}` ({index} here) stands at axis {axis} of {tensor}, whose "
            f"{_say(shape[axis], named)} entries it runs past, while {tensor}'s axis {j} has "
            f"{_say(shape[j], named)}: if `{said}` counts along axis {j}, index it there "
            f"({tensor}[{fixed}]); the axes of {tensor} are {shape}")
    return False, None


def boolean_index(exercise, case, last, line, named):
    match = re.search(r"boolean index did not match indexed array along (?:axis|dimension) "
                      r"(\d+); size of (?:axis|dimension) is (\d+) but size of corresponding "
                      r"boolean (?:axis|dimension) is (\d+)", last) or re.search(
        r"The shape of the mask \[([\d, ]*)\] at index (\d+) does not match the shape of the "
        r"indexed tensor \[([\d, ]*)\]", last)
    if not match:
        return None
    return ("boolean_index", "a boolean mask used as an index (x[mask] = ..., x[~mask]) must "
            "have exactly the shape of what it indexes: indexing does not broadcast, so a mask "
            "of size 1 along an axis (a (B, 1, 1, N_k) padding mask against (B, H, N_q, N_k) "
            "scores) does not fit. Use np.where(mask, x, -np.inf) or x.masked_fill(~mask, "
            "-inf), which broadcast.")
