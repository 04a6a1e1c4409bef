"""Round c, lesson 05: mha_flops, crossover_seq_len, mha_param_count (plain Python ints)."""

import math

from entry import Entry


# ------------------------------------------------------------------ mha_flops
def _flops(qkv, scores, wsum, outp):
    return {"qkv_projections": qkv, "scores": scores, "weighted_sum": wsum,
            "output_projection": outp, "total": qkv + scores + wsum + outp}


def flops_macs(seq_len, d_model):
    n, d = seq_len, d_model
    return _flops(3 * n * d * d, n * n * d, n * n * d, n * d * d)


def flops_one_projection(seq_len, d_model):
    n, d = seq_len, d_model
    return _flops(2 * n * d * d, 2 * n * n * d, 2 * n * n * d, 2 * n * d * d)


def flops_total_without_output(seq_len, d_model):
    n, d = seq_len, d_model
    parts = _flops(6 * n * d * d, 2 * n * n * d, 2 * n * n * d, 2 * n * d * d)
    parts["total"] = 6 * n * d * d + 4 * n * n * d
    return parts


def flops_math_pow(seq_len, d_model):
    n, d = seq_len, d_model
    return _flops(6 * n * math.pow(d, 2), 2 * n * n * d, 2 * n * n * d, 2 * n * math.pow(d, 2))


def flops_key_names(seq_len, d_model):
    n, d = seq_len, d_model
    return {"qkv_projection": 6 * n * d * d, "attention_scores": 2 * n * n * d,
            "weighted_sum": 2 * n * n * d, "output_projection": 2 * n * d * d,
            "total": 8 * n * d * d + 4 * n * n * d}


def flops_causal_half(seq_len, d_model):
    n, d = seq_len, d_model
    tri = n * (n + 1) // 2
    return _flops(6 * n * d * d, 2 * tri * d, 2 * tri * d, 2 * n * d * d)


def flops_matmul_helper(seq_len, d_model):
    def matmul(m, k, n):
        return 2 * m * k * n
    n, d = seq_len, d_model
    qkv = sum(matmul(n, d, d) for _ in "qkv")
    scores = matmul(n, d, n)
    wsum = matmul(n, n, d)
    outp = matmul(n, d, d)
    return {"qkv_projections": qkv, "scores": scores, "weighted_sum": wsum,
            "output_projection": outp, "total": sum((qkv, scores, wsum, outp))}


def flops_per_head(seq_len, d_model):
    # count per head of width 1 and add up the d_model heads: the totals do not depend on H
    n, d = seq_len, d_model
    scores = sum(2 * n * n * 1 for _ in range(d))
    wsum = sum(2 * n * n * 1 for _ in range(d))
    return {"qkv_projections": 3 * 2 * n * d * d, "scores": scores, "weighted_sum": wsum,
            "output_projection": 2 * n * d * d,
            "total": 8 * n * d * d + scores + wsum}


# ------------------------------------------------------------------ crossover_seq_len
def cross_qkv_only(d_model):
    return 3 * d_model // 2


def cross_inverted(d_model):
    return d_model // 2


def cross_float(d_model):
    return 2.0 * d_model


def cross_per_product(d_model):
    return d_model


def cross_scores_only(d_model):
    return 4 * d_model


def cross_sqrt(d_model):
    return math.isqrt(2 * d_model)


def cross_search(d_model):
    n = 1
    while 4 * n * n * d_model < 8 * n * d_model * d_model:
        n += 1
    return n


def cross_ratio(d_model):
    d = d_model
    return (8 * d * d) // (4 * d)


# ------------------------------------------------------------------ mha_param_count
def params_three_matrices(d_model, bias=True):
    d = d_model
    return 3 * d * d + (3 * d if bias else 0)


def params_one_bias_each(d_model, bias=True):
    return 4 * d_model * d_model + (4 if bias else 0)


def params_ignores_flag(d_model, bias=True):
    return 4 * d_model * d_model + 4 * d_model


def params_qkv_bias_only(d_model, bias=True):
    return 4 * d_model * d_model + (3 * d_model if bias else 0)


def params_float(d_model, bias=True):
    return 4 * d_model ** 2.0 + (4 * d_model if bias else 0)


def params_augmented_square(d_model, bias=True):
    return 4 * (d_model + 1) ** 2 if bias else 4 * d_model ** 2


def params_bool_arith(d_model, bias=True):
    return 4 * d_model * d_model + 4 * d_model * int(bias)


def params_per_matrix(d_model, bias=True):
    total = 0
    for _ in ("w_q", "w_k", "w_v", "w_o"):
        total += d_model * d_model
        if bias:
            total += d_model
    return total


ENTRIES = [
    Entry("mha_flops", "wrong", "multiply_add_as_one", "Counts a multiply-add as one FLOP instead of two, halving every term.", flops_macs),
    Entry("mha_flops", "wrong", "one_projection", "Counts the Q, K, V projections as one matrix product (2 N d^2) instead of three (6 N d^2).", flops_one_projection),
    Entry("mha_flops", "wrong", "total_without_output", "Leaves the output projection out of the total.", flops_total_without_output),
    Entry("mha_flops", "wrong", "math_pow_floats", "Uses math.pow, which returns floats, so the counts are not plain ints.", flops_math_pow),
    Entry("mha_flops", "wrong", "key_names", "Names the dictionary keys differently from the contract ('qkv_projection', 'attention_scores').", flops_key_names),
    Entry("mha_flops", "wrong", "causal_saving", "Counts only the causal half N(N+1)/2 of the score matrix, although the contract asks for dense attention.", flops_causal_half),
    Entry("mha_flops", "right", "matmul_helper", None, flops_matmul_helper),
    Entry("mha_flops", "right", "sum_over_unit_heads", None, flops_per_head),
    Entry("crossover_seq_len", "wrong", "qkv_only", "Equates the N^2 terms with the Q, K, V projections only (6 N d^2), giving 1.5 d_model.", cross_qkv_only),
    Entry("crossover_seq_len", "wrong", "inverted_ratio", "Inverts the ratio when solving 4 N^2 d = 8 N d^2, giving d_model / 2.", cross_inverted),
    Entry("crossover_seq_len", "wrong", "float_result", "Returns a float (2.0 * d_model) instead of a plain int.", cross_float),
    Entry("crossover_seq_len", "wrong", "one_product_each", "Compares one N^2 product (2 N^2 d) with one projection (2 N d^2), giving d_model.", cross_per_product),
    Entry("crossover_seq_len", "wrong", "scores_only", "Compares only the scores term with all the projections, giving 4 d_model.", cross_scores_only),
    Entry("crossover_seq_len", "wrong", "square_root", "Solves N^2 = 2 d_model instead of N = 2 d_model, taking a square root.", cross_sqrt),
    Entry("crossover_seq_len", "right", "linear_search", None, cross_search),
    Entry("crossover_seq_len", "right", "ratio_of_terms", None, cross_ratio),
    Entry("mha_param_count", "wrong", "three_matrices", "Counts only the Q, K, V projections and forgets the output projection.", params_three_matrices),
    Entry("mha_param_count", "wrong", "scalar_bias", "Counts one bias number per projection instead of a bias vector of d_model.", params_one_bias_each),
    Entry("mha_param_count", "wrong", "ignores_bias_flag", "Always adds the biases, ignoring bias=False.", params_ignores_flag),
    Entry("mha_param_count", "wrong", "qkv_bias_only", "Adds biases to Q, K and V but not to the output projection.", params_qkv_bias_only),
    Entry("mha_param_count", "wrong", "float_power", "Writes d_model ** 2.0, so the count is a float instead of an int.", params_float),
    Entry("mha_param_count", "wrong", "augmented_square", "Counts the bias as an extra row and column, 4 (d+1)^2, instead of one extra row, 4 d (d+1).", params_augmented_square),
    Entry("mha_param_count", "right", "bool_arithmetic", None, params_bool_arith),
    Entry("mha_param_count", "right", "per_matrix_loop", None, params_per_matrix),
]
