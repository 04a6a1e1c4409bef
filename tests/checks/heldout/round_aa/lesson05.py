"""Held-out catalogue, lesson 05 (FLOPs, plain Python ints): mha_flops, crossover_seq_len,
mha_param_count."""

import math
from fractions import Fraction

import numpy as np

from entry import Entry


# ============================================================================ mha_flops
def flops_one_per_madd(seq_len, d_model):
    n, d = seq_len, d_model
    out = {
        "qkv_projections": 3 * n * d * d,
        "scores": n * n * d,
        "weighted_sum": n * n * d,
        "output_projection": n * d * d,
    }
    out["total"] = sum(out.values())
    return out


def flops_one_projection(seq_len, d_model):
    proj = 2 * seq_len * d_model * d_model
    attn = 2 * seq_len * seq_len * d_model
    return {"qkv_projections": proj, "scores": attn, "weighted_sum": attn,
            "output_projection": proj, "total": 2 * proj + 2 * attn}


def flops_total_without_output(seq_len, d_model):
    N, d = seq_len, d_model
    qkv = 6 * N * d ** 2
    scores = 2 * N ** 2 * d
    wsum = 2 * N ** 2 * d
    outp = 2 * N * d ** 2
    return {"qkv_projections": qkv, "scores": scores, "weighted_sum": wsum,
            "output_projection": outp, "total": qkv + scores + wsum}


def flops_math_pow(seq_len, d_model):
    n, d = seq_len, d_model
    parts = {
        "qkv_projections": 6 * n * math.pow(d, 2),
        "scores": 2 * math.pow(n, 2) * d,
        "weighted_sum": 2 * math.pow(n, 2) * d,
        "output_projection": 2 * n * math.pow(d, 2),
    }
    parts["total"] = sum(parts.values())
    return parts


def flops_causal_saving(seq_len, d_model):
    n, d = seq_len, d_model
    pairs = n * (n + 1) // 2  # query i only sees keys 0..i
    res = {
        "qkv_projections": 6 * n * d * d,
        "scores": 2 * pairs * d,
        "weighted_sum": 2 * pairs * d,
        "output_projection": 2 * n * d * d,
    }
    res["total"] = sum(res.values())
    return res


def flops_scores_nd_squared(seq_len, d_model):
    N, D = seq_len, d_model
    qkv = 3 * 2 * N * D * D
    scores = 2 * (N * D) ** 2
    wsum = 2 * N * N * D
    out = 2 * N * D * D
    return {"qkv_projections": qkv, "scores": scores, "weighted_sum": wsum,
            "output_projection": out, "total": qkv + scores + wsum + out}


def flops_matmul_shapes(seq_len, d_model):
    def mm(m, k, n):
        return 2 * m * k * n

    n, d = seq_len, d_model
    qkv = sum(mm(n, d, d) for _ in ("q", "k", "v"))
    scores = mm(n, d, n)
    weighted = mm(n, n, d)
    out = mm(n, d, d)
    return {"qkv_projections": qkv, "scores": scores, "weighted_sum": weighted,
            "output_projection": out, "total": qkv + scores + weighted + out}


def flops_numpy_then_int(seq_len, d_model):
    coeff = np.array([6, 2, 2, 2], dtype=np.int64)
    nd = np.int64(seq_len) * np.int64(d_model)
    terms = coeff * nd * np.array([d_model, seq_len, seq_len, d_model], dtype=np.int64)
    keys = ["qkv_projections", "scores", "weighted_sum", "output_projection"]
    res = {key: int(val) for key, val in zip(keys, terms)}
    res["total"] = int(terms.sum())
    return res


# ============================================================================ crossover_seq_len
def crossover_one_term_each(d_model):
    # 2 N^2 d (scores) == 2 N d^2 (a projection)
    return d_model


def crossover_true_division(d_model):
    return 8 * d_model ** 2 / (4 * d_model)


def crossover_ratio_upside_down(d_model):
    return (4 * d_model) // 8


def crossover_without_output_projection(d_model):
    # 4 N^2 d == 6 N d^2 (q, k, v)
    return 6 * d_model // 4


def crossover_precedence(d_model):
    return 8 * d_model ** 2 // 4 * d_model


def crossover_search_off_by_one(d_model):
    n = 1
    while 4 * n * n * d_model <= 8 * n * d_model * d_model:
        n += 1
    return n


def crossover_search(d_model):
    n = 1
    while 4 * n * n * d_model < 8 * n * d_model * d_model:
        n += 1
    return n


def crossover_fraction(d_model):
    return int(Fraction(8 * d_model * d_model, 4 * d_model))


# ============================================================================ mha_param_count
def params_scalar_bias(d_model, bias=True):
    weights = 4 * d_model * d_model
    return weights + (4 if bias else 0)


def params_no_w_o(d_model, bias=True):
    total = 3 * d_model * d_model
    if bias:
        total += 3 * d_model
    return total


def params_bias_flag_ignored(d_model, bias=True):
    return 4 * d_model * d_model + 4 * d_model


def params_conditional_precedence(d_model, bias=True):
    return 4 * d_model ** 2 + 4 * d_model if bias else 0


def params_augmented_square(d_model, bias=True):
    if bias:
        return 4 * (d_model + 1) ** 2
    return 4 * d_model ** 2


def params_in_bytes(d_model, bias=True):
    count = 4 * d_model * d_model + (4 * d_model if bias else 0)
    return count * 4  # float32


def params_bool_arithmetic(d_model, bias=True):
    return 4 * d_model * (d_model + bool(bias))


def params_shape_list(d_model, bias=True):
    shapes = [(d_model, d_model)] * 4
    if bias:
        shapes += [(d_model,)] * 4
    return sum(math.prod(s) for s in shapes)


ENTRIES = [
    Entry("mha_flops", "wrong", "one_flop_per_multiply_add",
          "counts one multiply-add as 1 FLOP instead of 2, so every entry is half the key's",
          flops_one_per_madd),
    Entry("mha_flops", "wrong", "one_projection_for_qkv",
          "counts only one projection (2 N d^2) under qkv_projections instead of three (6 N d^2)",
          flops_one_projection),
    Entry("mha_flops", "wrong", "total_without_output_projection",
          "the total leaves out output_projection: 6 N d^2 + 4 N^2 d instead of "
          "8 N d^2 + 4 N^2 d", flops_total_without_output),
    Entry("mha_flops", "wrong", "math_pow_floats",
          "uses math.pow, which returns floats, so the counts are floats instead of plain ints",
          flops_math_pow),
    Entry("mha_flops", "wrong", "causal_saving",
          "counts only the N(N+1)/2 causal query-key pairs for scores and weighted_sum; the "
          "exercise counts dense attention (all N^2 pairs)", flops_causal_saving),
    Entry("mha_flops", "wrong", "scores_n_d_squared",
          "writes 2 * (N * d) ** 2 for the scores, 2 N^2 d^2 instead of 2 N^2 d (the square "
          "covers d as well)", flops_scores_nd_squared),
    Entry("mha_flops", "right", "matmul_shape_helper", None, flops_matmul_shapes),
    Entry("mha_flops", "right", "numpy_int64_then_int", None, flops_numpy_then_int),

    Entry("crossover_seq_len", "wrong", "one_term_each_side",
          "balances one N^2 term (2 N^2 d) against one projection (2 N d^2) and returns "
          "d_model instead of 2 d_model", crossover_one_term_each),
    Entry("crossover_seq_len", "wrong", "true_division_float",
          "divides with /, returning a float (2.0 * d_model) instead of an int",
          crossover_true_division),
    Entry("crossover_seq_len", "wrong", "ratio_upside_down",
          "solves the balance upside down: d_model // 2 instead of 2 d_model",
          crossover_ratio_upside_down),
    Entry("crossover_seq_len", "wrong", "without_output_projection",
          "leaves the output projection out and balances 4 N^2 d against 6 N d^2, giving "
          "1.5 d_model (rounded down) instead of 2 d_model", crossover_without_output_projection),
    Entry("crossover_seq_len", "wrong", "precedence_div_then_mul",
          "`8 * d ** 2 // 4 * d` divides by 4 and then multiplies by d (left to right), giving "
          "2 d^3 instead of 8 d^2 / (4 d)", crossover_precedence),
    Entry("crossover_seq_len", "wrong", "search_stops_one_late",
          "the search loop keeps going while the two sides are equal (`<=` instead of `<`), so "
          "it stops one past the crossover: 2 d_model + 1", crossover_search_off_by_one),
    Entry("crossover_seq_len", "right", "linear_search", None, crossover_search),
    Entry("crossover_seq_len", "right", "fraction", None, crossover_fraction),

    Entry("mha_param_count", "wrong", "one_number_per_bias",
          "counts one bias number per matrix (4 in all) instead of one bias vector of d_model "
          "per matrix (4 d_model)", params_scalar_bias),
    Entry("mha_param_count", "wrong", "no_output_projection",
          "counts only W_q, W_k, W_v (and their biases): the output projection W_o is left out",
          params_no_w_o),
    Entry("mha_param_count", "wrong", "bias_flag_ignored",
          "ignores the bias flag and always adds the 4 d_model biases", params_bias_flag_ignored),
    Entry("mha_param_count", "wrong", "conditional_swallows_sum",
          "`a + b if bias else 0` parses as `(a + b) if bias else 0`, so without bias it "
          "returns 0 instead of 4 d^2", params_conditional_precedence),
    Entry("mha_param_count", "wrong", "augmented_square_matrix",
          "counts each biased projection as a (d+1) x (d+1) matrix, 4 (d+1)^2, instead of a "
          "d x d matrix plus a bias vector, 4 d^2 + 4 d", params_augmented_square),
    Entry("mha_param_count", "wrong", "bytes_not_count",
          "multiplies by 4 bytes per float32 parameter: returns bytes, not a parameter count",
          params_in_bytes),
    Entry("mha_param_count", "right", "bool_arithmetic", None, params_bool_arithmetic),
    Entry("mha_param_count", "right", "sum_of_shapes", None, params_shape_list),
]
