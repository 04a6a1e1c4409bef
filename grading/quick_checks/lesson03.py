"""Keys of lesson 03's quick checks (instructor data: never copied into the package).

See mhalib.quiz.keys for the format.
"""

KEYS = {
    "qc_dot_variance": {
        "answer": "d_k * var_q * var_k",
        "explanation": "Each product q_i k_i has mean 0 and variance E[q_i^2] E[k_i^2] = "
                       "var_q var_k, and the d_k products are independent, so their variances "
                       "add: d_k var_q var_k. With unit variances that is d_k, which "
                       "1/sqrt(d_k) undoes.",
        "hint": "Find the variance of one product q_i k_i first (the entries are independent "
                "with mean 0), then add up d_k of them.",
        "mistakes": {
            "d_k": "That holds for unit-variance entries only: one product q_i k_i has "
                   "variance var_q var_k.",
            "d_k * (var_q + var_k)": "Variances add over a sum, not a product: the variance "
                                     "of q_i k_i is E[q_i^2] E[k_i^2] = var_q var_k.",
            "var_q * var_k": "That is one product q_i k_i; the dot product adds d_k "
                             "independent ones, and their variances add.",
            "math.sqrt(d_k * var_q * var_k)": "That is the standard deviation; the question "
                                              "asks for the variance.",
        },
        "accepted": ["var_q * var_k * d_k", "d_k * (var_q * var_k)"],
    },
    "qc_unscaled_ratio": {
        "answer": "math.exp(gap * math.sqrt(d_k))",
        "explanation": "Unscaled, one standard deviation of the scores is sqrt({d_k}), so "
                       "the two scores differ by {gap} · sqrt({d_k}); softmax turns that "
                       "difference into the weight ratio e^(difference) = {value}. Scaled, "
                       "the same gap would give only e^{gap}.",
        "hint": "First the score difference: how large is one standard deviation of unscaled "
                "scores? Then softmax's w_i / w_j = e^(s_i - s_j).",
        "mistakes": {
            "math.exp(gap)": "That is the ratio for scaled scores, whose standard deviation "
                             "is 1. Unscaled, one standard deviation is sqrt(d_k).",
            "gap * math.sqrt(d_k)": "That is the score difference; the weight ratio is its "
                                    "exponential, e^(s_i - s_j).",
            "math.exp(gap * d_k)": "d_k is the variance of the unscaled scores; one standard "
                                   "deviation is sqrt(d_k).",
            "math.exp(gap / math.sqrt(d_k))": "Unscaled scores spread more with d_k, not "
                                              "less: one standard deviation is sqrt(d_k), so "
                                              "multiply the gap by it.",
        },
        "accepted": ["np.exp(gap * d_k ** 0.5)", "math.e ** (gap * math.sqrt(d_k))"],
    },
    "qc_sink_entropy": {
        "answer": "-a * math.log(a) - (1 - a) * math.log((1 - a) / (N - 1))",
        "explanation": "H = -sum p log p over N keys: the sink gives -a log a, and the N - 1 "
                       "other keys, each (1 - a)/(N - 1), give -(1 - a) log((1 - a)/(N - 1)) "
                       "together.",
        "hint": "Write down every p_j: one is a, and N - 1 of them are equal. Then add up "
                "-p log p.",
        "mistakes": {
            "math.log(N)": "log N is the entropy of the uniform row; this row gives the sink "
                           "a and the others (1 - a)/(N - 1) each.",
            "-a * math.log(a) - (1 - a) * math.log(1 - a)": "That treats the rest as one key "
                                                            "holding 1 - a; it is spread over "
                                                            "N - 1 keys of (1 - a)/(N - 1) "
                                                            "each.",
            "-a * math.log(a)": "The other N - 1 keys carry weight too: add -p log p for "
                                "each of them.",
            "-a * math.log(a) - (1 - a) * math.log(1 / (N - 1))": "Each of the other keys "
                                                                  "holds (1 - a)/(N - 1), "
                                                                  "not 1/(N - 1): that is "
                                                                  "the value inside the "
                                                                  "log.",
        },
        "accepted": ["-a * np.log(a) - (1 - a) * np.log(1 - a) + (1 - a) * np.log(N - 1)"],
    },
    "qc_entropy_direction": {
        "answer": 2,
        "explanation": "Multiplying the scores by √2 multiplies every difference s_i - s_j by "
                       "√2, so each weight ratio e^(s_i - s_j) is raised to the power √2: the "
                       "top scores take more of the weight. The entropy falls (with the scores "
                       "multiplied by b, its derivative in b is -b times the variance of the "
                       "scores under p, negative unless they are all equal), but every weight "
                       "stays positive, so it never reaches 0.",
        "why_wrong": {
            0: "Adding a constant to every score changes nothing; multiplying them does: the "
               "differences grow by √2 as well, and softmax reads the differences.",
            1: "Wider heads sum more terms rather than average them, so unscaled the scores "
               "spread out; larger differences concentrate the weights instead of "
               "flattening them.",
            3: "For a given row, a factor above 1 always concentrates the weight on its top "
               "scores; no row that has two different scores gains entropy.",
        },
    },
    "qc_split_jacobian": {
        "answer": 3,
        "explanation": "With p_i = p_j = 1/2: the diagonal entries are p(1 - p) = 1/4, the "
                       "entries between i and j are -p_i p_j = -1/4, and every row or column "
                       "of a key with weight near 0 is near 0. Its size (Frobenius norm 1/2) "
                       "is even larger than the uniform row's over 16 keys (about 0.24): a "
                       "row torn between two keys still learns which of the two to prefer.",
        "why_wrong": {
            0: "That is diag(p) alone; p pᵀ adds 1/4 at all four of those entries and "
               "must be subtracted.",
            1: "The Jacobian vanishes when one weight is near 1. Split between two keys, "
               "p_i (1 - p_i) = 1/4 is far from 0.",
            2: "That is -p pᵀ alone; diag(p) adds 1/2 on the diagonal, giving +1/4 there.",
        },
    },
}
