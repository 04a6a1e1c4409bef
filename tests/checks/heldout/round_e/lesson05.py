"""Lesson 05 (plain Python ints): mha_flops, crossover_seq_len, mha_param_count."""

import math
from fractions import Fraction

import numpy as np

from entry import Entry


# ------------------------------------------------------------------ mha_flops, wrong
def flops_one_per_mac(seq_len, d_model):
    n, d = seq_len, d_model
    parts = {"qkv_projections": 3 * n * d * d, "scores": n * n * d, "weighted_sum": n * n * d,
             "output_projection": n * d * d}
    parts["total"] = sum(parts.values())
    return parts


def flops_total_without_output(seq_len, d_model):
    n, d = seq_len, d_model
    parts = {"qkv_projections": 6 * n * d * d, "scores": 2 * n * n * d,
             "weighted_sum": 2 * n * n * d, "output_projection": 2 * n * d * d}
    parts["total"] = parts["qkv_projections"] + parts["scores"] + parts["weighted_sum"]
    return parts


def flops_one_projection(seq_len, d_model):
    n, d = seq_len, d_model
    parts = {"qkv_projections": 2 * n * d * d, "scores": 2 * n * n * d,
             "weighted_sum": 2 * n * n * d, "output_projection": 2 * n * d * d}
    parts["total"] = sum(parts.values())
    return parts


def flops_math_pow(seq_len, d_model):
    n, d = seq_len, d_model
    parts = {"qkv_projections": 6 * n * d * d, "scores": 2 * math.pow(n, 2) * d,
             "weighted_sum": 2 * math.pow(n, 2) * d, "output_projection": 2 * n * d * d}
    parts["total"] = sum(parts.values())
    return parts


def flops_weighted_sum_shape(seq_len, d_model):
    n, d = seq_len, d_model
    parts = {"qkv_projections": 6 * n * d * d, "scores": 2 * n * n * d,
             "weighted_sum": 2 * n * d * d, "output_projection": 2 * n * d * d}
    parts["total"] = sum(parts.values())
    return parts


def flops_key_typo(seq_len, d_model):
    n, d = seq_len, d_model
    parts = {"qkv_projection": 6 * n * d * d, "scores": 2 * n * n * d,
             "weighted_sum": 2 * n * n * d, "output_projection": 2 * n * d * d}
    parts["total"] = sum(parts.values())
    return parts


# ------------------------------------------------------------------ mha_flops, right
def _mm(m, k, n):
    return 2 * m * k * n


def flops_matmul_shapes(seq_len, d_model):
    n, d = seq_len, d_model
    h = 1
    for cand in (8, 4, 2):
        if d % cand == 0:
            h = cand
            break
    dh = d // h
    parts = {
        "qkv_projections": sum(_mm(n, d, d) for _ in "qkv"),
        "scores": sum(_mm(n, dh, n) for _ in range(h)),
        "weighted_sum": sum(_mm(n, n, dh) for _ in range(h)),
        "output_projection": _mm(n, d, d),
    }
    parts["total"] = sum(parts.values())
    return parts


def flops_factored(seq_len, d_model):
    n, d = int(seq_len), int(d_model)
    proj = 2 * n * d * d
    attn = 2 * n * n * d
    return dict(qkv_projections=3 * proj, scores=attn, weighted_sum=attn,
                output_projection=proj, total=4 * proj + 2 * attn)


# ------------------------------------------------------------------ crossover_seq_len
def cross_equals_d(d_model):
    return d_model


def cross_float_division(d_model):
    return 8 * d_model * d_model / (4 * d_model)


def cross_scores_only(d_model):
    return 8 * d_model ** 2 // (2 * d_model)


def cross_without_output_projection(d_model):
    return 6 * d_model * d_model // (4 * d_model)


def cross_numpy_argmax(d_model):
    ns = np.arange(1, 4 * d_model + 2)
    idx = np.argmax(4 * ns * ns * d_model >= 8 * ns * d_model * d_model)
    return ns[idx]


def cross_loop_minus_one(d_model):
    n = 1
    while 4 * n * n * d_model < 8 * n * d_model * d_model:
        n += 1
    return n - 1


def cross_fraction(d_model):
    return int(Fraction(8 * d_model ** 2, 4 * d_model))


def cross_search(d_model):
    n = 1
    while 4 * n * n * d_model != 8 * n * d_model * d_model:
        n += 1
    return n


# ------------------------------------------------------------------ mha_param_count
def params_single_bias(d_model, bias=True):
    return 4 * d_model * d_model + (d_model if bias else 0)


def params_three_matrices(d_model, bias=True):
    return 3 * d_model * d_model + (3 * d_model if bias else 0)


def params_ignores_flag(d_model, bias=True):
    return 4 * d_model * d_model + 4 * d_model


def params_three_biases(d_model, bias=True):
    return 4 * d_model * d_model + (3 * d_model if bias else 0)


def params_math_pow(d_model, bias=True):
    total = 4 * math.pow(d_model, 2)
    if bias:
        total += 4 * d_model
    return total


def params_square_augmented(d_model, bias=True):
    return 4 * (d_model + 1) ** 2 if bias else 4 * d_model * d_model


def params_shapes(d_model, bias=True):
    shapes = [(d_model, d_model)] * 4 + ([(d_model,)] * 4 if bias else [])
    return sum(math.prod(s) for s in shapes)


def params_augmented_rows(d_model, bias=True):
    rows = d_model + (1 if bias else 0)  # bias as an extra input row of each matrix
    return 4 * rows * d_model


ENTRIES = [
    Entry("mha_flops", "wrong", "one_flop_per_multiply_add", "Counts a multiply-add as one FLOP, "
          "so every term is half the contract's.", flops_one_per_mac),
    Entry("mha_flops", "wrong", "total_misses_output_projection", "Leaves the output projection "
          "out of the total (6 N d^2 + 4 N^2 d).", flops_total_without_output),
    Entry("mha_flops", "wrong", "counts_one_projection", "Counts one projection (2 N d^2) for "
          "qkv_projections instead of three.", flops_one_projection),
    Entry("mha_flops", "wrong", "math_pow_gives_floats", "Uses math.pow(N, 2), which returns a "
          "float, so the counts are floats instead of plain ints.", flops_math_pow),
    Entry("mha_flops", "wrong", "weighted_sum_as_n_d_squared", "Counts the weighted sum as "
          "2 N d^2 (mixing up the shapes of p v) instead of 2 N^2 d.", flops_weighted_sum_shape),
    Entry("mha_flops", "wrong", "key_name_typo", "Names the key 'qkv_projection' instead of "
          "'qkv_projections'.", flops_key_typo),
    Entry("mha_flops", "right", "sum_over_matmul_shapes_per_head", None, flops_matmul_shapes),
    Entry("mha_flops", "right", "factored_terms", None, flops_factored),

    Entry("crossover_seq_len", "wrong", "returns_d_model", "Sets N^2 d equal to N d^2 and "
          "returns d_model, dropping the factors 4 and 8.", cross_equals_d),
    Entry("crossover_seq_len", "wrong", "float_division", "Solves 8 N d^2 = 4 N^2 d with /, "
          "returning a float instead of a plain int.", cross_float_division),
    Entry("crossover_seq_len", "wrong", "only_scores_term", "Compares the projections with only "
          "the scores term (2 N^2 d) instead of both N^2 terms, giving 4 d_model.",
          cross_scores_only),
    Entry("crossover_seq_len", "wrong", "forgets_output_projection", "Leaves the output "
          "projection out of the projection terms (6 N d^2), giving 1.5 d_model.",
          cross_without_output_projection),
    Entry("crossover_seq_len", "wrong", "numpy_integer", "Finds N with np.argmax over a numpy "
          "range and returns a numpy integer instead of a plain int.", cross_numpy_argmax),
    Entry("crossover_seq_len", "wrong", "search_loop_off_by_one", "Searches upward while the "
          "N^2 terms are smaller and then returns n - 1, one below the crossover.",
          cross_loop_minus_one),
    Entry("crossover_seq_len", "right", "fraction", None, cross_fraction),
    Entry("crossover_seq_len", "right", "exact_search", None, cross_search),

    Entry("mha_param_count", "wrong", "one_bias_vector", "Adds a single bias vector (d) instead "
          "of one per projection (4 d).", params_single_bias),
    Entry("mha_param_count", "wrong", "forgets_output_matrix", "Counts only W_q, W_k, W_v "
          "(and their biases), forgetting W_o.", params_three_matrices),
    Entry("mha_param_count", "wrong", "ignores_bias_flag", "Always adds the 4 d biases, "
          "ignoring bias=False.", params_ignores_flag),
    Entry("mha_param_count", "wrong", "forgets_output_bias", "Counts biases for q, k, v only "
          "(3 d), forgetting the output projection's bias.", params_three_biases),
    Entry("mha_param_count", "wrong", "math_pow_float", "Uses math.pow(d, 2), so the count is a "
          "float instead of a plain int.", params_math_pow),
    Entry("mha_param_count", "wrong", "bias_as_row_and_column", "Augments each matrix with both "
          "a bias row and a bias column, counting (d + 1)^2 per matrix.",
          params_square_augmented),
    Entry("mha_param_count", "right", "sum_of_shapes", None, params_shapes),
    Entry("mha_param_count", "right", "bias_as_extra_input_row", None, params_augmented_rows),
]
