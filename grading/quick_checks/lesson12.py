"""Keys of lesson 12's quick checks (instructor data: never copied into the package).

See mhalib.quiz.keys for the format.
"""

KEYS = {
    "qc_saturated_row": {
        "answer": 1,
        "explanation": "grad_s = p * (grad_p - sum_j p_j grad_p_j). At the chosen key p = 1 and "
                       "the row term is grad_p there, so 1 * (grad_p - grad_p) = 0; at the "
                       "other keys p = 0. The Jacobian diag(p) - p p^T of a one-hot p is all "
                       "zeros: a saturated softmax stops the gradient, which is why lesson "
                       "03's 1/sqrt(d) keeps the scores small enough to train.",
        "why_wrong": {
            0: "That is p * grad_p, the diagonal part diag(p) grad_p alone; the row term "
               "subtracts p_j grad_p_j, which is all of grad_p at the chosen key.",
            2: "A softmax does not pass its gradient through unchanged: its Jacobian "
               "diag(p) - p p^T multiplies grad_p, and for a one-hot p that matrix is zero.",
            3: "1 - grad_p is no derivative of the softmax; p (1 - p), the Jacobian's "
               "diagonal, is 1 x (1 - 1) = 0 at the chosen key.",
        },
    },
    "qc_delta_with_bias": {
        "answer": "np.sum(grad_out * (out - b))",
        "explanation": "sum_j p_j grad_p_j = sum_j p_j (grad_out . v_j) = grad_out . (sum_j "
                       "p_j v_j), and the weighted sum of the values is out - b. With out = "
                       "p v (no bias) this is section 3's delta = rowsum(grad_out * out); "
                       "what counts is the part of out that the weights made.",
        "hint": "Take grad_out out of the sum over keys; what is sum_j p_j v_j in terms of out "
                "and b?",
        "mistakes": {
            "np.sum(grad_out * out)": "That is delta for out = p v; here out also holds b, "
                                      "and grad_out . b has nothing to do with the weights: "
                                      "use out - b, the weighted sum of the values.",
            "np.sum(grad_out)": "The row term weights each key's grad_p by its p; summing "
                                "grad_out alone drops the weights and the values.",
            "np.sum(grad_out * (out + b))": "The bias was added to out; remove it to get "
                                            "the weighted sum of the values back: out - b.",
        },
        "accepted": ["(grad_out * out).sum() - (grad_out * b).sum()",
                     "np.sum(grad_out * out) - np.sum(grad_out * b)"],
    },
    "qc_saved_gib": {
        "answer": "layers * batch * heads * tokens * (tokens * bytes_per_value - 4) / 2 ** 30",
        "explanation": "Per layer the textbook core keeps p, {batch} x {heads} x {tokens}^2 "
                       "values of {bytes_per_value} bytes, where FlashAttention keeps the "
                       "log-sum-exp, {batch} x {heads} x {tokens} float32 numbers; x, q, k, "
                       "v and the attention output (which the output projection keeps "
                       "anyway) are the same in both. Over {layers} layers: {value} GiB. p "
                       "is per query head, so the K/V heads do not enter, and it grows with "
                       "the square of the length.",
        "hint": "Per layer, which tensor of size batch x heads x tokens x tokens does the "
                "textbook core keep, and what does FlashAttention keep in its place?",
        "mistakes": {
            "layers * batch * kv_heads * tokens * tokens * bytes_per_value / 2 ** 30":
                "p is per query head: grouped K/V heads share keys and values, but every "
                "query head has its own row of weights for every query.",
            "batch * heads * tokens * tokens * bytes_per_value / 2 ** 30":
                "That is one layer; every layer keeps its own p for the backward pass.",
            "layers * heads * tokens * tokens * bytes_per_value / 2 ** 30":
                "That is one sequence; each of the batch's sequences has its own p.",
            "layers * batch * heads * tokens * tokens * bytes_per_value * 2 / 2 ** 30":
                "The scores need not be kept: the softmax's backward needs only its output p "
                "(and the product p v keeps that same p), so one N x N tensor per head.",
            "layers * batch * heads * tokens * tokens * bytes_per_value / 10 ** 9":
                "That is GB (10**9 bytes); a GiB is 2**30 bytes.",
        },
        "accepted": ["layers * batch * heads * tokens ** 2 * bytes_per_value / 2 ** 30",
                     "layers*batch*heads*tokens*tokens*bytes_per_value/1024**3"],
    },
    "qc_outer_loop": {
        "answer": 2,
        "explanation": "Every query that sees a key adds to that key's grad_k and grad_v. "
                       "With one block of keys per thread block, those sums stay in its "
                       "on-chip memory through the loop over query blocks and are written "
                       "once; grad_q is the one summed across thread blocks (FlashAttention-2 "
                       "adds those shares with atomic adds). The forward is the mirror image: "
                       "an output row is finished by the thread block that owns its query.",
        "why_wrong": {
            0: "delta = rowsum(grad_out * out) comes from the forward's output, before any "
               "loop over keys: that is what keeping out buys.",
            1: "grad_q still adds up: each key block contributes grad_s k to it, from a "
               "different thread block; FlashAttention-2 uses atomic adds for it.",
            3: "The log-sum-exp is one number per query row, (B, H, N), like delta.",
        },
    },
    "qc_leaky_generation": {
        "answer": 3,
        "explanation": "At generation the last position has no key i + 1: that token is the "
                       "one being predicted. The model must use keys <= i, which training "
                       "never made it learn, because the leak handed it the answer; its low "
                       "training loss measured copying, not prediction. Section 6 shows both "
                       "the loss below the data's floor and the tokens it generates.",
        "why_wrong": {
            0: "There is no next token to read at generation: it is the token being "
               "predicted. The leak only exists in training, where the whole text is known.",
            1: "The last position still sees itself and every earlier key, so its softmax "
               "row is not empty and nothing is NaN; the prediction is finite, and poor.",
            2: "The training loss measured how well it reads the next token, which is gone "
               "now; nothing made it learn to predict from the past alone.",
        },
    },
}
