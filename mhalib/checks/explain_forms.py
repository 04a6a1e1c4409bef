"""A wrong output explained by its form (issue 22), for slips no mistake model lists: the right
values in the wrong places (an axis reversed, or scrambled by a reshape), only the diagonal
wrong, one constant factor
off (named by the case's sizes: sqrt(d_head), 1024, bytes_per_element...), NaN exactly where a
row has no allowed key or where large inputs overflow, axes extra, missing, swapped or
mis-sized (named by the case's sizes), dict keys other than the contract's."""

from __future__ import annotations

import math

import numpy as np

from mhalib.checks.exercise import expected_of


def explain_form(exercise, case, received, meta, named) -> tuple[str, str] | None:
    """``(flag, message)`` for a wrong recorded output, or None."""
    expected = expected_of(exercise, case)
    path, e, r = _first_difference(expected, received, "the output")
    if isinstance(e, dict) and isinstance(r, dict):
        missing, extra = sorted(set(e) - set(r)), sorted(set(r) - set(e))
        if missing:
            return ("form:keys", f"the dict's keys must be exactly {sorted(e)}: {missing} are "
                    f"missing" + (f" and {extra} are not the contract's" if extra else "")
                    + "; the grader reads the counts by these names.")
        return None
    if isinstance(e, (int, float)) and not isinstance(e, bool) and isinstance(r, (int, float)):
        return _scalar(e, r, path, named)
    if isinstance(e, (int, float)) and not isinstance(e, bool):
        return _not_a_number(e, r, path)
    if not isinstance(e, np.ndarray) or not isinstance(r, np.ndarray):
        return None
    if e.shape != r.shape:
        return _shape(e.shape, r.shape, path, named)
    if e.dtype.kind == r.dtype.kind == "b" and e.ndim >= 3 and e.sum() == r.sum():
        return _mask_order(e, r, path, named)
    if e.dtype.kind not in "fiu" or r.dtype.kind not in "fiu":
        return None
    noise = _rounding(case, r.dtype)
    e, r = e.astype(np.float64), r.astype(np.float64)
    return (_nan(case, e, r, path) or _triangle(e, r, path) or _diagonal_only(e, r, path)
            or _factor(e, r, path, named, noise) or _placement(e, r, path, named))


def _not_a_number(e, r, path) -> tuple[str, str] | None:
    """A number expected and None returned (a path with no return: a search that found
    nothing), or its parts returned side by side (round P)."""
    if r is None:
        return ("form:none", f"{path} is None: the function ended without returning a value, "
                "on a path with no return statement (a search loop that never met its answer, "
                "for instance because range()'s end is exclusive and stops one short, or a "
                "return missing after the loop).")
    if isinstance(r, (tuple, list)) and 1 < len(r) <= 8 and all(
            isinstance(x, (int, float)) and not isinstance(x, bool) for x in r) and math.isclose(
            sum(r), e, rel_tol=1e-9, abs_tol=1e-12):
        return ("form:parts", f"{path} is a {type(r).__name__} of {len(r)} numbers that add up "
                f"to the right {e!r}: the parts were returned side by side; return their sum, "
                "one number.")
    return None


def _rounding(case, dtype) -> float:
    """The rounding a computation in the case's precision leaves, relative to the output's
    largest value: a factor read from half-precision outputs is exact only to about 1e-3."""
    if half_precision(case, dtype):
        return 5e-3
    return 1e-9 if "64" in _precision(case, dtype) else 1e-5


def half_precision(case, dtype=None) -> bool:
    """True for a float16 or bfloat16 case (its ``dtype`` label, else ``dtype``)."""
    return "16" in _precision(case, dtype)


def _precision(case, dtype) -> str:
    return str(getattr(case, "dtype", "") or dtype or "")


def _first_difference(expected, received, path):
    """The first component of a tuple output that differs (the whole output otherwise)."""
    from mhalib.checks.compare import difference

    if isinstance(expected, tuple) and isinstance(received, tuple) and len(expected) == len(
            received):
        for i, (e, r) in enumerate(zip(expected, received)):
            if difference(e, r) is not None:
                return _first_difference(e, r, f"{path}[{i}]")
    if isinstance(received, (int, float)) and isinstance(expected, np.ndarray) and \
            expected.ndim == 0:
        return path, float(expected), received
    return path, expected, received


def _say(value, named):
    from mhalib.checks.explain_sizes import say_size

    return say_size(value, named)


def _scalar(e, r, path, named):
    from mhalib.checks.explain_sizes import factor_name

    if e == 0 or r == 0:
        return None
    if abs(r * e - 1) < 1e-6 and abs(e) != 1:
        return ("form:inverted", f"{path} is the reciprocal of the right value ({r:.6g} for "
                f"{e:.6g}): the division is upside down.")
    name = factor_name(r / e, named)
    if name is None:
        return None
    return ("form:factor", f"{path} is {name} times the right value ({r:.6g} for {e:.6g}): a "
            f"factor of {name.removeprefix('1/')} is {'missing' if r < e else 'one too many'}.")


def _size_relation(got: int, want: int, named: dict[str, int]) -> str:
    """How a wrong size relates to the right one, when simply: one off, or one factor of a
    product of the case's sizes one off (``4 = num_kv_heads x (n_rep - 1)``); a size the case
    already has (``6 = k.shape[3]``) is said as that first (round O: ``w @ k`` for ``w @ v``
    was put down to a loop one step off)."""
    from mhalib.checks.explain_sizes import names_of

    sizes = names_of(got, named)
    if sizes:
        off = (f", or one {'too many' if got > want else 'too few'}: a loop, a range or a slice "
               "one step off" if abs(got - want) == 1 else "")
        return (f" ({got} is {' = '.join(sizes[:2])}: another tensor's or axis's size, read "
                f"where this one's belongs{off})")
    if abs(got - want) == 1:
        return (f" (one {'too many' if got > want else 'too few'}: a loop, a range or a slice "
                "one step off)")
    if (got == 2 * want or 2 * got == want) and got not in named.values():
        return (f" ({'twice' if got > want else 'half'} as many: one per entry where one per pair "
                "is meant, or the other way round, or both halves kept where one belongs)")
    for a, va in named.items():
        for b, vb in named.items():
            if a >= b or va * vb != want:
                continue
            for (first, second, fa, fb) in ((a, b, va, vb), (b, a, vb, va)):
                for step in (-1, 1):
                    if fa * (fb + step) == got:
                        sign = "-" if step < 0 else "+"
                        return (f" ({got} = {first} x ({second} {sign} 1): one {second} too "
                                f"{'few' if step < 0 else 'many'} for each {first}, a loop or a "
                                "range one step off)")
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


def _shape(want, got, path, named):
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
        return ("form:shape", f"{path} has shape {got} for {want}{said}: the axes are in the "
                "wrong order (a transpose missing, one too many, or one that swapped the wrong "
                "pair of axes).")
    regrouped = _regrouped(want, got, named)
    if regrouped is not None:
        said, first_moved = regrouped
        cause = ("an operation ran along the wrong axis (np.concatenate or np.stack of an array "
                 "runs along its FIRST axis, the batch), or a reshape or a transpose used the axes "
                 "in the wrong order" if first_moved else "a reshape to sizes in the wrong order "
                 "(x.shape unpacked in the wrong order, or one size used for another), or a "
                 "transpose missing before it")
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
        same = int(np.prod(got)) == int(np.prod(want))
        return ("form:shape", f"{path} has shape {got} for {want}: " + "; ".join(parts)
                + (" (the same number of values: a reshape used the sizes in the wrong order "
                   "or unpacked x.shape in the wrong order)." if same else "."))
    return None


def _nan(case, e, r, path):
    bad = ~np.isfinite(r) & np.isfinite(e)
    if not bad.any():
        return None
    if e.ndim >= 1:
        rows = np.all(e == 0, axis=-1)  # rows that are all zeros in the answer
        bad_rows = np.any(bad, axis=-1)
        if rows.any() and np.array_equal(bad_rows, rows & bad_rows) and bad_rows.any():
            return ("form:nan_empty_rows", f"{path} is NaN exactly on the rows that should be "
                    "zeros (a query with no allowed key: -inf - (-inf) where the maximum of "
                    "its scores is -inf, or 0 / 0 in the division); the contract wants a zero "
                    "row there, so guard those rows in this output too.")
    arrays = [a for a in list(case.args) + list(case.kwargs.values())
              if isinstance(a, np.ndarray) and a.dtype.kind == "f" and a.size]
    finite = [np.abs(a[np.isfinite(a)]) for a in arrays]
    largest = max((float(f.max()) for f in finite if f.size), default=0.0)
    if largest < 80:
        return None
    fix = ("exp overflowed. The shift before exp must make every exponent <= 0: subtract "
           "the maximum first (adding it, or shifting by something else, overflows)")
    if any(np.isinf(a).any() for a in arrays):  # -inf inputs (empty sets): a second reading
        return ("form:overflow", f"{path} has NaN or inf on inputs as large as {largest:g}: "
                f"{fix}; or an input of -inf (nothing there) was not guarded: -inf - (-inf) "
                "and 0 * inf are NaN.")
    return ("form:overflow", f"{path} has NaN or inf on inputs as large as {largest:g}: {fix}.")


def _triangle(e, r, path):
    """The right values on one side of the diagonal of the last two axes and 0 on the other."""
    if e.ndim < 2 or e.shape[-1] != e.shape[-2] or e.shape[-1] < 2:
        return None
    n = e.shape[-1]
    for offset in (0, 1, -1):
        for kept, filled, empty in (("upper", np.triu, "below"), ("lower", np.tril, "above")):
            mask = filled(np.ones((n, n), dtype=bool), offset if kept == "upper" else -offset)
            if np.allclose(r, np.where(mask, e, 0.0), rtol=1e-6, atol=1e-9):
                side = ("on and " if offset == 0 else "") + (
                    "above" if kept == "upper" else "below")
                return ("form:triangle", f"{path} is right {side} the diagonal and 0 {empty} "
                        "it: only one triangle of the matrix was filled (a loop over j that "
                        "starts at i, or ends at i, without filling the other half).")
    return None


def _diagonal_only(e, r, path):
    """Every entry off the diagonal of the last two (square) axes right, and the diagonal
    wrong: the i == j case has its own term, and it is the one that is wrong."""
    if e.ndim < 2 or e.shape[-1] != e.shape[-2] or e.shape[-1] < 2:
        return None
    diagonal = np.eye(e.shape[-1], dtype=bool)
    close = np.isclose(r, e, rtol=1e-6, atol=1e-9)
    if not close[..., ~diagonal].all() or close[..., diagonal].any():
        return None
    return ("form:diagonal", f"{path} is right everywhere but on the diagonal (i == j), where "
            "every entry is wrong: the diagonal's own term is missing, doubled or overwritten "
            "(np.fill_diagonal or a separate i == j branch that sets the entry instead of "
            "adding to it).")


def _factor(e, r, path, named, noise: float = 1e-9):
    scale = max(1.0, float(np.max(np.abs(e), initial=0.0)))
    mask = np.abs(e) > max(1e-6, 10 * noise) * scale
    if mask.sum() < 2:
        return None
    if not np.allclose(r[~mask], 0.0, rtol=0, atol=max(1e-6, 10 * noise) * scale):
        return None  # "every value is c times the right one" must hold where the right one is 0
    ratios = r[mask] / e[mask]
    ratio = float(np.median(ratios))
    # every value c times the right one, up to the rounding of the case's precision (a small
    # value's ratio is loose in float32 and half precision; the values themselves are not)
    if not np.allclose(r, ratio * e, rtol=1e-3, atol=noise * scale) or np.isclose(ratio, 1.0):
        return None
    from mhalib.checks.explain_sizes import all_factor_names

    names = all_factor_names(ratio, named)[:3]
    if not names:
        return None
    name, inverse = " = ".join(names), " = ".join(n.removeprefix("1/") for n in names)
    return ("form:factor", f"every value of {path} is {name} times the right one: a factor of "
            f"{inverse} is {'missing' if abs(ratio) < 1 else 'one too many'} "
            "(a scale, a count or a unit).")


def _mask_order(e, r, path, named):
    """A mask of three or more axes (a padding mask's (B, 1, 1, N)) holding the right entries
    read in another order of its axes (built as (N, B), then reshaped). A square 2-D mask is
    left alone: its transpose is also the mask turned upside down."""
    from mhalib.checks.explain_axes import axis_order

    order = axis_order(e.astype(np.float64), r.astype(np.float64), named)
    return None if order is None else ("form:axis_order", f"{path} {order}.")


def _placement(e, r, path, named):
    if e.size < 4 or not np.allclose(np.sort(e, axis=None), np.sort(r, axis=None),
                                     rtol=1e-4, atol=1e-6):
        return None
    for axis in range(e.ndim):
        if e.shape[axis] > 1 and np.allclose(np.flip(e, axis), r, rtol=1e-4, atol=1e-6):
            return ("form:reversed", f"{path} is the right values with axis {axis} (of size "
                    f"{_say(e.shape[axis], named)}) in reverse order: the blocks along it were "
                    "taken or put back last to first.")
        if e.shape[axis] > 2 and any(np.allclose(np.roll(e, s, axis), r, rtol=1e-4, atol=1e-6)
                                     for s in (1, -1)):
            return ("form:shifted", f"{path} is the right values shifted by one place along "
                    f"axis {axis}: an index is off by one.")
        half = e.shape[axis] // 2
        if e.shape[axis] > 2 and e.shape[axis] % 2 == 0 and np.allclose(
                np.roll(e, half, axis), r, rtol=1e-4, atol=1e-6):
            return ("form:halves_swapped", f"{path} is the right values with the two halves of "
                    f"axis {axis} (of size {_say(e.shape[axis], named)}) swapped: the halves "
                    "were joined in the other order (torch.cat([b, a]) where [a, b] belongs), "
                    "or each was put where the other goes.")
    from mhalib.checks.explain_axes import axis_order

    order = axis_order(e, r, named)
    if order is not None:
        return "form:axis_order", f"{path} {order}."
    return ("form:placement", f"{path} holds the right values, but in the wrong places: a "
            "reshape where a transpose (or permute) was needed, the axes moved in the wrong "
            "order, or parts joined (torch.cat, np.concatenate, stack) in the wrong order.")
