"""Held-out catalogue, lesson 05 (FLOPs and parameters, plain Python ints): mha_flops,
crossover_seq_len, mha_param_count."""

import math
from fractions import Fraction

import numpy as np

from entry import Entry


# ============================================================================ mha_flops
def flops_mac_as_one(seq_len, d_model):
    n, d = seq_len, d_model
    parts = {
        "qkv_projections": 3 * n * d * d,
        "scores": n * n * d,
        "weighted_sum": n * n * d,
        "output_projection": n * d * d,
    }
    parts["total"] = sum(parts.values())
    return parts


def flops_total_drops_weighted_sum(seq_len, d_model):
    proj = 6 * seq_len * d_model ** 2
    scores = 2 * seq_len ** 2 * d_model
    mix = 2 * seq_len ** 2 * d_model
    out = 2 * seq_len * d_model ** 2
    return {"qkv_projections": proj, "scores": scores, "weighted_sum": mix,
            "output_projection": out, "total": proj + scores + out}


def flops_math_pow(seq_len, d_model):
    qkv = 6 * seq_len * math.pow(d_model, 2)
    sc = 2 * math.pow(seq_len, 2) * d_model
    ws = 2 * math.pow(seq_len, 2) * d_model
    op = 2 * seq_len * math.pow(d_model, 2)
    return {"qkv_projections": qkv, "scores": sc, "weighted_sum": ws,
            "output_projection": op, "total": qkv + sc + ws + op}


def flops_key_typo(seq_len, d_model):
    N, d = seq_len, d_model
    result = {
        "qkv_projection": 6 * N * d * d,
        "scores": 2 * N * N * d,
        "weighted_sum": 2 * N * N * d,
        "output_projection": 2 * N * d * d,
    }
    result["total"] = sum(result.values())
    return result


def flops_scores_n_d_squared(seq_len, d_model):
    def matmul(m, k, n):
        return 2 * m * k * n

    N, D = seq_len, d_model
    qkv = 3 * matmul(N, D, D)
    scores = matmul(N, D, D)  # (N, d) @ (d, N)
    wsum = matmul(N, N, D)
    outp = matmul(N, D, D)
    return {"qkv_projections": qkv, "scores": scores, "weighted_sum": wsum,
            "output_projection": outp, "total": qkv + scores + wsum + outp}


def flops_causal_pairs(seq_len, d_model):
    pairs = seq_len * (seq_len + 1) // 2  # each query only sees keys up to itself
    d = {"qkv_projections": 6 * seq_len * d_model * d_model,
         "scores": 2 * pairs * d_model,
         "weighted_sum": 2 * pairs * d_model,
         "output_projection": 2 * seq_len * d_model * d_model}
    d["total"] = d["qkv_projections"] + d["scores"] + d["weighted_sum"] + d["output_projection"]
    return d


def flops_right_matmul_helper(seq_len, d_model):
    def product(rows, inner, cols):
        return 2 * rows * inner * cols

    counts = {}
    counts["qkv_projections"] = sum(product(seq_len, d_model, d_model) for _ in "qkv")
    counts["scores"] = product(seq_len, d_model, seq_len)
    counts["weighted_sum"] = product(seq_len, seq_len, d_model)
    counts["output_projection"] = product(seq_len, d_model, d_model)
    counts["total"] = sum(counts.values())
    return counts


def flops_right_factored(seq_len, d_model):
    nd = seq_len * d_model
    keys = ("qkv_projections", "scores", "weighted_sum", "output_projection")
    coeff = (6 * d_model, 2 * seq_len, 2 * seq_len, 2 * d_model)
    out = {key: int(c * nd) for key, c in zip(keys, coeff)}
    out["total"] = 4 * nd * (2 * d_model + seq_len)
    return out


# ============================================================================ crossover_seq_len
def crossover_true_division(d_model):
    return 8 * d_model ** 2 / (4 * d_model)


def crossover_one_n2_term(d_model):
    # 2 N^2 d = 8 N d^2
    return 4 * d_model


def crossover_forgets_output_projection(d_model):
    # 4 N^2 d = 6 N d^2 (the Q, K, V projections)
    return 6 * d_model // 4


def crossover_precedence(d_model):
    return 8 * d_model ** 2 // 4 * d_model


def crossover_search_off_by_one(d_model):
    n = 1
    while 4 * n * n * d_model < 8 * n * d_model * d_model:
        n += 1
    return n - 1


def crossover_square_root(d_model):
    # 4 N^2 d = 8 N d^2  ->  N^2 = 2 d
    return int(math.sqrt(2 * d_model))


def crossover_right_search(d_model):
    n = 1
    while 4 * n * n * d_model != 8 * n * d_model * d_model:
        n += 1
    return n


def crossover_right_fraction(d_model):
    ratio = Fraction(8 * d_model * d_model, 4 * d_model)
    return int(ratio.numerator // ratio.denominator)


# ============================================================================ mha_param_count
def params_three_biases(d_model, bias=True):
    weights = 4 * d_model * d_model
    if bias:
        weights += 3 * d_model  # q, k, v biases
    return weights


def params_bias_test_inverted(d_model, bias=True):
    total = 4 * d_model ** 2
    if not bias:
        total += 4 * d_model
    return total


def params_three_matrices(d_model, bias=True):
    w = 3 * d_model * d_model
    b = 4 * d_model if bias else 0
    return w + b


def params_np_square(d_model, bias=True):
    count = 4 * np.square(d_model)
    if bias:
        count = count + 4 * d_model
    return count


def params_conditional_precedence(d_model, bias=True):
    return 4 * d_model ** 2 + 4 * d_model if bias else 0


def params_augmented_square(d_model, bias=True):
    side = d_model + 1 if bias else d_model
    return 4 * side * side


def params_right_shapes(d_model, bias=True):
    shapes = [(d_model, d_model)] * 4
    if bias:
        shapes += [(d_model,)] * 4
    return sum(math.prod(s) for s in shapes)


def params_right_factored(d_model, bias=True):
    return 4 * d_model * (d_model + int(bool(bias)))


ENTRIES = [
    Entry("mha_flops", "wrong", "multiply-add-as-one",
          "it counts one multiply-add as 1 FLOP instead of 2, so every entry is half the "
          "answer", flops_mac_as_one),
    Entry("mha_flops", "wrong", "total-drops-weighted-sum",
          "the total adds the projections, the scores and the output projection but forgets "
          "the weighted sum, 2 N^2 d", flops_total_drops_weighted_sum),
    Entry("mha_flops", "wrong", "math-pow-floats",
          "math.pow returns floats, so every count is a float instead of the plain int the "
          "contract requires", flops_math_pow),
    Entry("mha_flops", "wrong", "key-qkv-projection-singular",
          "the dict key is 'qkv_projection' instead of 'qkv_projections', so the contract's "
          "key is missing", flops_key_typo),
    Entry("mha_flops", "wrong", "scores-as-n-d-d",
          "the scores product (N, d) @ (d, N) is counted as 2 N d^2 (the inner and outer sizes "
          "mixed up) instead of 2 N^2 d", flops_scores_n_d_squared),
    Entry("mha_flops", "wrong", "causal-saving",
          "it counts only the N(N+1)/2 causal (query, key) pairs in the scores and weighted "
          "sum, but the contract counts dense attention, N^2 pairs", flops_causal_pairs),
    Entry("mha_flops", "right", "matmul-helper", None, flops_right_matmul_helper),
    Entry("mha_flops", "right", "factored-n-d", None, flops_right_factored),

    Entry("crossover_seq_len", "wrong", "true-division-float",
          "`/` returns a float (2.0 * d_model), not the plain int the contract requires",
          crossover_true_division),
    Entry("crossover_seq_len", "wrong", "one-n2-term",
          "it sets only one N^2 term (2 N^2 d) equal to the projections, giving 4 d_model "
          "instead of 2 d_model", crossover_one_n2_term),
    Entry("crossover_seq_len", "wrong", "forgets-output-projection",
          "it compares the N^2 terms with the Q, K, V projections only (6 N d^2), leaving out "
          "the output projection, so it returns 6 d_model // 4 (about 1.5 d_model)", crossover_forgets_output_projection),
    Entry("crossover_seq_len", "wrong", "division-precedence",
          "`8 * d ** 2 // 4 * d` is (8 d^2 // 4) * d by precedence, 2 d^3, instead of "
          "8 d^2 // (4 d)", crossover_precedence),
    Entry("crossover_seq_len", "wrong", "search-returns-n-minus-1",
          "the search loop stops at the first N where the N^2 terms reach the projections but "
          "returns N - 1, one too small", crossover_search_off_by_one),
    Entry("crossover_seq_len", "wrong", "square-root-algebra",
          "the algebra keeps an N too few: it solves N^2 = 2 d_model and returns "
          "sqrt(2 d_model) instead of dividing both sides by N", crossover_square_root),
    Entry("crossover_seq_len", "right", "exact-equality-search", None, crossover_right_search),
    Entry("crossover_seq_len", "right", "fraction", None, crossover_right_fraction),

    Entry("mha_param_count", "wrong", "three-biases",
          "with bias it adds only the three q, k, v biases (3 d); the output projection's bias "
          "is forgotten", params_three_biases),
    Entry("mha_param_count", "wrong", "bias-test-inverted",
          "the test is `if not bias`, so the biases are added exactly when they should not be",
          params_bias_test_inverted),
    Entry("mha_param_count", "wrong", "three-weight-matrices",
          "it counts three weight matrices (W_q, W_k, W_v), 3 d^2, and forgets W_o",
          params_three_matrices),
    Entry("mha_param_count", "wrong", "numpy-integer",
          "np.square returns a numpy integer, so the count is a numpy.int64, not the plain "
          "Python int the contract requires", params_np_square),
    Entry("mha_param_count", "wrong", "conditional-expression-precedence",
          "`4 d^2 + 4 d if bias else 0` is a conditional over the whole sum, so bias=False "
          "returns 0 instead of 4 d^2", params_conditional_precedence),
    Entry("mha_param_count", "wrong", "bias-as-augmented-square",
          "it folds the bias into each matrix as an extra row and column, (d + 1)^2, instead "
          "of one extra row, d (d + 1)", params_augmented_square),
    Entry("mha_param_count", "right", "sum-of-shapes", None, params_right_shapes),
    Entry("mha_param_count", "right", "factored", None, params_right_factored),
]
