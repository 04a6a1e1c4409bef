"""Held-out catalogue, lesson 05 (FLOPs): mha_flops, crossover_seq_len, mha_param_count."""

import functools
import math
import operator
from fractions import Fraction

import torch

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


def flops_output_in_qkv(seq_len, d_model):
    proj = 2 * seq_len * d_model * d_model
    result = {
        "qkv_projections": 4 * proj,  # W_q, W_k, W_v and W_o
        "scores": 2 * seq_len ** 2 * d_model,
        "weighted_sum": 2 * seq_len ** 2 * d_model,
        "output_projection": proj,
    }
    result["total"] = (result["qkv_projections"] + result["scores"] + result["weighted_sum"]
                       + result["output_projection"])
    return result


def flops_math_pow(seq_len, d_model):
    qkv = 6 * seq_len * math.pow(d_model, 2)
    scores = 2 * math.pow(seq_len, 2) * d_model
    mix = 2 * math.pow(seq_len, 2) * d_model
    proj = 2 * seq_len * math.pow(d_model, 2)
    return {"qkv_projections": qkv, "scores": scores, "weighted_sum": mix,
            "output_projection": proj, "total": qkv + scores + mix + proj}


def flops_scores_swapped(seq_len, d_model):
    N, d = seq_len, d_model
    counts = {}
    counts["qkv_projections"] = 6 * N * d * d
    counts["scores"] = 2 * N * d * d
    counts["weighted_sum"] = 2 * N * N * d
    counts["output_projection"] = 2 * N * d * d
    counts["total"] = sum(counts.values())
    return counts


def flops_xor(seq_len, d_model):
    N, d = seq_len, d_model
    qkv = 6 * N * d ^ 2
    out_proj = 2 * N * d ** 2
    scores = 2 * N ** 2 * d
    weighted = 2 * N ** 2 * d
    return {"qkv_projections": qkv, "scores": scores, "weighted_sum": weighted,
            "output_projection": out_proj, "total": qkv + scores + weighted + out_proj}


def flops_causal_half(seq_len, d_model):
    n, d = seq_len, d_model
    res = {
        "qkv_projections": 6 * n * d * d,
        "scores": n * n * d,  # causal: only half of the (query, key) pairs count
        "weighted_sum": n * n * d,
        "output_projection": 2 * n * d * d,
    }
    res["total"] = sum(res.values())
    return res


def flops_matmul_helper(seq_len, d_model):
    def matmul(m, k, n):
        return 2 * m * k * n  # one multiply-add per (i, p, j), two FLOPs each

    parts = {
        "qkv_projections": sum(matmul(seq_len, d_model, d_model) for _ in ("q", "k", "v")),
        "scores": matmul(seq_len, d_model, seq_len),
        "weighted_sum": matmul(seq_len, seq_len, d_model),
        "output_projection": matmul(seq_len, d_model, d_model),
    }
    parts["total"] = sum(parts.values())
    return parts


def flops_closed_form(seq_len, d_model):
    N, d = int(seq_len), int(d_model)
    nd = N * d
    return {
        "qkv_projections": 6 * nd * d,
        "scores": 2 * nd * N,
        "weighted_sum": 2 * nd * N,
        "output_projection": 2 * nd * d,
        "total": 4 * nd * (2 * d + N),
    }


# ============================================================================ crossover_seq_len
def crossover_true_division(d_model):
    return 8 * d_model ** 2 / (4 * d_model)


def crossover_one_quadratic_term(d_model):
    # scores 2 N^2 d equal to the projections 8 N d^2
    return 8 * d_model // 2


def crossover_qkv_only(d_model):
    # 4 N^2 d = 6 N d^2
    return 6 * d_model // 4


def crossover_precedence(d_model):
    return 8 * d_model ** 2 // 4 * d_model


def crossover_first_exceeding(d_model):
    n = 1
    while 4 * n * n * d_model <= 8 * n * d_model * d_model:
        n += 1
    return n


def crossover_projection_macs(d_model):
    d = d_model
    projections = 4 * d * d  # four (N, d) @ (d, d) products: N d^2 each
    quadratic = 4 * d  # the two N^2 terms: 2 N^2 d each
    return projections // quadratic


def crossover_search(d_model):
    n = 1
    while 4 * n * n * d_model != 8 * n * d_model * d_model:
        n += 1
    return n


def crossover_fraction(d_model):
    ratio = Fraction(8 * d_model * d_model, 4 * d_model)
    return ratio.numerator // ratio.denominator


# ============================================================================ mha_param_count
def params_one_bias(d_model, bias=True):
    weights = 4 * d_model * d_model
    return weights + d_model if bias else weights


def params_is_not_none(d_model, bias=True):
    total = 4 * d_model ** 2
    if bias is not None:
        total += 4 * d_model
    return total


def params_float_zero(d_model, bias=True):
    return 4 * d_model ** 2 + (4 * d_model if bias else 0.0)


def params_three_matrices(d_model, bias=True):
    n = 3 * d_model * d_model
    if bias:
        n += 3 * d_model
    return n


def params_conditional_precedence(d_model, bias=True):
    return 4 * d_model ** 2 + 4 * d_model if bias else 0


def params_augmented(d_model, bias=True):
    d = d_model + 1 if bias else d_model  # the bias as an extra row of ones
    return 4 * d * d


def params_torch_linear(d_model, bias=True):
    layers = [torch.nn.Linear(d_model, d_model, bias=bias, device="meta") for _ in range(4)]
    return sum(p.numel() for layer in layers for p in layer.parameters())


def params_shapes(d_model, bias=True):
    shapes = [(d_model, d_model)] * 4 + ([(d_model,)] * 4 if bias else [])
    return sum(functools.reduce(operator.mul, s, 1) for s in shapes)


ENTRIES = [
    # mha_flops
    Entry("mha_flops", "wrong", "counts_multiply_adds",
          "counts multiply-adds instead of FLOPs: every term is missing the factor 2",
          flops_macs),
    Entry("mha_flops", "wrong", "output_projection_in_qkv",
          "puts W_o into qkv_projections (8 N d^2 instead of 6 N d^2) and counts it again as "
          "output_projection",
          flops_output_in_qkv),
    Entry("mha_flops", "wrong", "math_pow_floats",
          "uses math.pow, which returns floats, so the counts are floats instead of plain ints",
          flops_math_pow),
    Entry("mha_flops", "wrong", "scores_n_d_squared",
          "counts the scores as 2 N d^2 (N and d swapped) instead of 2 N^2 d",
          flops_scores_swapped),
    Entry("mha_flops", "wrong", "caret_is_xor",
          "writes `d ^ 2` for d squared, but ^ is bitwise XOR in Python, so qkv_projections "
          "(and the total) are wrong",
          flops_xor),
    Entry("mha_flops", "wrong", "causal_halving",
          "halves the two N^2 terms as if a causal kernel skipped the masked half; the exercise "
          "counts dense attention (2 N^2 d each)",
          flops_causal_half),
    Entry("mha_flops", "right", "matmul_helper", None, flops_matmul_helper),
    Entry("mha_flops", "right", "factored_closed_form", None, flops_closed_form),
    # crossover_seq_len
    Entry("crossover_seq_len", "wrong", "true_division_float",
          "solves with `/`, so the answer is a float (2.0 * d_model) instead of a plain int",
          crossover_true_division),
    Entry("crossover_seq_len", "wrong", "only_one_quadratic_term",
          "sets only one N^2 term (2 N^2 d) equal to the projections, giving 4 d_model instead "
          "of 2 d_model",
          crossover_one_quadratic_term),
    Entry("crossover_seq_len", "wrong", "qkv_projections_only",
          "compares the N^2 terms with the Q/K/V projections only (6 N d^2), leaving out W_o, "
          "so it returns 3 d_model / 2",
          crossover_qkv_only),
    Entry("crossover_seq_len", "wrong", "precedence_divides_then_multiplies",
          "`8 * d ** 2 // 4 * d` is evaluated left to right as (8 d^2 // 4) * d = 2 d^3, not "
          "8 d^2 // (4 d)",
          crossover_precedence),
    Entry("crossover_seq_len", "wrong", "first_n_exceeding",
          "the search loop stops at the first N where the N^2 terms exceed the projections, "
          "2 d_model + 1, one past the N where they are equal",
          crossover_first_exceeding),
    Entry("crossover_seq_len", "wrong", "projections_in_multiply_adds",
          "counts the projections in multiply-adds (4 N d^2) but the N^2 terms in FLOPs "
          "(4 N^2 d), so it returns d_model instead of 2 d_model",
          crossover_projection_macs),
    Entry("crossover_seq_len", "right", "integer_search", None, crossover_search),
    Entry("crossover_seq_len", "right", "fraction", None, crossover_fraction),
    # mha_param_count
    Entry("mha_param_count", "wrong", "one_bias_vector",
          "adds a single bias vector (d) instead of one per projection (4 d)",
          params_one_bias),
    Entry("mha_param_count", "wrong", "bias_is_not_none",
          "tests `bias is not None`, which is also true for bias=False, so the biases are "
          "always counted",
          params_is_not_none),
    Entry("mha_param_count", "wrong", "float_zero_without_bias",
          "adds 0.0 when bias is False, so the count becomes a float instead of a plain int",
          params_float_zero),
    Entry("mha_param_count", "wrong", "forgets_w_o",
          "counts only W_q, W_k, W_v (and their biases), leaving out the output projection W_o",
          params_three_matrices),
    Entry("mha_param_count", "wrong", "conditional_expression_precedence",
          "`4 * d ** 2 + 4 * d if bias else 0` applies the condition to the whole sum, so "
          "bias=False returns 0",
          params_conditional_precedence),
    Entry("mha_param_count", "wrong", "augmented_matrix_squared",
          "treats the bias as an extra row and column of each matrix, 4 (d+1)^2, instead of an "
          "extra row only, 4 d (d+1)",
          params_augmented),
    Entry("mha_param_count", "right", "torch_linear_meta", None, params_torch_linear),
    Entry("mha_param_count", "right", "shape_products", None, params_shapes),
]
