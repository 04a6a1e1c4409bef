"""Hints of lesson 01 (single-head attention): ``softmax`` and ``attention``."""

HINTS: dict[str, tuple[str, ...]] = {
    "softmax": (
        "A softmax is `exp` of each entry divided by the sum of the `exp`s along `axis`. The "
        "whole exercise is doing that safely: `np.exp(710.0)` is already `inf` in float64, "
        "and `inf / inf` is `nan`.",

        "Subtracting the same number c from every entry of a slice does not change its "
        "softmax: e^(x - c) / sum e^(x - c), and the e^(-c) cancels. Take c = the largest "
        "entry of each slice along `axis`: every exponent is then at most 0, the largest "
        "term is exactly 1, nothing overflows, and `-inf` entries still get e^(-inf) = 0 (in "
        "a slice that has a finite entry).",

        "Both reductions (the largest entry and the sum) run along the `axis` you were given, "
        "never a fixed -1: the test also asks for `axis=0`. And both must keep the reduced "
        "axis with length 1, so that they broadcast back slice by slice. For `x` of shape "
        "(2, 3), `np.max(x, axis=1)` has shape (2,), which does not even broadcast against "
        "(2, 3); with `keepdims=True` it has shape (2, 1) and does.",

        "Three lines: `shifted = x - np.max(x, axis=axis, keepdims=True)`, "
        "`e = np.exp(shifted)`, and `return e / np.sum(e, axis=axis, keepdims=True)`.",
    ),
    "attention": (
        "Three steps, in this order: a score for every query against every key, a softmax "
        "that turns each query's row of scores into weights, and for each query the weighted "
        "average of the values. Return both the output and the weights.",

        "The scores have one row per query and one column per key, (..., N_q, N_k), so `q` "
        "(..., N_q, d_k) is multiplied by `k` with its last two axes swapped. `k.T` reverses "
        "*all* the axes: for `k` of shape (2, 5, 3) it gives (3, 5, 2), where "
        "`np.swapaxes(k, -1, -2)` gives (2, 3, 5).",

        "Divide the scores by sqrt(d_k) before the softmax, with d_k = `q.shape[-1]` (not the "
        "number of keys, not d_v). The softmax runs along the last axis, the keys, so that "
        "each query's weights sum to 1; multiplying the weights (..., N_q, N_k) by `v` "
        "(..., N_k, d_v) gives the output (..., N_q, d_v).",

        "`scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])`, then "
        "`weights = softmax(scores, axis=-1)`, and `return weights @ v, weights`.",
    ),
}
