"""Readings of an output of the wrong shape (issue 22): what made it, from the two shapes and
the case's named sizes (an axis regrouped, reversed, missing or extra; a size that is another
size of the case, or one off). Part of :mod:`mhalib.checks.explain_forms`."""

from __future__ import annotations

import itertools

import numpy as np


def _say(value, named):
    from mhalib.checks.explain_sizes import say_size

    return say_size(value, named)


_STARTED_WITH_ONE = (", or a result started from one piece (such as x[:, 0], where an empty "
                     "list belongs) before a loop that adds every piece")


def _size_relation(got: int, want: int, named: dict[str, int]) -> str:
    """How a wrong size relates to the right one, when simply: one off, or one factor of a
    product of the case's sizes one off (``4 = num_kv_heads x (n_rep - 1)``); a size the case
    already has (``6 = k.shape[3]``) is said as that first (round O: ``w @ k`` for ``w @ v``
    was put down to a loop one step off)."""
    from mhalib.checks.explain_sizes import names_of

    if got == 0:
        return (" (an empty slice or range: its start at or past its stop, such as "
                "x[..., -d:0], or a block taken one past the end by an index counted from 1 "
                "where 0 belongs, or a count that came out 0)")
    sizes = names_of(got, named)
    if sizes:
        off = (f", or one {'too many' if got > want else 'too few'}: a loop, a range or a slice "
               "one step off" if abs(got - want) == 1 else "")
        product = _one_factor_off(got, want, named)  # (round R: 4 = 2 groups x (3 - 1) copies)
        off = off or (f"; or {product[2:-1]}" if product else "")
        split = [f"{a} / {b}" for a, va in named.items() for b, vb in named.items()
                 if a != b and 1 < vb < va and va == got * vb and "/" not in a + b]
        off = off or (f"; or {split[0]}: an axis split into pieces of the wrong size"
                      if split else "")  # (round Y: N / H = 2 = H, tokens split by heads)
        off = off or _difference(got, want, named, "; or ")
        return (f" ({got} is {' = '.join(sizes[:2])}: another tensor's or axis's size, read "
                f"where this one's belongs{off})")
    gap = _difference(got, want, named, " (", ")")  # (the right size less another: first)
    if gap:
        return gap
    shorter = [name for name, value in named.items() if value == got + 1 and value > 2]
    if shorter and abs(got - want) != 1:  # (round AC: torch.diagonal over the first two axes)
        return (f" ({got} = {shorter[0]} - 1: the length of a diagonal just off the main one of "
                f"a square of {shorter[0]} (np.diagonal and torch.diagonal take the first two "
                "axes unless axis1/axis2 or dim1/dim2 say otherwise), or a slice or a range one "
                "short)")
    if abs(got - want) == 1:
        return (f" (one {'too many' if got > want else 'too few'}: a loop, a range or a slice "
                f"one step off{_STARTED_WITH_ONE if got > want else ''})")
    if (got == 2 * want or 2 * got == want) and got not in named.values():
        return (f" ({'twice' if got > want else 'half'} as many: one per entry where one per pair "
                "is meant, or the other way round, or both halves kept where one belongs)")
    return _one_factor_off(got, want, named)


def _difference(got: int, want: int, named: dict[str, int], before: str, after: str = "") -> str:
    """`` (3 = n_k - n_q: ...)`` when ``got`` is the right size less another of the case's
    sizes (round AE: ``np.tri(n_q, n_k - n_q)``, an offset passed where the number of columns
    goes), else ''."""
    found = [f"{a} - {b}" for a, va in named.items() for b, vb in named.items()
             if a != b and va == want and vb > 1 and va - vb == got > 0
             and not set("/*") & set(a + b)]
    if not found:
        return ""
    return (f"{before}{got} = {found[0]}: the gap between two sizes where the size itself "
            "belongs, such as an offset computed or passed in a size's place (np.tri(N, M, k) "
            "and np.eye(N, M, k) take the number of columns M second and the diagonal's offset "
            f"k third){after}")


def _one_factor_off(got: int, want: int, named: dict[str, int]) -> str:
    """`` (4 = G x (n_rep - 1): ...)`` when ``want`` is a product of two of the case's sizes
    and ``got`` that product with one factor one off, else ''."""
    for a, va in named.items():
        for b, vb in named.items():
            if a >= b or va * vb != want:
                continue
            for (first, second, fa, fb) in ((a, b, va, vb), (b, a, vb, va)):
                if fb < 2:
                    continue  # (a broadcast axis of 1, "plus one", is no loop's count)
                for step in (-1, 1):
                    if fa * (fb + step) == got:
                        sign = "-" if step < 0 else "+"
                        return (f" ({got} = {first} x ({second} {sign} 1): one {second} too "
                                f"{'few' if step < 0 else 'many'} for each {first}, a loop or a "
                                f"range one step off{_STARTED_WITH_ONE if step > 0 else ''})")
    return ""


def _regrouped(want, got, named) -> tuple[str, bool] | None:
    """When ``got`` is the axes of the right output, or of an input, regrouped (each of its axes
    the product of some of theirs, every one used once, not only in another order): which is
    which, in the case's sizes, and whether the first axis moved; else None."""
    import itertools
    import re

    if sorted(got) == sorted(want) or int(np.prod(got)) != int(np.prod(want)) or not got or \
            1 in got:
        return None
    inputs: dict[str, dict[int, int]] = {}
    for label, size in named.items():
        found = re.fullmatch(r"(\w+)\.shape\[(\d+)\]", label)
        if found and isinstance(size, int):
            inputs.setdefault(found.group(1), {})[int(found.group(2))] = size
    shapes = [tuple(want)] + [tuple(axes[i] for i in sorted(axes)) for axes in inputs.values()]
    for shape in shapes:
        sizes = [n for n in shape if n != 1]
        if int(np.prod(sizes)) != int(np.prod(got)) or len(sizes) > 6:
            continue
        for owner in itertools.product(range(len(got)), repeat=len(sizes)):
            groups = [[sizes[i] for i in range(len(sizes)) if owner[i] == axis]
                      for axis in range(len(got))]
            if all(groups) and all(int(np.prod(g)) == n for g, n in zip(groups, got)):
                if all(len(g) == 1 for g in groups):
                    break  # a plain reordering of this shape: said elsewhere
                said = ", ".join(" x ".join(_say(n, named) for n in g) for g in groups)
                return f"({said})", groups[0] != sizes[:1]
    return None


def _ones_placed_otherwise(want, got) -> str:
    """A sentence when ``got`` is ``want`` with its size-1 axes elsewhere and its other axes
    in the same order ((B, n, 1, 1) for (B, 1, 1, n)), else ''."""
    if 1 not in want or tuple(got) == tuple(want):
        return ""
    if [n for n in got if n != 1] != [n for n in want if n != 1]:
        return ""
    ones = [i for i, n in enumerate(want) if n == 1]
    return (f"the sizes are in the right order, but the axes of size 1 are at the wrong places "
            f"(they belong at axes {', '.join(map(str, ones))}): the new axes were inserted "
            "at the wrong position (x[:, None, None, :] or reshape(B, 1, 1, n) puts them before "
            "the last axis; x[..., None, None] puts them after it).")


def _reversed_from(want, got) -> str:
    """A sentence when ``got``, read backwards, is ``want`` or ``want`` with two axes swapped:
    every axis reversed (np.transpose or .T without axes), where none or one transpose was
    needed, else ''."""
    if len(want) < 4 or len(set(want)) != len(want):
        return ""  # (in three axes a reversal is also a rotation: a stack along the last axis)
    before = tuple(reversed(got))
    differ = [i for i, (a, b) in enumerate(zip(before, want)) if a != b]
    reverses = ("That is what a transpose without its axes does (np.transpose(x), x.T, or "
                "x.permute with the axes reversed): it reverses them all")
    if not differ:
        return f"the right axes in reverse order. {reverses}."
    if len(differ) != 2:
        return ""
    i, j = differ
    said = (f"every axis of {before} in reverse order. {reverses}, where only axes {i} and {j} "
            f"were to be swapped (np.swapaxes(x, {i}, {j}), x.transpose({i}, {j}) in torch).")
    swapped = [k for k, (a, b) in enumerate(zip(got, want)) if a != b]
    if len(swapped) == 2 and swapped[1] - swapped[0] == 1:
        return ""  # (two neighbouring axes swapped: a transpose missing is far likelier)
    if len(swapped) == 2:
        return (f"either axes {swapped[0]} and {swapped[1]} are swapped (a transpose missing, "
                f"one too many, or one of the wrong pair), or the output is {said}")
    return said


def axes_moved(expected, received, tolerance) -> bool | None:
    """Whether ``received`` is ``expected`` with its axes in another order (None: not the same
    sizes, or too many axes to try every order)."""
    if sorted(expected.shape) != sorted(received.shape) or not 2 <= expected.ndim <= 4:
        return None
    rtol, atol = (tuple(tolerance) + (None, None))[:2]
    rtol, atol = 1e-5 if rtol is None else rtol, 1e-8 if atol is None else atol
    try:
        for order in itertools.permutations(range(received.ndim)):
            moved = np.transpose(received, order)
            if moved.shape == expected.shape and (
                    np.array_equal(moved, expected) if expected.dtype.kind == "b" else
                    np.allclose(moved, expected, rtol=rtol, atol=atol, equal_nan=True)):
                return True
    except (TypeError, ValueError):
        return None
    return False


def shape_reading(want, got, path, named, moved=None) -> tuple[str, str] | None:
    """``("form:shape", sentence)`` for an output of shape ``got`` where ``want`` is due;
    ``moved`` (when known): whether the output is the right values with their axes moved."""
    if len(got) == len(want) + 1 and tuple(got) == (*want, 1):
        return ("form:shape", f"{path} has shape {got} for {want}: an extra axis of size 1 at "
                "the end. Most likely a value was given a trailing axis to line up against "
                "rows ([..., None], unsqueeze(-1), keepdim=True) and returned with it: remove "
                "it before returning (squeeze(-1), or [..., 0]).")
    if len(got) > len(want):
        squeezed = tuple(n for n in got if n != 1)
        if squeezed == tuple(n for n in want if n != 1):
            return ("form:shape", f"{path} has shape {got} for {want}: an extra axis of size 1. "
                    "Either pieces were stacked (torch.stack / np.stack, unsqueeze, [:, None]) "
                    "where they should have been joined along an axis they already have "
                    "(torch.cat / np.concatenate), or a tensor was built with more leading axes "
                    "than the input has (the contract allows any number of them, (..., N, d): "
                    "build the extra tensors from x's own shape).")
        extra = list(got)
        for n in want:
            if n in extra:
                extra.remove(n)
        if extra and all(n in want[:-2] for n in extra):
            return ("form:shape", f"{path} has shape {got} for {want}: its extra axes are the "
                    "batch axes again, so every batch was combined with every other (np.dot or "
                    "tensordot on stacked arrays); use @ (matmul), which pairs batches one to "
                    "one.")
    if len(got) < len(want):
        gone = list(want)
        for n in got:
            if n in gone:
                gone.remove(n)
        if len(gone) == 1 and gone[0] == 1:
            return ("form:shape", f"{path} has shape {got} for {want}: the axis of size "
                    f"{_say(1, named)} is missing: a squeeze() (np.squeeze, torch.squeeze "
                    "without a dim) drops every axis of size 1, an index such as x[:, 0] drops "
                    "the one it picks, and a sum, mean or max without keepdims drops the one it "
                    "reduces.")
        if len(gone) == 1:
            return ("form:shape", f"{path} has shape {got} for {want}: the axis of size "
                    f"{_say(gone[0], named)} is missing; the separate results along it were "
                    "summed or merged into one, or never made.")
    if len(got) == len(want) and sorted(got) == sorted(want):
        placed = _ones_placed_otherwise(want, got)
        if placed:
            return ("form:shape", f"{path} has shape {got} for {want}: {placed}")
        reversed_from = _reversed_from(want, got)
        if reversed_from:
            return ("form:shape", f"{path} has shape {got} for {want}: {reversed_from}")
        said = ""
        if len(set(want)) == len(want):  # each size names one axis of the right output
            said = (" (" + ", ".join(f"axis {want.index(n)}'s {_say(n, named)}" for n in got)
                    + " in that order)")
        if moved is False:  # (round AF: rows from arange(n_k), columns from arange(n_q))
            return ("form:shape", f"{path} has shape {got} for {want}{said}, and its values are "
                    "not the right ones with the axes moved, so no transpose mends it: each "
                    "axis was built from the other's size (a range, a reshape or a new array "
                    "given the sizes in the wrong order), so the entries are computed for the "
                    "wrong positions too.")
        return ("form:shape", f"{path} has shape {got} for {want}{said}: the axes are in the "
                "wrong order (a transpose missing, one too many, or one that swapped the wrong "
                "pair of axes).")
    regrouped = _regrouped(want, got, named)
    if regrouped is not None:
        said, first_moved = regrouped
        cause = ("an operation ran along the wrong axis (np.concatenate or np.stack of an array "
                 "runs along its FIRST axis, the batch), or a reshape or a transpose used the axes "
                 "in the wrong order" if first_moved else "a reshape to sizes in the wrong order "
                 "(x.shape unpacked in the wrong order, or one size used for another), a "
                 "transpose missing before it, or pieces joined along the wrong axis (a "
                 "torch.cat or np.concatenate of slices such as x[:, g], whose index dropped "
                 "an axis, so the join runs along the next one)")
        return ("form:shape", f"{path} has shape {got} for {want}: the same values with the axes "
                f"regrouped, {said}: {cause}.")
    if len(got) == len(want):
        wrong = [i for i, (a, b) in enumerate(zip(want, got)) if a != b]
        parts = [f"axis {i} has 1 entry where it should have {_say(want[i], named)}: either "
                 "its size was computed from another axis or argument, or only one result "
                 "along it was kept (the last step's, or a sum or mean over it)" if got[i] == 1
                 else
                 f"axis {i} has {got[i]} where it should have {_say(want[i], named)}"
                 + _size_relation(got[i], want[i], named) for i in wrong]
        same = int(np.prod(got)) == int(np.prod(want)) > 0
        return ("form:shape", f"{path} has shape {got} for {want}: " + "; ".join(parts)
                + (" (the same number of values: a reshape used the sizes in the wrong order, "
                   "x.shape was unpacked in the wrong order, or a split, stack or concatenation "
                   "ran along the wrong axis)." if same else "."))
    return None
