"""Held-out catalogue, lesson 05 (FLOPs): mha_flops, crossover_seq_len, mha_param_count."""

import math

import numpy as np

from entry import Entry


# ============================================================================ mha_flops
def flops_one_projection(seq_len, d_model):
    n, d = seq_len, d_model
    out = {
        "qkv_projections": 2 * n * d * d,
        "scores": 2 * n * n * d,
        "weighted_sum": 2 * n * n * d,
        "output_projection": 2 * n * d * d,
    }
    out["total"] = sum(out.values())
    return out


def flops_madd_is_one(seq_len, d_model):
    N, D = seq_len, d_model
    qkv = 3 * N * D * D
    scores = N * N * D
    wsum = N * N * D
    proj = N * D * D
    return {"qkv_projections": qkv, "scores": scores, "weighted_sum": wsum,
            "output_projection": proj, "total": qkv + scores + wsum + proj}


def flops_total_without_output(seq_len, d_model):
    qkv = 6 * seq_len * d_model ** 2
    scores = 2 * seq_len ** 2 * d_model
    weighted = 2 * seq_len ** 2 * d_model
    out_proj = 2 * seq_len * d_model ** 2
    return {
        "qkv_projections": qkv,
        "scores": scores,
        "weighted_sum": weighted,
        "output_projection": out_proj,
        "total": qkv + scores + weighted,
    }


def flops_math_pow(seq_len, d_model):
    res = {}
    res["qkv_projections"] = 6 * seq_len * math.pow(d_model, 2)
    res["scores"] = 2 * math.pow(seq_len, 2) * d_model
    res["weighted_sum"] = 2 * math.pow(seq_len, 2) * d_model
    res["output_projection"] = 2 * seq_len * math.pow(d_model, 2)
    res["total"] = 8 * seq_len * math.pow(d_model, 2) + 4 * math.pow(seq_len, 2) * d_model
    return res


def flops_caret_power(seq_len, d_model):
    N, d = seq_len, d_model
    return {
        "qkv_projections": 6 * N * d ^ 2,
        "scores": 2 * N * N * d,
        "weighted_sum": 2 * N * N * d,
        "output_projection": 2 * N * d * d,
        "total": 8 * N * d * d + 4 * N * N * d,
    }


def flops_causal_halving(seq_len, d_model):
    n, d = seq_len, d_model
    parts = {
        "qkv_projections": 6 * n * d * d,
        "scores": n * n * d,  # causal: only half the (i, j) pairs are needed
        "weighted_sum": n * n * d,
        "output_projection": 2 * n * d * d,
    }
    parts["total"] = sum(parts.values())
    return parts


def flops_per_head_loop(seq_len, d_model):
    heads = 1
    for h in (8, 4, 2, 1):
        if d_model % h == 0:
            heads = h
            break
    dh = d_model // heads
    counts = dict.fromkeys(
        ["qkv_projections", "scores", "weighted_sum", "output_projection"], 0)
    for _ in range(heads):
        counts["qkv_projections"] += 3 * 2 * seq_len * d_model * dh
        counts["scores"] += 2 * seq_len * seq_len * dh
        counts["weighted_sum"] += 2 * seq_len * seq_len * dh
    counts["output_projection"] = 2 * seq_len * d_model * d_model
    counts["total"] = sum(counts.values())
    return counts


def flops_factored(seq_len, d_model):
    nd = seq_len * d_model
    proj = 2 * nd * d_model
    attn = 2 * nd * seq_len
    result = dict(qkv_projections=3 * proj, scores=attn, weighted_sum=attn,
                  output_projection=proj)
    result["total"] = 4 * proj + 2 * attn
    return result


# ============================================================================ crossover_seq_len
def cross_true_division(d_model):
    return 8 * d_model ** 2 / (4 * d_model)


def cross_qkv_only(d_model):
    return 6 * d_model // 4


def cross_one_quadratic_term(d_model):
    # 2 N^2 d = 8 N d^2
    return 8 * d_model // 2


def cross_precedence(d_model):
    return 8 * d_model ** 2 // 4 * d_model


def cross_search_off_by_one(d_model):
    n = 1
    while 4 * n * n * d_model < 8 * n * d_model * d_model:
        n += 1
    return n - 1


def cross_upside_down(d_model):
    # 4 N^2 d = 8 N d^2  ->  N = 4 d / 8
    return 4 * d_model // 8


def cross_search_loop(d_model):
    n = 1
    while 4 * n * n * d_model != 8 * n * d_model * d_model:
        n += 1
    return n


def cross_fraction(d_model):
    from fractions import Fraction
    return int(Fraction(8 * d_model * d_model, 4 * d_model))


# ============================================================================ mha_param_count
def params_ternary_precedence(d_model, bias=True):
    return 4 * d_model * d_model + 4 * d_model if bias else 0


def params_math_pow(d_model, bias=True):
    weights = 4 * math.pow(d_model, 2)
    if bias:
        return weights + 4 * d_model
    return weights


def params_three_matrices(d_model, bias=True):
    total = 3 * d_model * d_model
    if bias:
        total += 4 * d_model
    return total


def params_counted_as_flops(d_model, bias=True):
    d = d_model
    n = 4 * (2 * d * d)  # each weight is a multiply-add
    if bias:
        n += 4 * d
    return n


def params_is_none_guard(d_model, bias=True):
    count = 4 * d_model ** 2
    if bias is not None:
        count += 4 * d_model
    return count


def params_scalar_bias(d_model, bias=True):
    w = 4 * d_model * d_model
    b = 4 if bias else 0  # one bias per projection
    return w + b


def params_shapes_sum(d_model, bias=True):
    shapes = [(d_model, d_model)] * 4
    if bias:
        shapes += [(d_model,)] * 4
    return sum(math.prod(s) for s in shapes)


def params_bool_arithmetic(d_model, bias=True):
    return int(4 * d_model * (d_model + bool(bias)))


ENTRIES = [
    Entry("mha_flops", "wrong", "one_projection",
          "counts the Q, K, V projections as one (N, d) @ (d, d) product, 2 N d^2, instead of "
          "three, 6 N d^2",
          flops_one_projection),
    Entry("mha_flops", "wrong", "multiply_add_as_one",
          "counts one multiply-add as 1 FLOP instead of 2, so every term is half the contract's",
          flops_madd_is_one),
    Entry("mha_flops", "wrong", "total_without_output_projection",
          "leaves the output projection out of the total (6 N d^2 + 4 N^2 d instead of "
          "8 N d^2 + 4 N^2 d)",
          flops_total_without_output),
    Entry("mha_flops", "wrong", "math_pow_floats",
          "uses math.pow, which returns floats, so the counts are floats instead of plain ints",
          flops_math_pow),
    Entry("mha_flops", "wrong", "caret_as_power",
          "writes d ^ 2 for d squared, but ^ is bitwise XOR in Python (and binds after *), so "
          "the qkv count is (6 N d) XOR 2",
          flops_caret_power),
    Entry("mha_flops", "wrong", "causal_halving",
          "halves the two N^2 terms for a causal mask, but the exercise counts dense attention "
          "(no causal saving)",
          flops_causal_halving),
    Entry("mha_flops", "right", "per_head_loop", None, flops_per_head_loop),
    Entry("mha_flops", "right", "factored", None, flops_factored),

    Entry("crossover_seq_len", "wrong", "true_division_float",
          "solves 4 N^2 d = 8 N d^2 with `/`, so it returns the float 2.0 * d_model instead of "
          "a plain int",
          cross_true_division),
    Entry("crossover_seq_len", "wrong", "qkv_only",
          "sets the N^2 terms equal to the Q, K, V projections only (6 N d^2), forgetting the "
          "output projection, and gets N = 1.5 d_model (floored)",
          cross_qkv_only),
    Entry("crossover_seq_len", "wrong", "one_quadratic_term",
          "counts only one of the two N^2 products (2 N^2 d) against the projections, and gets "
          "N = 4 d_model",
          cross_one_quadratic_term),
    Entry("crossover_seq_len", "wrong", "precedence",
          "writes 8 * d ** 2 // 4 * d, which Python reads as ((8 d^2) // 4) * d = 2 d^3, "
          "not 8 d^2 / (4 d)",
          cross_precedence),
    Entry("crossover_seq_len", "wrong", "search_off_by_one",
          "searches for the first N where the N^2 terms reach the projections but returns "
          "n - 1, one less than the crossover",
          cross_search_off_by_one),
    Entry("crossover_seq_len", "wrong", "ratio_upside_down",
          "solves the equation upside down, N = 4 d / 8, and returns d_model // 2",
          cross_upside_down),
    Entry("crossover_seq_len", "right", "search_loop", None, cross_search_loop),
    Entry("crossover_seq_len", "right", "fraction", None, cross_fraction),

    Entry("mha_param_count", "wrong", "ternary_precedence",
          "writes `4*d*d + 4*d if bias else 0`; the conditional expression covers the whole "
          "sum, so bias=False returns 0",
          params_ternary_precedence),
    Entry("mha_param_count", "wrong", "math_pow_float",
          "uses math.pow(d_model, 2), which returns a float, so the count is a float instead "
          "of a plain int",
          params_math_pow),
    Entry("mha_param_count", "wrong", "three_matrices",
          "counts only W_q, W_k, W_v (3 d^2) and forgets the output projection W_o",
          params_three_matrices),
    Entry("mha_param_count", "wrong", "counted_as_flops",
          "counts each weight twice, as a multiply-add would be counted in FLOPs, giving "
          "8 d^2 weights",
          params_counted_as_flops),
    Entry("mha_param_count", "wrong", "bias_is_not_none",
          "tests `bias is not None`, which is true for bias=False too, so the biases are "
          "always counted",
          params_is_none_guard),
    Entry("mha_param_count", "wrong", "scalar_bias",
          "counts each bias as one number instead of a vector of d_model values (4 instead of "
          "4 d)",
          params_scalar_bias),
    Entry("mha_param_count", "right", "shapes_sum", None, params_shapes_sum),
    Entry("mha_param_count", "right", "bool_arithmetic", None, params_bool_arithmetic),
]
