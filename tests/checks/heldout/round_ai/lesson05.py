"""Held-out catalogue, lesson 05 (FLOPs): mha_flops, crossover_seq_len, mha_param_count."""

import math
from fractions import Fraction
from functools import reduce
import operator

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


def flops_single_projection(seq_len, d_model):
    N, d = seq_len, d_model
    qkv = 2 * N * d * d
    scores = 2 * N * N * d
    wsum = 2 * N * N * d
    proj = 2 * N * d * d
    return {"qkv_projections": qkv, "scores": scores, "weighted_sum": wsum,
            "output_projection": proj, "total": qkv + scores + wsum + proj}


def flops_total_missing_output(seq_len, d_model):
    result = {}
    result["qkv_projections"] = 6 * seq_len * d_model ** 2
    result["scores"] = 2 * seq_len ** 2 * d_model
    result["weighted_sum"] = 2 * seq_len ** 2 * d_model
    result["output_projection"] = 2 * seq_len * d_model ** 2
    result["total"] = result["qkv_projections"] + result["scores"] + result["weighted_sum"]
    return result


def flops_math_pow(seq_len, d_model):
    proj = 2 * seq_len * math.pow(d_model, 2)
    quad = 2 * math.pow(seq_len, 2) * d_model
    return {
        "qkv_projections": 3 * proj,
        "scores": quad,
        "weighted_sum": quad,
        "output_projection": proj,
        "total": 4 * proj + 2 * quad,
    }


def flops_caret(seq_len, d_model):
    N, d = seq_len, d_model
    parts = {
        "qkv_projections": 6 * N * d ^ 2,
        "scores": 2 * N ^ 2 * d,
        "weighted_sum": 2 * N ^ 2 * d,
        "output_projection": 2 * N * d ^ 2,
    }
    parts["total"] = 8 * N * d ^ 2 + 4 * N ^ 2 * d
    return parts


def flops_scores_swapped(seq_len, d_model):
    n, d = seq_len, d_model

    def mm(rows, inner, cols):
        return 2 * rows * inner * cols

    qkv = 3 * mm(n, d, d)
    scores = mm(n, d, d)  # (N, d) @ (d, N)
    weighted = mm(n, n, d)
    out_proj = mm(n, d, d)
    return {"qkv_projections": qkv, "scores": scores, "weighted_sum": weighted,
            "output_projection": out_proj, "total": qkv + scores + weighted + out_proj}


def flops_matmul_shapes(seq_len, d_model):
    def matmul_flops(a_shape, b_shape):
        (m, k), (k2, n) = a_shape, b_shape
        assert k == k2
        return 2 * m * k * n

    N, D = int(seq_len), int(d_model)
    qkv = sum(matmul_flops((N, D), (D, D)) for _ in "qkv")
    scores = matmul_flops((N, D), (D, N))
    wsum = matmul_flops((N, N), (N, D))
    out = matmul_flops((N, D), (D, D))
    return {"qkv_projections": qkv, "scores": scores, "weighted_sum": wsum,
            "output_projection": out, "total": qkv + scores + wsum + out}


def flops_closed_total_first(seq_len, d_model):
    n, d = seq_len, d_model
    total = 4 * n * d * (2 * d + n)
    quad = 2 * n * n * d
    out_proj = 2 * n * d * d
    return {"total": total, "scores": quad, "weighted_sum": quad,
            "output_projection": out_proj,
            "qkv_projections": total - 2 * quad - out_proj}


# ============================================================================ crossover_seq_len
def crossover_true_division(d_model):
    return 8 * d_model ** 2 / (4 * d_model)


def crossover_sqrt(d_model):
    # 4 N^2 d = 8 N d^2  ->  N^2 = 2 d
    return int(math.sqrt(2 * d_model))


def crossover_inverted(d_model):
    return (4 * d_model) // 8


def crossover_floor_div_precedence(d_model):
    return 8 * d_model ** 2 // 4 * d_model


def crossover_scores_only(d_model):
    # the N^2 term 2 N^2 d against the projections 8 N d^2
    return 8 * d_model * d_model // (2 * d_model)


def crossover_first_exceeding(d_model):
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
    ratio = Fraction(8 * d_model * d_model, 4 * d_model)
    return int(ratio)


# ============================================================================ mha_param_count
def params_bias_scalar(d_model, bias=True):
    weights = 4 * d_model * d_model
    if bias:
        weights += 4
    return weights


def params_no_output_projection(d_model, bias=True):
    total = 0
    for _ in ("q", "k", "v"):
        total += d_model * d_model
        if bias:
            total += d_model
    return total


def params_is_not_none(d_model, bias=True):
    count = 4 * d_model ** 2
    if bias is not None:
        count += 4 * d_model
    return count


def params_conditional_precedence(d_model, bias=True):
    return 4 * d_model ** 2 + 4 * d_model if bias else 0


def params_numpy_int(d_model, bias=True):
    shapes = [(d_model, d_model)] * 4
    if bias:
        shapes += [(d_model,)] * 4
    return np.sum([np.prod(s) for s in shapes])


def params_augmented_square(d_model, bias=True):
    side = d_model + 1 if bias else d_model
    return 4 * side ** 2


def params_math_prod(d_model, bias=True):
    tensors = {f"w_{n}": (d_model, d_model) for n in "qkvo"}
    if bias:
        tensors.update({f"b_{n}": (d_model,) for n in "qkvo"})
    return sum(math.prod(shape) for shape in tensors.values())


def params_factored(d_model, bias=True):
    per_projection = d_model * (d_model + (1 if bias else 0))
    return reduce(operator.add, [per_projection] * 4)


ENTRIES = [
    Entry("mha_flops", "wrong", "multiply_add_as_one_flop",
          "Each multiply-add is counted as 1 FLOP instead of 2, so every term is half the "
          "contract's value.", flops_mac_as_one),
    Entry("mha_flops", "wrong", "one_projection_for_qkv",
          "The Q, K and V projections are counted as one (N, d) @ (d, d) product, 2 N d^2, "
          "instead of three, 6 N d^2.", flops_single_projection),
    Entry("mha_flops", "wrong", "total_without_output_projection",
          "The total leaves out the output projection: it adds only qkv, scores and the "
          "weighted sum.", flops_total_missing_output),
    Entry("mha_flops", "wrong", "math_pow_floats",
          "math.pow returns floats, so the counts are floats instead of the plain Python ints "
          "the contract asks for.", flops_math_pow),
    Entry("mha_flops", "wrong", "caret_for_power",
          "^ is bitwise XOR in Python, not a power, so d ^ 2 and N ^ 2 give wrong counts; ** "
          "was needed.", flops_caret),
    Entry("mha_flops", "wrong", "scores_with_d_squared",
          "The scores product (N, d) @ (d, N) is counted with inner and outer sizes mixed up, "
          "2 N d^2 instead of 2 N^2 d.", flops_scores_swapped),
    Entry("mha_flops", "right", "matmul_shape_helper", None, flops_matmul_shapes),
    Entry("mha_flops", "right", "closed_form_total_first", None, flops_closed_total_first),
    Entry("crossover_seq_len", "wrong", "true_division_float",
          "/ is true division, so it returns a float (2.0 * d_model) instead of an int.",
          crossover_true_division),
    Entry("crossover_seq_len", "wrong", "one_n_left_uncancelled",
          "The algebra keeps an N too many: 4 N^2 d = 8 N d^2 is solved as N^2 = 2 d "
          "(sqrt(2 d)) instead of N = 2 d.", crossover_sqrt),
    Entry("crossover_seq_len", "wrong", "ratio_inverted",
          "The ratio is inverted: it divides the N^2 coefficient by the projections' "
          "(4 d / 8 = d / 2) instead of 8 d^2 / (4 d) = 2 d.", crossover_inverted),
    Entry("crossover_seq_len", "wrong", "floor_division_precedence",
          "8 * d ** 2 // 4 * d parses as (8 d^2 // 4) * d = 2 d^3: the denominator 4 * d needs "
          "parentheses.", crossover_floor_div_precedence),
    Entry("crossover_seq_len", "wrong", "scores_term_only",
          "Only the scores term 2 N^2 d is compared with the projections, not both N^2 terms "
          "(4 N^2 d), giving 4 d instead of 2 d.", crossover_scores_only),
    Entry("crossover_seq_len", "wrong", "first_n_strictly_above",
          "The search stops at the first N where the N^2 terms strictly exceed the "
          "projections, one past the N where they are equal (2 d + 1).",
          crossover_first_exceeding),
    Entry("crossover_seq_len", "right", "search_until_equal", None, crossover_search),
    Entry("crossover_seq_len", "right", "fraction_ratio", None, crossover_fraction),
    Entry("mha_param_count", "wrong", "bias_counted_as_scalars",
          "Each bias is counted as one parameter (+4) instead of a vector of d_model "
          "parameters (+4 d_model).", params_bias_scalar),
    Entry("mha_param_count", "wrong", "forgets_output_projection",
          "Only W_q, W_k and W_v (and their biases) are counted; the output projection W_o "
          "and its bias are missing.", params_no_output_projection),
    Entry("mha_param_count", "wrong", "bias_is_not_none",
          "`if bias is not None` is true for bias=False, so the biases are always counted.",
          params_is_not_none),
    Entry("mha_param_count", "wrong", "conditional_expression_precedence",
          "The conditional expression binds loosest: `4 d^2 + 4 d if bias else 0` returns 0 "
          "when bias=False instead of 4 d^2.", params_conditional_precedence),
    Entry("mha_param_count", "wrong", "numpy_integer_result",
          "np.sum / np.prod return a numpy integer, not the plain Python int the contract "
          "asks for.", params_numpy_int),
    Entry("mha_param_count", "wrong", "augmented_square_matrix",
          "Folding the bias into the weight as an extra row, it counts (d+1) x (d+1) "
          "matrices instead of (d+1) x d, adding 2 d + 1 per projection instead of d.",
          params_augmented_square),
    Entry("mha_param_count", "right", "math_prod_of_shapes", None, params_math_prod),
    Entry("mha_param_count", "right", "factored_reduce", None, params_factored),
]
