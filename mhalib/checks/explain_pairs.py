"""A reading of exercises that return ``(out, weights)`` (issue 22, round AB): the weights
returned are right but the output is not those weights times the values, so the output was
computed from other weights (the scores before the mask, the exponentials before their
division by the row sums, another variable). It holds for any exercise whose right pair
satisfies ``out = weights @ v`` with ``v`` its third argument, and says nothing otherwise.
"""

from __future__ import annotations

import numpy as np

FLAG = "form:out_from_other_weights"


def from_other_weights(exercise, recorded) -> tuple[str, str] | None:
    """``(flag, message)`` when on every failing case (``recorded``: ``(case, result)``
    pairs with an output) the weights are right and the output is not ``weights @ v``."""
    from mhalib.checks.compare import difference, tolerance_of

    if not recorded:
        return None
    for case, result in recorded:
        output, expected = result.get("output"), exercise.expected_once(case)
        pair = _pair(output)
        right = _pair(expected)
        if pair is None or right is None or len(case.args) < 3:
            return None
        values = _array(case.args[2])
        if values is None or not _weighted_sum(right, values):
            return None  # (not an (out, weights) pair of this kind)
        if difference(expected[1], output[1], *tolerance_of(exercise, case)) is not None:
            return None  # (the weights are wrong too: the other readings say how)
        if _weighted_sum(pair, values) or any(
                _weighted_sum(pair, other) for other in map(_array, case.args[:2])
                if other is not None):
            return None  # (the right weights over q or k: the values' own readings say it)
    return FLAG, ("the weights returned are right, but the output is not those weights times "
                  "v: it was computed from other weights than the ones returned (the scores "
                  "before the mask was applied, the exponentials before their division by the "
                  "row sums, or another variable), or from other values than v. Compute the "
                  "output from the very weights you return: out = weights @ v.")


def _pair(value) -> tuple[np.ndarray, np.ndarray] | None:
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        return None
    out, weights = _array(value[0]), _array(value[1])
    if out is None or weights is None or out.ndim < 2 or weights.ndim < 2:
        return None
    return out, weights


def _array(value) -> np.ndarray | None:
    try:
        found = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        return None
    return found if found.dtype.kind == "f" else None


def _weighted_sum(pair, values) -> bool:
    """True when ``out == weights @ values`` (finite entries, up to float32 rounding)."""
    out, weights = pair
    try:
        product = np.nan_to_num(weights) @ values  # (..., N_q, d_v)
    except ValueError:
        return False
    if product.shape != out.shape:
        return False
    scale = max(1.0, float(np.max(np.abs(np.nan_to_num(out)), initial=0.0)))
    return bool(np.allclose(np.nan_to_num(out), product, rtol=1e-3, atol=1e-5 * scale))
