"""A wrong output explained by its form (issue 22), for slips no mistake model lists: the right
values in the wrong places (an axis reversed, or scrambled by a reshape), only the diagonal
wrong, one constant factor
off (named by the case's sizes: sqrt(d_head), 1024, bytes_per_element...), NaN exactly where a
row has no allowed key or where large inputs overflow, axes extra, missing, swapped or
mis-sized (named by the case's sizes), dict keys other than the contract's."""

from __future__ import annotations

import math

import numpy as np

from mhalib.checks.compare import tolerance_of
from mhalib.checks.exercise import expected_of
from mhalib.checks.explain_shapes import axes_moved, shape_reading


def explain_form(exercise, case, received, meta, named) -> tuple[str, str] | None:
    """``(flag, message)`` for a wrong recorded output, or None."""
    expected = expected_of(exercise, case)
    try:
        tolerance = tolerance_of(exercise, case)
    except Exception:
        tolerance = ()
    path, e, r = _first_difference(expected, received, "the output", tolerance)
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
    if isinstance(e, np.ndarray) and r is None:
        return ("form:none", f"{path} is None where an array belongs: the function ended "
                "without returning it (a path with no return statement), or returned what an "
                "in-place operation gives back, which is None: np.fill_diagonal, ndarray.sort, "
                "list.append or rng.shuffle change their argument and return None, so return the "
                "array itself after the call.")
    if not isinstance(e, np.ndarray) or not isinstance(r, np.ndarray):
        return None
    if e.shape != r.shape:
        unchanged = _an_input_returned(exercise, case, r)
        if unchanged:
            return ("form:input_returned", f"{path} is the argument {unchanged} itself, "
                    f"unchanged (shape {r.shape} where {e.shape} belongs): it came back as it "
                    "is, from an early return, a result computed but not returned or not "
                    "assigned, or a repeat or expand of 1.")
        return shape_reading(e.shape, r.shape, path, named, axes_moved(e, r, tolerance))
    if e.dtype.kind == r.dtype.kind == "b" and e.ndim >= 3 and e.sum() == r.sum():
        return _mask_order(e, r, path, named)
    if e.dtype.kind == r.dtype.kind == "b":
        return _constant_mask(e, r, path)
    if e.dtype.kind not in "fiu" or r.dtype.kind not in "fiu":
        return None
    noise, dtype = _rounding(case, r.dtype), r.dtype
    e, r = e.astype(np.float64), r.astype(np.float64)
    return (_nan(case, e, r, path) or _half_values(case, dtype, e, r, path)
            or _triangle(e, r, path) or _diagonal_only(e, r, path)
            or _sign_flipped(e, r, path) or _factor(e, r, path, named, noise)
            or _row_factors(e, r, path, noise) or _placement(e, r, path, named))


def _an_input_returned(exercise, case, received) -> str:
    """The name of an array argument of ``case`` that ``received`` equals exactly (its shape and
    every value), or ''."""
    from mhalib.checks.case_inputs import parameter_names

    for name, value in zip(parameter_names(exercise), case.args):
        try:
            given = np.asarray(value, dtype=np.float64)
        except (TypeError, ValueError, RuntimeError):
            continue
        if given.ndim >= 2 and given.shape == received.shape and np.array_equal(
                given, np.asarray(received, dtype=np.float64), equal_nan=True):
            return name
    return ""


def _not_a_number(e, r, path) -> tuple[str, str] | None:
    """A number expected and None returned (a path with no return: a search that found
    nothing), or its parts returned side by side (round P)."""
    if r is None:
        return ("form:none", f"{path} is None: the function ended without returning a value, "
                "on a path with no return statement (a search loop that never met its answer, "
                "for instance because range()'s end is exclusive and stops one short, or a "
                "return missing after the loop).")
    numbers = isinstance(r, (tuple, list)) and 1 < len(r) <= 8 and all(
        isinstance(x, (int, float)) and not isinstance(x, bool) for x in r)
    if numbers and any(math.isclose(x, e, rel_tol=1e-9, abs_tol=1e-12) for x in r):
        others = [x for x in r if not math.isclose(x, e, rel_tol=1e-9, abs_tol=1e-12)]
        return ("form:several", f"{path} is a {type(r).__name__} of {len(r)} numbers, and the "
                f"right {e!r} is one of them (beside {', '.join(repr(x) for x in others[:3])}): "
                "several candidates were returned where one number belongs, such as both "
                "roots of an equation or every value a loop met; return only the one the "
                "contract asks for.")
    if numbers and math.isclose(sum(r), e, rel_tol=1e-9, abs_tol=1e-12):
        return ("form:parts", f"{path} is a {type(r).__name__} of {len(r)} numbers that add up "
                f"to the right {e!r}: the parts were returned side by side; return their sum, "
                "one number.")
    return None


def _half_values(case, dtype, e, r, path) -> tuple[str, str] | None:
    """Every finite value of a float32 or float64 output is a bfloat16 (or float16) number
    close to the right one, where the right values are not such numbers: the computation went
    through half precision (round U: RoPE angles computed from float16 positions)."""
    if half_precision(case, dtype) or dtype.kind != "f" or any(
            "16" in str(getattr(a, "dtype", "")) for a in [*case.args, *case.kwargs.values()]):
        return None
    finite = np.isfinite(e) & np.isfinite(r)
    got, want = r[finite], e[finite]
    if np.unique(got).size < 4 or np.array_equal(got, want):
        return None
    scale = float(np.abs(want).max())
    if dtype.itemsize == 2 and np.allclose(got, want, rtol=4e-3, atol=4e-3 * scale):
        return ("form:half_precision", f"{path} is float16 (about 3 to 4 significant digits) "
                "on a case with no half-precision input: it was computed in float16 or cast "
                "to it on the way (an input or an intermediate cast with .half() or "
                ".astype(np.float16), or a tensor made in float16); compute in float32 or "
                "float64.")
    if dtype.itemsize < 4:
        return None
    import torch

    for name, digits, rtol, rounded in (
            ("bfloat16", "2 to 3", 3e-2, lambda a: torch.from_numpy(a).to(torch.bfloat16)
             .double().numpy()),
            ("float16", "3 to 4", 4e-3, lambda a: a.astype(np.float16).astype(np.float64))):
        with np.errstate(over="ignore"):  # (the right values, rounded: not zeros or a part)
            if np.array_equal(rounded(got), got) and not np.array_equal(
                    rounded(want), want) and np.allclose(got, want, rtol=rtol,
                                                         atol=rtol * scale):
                return ("form:half_precision", f"every value of {path} is a {name} number "
                        f"(about {digits} significant digits), where the right values are "
                        f"not: it was computed in {name} or rounded to it on the way (an input "
                        "or an intermediate cast to half precision, or a tensor made in a "
                        "half-precision dtype); compute in float32 or float64 and cast only "
                        "the result, if at all.")
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


def _first_difference(expected, received, path, tolerance=()):
    """The first component of a tuple output that differs beyond the case's ``tolerance``
    (``(rtol, atol)``; round AC: a bfloat16 output[0] within it, read as off by row factors
    of 0.999, where output[1] was the slip), the whole output otherwise."""
    from mhalib.checks.compare import difference

    if isinstance(expected, tuple) and isinstance(received, tuple) and len(expected) == len(
            received):
        for i, (e, r) in enumerate(zip(expected, received)):
            if difference(e, r, *tolerance) is not None:
                return _first_difference(e, r, f"{path}[{i}]", tolerance)
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
    if largest < 80 and np.isnan(r).all():
        return ("form:nan_everywhere", f"every value of {path} is NaN on inputs of ordinary size: "
                "0 / 0, an average or a division over nothing (a count or a sum that stayed 0: "
                "a loop or a range that never ran, or a slice that came out empty, often from a "
                "size read off the wrong axis).")
    if largest < 80:
        return None
    fix = ("exp went out of range: an exponent far above 0 overflows to inf, and a slice whose "
           "exponents are all far below 0 gives 0 / 0. The shift before exp must make each "
           "slice's largest exponent exactly 0: subtract the slice's own maximum (adding it, "
           "or shifting by something else, such as the largest absolute value, does not)")
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


def _sign_flipped(e, r, path):
    """Every wrong entry is the right one with the opposite sign, and some entries are right:
    a minus sign left out (or one too many) in the term that makes those entries."""
    close = np.isclose(r, e, rtol=1e-6, atol=1e-9)
    flipped = np.isclose(r, -e, rtol=1e-6, atol=1e-9) & ~close
    if close.all() or not (close | flipped).all() or close.sum() == 0:
        return None
    where = f"{int(flipped.sum())} of {flipped.size} entries"
    if e.ndim >= 2 and e.shape[-1] == e.shape[-2] >= 2:
        off = ~np.eye(e.shape[-1], dtype=bool)
        nonzero = ~np.isclose(e, 0.0, atol=1e-12)
        if (flipped | ~nonzero)[..., off].all() and not flipped[..., ~off].any():
            where = "the entries off the diagonal (i != j)"
    return ("form:sign", f"{path} has the right magnitude everywhere, but {where} have the wrong "
            "sign: the term that makes them lost its minus sign, or got one too many.")


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


def _row_factors(e, r, path, noise: float = 1e-9):
    """Each row (along the last axis) the right row times a factor of its own, the factors not
    all equal (round AA: attention's output taken from the exponentials before they were divided
    by their row sums)."""
    if e.ndim < 2 or e.shape[-1] < 2:
        return None
    rows_e, rows_r = e.reshape(-1, e.shape[-1]), r.reshape(-1, r.shape[-1])
    scale = max(1.0, float(np.max(np.abs(e), initial=0.0)))
    floor = max(1e-6, 10 * noise) * scale
    factors = []
    for row_e, row_r in zip(rows_e, rows_r):
        kept = np.abs(row_e) > floor
        if kept.sum() < 2:
            continue
        factor = float(np.median(row_r[kept] / row_e[kept]))
        if not np.allclose(row_r, factor * row_e, rtol=1e-3, atol=floor):
            return None
        factors.append(factor)
    spread = max(1e-3, 20 * noise)  # (factors within the case's rounding say nothing)
    if len(factors) < 2 or np.allclose(factors, factors[0], rtol=spread) or min(factors) <= 0 \
            or max(abs(f - 1.0) for f in factors) <= spread:
        return None
    low, high = min(factors), max(factors)
    return ("form:row_factors", f"each row of {path} (along its last axis) is the right row "
            f"times a factor of its own, from {low:.4g} to {high:.4g}: something computed once "
            "per row was left out or applied where it does not belong, such as the weights used "
            "before they were divided by their row sums, or divided by another row's sum.")


def _constant_mask(e, r, path):
    """A boolean output that is one value everywhere where the right one holds both (round Z: a
    padding mask made with np.ones and only its kept prefix written True)."""
    if r.size == 0 or r.min() != r.max() or e.min() == e.max():
        return None
    value, other = bool(r.flat[0]), not bool(r.flat[0])
    wrong = int((e != r).sum())
    return ("form:constant_mask", f"every entry of {path} is {value}, where {wrong} of "
            f"{e.size} should be {other}: nothing set them {other}. The array may have started "
            f"all {value} (np.{'ones' if value else 'zeros'}, np.full(..., {value})) with only "
            f"the entries meant to be {value} written, or a comparison holds for every entry.")


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
