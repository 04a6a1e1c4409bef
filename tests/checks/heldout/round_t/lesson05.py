"""Held-out catalogue, lesson 05 (FLOPs and parameters, plain ints): mha_flops,
crossover_seq_len, mha_param_count. Each wrong answer carries exactly one slip."""

import functools
import math
import operator
from fractions import Fraction

import numpy as np

from entry import Entry


# ============================================================================ mha_flops
def flops_mac_as_one(seq_len, d_model):
    n, d = seq_len, d_model
    out = {
        "qkv_projections": 3 * n * d * d,
        "scores": n * n * d,
        "weighted_sum": n * n * d,
        "output_projection": n * d * d,
    }
    out["total"] = sum(out.values())
    return out


def flops_total_too_early(seq_len, d_model):
    n, d = seq_len, d_model
    counts = {"qkv_projections": 6 * n * d * d, "scores": 2 * n * n * d,
              "weighted_sum": 2 * n * n * d}
    counts["total"] = sum(counts.values())
    counts["output_projection"] = 2 * n * d * d
    return counts


def flops_numpy_ints(seq_len, d_model):
    n, d = seq_len, d_model
    parts = {
        "qkv_projections": np.prod([6, n, d, d]),
        "scores": np.prod([2, n, n, d]),
        "weighted_sum": np.prod([2, n, n, d]),
        "output_projection": np.prod([2, n, d, d]),
    }
    parts["total"] = sum(parts.values())
    return parts


def flops_caret_power(seq_len, d_model):
    qkv = 6 * seq_len * d_model ** 2
    scores = 2 * seq_len ^ 2 * d_model
    weighted = 2 * seq_len ^ 2 * d_model
    out_proj = 2 * seq_len * d_model ** 2
    return {"qkv_projections": qkv, "scores": scores, "weighted_sum": weighted,
            "output_projection": out_proj, "total": qkv + scores + weighted + out_proj}


def flops_one_projection(seq_len, d_model):
    proj = 2 * seq_len * d_model * d_model  # one (N, d) @ (d, d) product
    attn = 2 * seq_len * seq_len * d_model
    result = {"qkv_projections": proj, "scores": attn, "weighted_sum": attn,
              "output_projection": proj}
    result["total"] = proj + attn + attn + proj
    return result


def flops_n_and_d_swapped(seq_len, d_model):
    n, d = seq_len, d_model
    scores = 2 * n * d * d
    parts = {"qkv_projections": 6 * n * d * d, "scores": scores, "weighted_sum": scores,
             "output_projection": 2 * n * d * d}
    parts["total"] = sum(parts.values())
    return parts


def _mm(m, k, n):
    """FLOPs of an (m, k) @ (k, n) product: m*n dot products of length k, 2 FLOPs per term."""
    return 2 * m * k * n


def flops_by_products(seq_len, d_model):
    n, d = seq_len, d_model
    parts = {
        "qkv_projections": sum(_mm(n, d, d) for _ in ("q", "k", "v")),
        "scores": _mm(n, d, n),  # all heads together: contraction over d_model
        "weighted_sum": _mm(n, n, d),
        "output_projection": _mm(n, d, d),
    }
    parts["total"] = functools.reduce(operator.add, parts.values())
    return parts


def flops_per_head_loop(seq_len, d_model):
    n, d = seq_len, d_model
    heads = 1
    for h in (8, 4, 2):  # any head count that divides d gives the same totals
        if d % h == 0:
            heads = h
            break
    dh = d // heads
    scores = sum(2 * n * n * dh for _ in range(heads))
    weighted = sum(2 * n * dh * n for _ in range(heads))
    total = 8 * n * d * d + 4 * n * n * d
    return {"qkv_projections": 6 * n * d * d, "scores": scores, "weighted_sum": weighted,
            "output_projection": 2 * n * d * d, "total": total}


# ============================================================================ crossover_seq_len
def cross_equal_d(d_model):
    return d_model


def cross_true_division(d_model):
    return 8 * d_model ** 2 / (4 * d_model)


def cross_precedence(d_model):
    return 8 * d_model * d_model // 4 * d_model


def cross_no_output_projection(d_model):
    return 6 * d_model * d_model // (4 * d_model)


def cross_loop_off_by_one(d_model):
    n = 1
    while 4 * n * n * d_model < 8 * n * d_model * d_model:
        n += 1
    return n - 1


def cross_forgot_cancel(d_model):
    return 8 * d_model ** 2 // 4


def cross_fraction(d_model):
    ratio = Fraction(8 * d_model * d_model, 4 * d_model)
    return int(ratio)


def cross_search(d_model):
    n = 1
    while 4 * n * n * d_model != 8 * n * d_model * d_model:
        n += 1
    return n


# ============================================================================ mha_param_count
def params_three_biases(d_model, bias=True):
    weights = 4 * d_model * d_model
    return weights + 3 * d_model if bias else weights


def params_ternary_precedence(d_model, bias=True):
    return 4 * d_model * d_model + 4 * d_model if bias else 0


def params_math_pow(d_model, bias=True):
    total = 4 * math.pow(d_model, 2)
    if bias:
        total += 4 * d_model
    return total


def params_bias_ignored(d_model, bias=True):
    per_matrix = d_model * d_model + d_model
    return 4 * per_matrix


def params_constant_squared(d_model, bias=True):
    count = (4 * d_model) ** 2
    if bias:
        count += 4 * d_model
    return count


def params_bias_twice(d_model, bias=True):
    per_matrix = d_model * (d_model + 1) if bias else d_model * d_model  # W plus its bias
    total = 4 * per_matrix
    if bias:
        total += 4 * d_model  # the four bias vectors
    return total


def params_shape_list(d_model, bias=True):
    shapes = [(d_model, d_model)] * 4
    if bias:
        shapes += [(d_model,)] * 4
    return sum(math.prod(s) for s in shapes)


def params_bool_arithmetic(d_model, bias=True):
    return int(np.int64(d_model) * (4 * d_model + 4 * bool(bias)))


ENTRIES = [
    Entry("mha_flops", "wrong", "multiply_add_as_one",
          "counts one multiply-add as 1 FLOP instead of 2, so every entry is half the "
          "contract's count",
          flops_mac_as_one),
    Entry("mha_flops", "wrong", "total_before_output_projection",
          "computes 'total' before adding 'output_projection' to the dict, so the total "
          "misses the 2 N d^2 of the output projection",
          flops_total_too_early),
    Entry("mha_flops", "wrong", "numpy_integers",
          "multiplies with np.prod, so the values are numpy int64, not the plain Python ints "
          "the contract asks for",
          flops_numpy_ints),
    Entry("mha_flops", "wrong", "caret_as_power",
          "writes N^2 as `seq_len ^ 2`; in Python ^ is bitwise XOR (and binds looser than *), "
          "so the score and weighted-sum counts are garbage",
          flops_caret_power),
    Entry("mha_flops", "wrong", "one_projection",
          "counts a single (N, d) @ (d, d) product for 'qkv_projections' (2 N d^2) instead "
          "of three (6 N d^2)",
          flops_one_projection),
    Entry("mha_flops", "wrong", "n_and_d_swapped",
          "writes the score and weighted-sum terms as 2 N d^2 instead of 2 N^2 d, squaring "
          "d_model instead of the sequence length",
          flops_n_and_d_swapped),
    Entry("mha_flops", "right", "matmul_helper", None, flops_by_products),
    Entry("mha_flops", "right", "per_head_sums", None, flops_per_head_loop),

    Entry("crossover_seq_len", "wrong", "n_equals_d",
          "returns d_model: sets N^2 d equal to N d^2 without the factors 4 and 8 of the two "
          "groups of terms",
          cross_equal_d),
    Entry("crossover_seq_len", "wrong", "true_division_float",
          "divides with `/`, so it returns the float 2.0 * d_model instead of an int",
          cross_true_division),
    Entry("crossover_seq_len", "wrong", "precedence_division",
          "writes 8 d^2 / (4 d) as `8 * d * d // 4 * d`, which Python reads as "
          "(8 d^2 // 4) * d = 2 d^3",
          cross_precedence),
    Entry("crossover_seq_len", "wrong", "no_output_projection",
          "balances the N^2 terms against the Q/K/V projections only (6 N d^2), forgetting "
          "the output projection, and returns 6 d^2 // (4 d), about 1.5 d_model",
          cross_no_output_projection),
    Entry("crossover_seq_len", "wrong", "loop_off_by_one",
          "searches up to the first N where the N^2 terms reach the projections, then "
          "returns n - 1, one less than the crossover",
          cross_loop_off_by_one),
    Entry("crossover_seq_len", "wrong", "d_not_cancelled",
          "solves 4 N^2 d = 8 N d^2 as N = 8 d^2 / 4, dividing by 4 instead of by 4 d, "
          "and returns 2 d_model^2",
          cross_forgot_cancel),
    Entry("crossover_seq_len", "right", "fraction", None, cross_fraction),
    Entry("crossover_seq_len", "right", "search_for_equality", None, cross_search),

    Entry("mha_param_count", "wrong", "three_biases",
          "adds only three bias vectors (3 d), forgetting the output projection's bias",
          params_three_biases),
    Entry("mha_param_count", "wrong", "ternary_precedence",
          "writes `4*d*d + 4*d if bias else 0`; the conditional expression covers the whole "
          "sum, so bias=False returns 0 instead of 4 d^2",
          params_ternary_precedence),
    Entry("mha_param_count", "wrong", "math_pow_float",
          "uses math.pow, which returns a float, so the count is not a plain int",
          params_math_pow),
    Entry("mha_param_count", "wrong", "bias_flag_ignored",
          "always counts the biases (d^2 + d per matrix), ignoring bias=False",
          params_bias_ignored),
    Entry("mha_param_count", "wrong", "constant_squared",
          "writes 4 d^2 as (4 * d_model) ** 2 = 16 d^2",
          params_constant_squared),
    Entry("mha_param_count", "wrong", "bias_counted_twice",
          "already counts each bias inside d (d + 1) per matrix, then adds the four bias "
          "vectors a second time when bias=True (4 d^2 + 8 d)",
          params_bias_twice),
    Entry("mha_param_count", "right", "sum_of_shapes", None, params_shape_list),
    Entry("mha_param_count", "right", "factored_bool_arithmetic", None, params_bool_arithmetic),
]
