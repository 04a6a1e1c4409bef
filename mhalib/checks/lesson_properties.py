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
                        "over another axis (or over everything), a mean or a max in its place, "
                        "a numerator and a denominator shifted differently, or a numerator "
                        "that is not the exponentials summed (the exp left out).",
                        _softmax_rows)


def _entropy_range(case, received):
    weights = case.args[0]
    axis = case.kwargs.get("axis", case.args[1] if len(case.args) > 1 else -1)
    n = weights.shape[axis]
    if not isinstance(received, np.ndarray) or not np.isfinite(received).all():
        return None
    bad = (received < -1e-9) | (received > np.log(n) + 1e-6)
    if not bad.any():
        return None
    at = tuple(int(i) for i in np.argwhere(bad)[0])
    return (f"the entropy at {at} is {float(received[at]):.4g}, outside "
            f"[0, log {n} = {np.log(n):.4g}]")


ENTROPY_RANGE = Property("entropy_range", "the entropy of a distribution over n outcomes lies "
                         "between 0 and log(n)", "the -log p terms are not weighted by p (or the "
                         "log is left out), the sign is wrong, or the sum runs over another "
                         "axis.", _entropy_range)

PROPERTIES = {
    "softmax": [SOFTMAX_SUMS],
    "attention": [rows_sum_to_one(1), nonnegative(1)],
    "masked_attention": [rows_sum_to_one(1), nonnegative(1)],
    "softmax_entropy": [ENTROPY_RANGE],
}
