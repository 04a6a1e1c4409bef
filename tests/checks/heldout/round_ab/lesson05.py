"""Held-out learners' answers, lesson 05 (mha_flops, crossover_seq_len, mha_param_count).
Plain Python ints in and out."""

import math
from fractions import Fraction

import numpy as np

from entry import Entry


# ============================================================================ mha_flops
def flops_one_per_mac(seq_len, d_model):
    n, d = seq_len, d_model
    out = {
        "qkv_projections": 3 * n * d * d,
        "scores": n * n * d,
        "weighted_sum": n * n * d,
        "output_projection": n * d * d,
    }
    out["total"] = sum(out.values())
    return out


def flops_caret_power(seq_len, d_model):
    N, d = seq_len, d_model
    qkv = 6 * N * d ^ 2
    scores = 2 * N * N * d
    weighted = 2 * N * N * d
    proj = 2 * N * d * d
    return {"qkv_projections": qkv, "scores": scores, "weighted_sum": weighted,
            "output_projection": proj, "total": qkv + scores + weighted + proj}


def flops_math_pow(seq_len, d_model):
    d2 = math.pow(d_model, 2)
    parts = {
        "qkv_projections": 6 * seq_len * d2,
        "scores": 2 * seq_len * seq_len * d_model,
        "weighted_sum": 2 * seq_len * seq_len * d_model,
        "output_projection": 2 * seq_len * d2,
    }
    parts["total"] = parts["qkv_projections"] + parts["scores"] + parts["weighted_sum"] + \
        parts["output_projection"]
    return parts


def flops_total_missing_out_proj(seq_len, d_model):
    proj = 2 * seq_len * d_model * d_model
    qkv = 3 * proj
    attn = 2 * seq_len ** 2 * d_model
    return {
        "qkv_projections": qkv,
        "scores": attn,
        "weighted_sum": attn,
        "output_projection": proj,
        "total": qkv + attn + attn,
    }


def flops_causal_half(seq_len, d_model):
    n, d = seq_len, d_model
    pairs = n * (n + 1) // 2  # each query only sees the keys up to itself
    res = {
        "qkv_projections": 6 * n * d * d,
        "scores": 2 * pairs * d,
        "weighted_sum": 2 * pairs * d,
        "output_projection": 2 * n * d * d,
    }
    res["total"] = sum(res.values())
    return res


def flops_single_projection(seq_len, d_model):
    def matmul(m, k, n):
        return 2 * m * k * n

    qkv = matmul(seq_len, d_model, d_model)
    scores = matmul(seq_len, d_model, seq_len)
    wsum = matmul(seq_len, seq_len, d_model)
    out = matmul(seq_len, d_model, d_model)
    return {"qkv_projections": qkv, "scores": scores, "weighted_sum": wsum,
            "output_projection": out, "total": qkv + scores + wsum + out}


def flops_matmul_shapes(seq_len, d_model):
    def mm(shape_a, shape_b):
        (m, k), (k2, n) = shape_a, shape_b
        assert k == k2
        return 2 * m * k * n

    N, D = seq_len, d_model
    counts = {
        "qkv_projections": sum(mm((N, D), (D, D)) for _ in ("q", "k", "v")),
        "scores": mm((N, D), (D, N)),
        "weighted_sum": mm((N, N), (N, D)),
        "output_projection": mm((N, D), (D, D)),
    }
    counts["total"] = sum(counts.values())
    return counts


def flops_factored_total(seq_len, d_model):
    n, d = int(seq_len), int(d_model)
    names = ("qkv_projections", "scores", "weighted_sum", "output_projection")
    coeffs = ((6, 1, 2), (2, 2, 1), (2, 2, 1), (2, 1, 2))  # c * n**a * d**b
    result = {name: c * n ** a * d ** b for name, (c, a, b) in zip(names, coeffs)}
    result["total"] = 4 * n * d * (2 * d + n)
    return result


# ============================================================================ crossover_seq_len
def crossover_d(d_model):
    return d_model


def crossover_true_division(d_model):
    return 8 * d_model ** 2 / (4 * d_model)


def crossover_without_output_proj(d_model):
    # 4 N^2 d = 6 N d^2  (the Q, K, V projections)
    return 6 * d_model // 4


def crossover_precedence(d_model):
    return 8 * d_model ** 2 // 4 * d_model


def crossover_strict_search(d_model):
    n = 1
    while not 4 * n * n * d_model > 8 * n * d_model * d_model:
        n += 1
    return n


def crossover_both_roots(d_model):
    # 4 d N^2 - 8 d^2 N = 0  ->  N (4 d N - 8 d^2) = 0
    return 0, 2 * d_model


def crossover_search(d_model):
    n = 1
    while 4 * n * n * d_model < 8 * n * d_model * d_model:
        n += 1
    return n


def crossover_fraction(d_model):
    ratio = Fraction(8 * d_model * d_model, 4 * d_model)
    assert ratio.denominator == 1
    return int(ratio)


# ============================================================================ mha_param_count
def params_one_bias(d_model, bias=True):
    total = 4 * d_model * d_model
    if bias:
        total += d_model
    return total


def params_bias_inverted(d_model, bias=True):
    weights = 4 * d_model ** 2
    biases = 0 if bias else 4 * d_model
    return weights + biases


def params_conditional_precedence(d_model, bias=True):
    return 4 * d_model ** 2 + 4 * d_model if bias else 0


def params_numpy_prod(d_model, bias=True):
    shapes = [(d_model, d_model)] * 4
    if bias:
        shapes += [(d_model,)] * 4
    return sum(np.prod(s) for s in shapes)


def params_in_bytes(d_model, bias=True):
    count = 4 * d_model * d_model + (4 * d_model if bias else 0)
    return count * 4  # float32


def params_times_two_typo(d_model, bias=True):
    n = 4 * d_model * 2
    if bias:
        n += 4 * d_model
    return n


def params_math_prod(d_model, bias=True):
    shapes = [(d_model, d_model) for _ in "qkvo"]
    if bias:
        shapes.extend((d_model,) for _ in "qkvo")
    return sum(math.prod(shape) for shape in shapes)


def params_bool_arithmetic(d_model, bias=True):
    return 4 * d_model * (d_model + int(bool(bias)))


ENTRIES = [
    Entry("mha_flops", "wrong", "one_flop_per_mac",
          "counts one multiply-add as 1 FLOP instead of 2, so every term is half the "
          "contract's",
          flops_one_per_mac),
    Entry("mha_flops", "wrong", "caret_for_power",
          "writes d ^ 2 for d squared; in Python ^ is bitwise XOR (and binds after *), "
          "so the projection count is (6 N d) XOR 2",
          flops_caret_power),
    Entry("mha_flops", "wrong", "math_pow_float",
          "squares d_model with math.pow, which returns a float, so the projection counts "
          "and the total are floats instead of plain ints",
          flops_math_pow),
    Entry("mha_flops", "wrong", "total_without_output_projection",
          "leaves the output projection out of the total (8 N d^2 + 4 N^2 d needs it)",
          flops_total_missing_out_proj),
    Entry("mha_flops", "wrong", "causal_saving",
          "counts only the N(N+1)/2 causal (query, key) pairs for the scores and the "
          "weighted sum, although the contract counts dense attention",
          flops_causal_half),
    Entry("mha_flops", "wrong", "one_qkv_projection",
          "counts a single (N, d) @ (d, d) product for qkv_projections instead of three "
          "(one each for Q, K and V)",
          flops_single_projection),
    Entry("mha_flops", "right", "matmul_shape_helper", None, flops_matmul_shapes),
    Entry("mha_flops", "right", "coefficient_table_factored_total", None, flops_factored_total),

    Entry("crossover_seq_len", "wrong", "returns_d_model",
          "returns d_model, equating one N^2 term with one projection (2 N^2 d = 2 N d^2) "
          "instead of both N^2 terms with all four projections (N = 2 d_model)",
          crossover_d),
    Entry("crossover_seq_len", "wrong", "true_division_float",
          "divides with /, so it returns a float (2.0 * d_model) instead of a plain int",
          crossover_true_division),
    Entry("crossover_seq_len", "wrong", "forgets_output_projection",
          "equates the N^2 terms with the Q, K, V projections only (6 N d^2), leaving out "
          "the output projection: N = 1.5 d_model instead of 2 d_model",
          crossover_without_output_proj),
    Entry("crossover_seq_len", "wrong", "precedence",
          "writes 8 * d ** 2 // 4 * d, which Python reads as (8 d^2 // 4) * d = 2 d^3, "
          "instead of dividing by 4 d",
          crossover_precedence),
    Entry("crossover_seq_len", "wrong", "strict_search",
          "searches for the first N where the N^2 terms strictly exceed the projections, "
          "so it returns 2 d_model + 1, one past the crossover",
          crossover_strict_search),
    Entry("crossover_seq_len", "wrong", "both_roots",
          "returns both roots (0, 2 d_model) of the quadratic instead of the single "
          "crossover length as an int",
          crossover_both_roots),
    Entry("crossover_seq_len", "right", "integer_search", None, crossover_search),
    Entry("crossover_seq_len", "right", "fraction", None, crossover_fraction),

    Entry("mha_param_count", "wrong", "one_bias_vector",
          "adds a single bias vector of d_model when bias is true instead of one per "
          "projection (4 d_model)",
          params_one_bias),
    Entry("mha_param_count", "wrong", "bias_condition_inverted",
          "adds the biases when bias is False and leaves them out when it is True",
          params_bias_inverted),
    Entry("mha_param_count", "wrong", "conditional_precedence",
          "writes 4 d^2 + 4 d if bias else 0: the conditional expression takes the whole "
          "sum, so bias=False returns 0 instead of 4 d^2",
          params_conditional_precedence),
    Entry("mha_param_count", "wrong", "numpy_integer",
          "adds up np.prod of the shapes, which returns a numpy integer instead of the "
          "plain Python int the lesson asks for",
          params_numpy_prod),
    Entry("mha_param_count", "wrong", "bytes_not_parameters",
          "multiplies the count by 4 bytes per float32 value: it returns the size in bytes "
          "instead of the number of parameters",
          params_in_bytes),
    Entry("mha_param_count", "wrong", "times_two_for_square",
          "writes d_model * 2 where d_model ** 2 belongs, so the weights count as 8 d "
          "instead of 4 d^2",
          params_times_two_typo),
    Entry("mha_param_count", "right", "math_prod_shapes", None, params_math_prod),
    Entry("mha_param_count", "right", "bool_as_int", None, params_bool_arithmetic),
]
