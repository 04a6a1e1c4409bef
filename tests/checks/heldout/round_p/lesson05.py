"""Held-out catalogue, lesson 05 (plain Python ints): mha_flops, crossover_seq_len,
mha_param_count."""

import itertools
import math
from fractions import Fraction

from entry import Entry

# ============================================================================ mha_flops


def flops_macs(seq_len, d_model):
    n, d = seq_len, d_model
    out = {
        "qkv_projections": 3 * n * d * d,
        "scores": n * n * d,
        "weighted_sum": n * n * d,
        "output_projection": n * d * d,
    }
    out["total"] = sum(out.values())
    return out


def flops_total_missing_output(seq_len, d_model):
    N, d = seq_len, d_model
    qkv = 6 * N * d ** 2
    scores = 2 * N ** 2 * d
    weighted = 2 * N ** 2 * d
    out_proj = 2 * N * d ** 2
    return {"qkv_projections": qkv, "scores": scores, "weighted_sum": weighted,
            "output_projection": out_proj, "total": qkv + scores + weighted}


def flops_math_pow(seq_len, d_model):
    return {
        "qkv_projections": 6 * seq_len * d_model * d_model,
        "scores": 2 * math.pow(seq_len, 2) * d_model,
        "weighted_sum": 2 * seq_len * seq_len * d_model,
        "output_projection": 2 * seq_len * d_model * d_model,
        "total": 8 * seq_len * d_model * d_model + 4 * seq_len * seq_len * d_model,
    }


def flops_scores_d_squared(seq_len, d_model):
    n, d = seq_len, d_model
    parts = {"qkv_projections": 6 * n * d * d, "scores": 2 * n * d * d,
             "weighted_sum": 2 * n * n * d, "output_projection": 2 * n * d * d}
    parts["total"] = sum(parts.values())
    return parts


def flops_caret_power(seq_len, d_model):
    N, d = seq_len, d_model
    return {
        "qkv_projections": 6 * N * d ^ 2,
        "scores": 2 * N ^ 2 * d,
        "weighted_sum": 2 * N ^ 2 * d,
        "output_projection": 2 * N * d ^ 2,
        "total": 8 * N * d ^ 2 + 4 * N ^ 2 * d,
    }


def flops_causal_half(seq_len, d_model):
    n, d = seq_len, d_model
    scores = n * n * d  # causal: only half of the score matrix is needed
    parts = {"qkv_projections": 6 * n * d * d, "scores": scores, "weighted_sum": scores,
             "output_projection": 2 * n * d * d}
    parts["total"] = sum(parts.values())
    return parts


def flops_from_shapes(seq_len, d_model):
    def mm(m, k, n):  # (m, k) @ (k, n)
        return 2 * m * k * n

    n, d = int(seq_len), int(d_model)
    parts = {
        "qkv_projections": sum(mm(n, d, d) for _ in ("q", "k", "v")),
        "scores": mm(n, d, n),
        "weighted_sum": mm(n, n, d),
        "output_projection": mm(n, d, d),
    }
    parts["total"] = sum(parts.values())
    return parts


def flops_factored(seq_len, d_model):
    N, d = seq_len, d_model
    return {"qkv_projections": 6 * N * d * d, "scores": 2 * N * N * d,
            "weighted_sum": 2 * N * N * d, "output_projection": 2 * N * d * d,
            "total": 4 * N * d * (2 * d + N)}


# ============================================================================ crossover_seq_len


def crossover_equals_d(d_model):
    # one N^2 product (2 N^2 d) against one projection (2 N d^2)
    return d_model


def crossover_scores_vs_qkv(d_model):
    # 2 N^2 d == 6 N d^2
    return 3 * d_model


def crossover_true_division(d_model):
    return 8 * d_model ** 2 / (4 * d_model)


def crossover_precedence(d_model):
    return 8 * d_model ** 2 // 4 * d_model


def crossover_range_stops_short(d_model):
    d = d_model
    for n in range(1, 2 * d):
        if 4 * n * n * d >= 8 * n * d * d:
            return n


def crossover_strict_greater(d_model):
    d = d_model
    for n in itertools.count(1):
        if 4 * n * n * d > 8 * n * d * d:
            return n


def crossover_search(d_model):
    n = 1
    while 4 * n * n * d_model < 8 * n * d_model * d_model:
        n += 1
    return n


def crossover_fraction(d_model):
    ratio = Fraction(8 * d_model * d_model, 4 * d_model)
    return int(ratio)


# ============================================================================ mha_param_count


def params_one_bias(d_model, bias=True):
    total = 4 * d_model * d_model
    if bias:
        total += d_model
    return total


def params_three_matrices(d_model, bias=True):
    d = d_model
    return 3 * d * d + (3 * d if bias else 0)


def params_conditional_precedence(d_model, bias=True):
    return 4 * d_model ** 2 + 4 * d_model if bias else 0


def params_math_pow(d_model, bias=True):
    weights = 4 * math.pow(d_model, 2)
    return weights + 4 * d_model if bias else weights


def params_bias_twice(d_model, bias=True):
    per_linear = d_model * (d_model + 1)  # weight matrix with its bias row
    total = 4 * per_linear
    if bias:
        total += 4 * d_model
    return total


def params_tuple(d_model, bias=True):
    return 4 * d_model * d_model, (4 * d_model if bias else 0)


def params_shapes(d_model, bias=True):
    shapes = [(d_model, d_model)] * 4
    if bias:
        shapes += [(d_model,)] * 4
    return sum(math.prod(s) for s in shapes)


def params_closed_form(d_model, bias=True):
    return 4 * d_model * (d_model + int(bool(bias)))


ENTRIES = [
    Entry("mha_flops", "wrong", "multiply_add_as_one",
          "counts one multiply-add as 1 FLOP instead of 2, so every entry is half the contract's",
          flops_macs),
    Entry("mha_flops", "wrong", "total_missing_output_projection",
          "leaves the output projection out of the total (6 N d^2 + 4 N^2 d instead of "
          "8 N d^2 + 4 N^2 d)",
          flops_total_missing_output),
    Entry("mha_flops", "wrong", "math_pow_float",
          "uses math.pow for N^2, which returns a float, so 'scores' is not a plain int",
          flops_math_pow),
    Entry("mha_flops", "wrong", "scores_d_squared",
          "writes the scores as 2 N d^2 (d and N swapped) instead of 2 N^2 d",
          flops_scores_d_squared),
    Entry("mha_flops", "wrong", "caret_for_power",
          "writes powers with `^`, which is bitwise XOR in Python, so 6 * N * d ^ 2 is "
          "(6 N d) XOR 2, not 6 N d^2",
          flops_caret_power),
    Entry("mha_flops", "wrong", "causal_half",
          "halves the two N^2 terms for a causal mask, but the contract counts dense attention "
          "(no causal saving)",
          flops_causal_half),
    Entry("mha_flops", "right", "matrix_product_shapes", None, flops_from_shapes),
    Entry("mha_flops", "right", "factored_total", None, flops_factored),

    Entry("crossover_seq_len", "wrong", "one_product_each",
          "equates one N^2 product (2 N^2 d) with one projection (2 N d^2), giving d_model "
          "instead of 2 d_model",
          crossover_equals_d),
    Entry("crossover_seq_len", "wrong", "scores_vs_qkv",
          "equates the scores alone with the three input projections (2 N^2 d = 6 N d^2), giving "
          "3 d_model instead of 2 d_model",
          crossover_scores_vs_qkv),
    Entry("crossover_seq_len", "wrong", "true_division_float",
          "divides with `/`, so it returns a float (2.0 * d_model) instead of a plain int",
          crossover_true_division),
    Entry("crossover_seq_len", "wrong", "precedence_divide_then_multiply",
          "writes 8 * d**2 // 4 * d, which Python evaluates as (8 d^2 // 4) * d = 2 d^3, "
          "instead of 8 d^2 // (4 d)",
          crossover_precedence),
    Entry("crossover_seq_len", "wrong", "search_range_too_short",
          "searches n in range(1, 2 * d_model), whose end is exclusive, so the crossover 2 d_model "
          "is never reached and the function returns None",
          crossover_range_stops_short),
    Entry("crossover_seq_len", "wrong", "strict_greater",
          "searches for the first N where the N^2 terms are strictly greater (>) than the "
          "projections, returning 2 d_model + 1 instead of the N where they are equal",
          crossover_strict_greater),
    Entry("crossover_seq_len", "right", "while_search", None, crossover_search),
    Entry("crossover_seq_len", "right", "fraction", None, crossover_fraction),

    Entry("mha_param_count", "wrong", "one_bias_vector",
          "adds a single bias vector (d_model) instead of four, one per projection",
          params_one_bias),
    Entry("mha_param_count", "wrong", "three_matrices",
          "counts only W_q, W_k, W_v (3 d^2 + 3 d) and forgets the output projection W_o",
          params_three_matrices),
    Entry("mha_param_count", "wrong", "conditional_precedence",
          "writes `4 * d**2 + 4 * d if bias else 0`, which Python reads as "
          "`(4 d^2 + 4 d) if bias else 0`, so bias=False returns 0",
          params_conditional_precedence),
    Entry("mha_param_count", "wrong", "math_pow_float",
          "uses math.pow(d_model, 2), so the count is a float instead of a plain int",
          params_math_pow),
    Entry("mha_param_count", "wrong", "bias_counted_twice",
          "counts each projection as d (d + 1) (weights and bias) and then adds the 4 d biases "
          "again, so biases are counted even when bias=False",
          params_bias_twice),
    Entry("mha_param_count", "wrong", "returns_tuple",
          "returns the tuple (weights, biases) instead of their sum as one int",
          params_tuple),
    Entry("mha_param_count", "right", "sum_of_shapes", None, params_shapes),
    Entry("mha_param_count", "right", "closed_form_int_bias", None, params_closed_form),
]

