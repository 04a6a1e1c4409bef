"""Read back, row by row, the combination a learner's code computed (issue 22).

Two exercises combine known pieces row by row, so the learner's output can be solved for the
coefficients it used, and those coefficients name the slip whatever code produced them:

- ``merge_attention_states``: each output row is ``alpha * out_a + beta * out_b``; the right
  shares are ``exp(lse_a - lse)`` and ``exp(lse_b - lse)``. Reading ``(alpha, beta)`` back tells
  an unweighted sum, an average, shares not divided by their total, swapped shares...
- ``softmax_backward``: each row is ``p * (g - r)`` with one row term ``r = sum(g * p)``.
  Reading ``r`` back tells a row term not weighted by p, weighted twice, averaged, summed over
  the whole tensor or another axis, missing or of the wrong sign; an output ``g - r`` (no
  leading p) is read too.

Each reader returns ``(flag, message)`` or None; it says only what the read-back reproduces.
"""

from __future__ import annotations

import numpy as np

from mhalib.checks.case_inputs import float64_inputs as _inputs
from mhalib.checks.case_inputs import float64_output as _array

CLOSE = 1e-6


def _same(a, b) -> bool:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return a.shape == b.shape and bool(np.allclose(a, b, rtol=1e-5, atol=CLOSE))


# -- merge_attention_states ---------------------------------------------------------------------

def merge_readback(exercise, case, output):
    values = _inputs(exercise, case)
    out = _array(output)
    if values is None or out is None:
        return None
    out_a, lse_a, out_b, lse_b = (values[k] for k in ("out_a", "lse_a", "out_b", "lse_b"))
    if out.shape != out_a.shape or out_a.shape[-1] < 3:
        return None
    rows = np.isfinite(lse_a) & np.isfinite(lse_b) & (np.abs(lse_a) < 300) & (np.abs(lse_b) < 300)
    if not rows.any() or not np.isfinite(out[rows]).all():
        return None
    a, b, y = out_a[rows], out_b[rows], out[rows]  # (R, d_v)
    alpha, beta = np.empty(len(a)), np.empty(len(a))
    for i in range(len(a)):
        basis = np.stack([a[i], b[i]], axis=1)  # (d_v, 2)
        coef, *_ = np.linalg.lstsq(basis, y[i], rcond=None)
        if np.linalg.norm(basis @ coef - y[i]) > 1e-6 * max(1.0, np.linalg.norm(y[i])):
            return None  # not a mix of the two outputs: nothing to read
        alpha[i], beta[i] = coef
    la, lb = lse_a[rows], lse_b[rows]
    lse = np.logaddexp(la, lb)
    right = (np.exp(la - lse), np.exp(lb - lse))
    top = np.maximum(la, lb)
    shifted_by_max = (np.exp(la - top), np.exp(lb - top))  # (what a lse taken as the max gives)
    readings = [
        ((np.ones_like(la), np.ones_like(lb)), "added_outputs",
         "the two outputs were added as they are: each is normalised over its own keys, so each "
         "must be weighted by its share of the total, exp(lse_a - lse) and exp(lse_b - lse)"),
        ((np.full_like(la, 0.5), np.full_like(lb, 0.5)), "averaged_outputs",
         "the two outputs were averaged: each must be weighted by its share of the total, "
         "exp(lse_a - lse) and exp(lse_b - lse), not 1/2"),
        ((np.exp(la), np.exp(lb)), "shares_not_normalised",
         "the outputs were weighted by exp(lse_a) and exp(lse_b) without dividing by their "
         "total: the shares are exp(lse_x - lse) with lse = log(exp(lse_a) + exp(lse_b))"),
        (shifted_by_max, "shares_not_normalised",
         "the outputs were weighted by exp(lse_x - max) without dividing by the total of the two "
         "weights: the shares exp(lse_x - lse) sum to 1"),
        ((right[1], right[0]), "shares_swapped",
         "the shares are swapped: out_a got B's share exp(lse_b - lse) and out_b got A's"),
        ((la / (la + lb), lb / (la + lb)), "linear_shares",
         "the outputs were weighted by lse_a / (lse_a + lse_b): the lse are logarithms, so the "
         "shares are exp(lse_x - lse), not ratios of the lse themselves"),
    ]
    if _same(alpha, right[0]) and _same(beta, right[1]):
        return _lse_readback(output, la, lb, lse, rows)
    if _same(alpha, shifted_by_max[0]) and _same(beta, shifted_by_max[1]) and \
            _returned_lse(output, rows, top):
        return "readback:lse_is_max", (
            "read back from your output, the combined lse is the larger of the two, max(lse_a, "
            "lse_b), not log(exp(lse_a) + exp(lse_b)) (the log of a sum is not the max of the "
            "logs): so the shares exp(lse_x - lse) do not sum to 1, and the returned lse is "
            "wrong too")
    for (want_a, want_b), name, sentence in readings:
        if _same(alpha, want_a) and _same(beta, want_b):
            return f"readback:{name}", f"read back from your output, {sentence}"
    i = int(np.argmax(np.abs(alpha - right[0]) + np.abs(beta - right[1])))
    return "readback:shares", (
        f"read back from your output, a row mixes out_a and out_b with weights "
        f"({alpha[i]:.4g}, {beta[i]:.4g}) where the right shares are ({right[0][i]:.4g}, "
        f"{right[1][i]:.4g}) = exp(lse_x - lse): check how each output is weighted")


def _returned_lse(output, rows, value) -> bool:
    """True when the lse the learner returned is ``value`` on ``rows``."""
    if not (isinstance(output, tuple) and len(output) > 1 and isinstance(output[1], np.ndarray)):
        return False
    got = output[1].astype(np.float64)
    return got.shape == rows.shape and _same(got[rows], value)


def _lse_readback(output, la, lb, lse, rows):
    if not (isinstance(output, tuple) and len(output) > 1 and isinstance(output[1], np.ndarray)):
        return None
    got = output[1].astype(np.float64)
    if got.shape != rows.shape:
        return None
    got = got[rows]
    for value, sentence in ((np.maximum(la, lb), "the larger of the two lse (the log of a sum "
                             "is not the max of the logs)"),
                            (la + lb, "lse_a + lse_b (that is the log of a product)"),
                            ((la + lb) / 2, "the mean of the two lse"),
                            (np.exp(la) + np.exp(lb), "exp(lse_a) + exp(lse_b), the total "
                             "itself, not its logarithm")):
        if _same(got, value):
            return "readback:lse", (f"the merged outputs are right, but the returned lse is "
                                    f"{sentence}: return log(exp(lse_a) + exp(lse_b)), "
                                    "computed as max + log(exp(lse_a - max) + exp(lse_b - max))")
    return None


# -- softmax_backward ---------------------------------------------------------------------------

def softmax_backward_readback(exercise, case, output):
    values = _inputs(exercise, case)
    y = _array(output)
    if values is None or y is None:
        return None
    p, g = values.get("weights"), values.get("grad_weights")
    if p is None or g is None or y.shape != p.shape or p.shape[-1] < 3:
        return None
    live = (p > 1e-6).all(axis=-1)  # rows without zero weights
    if not live.any() or not np.isfinite(y[live]).all():
        return None
    pl, gl, yl = p[live], g[live], y[live]
    right = (gl * pl).sum(-1)
    no_leading = gl - yl  # constant along each row when the leading p was left out
    if np.allclose(no_leading, no_leading[..., :1], atol=CLOSE) and \
            not np.allclose(no_leading[..., 0], 0, atol=CLOSE):
        return "readback:no_leading_weights", (
            "read back from your output, it is grad_weights minus a row term, not multiplied by "
            "the weights: the gradient is weights * (grad_weights - sum(grad_weights * weights))")
    term = gl - yl / pl  # constant along each row when the form p (g - r) holds
    twice = term / pl  # constant along each row when it is p g - p^2 r
    if not np.allclose(term, term[..., :1], atol=1e-5):
        if np.allclose(twice, twice[..., :1], atol=1e-5) and _same(twice[..., 0], right):
            return "readback:row_term_times_p_twice", (
                "read back from your output, it is weights * grad_weights - weights**2 * "
                "sum(grad_weights * weights): the row term is multiplied by the weights twice; "
                "the gradient is weights * (grad_weights - sum(grad_weights * weights))")
        return None
    r = term[..., 0]
    if _same(r, right):
        return None
    candidates = [
        (np.zeros_like(r), "the row term is missing: the gradient is weights * (grad_weights - "
                           "sum(grad_weights * weights)), not weights * grad_weights"),
        (-right, "the row term has the wrong sign: subtract sum(grad_weights * weights)"),
        (gl.sum(-1), "the row term sums grad_weights without weighting it: it is "
                     "sum(grad_weights * weights) over the row"),
        ((gl * pl * pl).sum(-1), "the row term weights grad_weights by the weights twice: it is "
                                 "sum(grad_weights * weights), one factor of p"),
        ((gl * pl).mean(-1), "the row term is a mean: it is the SUM of grad_weights * weights "
                             "over the row"),
        (np.full_like(r, float((g * p).sum())), "every row got the same row term, summed over "
                                                "the whole tensor: sum over the last axis only, "
                                                "keepdim=True"),
    ]
    for value, sentence in candidates:
        if _same(r, value):
            return "readback:row_term", f"read back from your output, {sentence}"
    if p.ndim >= 2:
        other = (g * p).sum(-2, keepdims=True) * np.ones_like(p)
        if _same(r, other[live][..., 0]) or _same(term, other[live]):
            return "readback:row_term", ("read back from your output, the row term was summed "
                                         "over another axis: sum over the last axis (the keys)")
    return "readback:row_term", (
        "read back from your output, it has the form weights * (grad_weights - r) but r is not "
        "sum(grad_weights * weights) over the row: check how the row term is computed")


READERS = {"merge_attention_states": merge_readback,
           "softmax_backward": softmax_backward_readback}
