"""Keys of lesson 01's quick checks (instructor data: never copied into the package).

See mhalib.quiz.keys for the format.
"""

KEYS = {
    "qc_log_softmax": {
        "answer": "np.log(np.exp(x - m).sum(axis=-1, keepdims=True))",
        "explanation": "log softmax(x) = x - log sum exp(x), and log sum exp(x) = m + log sum "
                       "exp(x - m): the same shift as in softmax. Every exp(x - m) is at most "
                       "1 and each row's sum is at least 1, so nothing overflows and the log "
                       "never sees 0.",
        "hint": "Write log softmax(x) as x minus the log of the row's sum of exponentials, "
                "then shift that sum by m as the softmax does. Keep the (rows, 1) shape.",
        "mistakes": {
            "np.log(np.exp(x).sum(axis=-1, keepdims=True))":
                "log sum exp(x) already contains m (it equals m + log sum exp(x - m)), so m "
                "is subtracted twice; and exp(x) overflows for large logits. Shift inside the "
                "exponential.",
            "np.log(np.exp(x - m).sum(axis=-1))":
                "Without keepdims the (rows,) sums broadcast along the wrong axis of x - m: "
                "keep the reduced axis with keepdims=True.",
            "np.log(np.exp(x - m).sum())":
                "That sums the exponentials of all rows together; each row needs its own "
                "sum (axis=-1, keepdims=True).",
            "np.exp(x - m).sum(axis=-1, keepdims=True)":
                "That is the sum itself; log_p subtracts its logarithm.",
        },
        "accepted": ["np.log(np.sum(np.exp(x - m), axis=-1, keepdims=True))",
                     "np.log(np.exp(x - m).sum(-1, keepdims=True))"],
    },
    "qc_scale_divisor": {
        "answer": "math.sqrt(d_k)",
        "explanation": "Each score sums d_k products of unit-variance terms, so its variance is "
                       "d_k; dividing by sqrt(d_k) brings it back to 1.",
        "hint": "The variance of q . k grows like d_k; what brings its standard deviation "
                "to 1?",
        "mistakes": {"d_k": "Dividing by d_k shrinks the variance to 1/d_k: the variance is "
                            "d_k, so divide by its square root.",
                     "math.sqrt(q.shape[0])": "q.shape[0] is the number of queries, not the "
                                              "width d_k of each one."},
        "accepted": ["np.sqrt(d_k)", "d_k ** 0.5", "math.sqrt(q.shape[-1])",
                     "sqrt(k.shape[1])"],
    },
    "qc_weights_shape": {
        "answer": 0,
        "explanation": "Whatever the layout, each query spreads one unit of attention over the "
                       "keys. Here a query is a column, so its weights run down axis 0: "
                       "weights = softmax(s, axis=0), and the output is weights.T @ v.",
        "why_wrong": {
            1: "The softmax is not tied to the last axis but to the keys. In this layout a "
               "row belongs to one key, so axis=-1 would make each key share out one unit "
               "over the queries.",
            2: "One softmax over the whole array would leave each query a tiny share of a "
               "single unit, shrinking as the sequence grows.",
            3: "Normalised along the other axis, a query's weights no longer sum to 1, so its "
               "output is not an average of the values: the results differ.",
        },
    },
    "qc_weights_memory": {
        "answer": "tokens ** 2 * bytes_per_value / 2 ** 20",
        "explanation": "The matrix holds N x N = {tokens} x {tokens} values of "
                       "{bytes_per_value} bytes: {value} MiB for one head of one layer, which "
                       "is why long contexts avoid storing it.",
        "hint": "Count the values in an N x N matrix, times the bytes of each, in MiB.",
        "mistakes": {"tokens ** 2 * bytes_per_value / 10 ** 6": "That is megabytes (10**6 "
                                                                "bytes); a MiB is 2**20 "
                                                                "bytes.",
                     "tokens * bytes_per_value / 2 ** 20": "That is one row of the matrix; "
                                                           "it has N rows.",
                     "tokens ** 2 / 2 ** 20": "That counts values, not bytes: multiply by "
                                              "the bytes per value."},
        "accepted": ["tokens * tokens * bytes_per_value / 1024 / 1024"],
    },
    "qc_shared_scale": {
        "answer": "d_k ** -0.25",
        "explanation": "Both factors end up in every score: (q c) . (k c) = c^2 (q . k). For "
                       "c^2 = 1 / sqrt(d_k), c = d_k^(-1/4).",
        "hint": "c multiplies q and k, so the scores are multiplied by c twice.",
        "mistakes": {
            "1 / math.sqrt(d_k)": "c multiplies both q and k, so the scores get c^2 = 1 / d_k: "
                                  "divided by d_k, not by its square root.",
            "math.sqrt(d_k)": "c multiplies: a factor above 1 makes the scores larger, not "
                              "smaller.",
            "d_k ** 0.25": "That is the reciprocal: the scores would be multiplied by "
                           "sqrt(d_k) instead of divided by it.",
        },
        "accepted": ["1 / d_k ** 0.25", "1 / math.sqrt(math.sqrt(d_k))",
                     "q.shape[-1] ** (-1 / 4)"],
    },
}
