"""Held-out catalogue, lesson 05 (FLOPs and parameters, plain Python ints):
mha_flops, crossover_seq_len, mha_param_count."""

import math
from fractions import Fraction

import numpy as np

from entry import Entry


# ============================================================================ mha_flops
# ---- wrong ----------------------------------------------------------------------------------
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


def flops_math_pow(seq_len, d_model):
    qkv = 6 * seq_len * math.pow(d_model, 2)
    scores = 2 * math.pow(seq_len, 2) * d_model
    mix = 2 * math.pow(seq_len, 2) * d_model
    out = 2 * seq_len * math.pow(d_model, 2)
    return {"qkv_projections": qkv, "scores": scores, "weighted_sum": mix,
            "output_projection": out, "total": qkv + scores + mix + out}


def flops_single_projection(seq_len, d_model):
    proj = 2 * seq_len * d_model * d_model  # one (N, d) @ (d, d)
    attn = 2 * seq_len * seq_len * d_model
    result = {"qkv_projections": proj, "scores": attn, "weighted_sum": attn,
              "output_projection": proj}
    result["total"] = sum(result.values())
    return result


def flops_xor(seq_len, d_model):
    N, d = seq_len, d_model
    qkv = 6 * N * d ^ 2
    sc = 2 * N * N * d
    ws = 2 * N * N * d
    op = 2 * N * d * d
    return {"qkv_projections": qkv, "scores": sc, "weighted_sum": ws,
            "output_projection": op, "total": qkv + sc + ws + op}


def flops_causal_half(seq_len, d_model):
    n, d = seq_len, d_model
    qkv = 6 * n * d * d
    scores = n * n * d  # only the lower triangle is needed
    weighted = n * n * d
    out_proj = 2 * n * d * d
    return {"qkv_projections": qkv, "scores": scores, "weighted_sum": weighted,
            "output_projection": out_proj, "total": qkv + scores + weighted + out_proj}


def flops_total_without_output(seq_len, d_model):
    n, d = seq_len, d_model
    qkv = 6 * n * d * d
    scores = 2 * n * n * d
    weighted = 2 * n * n * d
    out_proj = 2 * n * d * d
    return {"qkv_projections": qkv, "scores": scores, "weighted_sum": weighted,
            "output_projection": out_proj, "total": qkv + scores + weighted}


# ---- right ----------------------------------------------------------------------------------
def flops_from_matmul_shapes(seq_len, d_model):
    n, d = int(seq_len), int(d_model)
    products = {  # lists of (m, k, n) matrix products
        "qkv_projections": [(n, d, d)] * 3,
        "scores": [(n, d, n)],
        "weighted_sum": [(n, n, d)],
        "output_projection": [(n, d, d)],
    }
    counts = {key: sum(2 * a * b * c for a, b, c in shapes) for key, shapes in products.items()}
    counts["total"] = sum(counts.values())
    return counts


def flops_factored_total(seq_len, d_model):
    n, d = seq_len, d_model
    out = {}
    out["qkv_projections"] = 6 * n * d * d
    out["scores"] = 2 * n * n * d
    out["weighted_sum"] = out["scores"]
    out["output_projection"] = out["qkv_projections"] // 3
    out["total"] = 4 * n * d * (2 * d + n)
    return out


# ============================================================================ crossover_seq_len
# ---- wrong ----------------------------------------------------------------------------------
def crossover_one_term_each(d_model):
    # 2 N^2 d (scores) == 2 N d^2 (output projection)
    return d_model


def crossover_true_division(d_model):
    return 8 * d_model ** 2 / (4 * d_model)


def crossover_qkv_only(d_model):
    # 4 N^2 d == 6 N d^2
    return 6 * d_model // 4


def crossover_inverted(d_model):
    return 4 * d_model // 8


def crossover_search_overshoot(d_model):
    d = d_model
    n = 1
    while 4 * n * n * d <= 8 * n * d * d:
        n += 1
    return n


def crossover_precedence(d_model):
    return 8 * d_model ** 2 // 4 * d_model


# ---- right ----------------------------------------------------------------------------------
def crossover_linear_search(d_model):
    n = 1
    while 4 * n * n * d_model < 8 * n * d_model * d_model:
        n += 1
    return n


def crossover_fraction(d_model):
    ratio = Fraction(8 * d_model * d_model, 4 * d_model)
    return int(ratio)


# ============================================================================ mha_param_count
# ---- wrong ----------------------------------------------------------------------------------
def params_scalar_bias(d_model, bias=True):
    return 4 * d_model * d_model + (4 if bias else 0)


def params_three_biases(d_model, bias=True):
    weights = 4 * d_model ** 2
    biases = 3 * d_model if bias else 0  # b_q, b_k, b_v
    return weights + biases


def params_conditional_precedence(d_model, bias=True):
    return 4 * d_model * d_model + 4 * d_model if bias else 0


def params_is_not_none(d_model, bias=True):
    total = 4 * d_model * d_model
    if bias is not None:
        total += 4 * d_model
    return total


def params_numpy_square(d_model, bias=True):
    count = 4 * np.square(d_model)
    if bias:
        count += 4 * d_model
    return count


def params_times_two(d_model, bias=True):
    count = 4 * d_model * 2
    if bias:
        count += 4 * d_model
    return count


# ---- right ----------------------------------------------------------------------------------
def params_from_shapes(d_model, bias=True):
    shapes = [(d_model, d_model)] * 4
    if bias:
        shapes += [(d_model,)] * 4
    return sum(math.prod(s) for s in shapes)


def params_factored(d_model, bias=True):
    return 4 * d_model * (d_model + int(bool(bias)))


ENTRIES = [
    Entry("mha_flops", "wrong", "one_flop_per_multiply_add",
          "Each multiply-add is counted as 1 FLOP instead of 2, so every count is half the "
          "contract's.",
          flops_one_per_mac),
    Entry("mha_flops", "wrong", "math_pow_floats",
          "math.pow returns a float, so the counts are floats instead of plain Python ints.",
          flops_math_pow),
    Entry("mha_flops", "wrong", "one_projection_not_three",
          "qkv_projections counts a single (N, d) @ (d, d) product, 2 N d^2, instead of three "
          "(6 N d^2).",
          flops_single_projection),
    Entry("mha_flops", "wrong", "xor_for_power",
          "`^` is bitwise XOR in Python, not a power: `6 * N * d ^ 2` computes (6 N d) XOR 2 "
          "instead of 6 N d^2.",
          flops_xor),
    Entry("mha_flops", "wrong", "causal_halving",
          "It halves the two N^2 terms as if a causal mask saved half the work, but the "
          "contract counts dense attention (2 N^2 d each).",
          flops_causal_half),
    Entry("mha_flops", "wrong", "total_misses_output_projection",
          "The total adds the projections, scores and weighted sum but leaves out the output "
          "projection.",
          flops_total_without_output),
    Entry("mha_flops", "right", "sum_over_matmul_shapes", None, flops_from_matmul_shapes),
    Entry("mha_flops", "right", "factored_closed_form", None, flops_factored_total),
    Entry("crossover_seq_len", "wrong", "one_term_each_side",
          "It equates one N^2 term (scores, 2 N^2 d) with one projection (2 N d^2) and "
          "returns d_model instead of 2 * d_model.",
          crossover_one_term_each),
    Entry("crossover_seq_len", "wrong", "true_division_float",
          "`/` returns a float (2.0 * d_model) instead of the plain int the contract requires.",
          crossover_true_division),
    Entry("crossover_seq_len", "wrong", "qkv_projections_only",
          "It balances the N^2 terms against the Q, K, V projections only (6 N d^2), "
          "forgetting the output projection: 1.5 d_model instead of 2 d_model.",
          crossover_qkv_only),
    Entry("crossover_seq_len", "wrong", "ratio_inverted",
          "The algebra is solved upside down: 4 d / 8 = d_model / 2 instead of 8 d^2 / 4 d "
          "= 2 d_model.",
          crossover_inverted),
    Entry("crossover_seq_len", "wrong", "search_overshoots_by_one",
          "The search loop continues while the N^2 terms are <= the projections, so it steps "
          "past the equality point and returns 2 d_model + 1.",
          crossover_search_overshoot),
    Entry("crossover_seq_len", "wrong", "missing_parentheses",
          "`8 * d ** 2 // 4 * d` multiplies by d after dividing by 4 (left to right), giving "
          "2 d^3 instead of 8 d^2 / (4 d) = 2 d.",
          crossover_precedence),
    Entry("crossover_seq_len", "right", "integer_search", None, crossover_linear_search),
    Entry("crossover_seq_len", "right", "exact_fraction", None, crossover_fraction),
    Entry("mha_param_count", "wrong", "one_bias_per_matrix",
          "Each projection gets a single scalar bias (+4) instead of a bias vector of d_model "
          "entries (+4 d).",
          params_scalar_bias),
    Entry("mha_param_count", "wrong", "three_bias_vectors",
          "Biases are counted for Q, K and V only (3 d); the output projection's bias is "
          "missing.",
          params_three_biases),
    Entry("mha_param_count", "wrong", "conditional_expression_precedence",
          "`a + b if bias else 0` parses as `(a + b) if bias else 0`, so bias=False returns 0 "
          "instead of 4 d^2.",
          params_conditional_precedence),
    Entry("mha_param_count", "wrong", "bias_is_not_none",
          "It tests `bias is not None`, which is also true for bias=False, so the biases are "
          "always counted.",
          params_is_not_none),
    Entry("mha_param_count", "wrong", "numpy_integer",
          "np.square returns a numpy integer, so the count is np.int64 instead of a plain "
          "Python int.",
          params_numpy_square),
    Entry("mha_param_count", "wrong", "times_two_not_squared",
          "`d_model * 2` is written where `d_model ** 2` belongs, so the weights count 8 d "
          "instead of 4 d^2.",
          params_times_two),
    Entry("mha_param_count", "right", "sum_of_shape_products", None, params_from_shapes),
    Entry("mha_param_count", "right", "factored_4d_times_d_plus_1", None, params_factored),
]
