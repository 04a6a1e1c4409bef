"""Per-lesson properties (issue 22): what every right output of an exercise satisfies, named
when a failing output breaks it (see :mod:`mhalib.checks.properties`). Looked up by exercise
name, so the lessons' checker modules stay as they are."""

from __future__ import annotations

import numpy as np

from mhalib.checks.answer_key import answer_key
from mhalib.checks.properties import Property, nonnegative, rows_sum_to_one


def _axis(case) -> int:
    """The ``axis`` a softmax or entropy case asks for (keyword, second argument, or -1)."""
    return case.kwargs.get("axis", case.args[1] if len(case.args) > 1 else -1)


def _softmax_rows(case, received):
    axis = _axis(case)
    if not isinstance(received, np.ndarray) or not np.isfinite(received).all():
        return None
    sums = received.sum(axis=axis)
    bad = ~np.isclose(sums, 1.0, atol=1e-3)
    if not bad.any():
        return None
    at = tuple(int(i) for i in np.argwhere(bad)[0])
    return f"the slice along axis={axis} at {at} sums to {float(sums[at]):.4g}"


def _one_entry_off(twice: bool):
    """The test of a softmax whose every slice is the right one divided by 1 + p_j (an entry's
    exponential counted twice, ``twice``) or by 1 - p_j (left out), p_j a right weight."""
    def broken(case, received):
        axis = _axis(case)
        if not isinstance(received, np.ndarray) or not np.isfinite(received).all():
            return None
        logits = np.asarray(case.args[0], dtype=np.float64)
        if received.shape != logits.shape or logits.size == 0:
            return None
        right = np.moveaxis(np.asarray(answer_key("softmax")(logits, axis)), axis, -1)
        got = np.moveaxis(received.astype(np.float64), axis, -1)
        sums = got.sum(axis=-1)  # (...,): the factor that scales each right slice
        if not np.allclose(got, right * sums[..., None], rtol=1e-5, atol=1e-9):
            return None
        gap = 1 / sums - 1 if twice else 1 - 1 / sums  # p_j of the entry counted off
        bad = ~np.isclose(sums, 1.0, atol=1e-6)
        if not bad.any():
            return None
        matches = np.isclose(right, gap[..., None], rtol=1e-4, atol=1e-9)  # (..., n)
        if not matches[bad].any(axis=-1).all():
            return None
        at = tuple(int(i) for i in np.argwhere(bad)[0])
        entry = int(np.argmax(matches[at]))
        same = matches[bad][:, entry].all()
        largest = (matches & (right == right.max(axis=-1, keepdims=True)))[bad].any(axis=-1)
        return (f"the slice along axis={axis} at {at} sums to {float(sums[at]):.4g}, exactly the "
                f"right weights divided by 1 {'+' if twice else '-'} {float(gap[at]):.4g}, the "
                f"weight of its entry {entry}"
                + (f" (and so in every slice: entry {entry} each time)" if same else "")
                + (" (each slice's largest entry, whose exponential after the max shift is 1: a "
                   f"1 {'added to' if twice else 'taken from'} the sum does the same)"
                   if largest.all() else ""))
    return broken


SOFTMAX_ENTRY_TWICE = Property(
    "denominator_counts_an_entry_twice", "every slice along `axis` of a softmax sums to 1",
    "the denominator is the slice's sum of the exponentials with that entry's exponential "
    "counted twice: e.g. a running total that starts at the first exponential and then adds "
    "every one of them, the first again. Start the total at 0.", _one_entry_off(twice=True))
SOFTMAX_ENTRY_LEFT_OUT = Property(
    "denominator_leaves_an_entry_out", "every slice along `axis` of a softmax sums to 1",
    "the denominator is the slice's sum of the exponentials without that entry's exponential: "
    "a loop or slice over the entries that skips one (range(1, n), [:-1] or [1:]). Sum all n "
    "of them.", _one_entry_off(twice=False))
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
        axis = _axis(case)
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
    "softmax": [SOFTMAX_ENTRY_TWICE, SOFTMAX_ENTRY_LEFT_OUT, SOFTMAX_SUMS],
    "attention": [rows_sum_to_one(1), nonnegative(1)],
    "masked_attention": [rows_sum_to_one(1), nonnegative(1)],
    "softmax_entropy": [ENTROPY_NEGATIVE, ENTROPY_ABOVE],
}
