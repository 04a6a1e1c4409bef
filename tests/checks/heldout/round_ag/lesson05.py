"""Held-out catalogue, lesson 05 (FLOPs and parameters, plain Python ints):
mha_flops, crossover_seq_len, mha_param_count."""

import math

import numpy as np

from entry import Entry


# ============================================================================ mha_flops
def flops_one_per_mac(seq_len, d_model):
    n, d = seq_len, d_model
    parts = {
        "qkv_projections": 3 * n * d * d,
        "scores": n * n * d,
        "weighted_sum": n * n * d,
        "output_projection": n * d * d,
    }
    parts["total"] = sum(parts.values())
    return parts


def flops_total_misses_output(seq_len, d_model):
    N, d = seq_len, d_model
    qkv = 6 * N * d * d
    scores = 2 * N * N * d
    wsum = 2 * N * N * d
    out = 2 * N * d * d
    return {"qkv_projections": qkv, "scores": scores, "weighted_sum": wsum,
            "output_projection": out, "total": qkv + scores + wsum}


def flops_math_pow(seq_len, d_model):
    proj = 2 * seq_len * math.pow(d_model, 2)
    attn = 2 * math.pow(seq_len, 2) * d_model
    result = {"qkv_projections": 3 * proj, "scores": attn, "weighted_sum": attn,
              "output_projection": proj}
    result["total"] = sum(result.values())
    return result


def flops_causal_halved(seq_len, d_model):
    n, d = seq_len, d_model
    half_pairs = n * n // 2  # only the lower triangle of the score matrix is needed
    res = {
        "qkv_projections": 6 * n * d * d,
        "scores": 2 * half_pairs * d,
        "weighted_sum": 2 * half_pairs * d,
        "output_projection": 2 * n * d * d,
    }
    res["total"] = sum(res.values())
    return res


def flops_xor_for_square(seq_len, d_model):
    N, d = seq_len, d_model
    proj = 2 * N * d ^ 2
    quad = 2 * N ^ 2 * d
    return {"qkv_projections": 3 * proj, "scores": quad, "weighted_sum": quad,
            "output_projection": proj, "total": 4 * proj + 2 * quad}


def flops_scores_square_on_d(seq_len, d_model):
    n, d = seq_len, d_model
    qkv = 3 * (2 * n * d * d)
    scores = 2 * n * d * d  # (N, d) @ (d, N)
    weighted = 2 * n * n * d
    out_proj = 2 * n * d * d
    return {"qkv_projections": qkv, "scores": scores, "weighted_sum": weighted,
            "output_projection": out_proj, "total": qkv + scores + weighted + out_proj}


def flops_right_per_head_sum(seq_len, d_model):
    # count head by head with a divisor of d_model, then sum: the head count cancels
    heads = 1
    for cand in range(2, d_model + 1):
        if d_model % cand == 0:
            heads = cand
            break
    dh = d_model // heads
    counts = dict.fromkeys(("qkv_projections", "scores", "weighted_sum", "output_projection"), 0)
    counts["qkv_projections"] = 3 * 2 * seq_len * d_model * d_model
    for _ in range(heads):
        counts["scores"] += 2 * seq_len * seq_len * dh
        counts["weighted_sum"] += 2 * seq_len * seq_len * dh
    counts["output_projection"] = 2 * seq_len * d_model * d_model
    counts["total"] = sum(counts.values())
    return counts


def flops_right_matmul_helper(seq_len, d_model):
    def mm(m, k, n):
        return 2 * m * k * n  # an (m, k) @ (k, n) product

    n, d = seq_len, d_model
    out = {
        "qkv_projections": 3 * mm(n, d, d),
        "scores": mm(n, d, n),
        "weighted_sum": mm(n, n, d),
        "output_projection": mm(n, d, d),
    }
    out["total"] = int(sum(out.values()))
    return out


# ============================================================================ crossover_seq_len
def crossover_one_quadratic_term(d_model):
    # 2 N^2 d = 8 N d^2
    return 4 * d_model


def crossover_ratio_inverted(d_model):
    return d_model * 4 // 8


def crossover_true_division(d_model):
    return 8 * d_model / 4


def crossover_qkv_only(d_model):
    # 4 N^2 d = 6 N d^2  ->  N = 6 d / 4
    return 6 * d_model // 4


def crossover_dropped_n(d_model):
    # 4 N^2 d = 8 d^2  ->  N^2 = 2 d^2
    return int(math.sqrt(2) * d_model)


def crossover_first_exceeding(d_model):
    n = 1
    while 4 * n * n * d_model <= 8 * n * d_model * d_model:
        n += 1
    return n


def crossover_right_search(d_model):
    n = 1
    while 4 * n * n * d_model < 8 * n * d_model * d_model:
        n += 1
    return n


def crossover_right_ratio(d_model):
    return (8 * d_model * d_model) // (4 * d_model)


# ============================================================================ mha_param_count
def params_scalar_biases(d_model, bias=True):
    total = 4 * d_model * d_model
    if bias:
        total += 4
    return total


def params_ternary_precedence(d_model, bias=True):
    return 4 * d_model * d_model + 4 * d_model if bias else 0


def params_no_output_projection(d_model, bias=True):
    d = d_model
    weights = 3 * d * d
    biases = 3 * d if bias else 0
    return weights + biases


def params_numpy_int(d_model, bias=True):
    n = 4 * np.square(d_model)
    if bias:
        n = n + 4 * d_model
    return n


def params_output_bias_forgotten(d_model, bias=True):
    d = d_model
    count = 4 * d * d
    if bias:
        count += 3 * d  # b_q, b_k, b_v
    return count


def params_augmented_square(d_model, bias=True):
    side = d_model + 1 if bias else d_model
    return 4 * side ** 2


def params_right_augmented_rows(d_model, bias=True):
    rows = d_model + (1 if bias else 0)  # a bias is one extra input row of W
    return 4 * rows * d_model


def params_right_shapes(d_model, bias=True):
    shapes = [(d_model, d_model)] * 4
    if bias:
        shapes += [(d_model,)] * 4
    return sum(math.prod(s) for s in shapes)


ENTRIES = [
    Entry("mha_flops", "wrong", "one-flop-per-multiply-add",
          "every product is counted with one FLOP per multiply-add instead of two, so each "
          "entry is half the contract's count", flops_one_per_mac),
    Entry("mha_flops", "wrong", "total-misses-output-projection",
          "the total adds the projections, scores and weighted sum but leaves out the output "
          "projection (6 N d^2 + 4 N^2 d instead of 8 N d^2 + 4 N^2 d)",
          flops_total_misses_output),
    Entry("mha_flops", "wrong", "math-pow-floats",
          "math.pow returns floats, so every count is a float instead of the plain Python int "
          "the contract asks for", flops_math_pow),
    Entry("mha_flops", "wrong", "causal-halving",
          "the two N^2 terms are halved as if a causal mask skipped the upper triangle, but "
          "the exercise counts dense attention (no causal saving)", flops_causal_halved),
    Entry("mha_flops", "wrong", "caret-for-power",
          "`d ^ 2` is bitwise XOR in Python, not a square (and binds after *), so "
          "`2 * N * d ^ 2` is (2 N d) XOR 2", flops_xor_for_square),
    Entry("mha_flops", "wrong", "scores-square-on-d",
          "the score product (N, d) @ (d, N) is counted as 2 N d^2 instead of 2 N^2 d: the "
          "square is put on the wrong dimension", flops_scores_square_on_d),
    Entry("mha_flops", "right", "per-head-sum", None, flops_right_per_head_sum),
    Entry("mha_flops", "right", "matmul-helper", None, flops_right_matmul_helper),

    Entry("crossover_seq_len", "wrong", "one-quadratic-term",
          "it equates only one of the two N^2 terms (2 N^2 d) with the projections, giving "
          "N = 4 d_model instead of 2 d_model", crossover_one_quadratic_term),
    Entry("crossover_seq_len", "wrong", "ratio-inverted",
          "the ratio is inverted: it returns d_model * 4 / 8 (= d_model / 2) instead of "
          "8 / 4 * d_model", crossover_ratio_inverted),
    Entry("crossover_seq_len", "wrong", "true-division-float",
          "8 * d_model / 4 uses true division, so the result is a float instead of a plain int",
          crossover_true_division),
    Entry("crossover_seq_len", "wrong", "qkv-projections-only",
          "it compares the N^2 terms with the three Q/K/V projections only (6 N d^2), "
          "forgetting the output projection, so N = 1.5 d_model", crossover_qkv_only),
    Entry("crossover_seq_len", "wrong", "dropped-an-n",
          "in the algebra one factor N is dropped from the projection side (4 N^2 d = 8 d^2), "
          "so it returns sqrt(2) * d_model instead of 2 * d_model", crossover_dropped_n),
    Entry("crossover_seq_len", "wrong", "first-n-strictly-past",
          "the search loop stops at the first N where the N^2 terms strictly exceed the "
          "projections (`<=` in the loop condition), one past the crossover: 2 d_model + 1",
          crossover_first_exceeding),
    Entry("crossover_seq_len", "right", "search-loop", None, crossover_right_search),
    Entry("crossover_seq_len", "right", "integer-ratio", None, crossover_right_ratio),

    Entry("mha_param_count", "wrong", "scalar-biases",
          "each bias is counted as one number (+4) instead of a vector of d_model entries "
          "(+4 d_model)", params_scalar_biases),
    Entry("mha_param_count", "wrong", "ternary-precedence",
          "`4*d*d + 4*d if bias else 0` parses as `(4*d*d + 4*d) if bias else 0`, so "
          "bias=False returns 0", params_ternary_precedence),
    Entry("mha_param_count", "wrong", "no-output-projection",
          "it counts only W_q, W_k, W_v (and their biases), leaving out the output projection "
          "W_o", params_no_output_projection),
    Entry("mha_param_count", "wrong", "numpy-integer",
          "np.square returns a numpy integer, so the count is a np.int64 instead of a plain "
          "Python int", params_numpy_int),
    Entry("mha_param_count", "wrong", "output-bias-forgotten",
          "with bias=True it adds only the three Q/K/V bias vectors (3 d) and forgets the "
          "output projection's bias", params_output_bias_forgotten),
    Entry("mha_param_count", "wrong", "bias-augments-both-sides",
          "it folds the bias into each matrix as a (d+1) x (d+1) square, adding a row AND a "
          "column: 4 (d+1)^2 instead of 4 d (d+1)", params_augmented_square),
    Entry("mha_param_count", "right", "augmented-input-row", None, params_right_augmented_rows),
    Entry("mha_param_count", "right", "sum-of-shapes", None, params_right_shapes),
]
