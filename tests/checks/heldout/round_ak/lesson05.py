"""Held-out catalogue, lesson 05 (mha_flops, crossover_seq_len, mha_param_count): plain ints."""

import math

import numpy as np

from entry import Entry


# ============================================================================ mha_flops
def flops_macs_not_doubled(seq_len, d_model):
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
    N, d = seq_len, d_model
    qkv = 6 * N * math.pow(d, 2)
    scores = 2 * math.pow(N, 2) * d
    weighted = 2 * math.pow(N, 2) * d
    out_proj = 2 * N * math.pow(d, 2)
    return {"qkv_projections": qkv, "scores": scores, "weighted_sum": weighted,
            "output_projection": out_proj, "total": qkv + scores + weighted + out_proj}


def flops_total_missing_term(seq_len, d_model):
    qkv = 6 * seq_len * d_model ** 2
    scores = 2 * seq_len ** 2 * d_model
    wsum = 2 * seq_len ** 2 * d_model
    proj = 2 * seq_len * d_model ** 2
    return {"qkv_projections": qkv, "scores": scores, "weighted_sum": wsum,
            "output_projection": proj, "total": qkv + scores + proj}


def flops_causal_halving(seq_len, d_model):
    N, D = seq_len, d_model
    pairs = N * (N + 1) // 2  # only keys j <= i are needed
    result = {
        "qkv_projections": 6 * N * D * D,
        "scores": 2 * pairs * D,
        "weighted_sum": 2 * pairs * D,
        "output_projection": 2 * N * D * D,
    }
    result["total"] = sum(result.values())
    return result


def flops_precedence_square(seq_len, d_model):
    n, d = seq_len, d_model
    qkv = 6 * n * d ** 2
    attn = (2 * n) ** 2 * d
    out = 2 * n * d ** 2
    return {"qkv_projections": qkv, "scores": attn, "weighted_sum": attn,
            "output_projection": out, "total": qkv + 2 * attn + out}


def flops_weighted_sum_as_projection(seq_len, d_model):
    N, d = seq_len, d_model
    flops = {}
    flops["qkv_projections"] = 3 * (2 * N * d * d)
    flops["scores"] = 2 * N * N * d
    flops["weighted_sum"] = 2 * N * d * d
    flops["output_projection"] = 2 * N * d * d
    flops["total"] = sum(flops.values())
    return flops


def flops_by_matmul_shapes(seq_len, d_model):
    def mm(m, k, n):
        return 2 * m * k * n

    N, d = int(seq_len), int(d_model)
    counts = {
        "qkv_projections": sum(mm(N, d, d) for _ in ("q", "k", "v")),
        "scores": mm(N, d, N),
        "weighted_sum": mm(N, N, d),
        "output_projection": mm(N, d, d),
    }
    counts["total"] = sum(counts.values())
    return counts


def flops_closed_form(seq_len, d_model):
    n, d = seq_len, d_model
    keys = ("qkv_projections", "scores", "weighted_sum", "output_projection")
    coeff = dict(zip(keys, (6 * d, 2 * n, 2 * n, 2 * d)))
    out = {key: c * n * d for key, c in coeff.items()}
    out["total"] = 4 * n * d * (2 * d + n)
    return out


# ============================================================================ crossover_seq_len
def crossover_true_division(d_model):
    return 8 * d_model ** 2 / (4 * d_model)


def crossover_qkv_only(d_model):
    # 4 N^2 d = 6 N d^2
    return 6 * d_model // 4


def crossover_one_quadratic_term(d_model):
    # 2 N^2 d = 8 N d^2
    return 8 * d_model ** 2 // (2 * d_model)


def crossover_per_projection(d_model):
    # 4 N^2 d = 2 N d^2 (one projection)
    return d_model // 2


def crossover_precedence(d_model):
    return int(8 * d_model ** 2 / 4 * d_model)


def crossover_first_n_above(d_model):
    n = 2 * d_model
    return n + 1  # first N where the N^2 terms win


def crossover_search(d_model):
    n = 1
    while 4 * n * n * d_model < 8 * n * d_model * d_model:
        n += 1
    return n


def crossover_fraction(d_model):
    from fractions import Fraction
    value = Fraction(8 * d_model * d_model, 4 * d_model)
    return int(value.numerator // value.denominator)


# ============================================================================ mha_param_count
def params_no_output_bias(d_model, bias=True):
    d = d_model
    weights = 4 * d * d
    if bias:
        return weights + 3 * d
    return weights


def params_bias_is_not_none(d_model, bias=True):
    total = 4 * d_model * d_model
    if bias is not None:
        total += 4 * d_model
    return total


def params_conditional_precedence(d_model, bias=True):
    return 4 * d_model ** 2 + 4 * d_model if bias else 0


def params_np_square(d_model, bias=True):
    count = 4 * np.square(d_model)
    if bias:
        count = count + 4 * d_model
    return count


def params_augmented_square(d_model, bias=True):
    if bias:
        return 4 * (d_model + 1) ** 2
    return 4 * d_model ** 2


def params_scalar_bias(d_model, bias=True):
    per_matrix = d_model * d_model + (1 if bias else 0)
    return 4 * per_matrix


def params_bool_arithmetic(d_model, bias=True):
    return 4 * d_model * (d_model + bool(bias))


def params_layer_shapes(d_model, bias=True):
    shapes = [(d_model, d_model)] * 4
    if bias:
        shapes += [(d_model,)] * 4
    return sum(math.prod(s) for s in shapes)


ENTRIES = [
    Entry("mha_flops", "wrong", "multiply_add_counted_once",
          "counts one multiply-add as 1 FLOP instead of 2, so every entry is half the "
          "answer", flops_macs_not_doubled),
    Entry("mha_flops", "wrong", "math_pow_floats",
          "uses math.pow, which returns floats, so the dict holds floats instead of plain "
          "ints", flops_math_pow),
    Entry("mha_flops", "wrong", "total_misses_weighted_sum",
          "the total adds qkv, scores and output projection but leaves out the weighted sum, "
          "giving 8 N d^2 + 2 N^2 d", flops_total_missing_term),
    Entry("mha_flops", "wrong", "causal_halving",
          "counts only the causal (query, key) pairs N(N+1)/2 for scores and weighted sum, "
          "although the exercise asks for dense attention", flops_causal_halving),
    Entry("mha_flops", "wrong", "precedence_2N_squared",
          "writes (2 * N) ** 2 * d for the N^2 terms, which is 4 N^2 d each instead of "
          "2 N^2 d", flops_precedence_square),
    Entry("mha_flops", "wrong", "weighted_sum_as_projection",
          "counts the weighted sum as 2 N d^2 (a projection's cost) instead of 2 N^2 d: the "
          "(N, N) @ (N, d) product has N as its inner size", flops_weighted_sum_as_projection),
    Entry("mha_flops", "right", "matmul_shape_helper", None, flops_by_matmul_shapes),
    Entry("mha_flops", "right", "factored_closed_form", None, flops_closed_form),

    Entry("crossover_seq_len", "wrong", "true_division_float",
          "solves with `/`, so it returns the float 2.0 * d_model instead of a plain int",
          crossover_true_division),
    Entry("crossover_seq_len", "wrong", "qkv_projections_only",
          "compares the N^2 terms with the three QKV projections only (6 N d^2), leaving the "
          "output projection out, so it returns 1.5 d_model", crossover_qkv_only),
    Entry("crossover_seq_len", "wrong", "one_quadratic_term",
          "sets a single N^2 term (2 N^2 d) equal to the projections instead of both together "
          "(4 N^2 d), so it returns 4 d_model", crossover_one_quadratic_term),
    Entry("crossover_seq_len", "wrong", "one_projection",
          "compares the N^2 terms with a single projection (2 N d^2) instead of all four, so it "
          "returns d_model // 2", crossover_per_projection),
    Entry("crossover_seq_len", "wrong", "precedence_divide_multiply",
          "writes 8 * d**2 / 4 * d, which by precedence multiplies by d instead of dividing by "
          "4 d, giving 2 d^3", crossover_precedence),
    Entry("crossover_seq_len", "wrong", "off_by_one_first_above",
          "returns 2 d_model + 1, the first N where the N^2 terms are larger, instead of the N "
          "where they are equal", crossover_first_n_above),
    Entry("crossover_seq_len", "right", "integer_search", None, crossover_search),
    Entry("crossover_seq_len", "right", "fraction_solve", None, crossover_fraction),

    Entry("mha_param_count", "wrong", "no_output_bias",
          "adds only 3 d_model biases (Q, K, V), forgetting the output projection's bias",
          params_no_output_bias),
    Entry("mha_param_count", "wrong", "bias_is_not_none",
          "tests `bias is not None`, which is also true for bias=False, so the biases are "
          "always counted", params_bias_is_not_none),
    Entry("mha_param_count", "wrong", "conditional_expression_precedence",
          "writes `4*d**2 + 4*d if bias else 0`, which parses as (4d^2 + 4d) if bias else 0, "
          "so bias=False returns 0", params_conditional_precedence),
    Entry("mha_param_count", "wrong", "numpy_integer",
          "uses np.square, so the count is a numpy integer instead of a plain Python int",
          params_np_square),
    Entry("mha_param_count", "wrong", "augmented_matrix_squared",
          "counts each weight-with-bias as a (d+1) x (d+1) matrix, 4 (d+1)^2, instead of "
          "d x d weights plus a d-vector", params_augmented_square),
    Entry("mha_param_count", "wrong", "scalar_bias",
          "counts one bias number per matrix instead of a bias vector of d_model numbers",
          params_scalar_bias),
    Entry("mha_param_count", "right", "bool_as_int", None, params_bool_arithmetic),
    Entry("mha_param_count", "right", "sum_of_layer_shapes", None, params_layer_shapes),
]
