"""Held-out catalogue, lesson 05 (mha_flops, crossover_seq_len, mha_param_count): plain ints."""

import math
from fractions import Fraction

import numpy as np

from entry import Entry


# ============================================================================ mha_flops
def flops_math_pow(seq_len, d_model):
    n, d = seq_len, d_model
    proj = 6 * n * math.pow(d, 2)
    scores = 2 * n * n * d
    wsum = 2 * n * n * d
    out = 2 * n * math.pow(d, 2)
    return {"qkv_projections": proj, "scores": scores, "weighted_sum": wsum,
            "output_projection": out, "total": proj + scores + wsum + out}


def flops_macs(seq_len, d_model):
    N, d = seq_len, d_model
    parts = {
        "qkv_projections": 3 * N * d * d,
        "scores": N * N * d,
        "weighted_sum": N * N * d,
        "output_projection": N * d * d,
    }
    parts["total"] = sum(parts.values())
    return parts


def flops_one_projection(seq_len, d_model):
    n, d = seq_len, d_model
    qkv = 2 * n * d * d
    sc = 2 * n ** 2 * d
    ws = 2 * n ** 2 * d
    op = 2 * n * d ** 2
    return {"qkv_projections": qkv, "scores": sc, "weighted_sum": ws,
            "output_projection": op, "total": qkv + sc + ws + op}


def flops_total_without_output(seq_len, d_model):
    n, d = seq_len, d_model
    result = {
        "qkv_projections": 6 * n * d * d,
        "scores": 2 * n * n * d,
        "weighted_sum": 2 * n * n * d,
        "output_projection": 2 * n * d * d,
    }
    result["total"] = result["qkv_projections"] + result["scores"] + result["weighted_sum"]
    return result


def flops_scores_swapped(seq_len, d_model):
    n, d = seq_len, d_model
    scores = 2 * n * d * d
    weighted = 2 * n * n * d
    qkv = 6 * n * d * d
    o = 2 * n * d * d
    return dict(qkv_projections=qkv, scores=scores, weighted_sum=weighted,
                output_projection=o, total=qkv + scores + weighted + o)


def flops_square_precedence(seq_len, d_model):
    n, d = seq_len, d_model
    scores = 2 * n^2 * d
    weighted = 2 * n^2 * d
    qkv = 6 * n * d * d
    out = 2 * n * d * d
    return {"qkv_projections": qkv, "scores": scores, "weighted_sum": weighted,
            "output_projection": out, "total": qkv + scores + weighted + out}


def flops_by_matmul(seq_len, d_model):
    def mm(m, k, n):  # (m, k) @ (k, n)
        return 2 * m * k * n

    N, D = int(seq_len), int(d_model)
    parts = {
        "qkv_projections": 3 * mm(N, D, D),
        "scores": mm(N, D, N),
        "weighted_sum": mm(N, N, D),
        "output_projection": mm(N, D, D),
    }
    parts["total"] = sum(parts.values())
    return parts


def flops_factorised(seq_len, d_model):
    n, d = seq_len, d_model
    return {"qkv_projections": 6 * n * d * d, "scores": 2 * d * n * n,
            "weighted_sum": 2 * d * n * n, "output_projection": 2 * n * d * d,
            "total": 4 * n * d * (2 * d + n)}


# ============================================================================ crossover_seq_len
def cross_true_division(d_model):
    return 8 * d_model ** 2 / (4 * d_model)


def cross_qkv_only(d_model):
    return 6 * d_model * d_model // (4 * d_model)


def cross_one_quadratic_term(d_model):
    return 8 * d_model ** 2 // (2 * d_model)


def cross_equals_d_model(d_model):
    return d_model


def cross_precedence(d_model):
    return 8 * d_model ** 2 // 4 * d_model


def cross_uncancelled(d_model):
    return 8 * d_model ** 2 // 4


def cross_search(d_model):
    n = 1
    while 4 * n * n * d_model < 8 * n * d_model * d_model:
        n += 1
    return n


def cross_fraction(d_model):
    ratio = Fraction(8 * d_model * d_model, 4 * d_model)
    return ratio.numerator // ratio.denominator


# ============================================================================ mha_param_count
def params_bias_scalars(d_model, bias=True):
    total = 4 * d_model * d_model
    if bias:
        total += 4
    return total


def params_bias_is_not_none(d_model, bias=True):
    count = 4 * d_model ** 2
    if bias is not None:
        count += 4 * d_model
    return count


def params_np_prod(d_model, bias=True):
    shapes = [(d_model, d_model)] * 4
    if bias:
        shapes += [(d_model,)] * 4
    return sum(np.prod(s) for s in shapes)


def params_forgot_output_projection(d_model, bias=True):
    d = d_model
    weights = 3 * d * d
    biases = 3 * d if bias else 0
    return weights + biases


def params_conditional_precedence(d_model, bias=True):
    return 4 * d_model ** 2 + 4 * d_model if bias else 0


def params_bytes(d_model, bias=True):
    n = 4 * d_model * d_model + (4 * d_model if bias else 0)
    return n * 4


def params_math_prod(d_model, bias=True):
    layers = [(d_model, d_model)] * 4
    if bias:
        layers += [(d_model,)] * 4
    return sum(math.prod(shape) for shape in layers)


def params_closed_form(d_model, bias=True):
    return 4 * d_model * (d_model + int(bool(bias)))


ENTRIES = [
    Entry("mha_flops", "wrong", "math_pow_floats",
          "squares d_model with math.pow, which returns a float, so the projection counts and "
          "the total are floats instead of plain ints", flops_math_pow),
    Entry("mha_flops", "wrong", "multiply_adds_as_one",
          "counts one multiply-add as 1 FLOP instead of 2, so every count is halved",
          flops_macs),
    Entry("mha_flops", "wrong", "one_projection_for_qkv",
          "counts qkv_projections as 2 N d^2, one projection instead of three (6 N d^2)",
          flops_one_projection),
    Entry("mha_flops", "wrong", "total_without_output_projection",
          "leaves the output projection out of the total (6 N d^2 + 4 N^2 d instead of "
          "8 N d^2 + 4 N^2 d)", flops_total_without_output),
    Entry("mha_flops", "wrong", "scores_n_and_d_swapped",
          "counts the scores as 2 N d^2 instead of 2 N^2 d (N and d_model swapped)",
          flops_scores_swapped),
    Entry("mha_flops", "wrong", "caret_for_power",
          "writes N squared as n^2: in Python ^ is bitwise XOR and binds looser than *, so "
          "2 * n^2 * d is (2n) XOR (2d), not 2 N^2 d", flops_square_precedence),
    Entry("mha_flops", "right", "helper_per_matmul", None, flops_by_matmul),
    Entry("mha_flops", "right", "factorised_total", None, flops_factorised),
    Entry("crossover_seq_len", "wrong", "true_division_float",
          "solves with `/`, so the answer is the float 2.0 * d_model instead of a plain int",
          cross_true_division),
    Entry("crossover_seq_len", "wrong", "qkv_projections_only",
          "equates the N^2 terms with the q, k, v projections only (6 N d^2), giving 3 d / 2 "
          "instead of 2 d", cross_qkv_only),
    Entry("crossover_seq_len", "wrong", "one_quadratic_term",
          "equates the projections with one N^2 term (2 N^2 d) instead of both, giving 4 d",
          cross_one_quadratic_term),
    Entry("crossover_seq_len", "wrong", "crossover_at_d_model",
          "returns d_model itself, misremembering the crossover as N = d_model", cross_equals_d_model),
    Entry("crossover_seq_len", "wrong", "division_precedence",
          "writes 8 * d ** 2 // 4 * d, which multiplies by d after dividing by 4 (2 d^3) "
          "instead of dividing by 4 d", cross_precedence),
    Entry("crossover_seq_len", "wrong", "d_not_cancelled",
          "divides 8 d^2 by 4 only, forgetting the d of 4 N^2 d, giving 2 d^2", cross_uncancelled),
    Entry("crossover_seq_len", "right", "linear_search", None, cross_search),
    Entry("crossover_seq_len", "right", "fraction", None, cross_fraction),
    Entry("mha_param_count", "wrong", "four_scalar_biases",
          "adds 4 for the biases (one number per bias) instead of 4 d_model (four vectors of "
          "d_model entries)", params_bias_scalars),
    Entry("mha_param_count", "wrong", "bias_is_not_none",
          "tests `if bias is not None`, which is true for bias=False too, so the biases are "
          "always counted", params_bias_is_not_none),
    Entry("mha_param_count", "wrong", "numpy_int",
          "sums np.prod of the shapes, returning a numpy integer instead of a plain int",
          params_np_prod),
    Entry("mha_param_count", "wrong", "no_output_projection",
          "counts only the q, k, v projections (3 d^2 + 3 d) and forgets the output "
          "projection", params_forgot_output_projection),
    Entry("mha_param_count", "wrong", "conditional_precedence",
          "writes `4*d**2 + 4*d if bias else 0`, which by precedence returns 0 (not 4 d^2) "
          "when bias is False", params_conditional_precedence),
    Entry("mha_param_count", "wrong", "bytes_not_params",
          "multiplies by 4 bytes per float32, returning the size in bytes instead of the "
          "number of parameters", params_bytes),
    Entry("mha_param_count", "right", "math_prod_shapes", None, params_math_prod),
    Entry("mha_param_count", "right", "closed_form_int_bias", None, params_closed_form),
]
