"""Held-out catalogue, lesson 05 (FLOPs): mha_flops, crossover_seq_len, mha_param_count.
Plain Python ints in and out."""

import math
from fractions import Fraction

import numpy as np

from entry import Entry


# ----------------------------------------------------------------------------- mha_flops, wrong
def flops_counts_macs(seq_len, d_model):
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
    return {
        "qkv_projections": proj,
        "scores": attn,
        "weighted_sum": attn,
        "output_projection": proj,
        "total": 2 * proj + 2 * attn,
    }


def flops_total_missing_term(seq_len, d_model):
    N, D = seq_len, d_model
    qkv = 6 * N * D ** 2
    scores = 2 * N ** 2 * D
    weighted = 2 * N ** 2 * D
    out_proj = 2 * N * D ** 2
    return {"qkv_projections": qkv, "scores": scores, "weighted_sum": weighted,
            "output_projection": out_proj, "total": qkv + scores + out_proj}


def flops_math_pow(seq_len, d_model):
    quad = 2 * math.pow(seq_len, 2) * d_model
    result = {
        "qkv_projections": 6 * seq_len * d_model * d_model,
        "scores": quad,
        "weighted_sum": quad,
        "output_projection": 2 * seq_len * d_model * d_model,
    }
    result["total"] = sum(result.values())
    return result


def flops_quadratic_in_d(seq_len, d_model):
    n, d = seq_len, d_model
    parts = {
        "qkv_projections": 6 * n * d * d,
        "scores": 2 * n * d * d,
        "weighted_sum": 2 * n * d * d,
        "output_projection": 2 * n * d * d,
    }
    parts["total"] = sum(parts.values())
    return parts


def flops_causal_pairs(seq_len, d_model):
    n, d = seq_len, d_model
    pairs = n * (n + 1) // 2  # a query only looks at keys up to itself
    parts = {
        "qkv_projections": 6 * n * d * d,
        "scores": 2 * pairs * d,
        "weighted_sum": 2 * pairs * d,
        "output_projection": 2 * n * d * d,
    }
    parts["total"] = sum(parts.values())
    return parts


# ----------------------------------------------------------------------------- mha_flops, right
def flops_from_matmul_shapes(seq_len, d_model):
    n, d = seq_len, d_model

    def mm(m, k, p):
        return 2 * m * k * p

    counts = {
        "qkv_projections": sum(mm(n, d, d) for _ in "qkv"),
        "scores": mm(n, d, n),
        "weighted_sum": mm(n, n, d),
        "output_projection": mm(n, d, d),
    }
    counts["total"] = sum(counts.values())
    return counts


def flops_width_one_heads(seq_len, d_model):
    # d_model heads of width 1: the per-head terms add up to the same totals
    scores = weighted = 0
    for _ in range(d_model):
        scores += 2 * seq_len * 1 * seq_len
        weighted += 2 * seq_len * seq_len * 1
    qkv = 3 * 2 * seq_len * d_model * d_model
    out = 2 * seq_len * d_model * d_model
    return {"qkv_projections": qkv, "scores": scores, "weighted_sum": weighted,
            "output_projection": out, "total": qkv + scores + weighted + out}


# ----------------------------------------------------------------------------- crossover, wrong
def crossover_true_division(d_model):
    return 8 * d_model * d_model / (4 * d_model)


def crossover_qkv_only(d_model):
    # 4 N^2 d = 6 N d^2
    return 3 * d_model // 2


def crossover_cancel_wrong_factor(d_model):
    # 4 N^2 d = 8 N d^2  ->  N^2 = 2 d
    return math.isqrt(2 * d_model)


def crossover_search_le(d_model):
    n = 1
    while 4 * n * n * d_model <= 8 * n * d_model * d_model:
        n += 1
    return n


def crossover_mixed_units(d_model):
    # attention terms in FLOPs (4 N^2 d), projections in multiply-adds (4 N d^2)
    return (4 * d_model * d_model) // (4 * d_model)


def crossover_scores_only(d_model):
    # 2 N^2 d (the score matrix) = 8 N d^2
    return 8 * d_model // 2


# ----------------------------------------------------------------------------- crossover, right
def crossover_linear_search(d_model):
    n = 1
    while 4 * n * n * d_model < 8 * n * d_model * d_model:
        n += 1
    return n


def crossover_fraction(d_model):
    ratio = Fraction(8 * d_model ** 2, 4 * d_model)
    return int(ratio)


# ----------------------------------------------------------------------------- params, wrong
def params_one_bias_vector(d_model, bias=True):
    total = 4 * d_model * d_model
    if bias:
        total += d_model
    return total


def params_three_matrices(d_model, bias=True):
    per_proj = d_model * d_model + (d_model if bias else 0)
    return 3 * per_proj


def params_times_two_typo(d_model, bias=True):
    weights = 4 * d_model * 2
    biases = 4 * d_model if bias else 0
    return weights + biases


def params_numpy_prod(d_model, bias=True):
    shapes = [(d_model, d_model)] * 4
    if bias:
        shapes += [(d_model,)] * 4
    return sum(np.prod(s) for s in shapes)


def params_bias_ignored(d_model, bias=True):
    return 4 * d_model ** 2 + 4 * d_model


def params_ternary_precedence(d_model, bias=True):
    return 4 * d_model ** 2 + 4 * d_model if bias else 0


# ----------------------------------------------------------------------------- params, right
def params_bool_arithmetic(d_model, bias=True):
    return 4 * d_model * d_model + 4 * d_model * bias


def params_math_prod_shapes(d_model, bias=True):
    layers = {"w_q": (d_model, d_model), "w_k": (d_model, d_model),
              "w_v": (d_model, d_model), "w_o": (d_model, d_model)}
    if bias:
        layers.update({f"b_{c}": (d_model,) for c in "qkvo"})
    return sum(math.prod(shape) for shape in layers.values())


ENTRIES = [
    Entry("mha_flops", "wrong", "multiply_adds_not_flops",
          "counts each multiply-add as 1 FLOP, so every entry is half the contract's count",
          flops_counts_macs),
    Entry("mha_flops", "wrong", "one_projection_for_qkv",
          "counts the Q, K and V projections as one (N, d) @ (d, d) product: 2 N d^2 "
          "instead of 6 N d^2", flops_one_projection),
    Entry("mha_flops", "wrong", "total_misses_weighted_sum",
          "leaves the weighted-sum term out of the total", flops_total_missing_term),
    Entry("mha_flops", "wrong", "math_pow_float",
          "uses math.pow(seq_len, 2), which returns a float, so the N^2 entries and the "
          "total are floats instead of plain ints", flops_math_pow),
    Entry("mha_flops", "wrong", "quadratic_term_in_d",
          "writes the score and weighted-sum terms as 2 N d^2 instead of 2 N^2 d (mixes up "
          "which term is quadratic in the sequence length)", flops_quadratic_in_d),
    Entry("mha_flops", "wrong", "causal_saving_counted",
          "counts only the N(N+1)/2 causal query-key pairs, though the contract asks for "
          "dense attention with no causal saving", flops_causal_pairs),
    Entry("mha_flops", "right", "matmul_shape_helper", None, flops_from_matmul_shapes),
    Entry("mha_flops", "right", "sum_over_width_one_heads", None, flops_width_one_heads),
    Entry("crossover_seq_len", "wrong", "true_division_float",
          "solves with true division /, so it returns a float (2.0 * d_model) instead of "
          "a plain int", crossover_true_division),
    Entry("crossover_seq_len", "wrong", "forgets_output_projection",
          "equates the N^2 terms with the three Q/K/V projections only (6 N d^2), "
          "forgetting the output projection, and gets 1.5 d_model",
          crossover_qkv_only),
    Entry("crossover_seq_len", "wrong", "cancels_d_instead_of_n",
          "cancels the wrong factor in 4 N^2 d = 8 N d^2 and gets N^2 = 2 d_model, "
          "returning isqrt(2 d_model)", crossover_cancel_wrong_factor),
    Entry("crossover_seq_len", "wrong", "search_stops_one_late",
          "searches with <= and so returns the first N past the crossover, 2 d_model + 1",
          crossover_search_le),
    Entry("crossover_seq_len", "wrong", "mixed_flops_and_macs",
          "counts the N^2 terms in FLOPs but the projections in multiply-adds, so it "
          "returns d_model instead of 2 d_model", crossover_mixed_units),
    Entry("crossover_seq_len", "wrong", "scores_term_only",
          "equates only the score term 2 N^2 d (without the weighted sum) with the "
          "projections, getting 4 d_model", crossover_scores_only),
    Entry("crossover_seq_len", "right", "linear_search_strict", None, crossover_linear_search),
    Entry("crossover_seq_len", "right", "fraction_ratio", None, crossover_fraction),
    Entry("mha_param_count", "wrong", "one_bias_vector",
          "adds a single bias vector (d) instead of four (4 d)", params_one_bias_vector),
    Entry("mha_param_count", "wrong", "three_projections",
          "counts only the Q, K and V projections and forgets W_o (and its bias)",
          params_three_matrices),
    Entry("mha_param_count", "wrong", "times_two_for_squared",
          "writes d_model * 2 where d_model ** 2 belongs, so the weights count 8 d "
          "instead of 4 d^2", params_times_two_typo),
    Entry("mha_param_count", "wrong", "numpy_int64",
          "sums np.prod of the shapes, which returns a numpy int64 instead of the plain "
          "Python int the contract fixes", params_numpy_prod),
    Entry("mha_param_count", "wrong", "bias_flag_ignored",
          "always adds the 4 d biases, ignoring bias=False", params_bias_ignored),
    Entry("mha_param_count", "wrong", "conditional_expression_precedence",
          "writes 4*d**2 + 4*d if bias else 0, which Python reads as "
          "(4*d**2 + 4*d) if bias else 0, so bias=False returns 0", params_ternary_precedence),
    Entry("mha_param_count", "right", "bool_as_int", None, params_bool_arithmetic),
    Entry("mha_param_count", "right", "math_prod_of_shapes", None, params_math_prod_shapes),
]
