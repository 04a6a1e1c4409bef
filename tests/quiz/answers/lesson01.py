"""Answers a learner could give to lesson 01's quick checks: right ones written differently
(ACCEPT) and the slips the lesson warns about (REJECT). Multiple-choice answers are canonical
option indexes or option texts."""

ACCEPT = {
    "qc_scale_divisor": ["np.sqrt(d_k)", "d_k ** 0.5", "math.sqrt(q.shape[-1])",
                         "sqrt(k.shape[1])", "q.shape[-1]**(1/2)"],
    "qc_log_softmax": ["np.log(np.sum(np.exp(x - m), axis=-1, keepdims=True))",
                       "np.log(np.exp(x - m).sum(-1, keepdims=True))",
                       "np.log(np.exp(x - x.max(axis=1, keepdims=True)).sum(axis=1, "
                       "keepdims=True))"],
    "qc_weights_shape": [0, "axis=0: each column sums to 1"],
    "qc_weights_memory": ["tokens**2 * bytes_per_value / 2**20",
                          "tokens * tokens * bytes_per_value / 1048576"],
    "qc_shared_scale": ["1 / d_k ** 0.25", "1 / math.sqrt(math.sqrt(d_k))", "d_k ** (-1/4)",
                        "q.shape[-1] ** -0.25", "np.power(d_k, -0.25)"],
}
REJECT = {
    "qc_scale_divisor": ["d_k", "np.sqrt(q.shape[0])", "2", "d_k / 2"],
    "qc_log_softmax": ["np.log(np.exp(x).sum(axis=-1, keepdims=True))",
                       "np.log(np.exp(x - m).sum(axis=-1))", "np.log(np.exp(x - m).sum())",
                       "np.exp(x - m).sum(axis=-1, keepdims=True)", "m", "0"],
    "qc_weights_shape": [1, 2, 3, "axis=-1, so that each row sums to 1"],
    "qc_weights_memory": ["tokens**2 * bytes_per_value", "tokens**2 * bytes_per_value / 1e6",
                          "tokens**2 / 2**20"],
    "qc_shared_scale": ["1 / math.sqrt(d_k)", "math.sqrt(d_k)", "d_k ** 0.25", "1 / d_k",
                        "0.5"],
}
