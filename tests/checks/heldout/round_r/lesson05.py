"""Held-out catalogue, lesson 05 (flops): mha_flops, crossover_seq_len, mha_param_count.
Plain Python ints."""

import math
from functools import reduce
from operator import mul

from entry import Entry


# ================================================================================= mha_flops
def flops_macs_not_flops(seq_len, d_model):
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
    n, d = seq_len, d_model
    qkv = 6 * n * d * d
    scores = 2 * n * n * d
    wsum = 2 * n * n * d
    out = 2 * n * d * d
    return {"qkv_projections": qkv, "scores": scores, "weighted_sum": wsum,
            "output_projection": out, "total": qkv + scores + wsum}


def flops_one_projection(seq_len, d_model):
    n, d = seq_len, d_model
    proj = 2 * n * d * d  # one (N, d) @ (d, d)
    res = {"qkv_projections": proj, "scores": 2 * n * n * d, "weighted_sum": 2 * n * n * d,
           "output_projection": 2 * n * d * d}
    res["total"] = sum(res.values())
    return res


def flops_true_division(seq_len, d_model):
    n, d = seq_len, d_model
    res = {
        "qkv_projections": 6 * n * d * d,
        "scores": 4 * n * n * d / 2,  # 2 * (N^2 d) multiply-adds
        "weighted_sum": 4 * n * n * d / 2,
        "output_projection": 2 * n * d * d,
    }
    res["total"] = res["qkv_projections"] + res["scores"] + res["weighted_sum"] \
        + res["output_projection"]
    return res


def flops_scores_n_d_swapped(seq_len, d_model):
    N, D = seq_len, d_model
    out = {"qkv_projections": 6 * N * D * D, "scores": 2 * N * D * D,
           "weighted_sum": 2 * N * N * D, "output_projection": 2 * N * D * D}
    out["total"] = sum(out.values())
    return out


def flops_square_precedence(seq_len, d_model):
    n, d = seq_len, d_model
    out = {"qkv_projections": 6 * n * d ** 2, "scores": (2 * n) ** 2 * d,
           "weighted_sum": 2 * n ** 2 * d, "output_projection": 2 * n * d ** 2}
    out["total"] = sum(out.values())
    return out


def flops_matmul_helper(seq_len, d_model):
    def mm(m, k, n):  # (m, k) @ (k, n), one multiply-add = 2 FLOPs
        return 2 * m * k * n
    n, d = seq_len, d_model
    counts = {
        "qkv_projections": 3 * mm(n, d, d),
        "scores": mm(n, d, n),
        "weighted_sum": mm(n, n, d),
        "output_projection": mm(n, d, d),
    }
    counts["total"] = 8 * n * d * d + 4 * n * n * d
    return counts


def flops_sum_over_unit_heads(seq_len, d_model):
    n, d = int(seq_len), int(d_model)
    scores = weighted = 0
    for _head in range(d):  # d heads of size 1 do d_model's work
        scores += 2 * n * n * 1
        weighted += 2 * n * 1 * n
    proj = 2 * n * d * d
    res = {"qkv_projections": 3 * proj, "scores": scores, "weighted_sum": weighted,
           "output_projection": proj}
    res["total"] = sum(res.values())
    return res


# ========================================================================= crossover_seq_len
def cross_true_division(d_model):
    return 8 * d_model ** 2 / (4 * d_model)


def cross_forgets_output_projection(d_model):
    # 4 N^2 d = 6 N d^2
    return 3 * d_model // 2


def cross_precedence(d_model):
    return 8 * d_model ** 2 // 4 * d_model


def cross_macs_vs_flops(d_model):
    # N^2 terms 4 N^2 d (FLOPs) against projections 4 N d^2 (multiply-adds)
    return 4 * d_model * d_model // (4 * d_model)


def cross_first_n_exceeding(d_model):
    n = 1
    while 4 * n * n * d_model <= 8 * n * d_model * d_model:
        n += 1
    return n


def cross_scores_only(d_model):
    # 2 N^2 d = 8 N d^2
    return 4 * d_model


def cross_solve_ratio(d_model):
    projections_per_n = 8 * d_model * d_model   # 8 N d^2 = N * this
    quadratic_per_n2 = 4 * d_model              # 4 N^2 d = N^2 * this
    return projections_per_n // quadratic_per_n2


def cross_bit_shift(d_model):
    return int(d_model) << 1


# =========================================================================== mha_param_count
def params_bias_scalars(d_model, bias=True):
    total = 4 * d_model * d_model
    if bias:
        total += 4
    return total


def params_conditional_precedence(d_model, bias=True):
    return 4 * d_model ** 2 + 4 * d_model if bias else 0


def params_math_pow(d_model, bias=True):
    n = 4 * math.pow(d_model, 2)
    if bias:
        n += 4 * d_model
    return n


def params_three_matrices(d_model, bias=True):
    per_matrix = d_model * d_model + (d_model if bias else 0)
    return 3 * per_matrix


def params_bias_flag_ignored(d_model, bias=True):
    weights = 4 * d_model * d_model
    biases = 4 * d_model
    return weights + biases


def params_xor_power(d_model, bias=True):
    count = 4 * d_model ^ 2
    if bias:
        count += 4 * d_model
    return count


def params_shapes_table(d_model, bias=True):
    shapes = [(d_model, d_model)] * 4
    if bias:
        shapes += [(d_model,)] * 4
    return sum(math.prod(s) for s in shapes)


def params_factored(d_model, bias=True):
    return reduce(mul, (4, d_model, d_model + (1 if bias else 0)))


E = Entry
ENTRIES = [
    E("mha_flops", "wrong", "counts_multiply_adds",
      "it counts one multiply-add as 1 FLOP instead of 2, so every entry is half the "
      "contract's value",
      flops_macs_not_flops),
    E("mha_flops", "wrong", "total_misses_output_projection",
      "the total adds the Q/K/V projections, scores and weighted sum but leaves out the "
      "output projection (6 N d^2 + 4 N^2 d instead of 8 N d^2 + 4 N^2 d)",
      flops_total_misses_output),
    E("mha_flops", "wrong", "one_projection_for_qkv",
      "qkv_projections counts a single (N, d) @ (d, d) product (2 N d^2) instead of three "
      "(6 N d^2), and the total inherits the error",
      flops_one_projection),
    E("mha_flops", "wrong", "true_division_float",
      "`4 * n * n * d / 2` uses true division, so scores, weighted_sum and total are floats "
      "instead of plain ints",
      flops_true_division),
    E("mha_flops", "wrong", "scores_n_and_d_swapped",
      "the scores entry is 2 N d^2 instead of 2 N^2 d (N and d swapped), so it and the total "
      "are wrong whenever seq_len != d_model",
      flops_scores_n_d_swapped),
    E("mha_flops", "wrong", "square_precedence",
      "`(2 * n) ** 2 * d` squares the factor 2 as well, so scores is 4 N^2 d instead of "
      "2 N^2 d",
      flops_square_precedence),
    E("mha_flops", "right", "matmul_shape_helper", None, flops_matmul_helper),
    E("mha_flops", "right", "sum_over_unit_heads", None, flops_sum_over_unit_heads),

    E("crossover_seq_len", "wrong", "true_division_float",
      "8 d^2 / (4 d) uses true division, so it returns the float 2.0 * d_model instead of a "
      "plain int",
      cross_true_division),
    E("crossover_seq_len", "wrong", "forgets_output_projection",
      "it sets the N^2 terms equal to the Q/K/V projections only (6 N d^2), forgetting the "
      "output projection, and gets 3 d_model // 2 (1.5 d_model, floored) instead of 2 d_model",
      cross_forgets_output_projection),
    E("crossover_seq_len", "wrong", "floor_division_precedence",
      "`8 * d ** 2 // 4 * d` is `(8 d^2 // 4) * d` = 2 d^3, not 8 d^2 // (4 d)",
      cross_precedence),
    E("crossover_seq_len", "wrong", "mixes_macs_and_flops",
      "it counts the projections in multiply-adds (4 N d^2) but the N^2 terms in FLOPs "
      "(4 N^2 d), so it answers d_model instead of 2 d_model",
      cross_macs_vs_flops),
    E("crossover_seq_len", "wrong", "first_n_past_crossover",
      "the search loop stops at the first N where the N^2 terms exceed the projections "
      "(the `<=` keeps going at equality), so it returns 2 d_model + 1",
      cross_first_n_exceeding),
    E("crossover_seq_len", "wrong", "scores_term_only",
      "it takes only the score term 2 N^2 d as 'the N^2 terms' (forgetting the weighted sum), "
      "so it answers 4 d_model",
      cross_scores_only),
    E("crossover_seq_len", "right", "ratio_of_coefficients", None, cross_solve_ratio),
    E("crossover_seq_len", "right", "bit_shift", None, cross_bit_shift),

    E("mha_param_count", "wrong", "bias_as_scalars",
      "with bias it adds 4 (one number per matrix) instead of 4 d_model (one bias vector of "
      "length d_model per projection)",
      params_bias_scalars),
    E("mha_param_count", "wrong", "conditional_expression_precedence",
      "`4*d**2 + 4*d if bias else 0` parses as `(4*d**2 + 4*d) if bias else 0`, so "
      "bias=False returns 0 instead of 4 d^2",
      params_conditional_precedence),
    E("mha_param_count", "wrong", "math_pow_float",
      "math.pow always returns a float, so the count is a float instead of a plain int",
      params_math_pow),
    E("mha_param_count", "wrong", "three_matrices",
      "it counts only W_q, W_k and W_v (and their biases), forgetting the output projection "
      "W_o",
      params_three_matrices),
    E("mha_param_count", "wrong", "bias_flag_ignored",
      "the bias argument is never used: the 4 d_model biases are always added, also for "
      "bias=False",
      params_bias_flag_ignored),
    E("mha_param_count", "wrong", "caret_is_xor",
      "`d_model ^ 2` is a bitwise XOR in Python, not a power: `4 * d_model ^ 2` is "
      "(4 d_model) XOR 2",
      params_xor_power),
    E("mha_param_count", "right", "table_of_shapes", None, params_shapes_table),
    E("mha_param_count", "right", "factored_closed_form", None, params_factored),
]
