"""Held-out learners' answers, lesson 05 (mha_flops, crossover_seq_len, mha_param_count)."""

import math
from fractions import Fraction

from entry import Entry


# =============================================================================== mha_flops
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


def flops_total_without_output(seq_len, d_model):
    N, d = seq_len, d_model
    qkv = 6 * N * d ** 2
    scores = 2 * N ** 2 * d
    wsum = 2 * N ** 2 * d
    proj = 2 * N * d ** 2
    return {"qkv_projections": qkv, "scores": scores, "weighted_sum": wsum,
            "output_projection": proj, "total": qkv + scores + wsum}


def flops_precedence(seq_len, d_model):
    parts = {}
    parts["qkv_projections"] = 6 * seq_len * d_model * d_model
    parts["scores"] = (2 * seq_len) ** 2 * d_model
    parts["weighted_sum"] = 2 * seq_len ** 2 * d_model
    parts["output_projection"] = 2 * seq_len * d_model * d_model
    parts["total"] = sum(parts.values())
    return parts


def flops_math_pow(seq_len, d_model):
    qkv = 6 * seq_len * math.pow(d_model, 2)
    att = 2 * math.pow(seq_len, 2) * d_model
    out = 2 * seq_len * math.pow(d_model, 2)
    return {"qkv_projections": qkv, "scores": att, "weighted_sum": att,
            "output_projection": out, "total": qkv + 2 * att + out}


def flops_causal_saving(seq_len, d_model):
    n, d = seq_len, d_model
    pairs = n * (n + 1) // 2  # only the visible (query, key) pairs
    result = {
        "qkv_projections": 6 * n * d * d,
        "scores": 2 * pairs * d,
        "weighted_sum": 2 * pairs * d,
        "output_projection": 2 * n * d * d,
    }
    result["total"] = sum(result.values())
    return result


def flops_weighted_sum_dims(seq_len, d_model):
    def matmul(m, k, n):
        return 2 * m * k * n

    N, D = seq_len, d_model
    f = {
        "qkv_projections": 3 * matmul(N, D, D),
        "scores": matmul(N, D, N),
        "weighted_sum": matmul(N, D, D),
        "output_projection": matmul(N, D, D),
    }
    f["total"] = sum(f.values())
    return f


def flops_matmul_shapes(seq_len, d_model):
    def mm(a_shape, b_shape):
        (m, k), (k2, n) = a_shape, b_shape
        assert k == k2
        return 2 * m * k * n

    N, d = seq_len, d_model
    counts = {
        "qkv_projections": sum(mm((N, d), (d, d)) for _ in "qkv"),
        "scores": mm((N, d), (d, N)),
        "weighted_sum": mm((N, N), (N, d)),
        "output_projection": mm((N, d), (d, d)),
    }
    counts["total"] = sum(counts.values())
    return counts


def flops_closed_form(seq_len, d_model):
    n, d = int(seq_len), int(d_model)
    return {"qkv_projections": 6 * n * d * d, "scores": 2 * n * n * d,
            "weighted_sum": 2 * n * n * d, "output_projection": 2 * n * d * d,
            "total": 4 * n * d * (2 * d + n)}


# =============================================================================== crossover_seq_len
def crossover_inverted(d_model):
    return d_model // 2


def crossover_float(d_model):
    return 8 * d_model ** 2 / (4 * d_model)


def crossover_one_quadratic_term(d_model):
    # 2 N^2 d = 8 N d^2
    return 4 * d_model


def crossover_qkv_only(d_model):
    # 4 N^2 d = 6 N d^2
    return int(6 * d_model / 4)


def crossover_precedence(d_model):
    return int(8 * d_model ** 2 / 4 * d_model)


def crossover_search_off_by_one(d_model):
    d = d_model
    n = 1
    while 4 * n * n * d <= 8 * n * d * d:
        n += 1
    return n


def crossover_search(d_model):
    d = d_model
    n = 1
    while 4 * n * n * d < 8 * n * d * d:
        n += 1
    return n


def crossover_fraction(d_model):
    ratio = Fraction(8 * d_model * d_model, 4 * d_model)
    assert ratio.denominator == 1
    return int(ratio.numerator)


# =============================================================================== mha_param_count
def params_precedence(d_model, bias=True):
    return 4 * d_model ** 2 + 4 * d_model if bias else 0


def params_float(d_model, bias=True):
    total = 4 * math.pow(d_model, 2)
    if bias:
        total += 4 * d_model
    return total


def params_three_biases(d_model, bias=True):
    weights = 4 * d_model * d_model
    biases = 3 * d_model if bias else 0  # b_q, b_k, b_v
    return weights + biases


def params_bias_ignored(d_model, bias=True):
    d = d_model
    return 4 * d * d + 4 * d


def params_bias_as_scalar(d_model, bias=True):
    n = 4 * d_model * d_model
    if bias:
        n += 4
    return n


def params_augmented_square(d_model, bias=True):
    side = d_model + 1 if bias else d_model
    return 4 * side * side


def params_augmented_rows(d_model, bias=True):
    return 4 * d_model * (d_model + int(bias))


def params_shape_list(d_model, bias=True):
    shapes = [(d_model, d_model)] * 4
    if bias:
        shapes += [(d_model,)] * 4
    return sum(math.prod(s) for s in shapes)


ENTRIES = [
    Entry("mha_flops", "wrong", "one_flop_per_multiply_add",
          "counts one multiply-add as 1 FLOP instead of 2, so every term is halved",
          flops_one_per_mac),
    Entry("mha_flops", "wrong", "total_misses_output_projection",
          "leaves the output projection out of the total (6 N d^2 + 4 N^2 d)",
          flops_total_without_output),
    Entry("mha_flops", "wrong", "scores_precedence",
          "writes the scores as (2 * N) ** 2 * d, squaring the 2 as well (4 N^2 d instead of "
          "2 N^2 d)", flops_precedence),
    Entry("mha_flops", "wrong", "math_pow_floats",
          "uses math.pow, which returns floats, so the counts are not plain ints",
          flops_math_pow),
    Entry("mha_flops", "wrong", "causal_saving",
          "counts only the N(N+1)/2 causal (query, key) pairs for the scores and weighted "
          "sum, but the contract counts dense attention", flops_causal_saving),
    Entry("mha_flops", "wrong", "weighted_sum_as_projection",
          "counts the weighted sum as an (N, d) @ (d, d) product (2 N d^2) instead of "
          "(N, N) @ (N, d) (2 N^2 d)", flops_weighted_sum_dims),
    Entry("mha_flops", "right", "matmul_shape_helper", None, flops_matmul_shapes),
    Entry("mha_flops", "right", "factored_total", None, flops_closed_form),
    Entry("crossover_seq_len", "wrong", "ratio_inverted",
          "solves 4 N^2 d = 8 N d^2 upside down and returns d_model // 2 instead of "
          "2 * d_model", crossover_inverted),
    Entry("crossover_seq_len", "wrong", "float_result",
          "returns 8 d^2 / (4 d) computed with `/`, a float instead of a plain int",
          crossover_float),
    Entry("crossover_seq_len", "wrong", "one_quadratic_term",
          "compares only the score product (2 N^2 d) with the projections, forgetting the "
          "weighted sum, and gets 4 * d_model", crossover_one_quadratic_term),
    Entry("crossover_seq_len", "wrong", "qkv_projections_only",
          "compares the N^2 terms with the Q, K, V projections only (6 N d^2), forgetting the "
          "output projection, and gets 1.5 * d_model", crossover_qkv_only),
    Entry("crossover_seq_len", "wrong", "precedence",
          "writes 8 * d ** 2 / 4 * d, which multiplies by d instead of dividing by 4 d "
          "(operator precedence), giving 2 d^3", crossover_precedence),
    Entry("crossover_seq_len", "wrong", "search_overshoots",
          "searches with `<=`, so the loop steps past the point of equality and returns "
          "2 * d_model + 1", crossover_search_off_by_one),
    Entry("crossover_seq_len", "right", "linear_search", None, crossover_search),
    Entry("crossover_seq_len", "right", "fraction", None, crossover_fraction),
    Entry("mha_param_count", "wrong", "conditional_precedence",
          "writes `4 * d ** 2 + 4 * d if bias else 0`: the conditional expression covers the "
          "whole sum, so bias=False returns 0 instead of 4 d^2", params_precedence),
    Entry("mha_param_count", "wrong", "math_pow_float",
          "uses math.pow, so the count is a float instead of a plain int", params_float),
    Entry("mha_param_count", "wrong", "three_biases",
          "counts biases only for the Q, K and V projections (3 d) and forgets the output "
          "projection's bias", params_three_biases),
    Entry("mha_param_count", "wrong", "bias_argument_ignored",
          "always adds the 4 d biases and never looks at `bias`", params_bias_ignored),
    Entry("mha_param_count", "wrong", "bias_as_scalar",
          "counts each bias as one number (+4) instead of a vector of d_model values (+4 d)",
          params_bias_as_scalar),
    Entry("mha_param_count", "wrong", "bias_adds_row_and_column",
          "treats the bias as making each matrix (d+1) x (d+1), giving 4 (d+1)^2 instead of "
          "4 d^2 + 4 d", params_augmented_square),
    Entry("mha_param_count", "right", "augmented_rows", None, params_augmented_rows),
    Entry("mha_param_count", "right", "shape_list_prod", None, params_shape_list),
]
