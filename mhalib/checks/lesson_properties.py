"""Per-lesson properties (issue 22): what every right output of an exercise satisfies, named
when a failing output breaks it (see :mod:`mhalib.checks.properties`). Looked up by exercise
name, so the lessons' checker modules stay as they are."""

from __future__ import annotations

import numpy as np

from mhalib.checks.properties import Property, nonnegative, rows_sum_to_one


def _softmax_rows(case, received):
    axis = case.kwargs.get("axis", case.args[1] if len(case.args) > 1 else -1)
    if not isinstance(received, np.ndarray) or not np.isfinite(received).all():
        return None
    sums = received.sum(axis=axis)
    bad = ~np.isclose(sums, 1.0, atol=1e-3)
    if not bad.any():
        return None
    at = tuple(int(i) for i in np.argwhere(bad)[0])
    return f"the slice along axis={axis} at {at} sums to {float(sums[at]):.4g}"


SOFTMAX_SUMS = Property("sums_to_one", "every slice along `axis` of a softmax sums to 1",
                        "the division is not by this slice's sum of the exponentials: a sum "
                        "over another axis (or over everything), a sum that lost its axis and "
                        "was put back along another one (s[..., None] puts it last, whatever "
                        "`axis` was), a mean or a max in its place, "
                        "a numerator and a denominator shifted differently, or a numerator "
                        "that is not the exponentials summed (the exp left out).",
                        _softmax_rows)


def _entropy_outside(below: bool):
    """The test of an entropy below 0 (``below``) or above log(n) on a failing output."""
    def broken(case, received):
        weights = case.args[0]
        axis = case.kwargs.get("axis", case.args[1] if len(case.args) > 1 else -1)
        n = weights.shape[axis]
        if not isinstance(received, np.ndarray) or not np.isfinite(received).all():
            return None
        bad = received < -1e-9 if below else received > np.log(n) + 1e-6
        if not bad.any():
            return None
        at = tuple(int(i) for i in np.argwhere(bad)[0])
        return (f"the entropy at {at} is {float(received[at]):.4g}, outside "
                f"[0, log {n} = {np.log(n):.4g}]")
    return broken


_ENTROPY_RANGE = "the entropy of a distribution over n outcomes lies between 0 and log(n)"
ENTROPY_NEGATIVE = Property("entropy_negative", _ENTROPY_RANGE, "a negative entropy comes from "
                            "negative terms where each term p log(1/p) is at least 0: the minus "
                            "sign left out (p log p), or the log replaced by a function that is "
                            "positive for p in (0, 1] (-p log1p(p), where log1p(p) = log(1 + p); "
                            "or -p log(1/p), the minus sign kept as well).",
                            _entropy_outside(below=True))
ENTROPY_ABOVE = Property("entropy_above_log_n", _ENTROPY_RANGE, "an entropy above log(n) comes "
                         "from terms larger than p log(1/p): the -log p terms not weighted by p "
                         "(or the log left out), or a sum over more entries than one "
                         "distribution's (another axis, or the whole array).",
                         _entropy_outside(below=False))

PROPERTIES = {
    "softmax": [SOFTMAX_SUMS],
    "attention": [rows_sum_to_one(1), nonnegative(1)],
    "masked_attention": [rows_sum_to_one(1), nonnegative(1)],
    "softmax_entropy": [ENTROPY_NEGATIVE, ENTROPY_ABOVE],
}
