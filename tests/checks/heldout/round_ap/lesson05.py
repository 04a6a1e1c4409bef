"""Held-out catalogue, lesson 05 (FLOPs and parameters, plain Python ints): mha_flops,
crossover_seq_len, mha_param_count. Each function is one learner's own answer; wrong ones
carry one slip."""

import math
import operator
from fractions import Fraction
from functools import reduce

import numpy as np

from entry import Entry


# ============================================================== mha_flops: wrong
def flops_one_per_multiply_add(seq_len, d_model):
    n, d = seq_len, d_model
    out = {
        "qkv_projections": 3 * n * d * d,
        "scores": n * n * d,
        "weighted_sum": n * n * d,
        "output_projection": n * d * d,
    }
    out["total"] = sum(out.values())
    return out


def flops_total_misses_output(seq_len, d_model):
    qkv = 6 * seq_len * d_model ** 2
    scores = 2 * seq_len ** 2 * d_model
    mix = 2 * seq_len ** 2 * d_model
    proj = 2 * seq_len * d_model ** 2
    return {"qkv_projections": qkv, "scores": scores, "weighted_sum": mix,
            "output_projection": proj, "total": qkv + scores + mix}


def flops_math_pow(seq_len, d_model):
    proj_one = 2 * seq_len * math.pow(d_model, 2)
    result = {
        "qkv_projections": 3 * proj_one,
        "scores": 2 * seq_len * seq_len * d_model,
        "weighted_sum": 2 * seq_len * seq_len * d_model,
        "output_projection": proj_one,
    }
    result["total"] = sum(result.values())
    return result


def flops_square_grouping(seq_len, d_model):
    N, d = seq_len, d_model
    scores = 2 * (N * d) ** 2
    weighted = 2 * N ** 2 * d
    qkv = 6 * N * d ** 2
    o = 2 * N * d ** 2
    return {"qkv_projections": qkv, "scores": scores, "weighted_sum": weighted,
            "output_projection": o, "total": qkv + scores + weighted + o}


def flops_weighted_sum_dims_swapped(seq_len, d_model):
    n, d = seq_len, d_model
    parts = {}
    parts["qkv_projections"] = 3 * (2 * n * d * d)
    parts["scores"] = 2 * n * n * d
    parts["weighted_sum"] = 2 * n * d * d
    parts["output_projection"] = 2 * n * d * d
    parts["total"] = sum(parts.values())
    return parts


def flops_causal_halving(seq_len, d_model):
    n, d = seq_len, d_model
    attn = n * n * d  # causal: only half of the N x N scores are needed
    res = {"qkv_projections": 6 * n * d * d, "scores": attn, "weighted_sum": attn,
           "output_projection": 2 * n * d * d}
    res["total"] = sum(res.values())
    return res


# ============================================================== mha_flops: right
def flops_from_matmul_shapes(seq_len, d_model):
    def mm(m, k, n):  # FLOPs of an (m, k) @ (k, n) product
        return 2 * m * k * n

    n, d = seq_len, d_model
    qkv = sum(mm(n, d, d) for _ in ("q", "k", "v"))
    parts = {
        "qkv_projections": qkv,
        "scores": mm(n, d, n),  # all heads together: (N, d) @ (d, N)
        "weighted_sum": mm(n, n, d),
        "output_projection": mm(n, d, d),
    }
    parts["total"] = reduce(operator.add, parts.values())
    return parts


def flops_closed_form_factored(seq_len, d_model):
    n, d = int(seq_len), int(d_model)
    nd = n * d
    keys = ["qkv_projections", "scores", "weighted_sum", "output_projection"]
    vals = [6 * nd * d, 2 * nd * n, 2 * nd * n, 2 * nd * d]
    out = dict(zip(keys, vals))
    out["total"] = 4 * nd * (2 * d + n)
    return out


# ============================================================== crossover_seq_len: wrong
def crossover_half(d_model):
    return d_model // 2


def crossover_true_division(d_model):
    return (8 * d_model ** 2) / (4 * d_model)


def crossover_one_term_each(d_model):
    # 2 N^2 d (scores) equals 2 N d^2 (one projection)
    return d_model


def crossover_precedence(d_model):
    return 8 * d_model ** 2 // 4 * d_model


def crossover_strictly_greater(d_model):
    return 2 * d_model + 1  # first N where attention costs more


def crossover_search_from_zero(d_model):
    n = 0
    while 4 * n * n * d_model < 8 * n * d_model * d_model:
        n += 1
    return n


# ============================================================== crossover_seq_len: right
def crossover_search_from_one(d_model):
    n = 1
    while 4 * n * n * d_model != 8 * n * d_model * d_model:
        n += 1
    return n


def crossover_fraction(d_model):
    ratio = Fraction(8 * d_model * d_model, 4 * d_model)
    return int(ratio)


# ============================================================== mha_param_count: wrong
def params_one_bias_vector(d_model, bias=True):
    count = 4 * d_model * d_model
    if bias:
        count += d_model
    return count


def params_bias_is_not_none(d_model, bias=True):
    total = 4 * d_model ** 2
    if bias is not None:
        total += 4 * d_model
    return total


def params_qkv_only(d_model, bias=True):
    per_matrix = d_model * d_model + (d_model if bias else 0)
    return 3 * per_matrix


def params_conditional_precedence(d_model, bias=True):
    return 4 * d_model ** 2 + 4 * d_model if bias else 0


def params_numpy_sum(d_model, bias=True):
    sizes = [d_model * d_model] * 4
    if bias:
        sizes += [d_model] * 4
    return np.sum(sizes)


def params_caret_power(d_model, bias=True):
    weights = 4 * d_model ^ 2
    return weights + (4 * d_model if bias else 0)


# ============================================================== mha_param_count: right
def params_shape_walk(d_model, bias=True):
    shapes = [(d_model, d_model)] * 4
    if bias:
        shapes += [(d_model,)] * 4
    return sum(math.prod(s) for s in shapes)


def params_factored(d_model, bias=True):
    return d_model * (4 * d_model + 4 * int(bool(bias)))


ENTRIES = [
    Entry("mha_flops", "wrong", "multiply_add_as_one_flop",
          "counts one multiply-add as 1 FLOP instead of 2, halving every entry",
          flops_one_per_multiply_add),
    Entry("mha_flops", "wrong", "total_without_output_projection",
          "the total leaves out the output projection (6 N d^2 + 4 N^2 d)",
          flops_total_misses_output),
    Entry("mha_flops", "wrong", "math_pow_float",
          "uses math.pow for d^2, which returns a float, so the projection counts and the "
          "total are floats instead of plain ints",
          flops_math_pow),
    Entry("mha_flops", "wrong", "scores_squares_n_times_d",
          "writes the scores as 2 * (N * d) ** 2, squaring d as well as N (2 N^2 d^2 instead "
          "of 2 N^2 d)",
          flops_square_grouping),
    Entry("mha_flops", "wrong", "weighted_sum_as_2_n_d2",
          "counts the weighted sum as 2 N d^2, mixing up which dimension is squared "
          "(it is (N, N) @ (N, d): 2 N^2 d)",
          flops_weighted_sum_dims_swapped),
    Entry("mha_flops", "wrong", "causal_halving",
          "halves the two N^2 terms for a causal mask, but the count is for dense attention",
          flops_causal_halving),
    Entry("mha_flops", "right", "matmul_shape_helper", None, flops_from_matmul_shapes),
    Entry("mha_flops", "right", "factored_closed_form", None, flops_closed_form_factored),

    Entry("crossover_seq_len", "wrong", "ratio_inverted",
          "inverts the ratio and returns d_model // 2 instead of 2 * d_model", crossover_half),
    Entry("crossover_seq_len", "wrong", "true_division_float",
          "solves 8 N d^2 = 4 N^2 d with `/`, returning a float instead of an int",
          crossover_true_division),
    Entry("crossover_seq_len", "wrong", "one_term_each_side",
          "equates one N^2 term (2 N^2 d) with one projection (2 N d^2) and returns d_model",
          crossover_one_term_each),
    Entry("crossover_seq_len", "wrong", "precedence_multiplies_d",
          "`8 * d ** 2 // 4 * d` multiplies by d after dividing (2 d^3): the denominator "
          "4 * d needs parentheses",
          crossover_precedence),
    Entry("crossover_seq_len", "wrong", "first_n_strictly_above",
          "returns 2 * d_model + 1, the first N where the N^2 terms exceed the projections, "
          "instead of the N where they are equal",
          crossover_strictly_greater),
    Entry("crossover_seq_len", "wrong", "search_starts_at_zero",
          "the search starts at N = 0, where both sides are 0, so it stops at once and "
          "returns 0",
          crossover_search_from_zero),
    Entry("crossover_seq_len", "right", "search_from_one", None, crossover_search_from_one),
    Entry("crossover_seq_len", "right", "fraction", None, crossover_fraction),

    Entry("mha_param_count", "wrong", "one_bias_vector",
          "adds a single bias vector of d_model instead of four (one per projection)",
          params_one_bias_vector),
    Entry("mha_param_count", "wrong", "bias_is_not_none",
          "tests `bias is not None`, which is also true for bias=False, so the biases are "
          "always counted",
          params_bias_is_not_none),
    Entry("mha_param_count", "wrong", "forgets_output_projection",
          "counts only W_q, W_k, W_v (and their biases), leaving out W_o",
          params_qkv_only),
    Entry("mha_param_count", "wrong", "conditional_expression_precedence",
          "`4*d**2 + 4*d if bias else 0` applies the conditional to the whole sum, so "
          "bias=False returns 0",
          params_conditional_precedence),
    Entry("mha_param_count", "wrong", "numpy_integer",
          "adds the sizes with np.sum, returning a numpy integer instead of a plain int",
          params_numpy_sum),
    Entry("mha_param_count", "wrong", "caret_is_xor",
          "writes d_model ^ 2 for the square, but ^ is bitwise XOR in Python (and binds "
          "after *, giving (4 d) XOR 2)",
          params_caret_power),
    Entry("mha_param_count", "right", "shape_walk_math_prod", None, params_shape_walk),
    Entry("mha_param_count", "right", "factored", None, params_factored),
]
