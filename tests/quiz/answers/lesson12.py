"""Answers a learner could give to lesson 12's quick checks: right ones written differently
(ACCEPT) and the slips the lesson warns about (REJECT). Multiple-choice answers are canonical
option indexes or option texts."""

ACCEPT = {
    "qc_saturated_row": [1, "All zeros: no gradient reaches its scores"],
    "qc_delta_with_bias": ["np.sum(grad_out * (out - b))", "(grad_out*(out-b)).sum()",
                           "np.sum(grad_out * out) - np.sum(b * grad_out)",
                           "(out - b).sum() * 0 + ((out - b) * grad_out).sum()"],
    "qc_saved_gib": ["layers * batch * heads * tokens**2 * bytes_per_value / 2**30",
                     "layers*batch*heads*tokens*(tokens*bytes_per_value - 4)/1024**3",
                     "batch * heads * tokens * tokens * bytes_per_value * layers / 1073741824"],
    "qc_outer_loop": [2, "Each key block's grad_k and grad_v are then finished in one place"],
    "qc_leaky_generation": [3, "Only keys <= i, which the leak let it ignore"],
}
REJECT = {
    "qc_saturated_row": [0, 2, 3, "grad_p, unchanged"],
    "qc_delta_with_bias": ["np.sum(grad_out * out)", "np.sum(grad_out)",
                           "np.sum(grad_out * (out + b))", "np.sum(out - b)",
                           "np.sum(grad_out * b)"],
    "qc_saved_gib": ["layers * batch * kv_heads * tokens**2 * bytes_per_value / 2**30",
                     "batch * heads * tokens**2 * bytes_per_value / 2**30",
                     "layers * heads * tokens**2 * bytes_per_value / 2**30",
                     "2 * layers * batch * heads * tokens**2 * bytes_per_value / 2**30",
                     "layers * batch * heads * tokens**2 * bytes_per_value / 1e9",
                     "layers * batch * heads * tokens * head_dim * bytes_per_value / 2**30",
                     "layers * batch * heads * tokens**2 * bytes_per_value"],
    "qc_outer_loop": [0, 1, 3, "grad_q then needs no accumulation over blocks"],
    "qc_leaky_generation": [0, 1, 2, "The next token, which it learned to read through the leak"],
}
