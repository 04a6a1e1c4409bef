"""Held-out catalogue, lesson 05 (FLOPs and parameters, plain Python ints): mha_flops,
crossover_seq_len, mha_param_count."""

import math

import numpy as np

from entry import Entry


# ============================================================================ mha_flops
def flops_counts_macs(seq_len, d_model):
    n, d = seq_len, d_model
    parts = {
        "qkv_projections": 3 * n * d * d,
        "scores": n * n * d,
        "weighted_sum": n * n * d,
        "output_projection": n * d * d,
    }
    parts["total"] = sum(parts.values())
    return parts


def flops_total_misses_output(seq_len, d_model):
    n, d = seq_len, d_model
    qkv = 6 * n * d * d
    scores = 2 * n * n * d
    weighted = 2 * n * n * d
    out_proj = 2 * n * d * d
    return {"qkv_projections": qkv, "scores": scores, "weighted_sum": weighted,
            "output_projection": out_proj, "total": qkv + scores + weighted}


def flops_causal_halving(seq_len, d_model):
    n, d = seq_len, d_model
    parts = {
        "qkv_projections": 6 * n * d ** 2,
        "scores": 2 * n ** 2 * d // 2,  # only the lower triangle is needed
        "weighted_sum": 2 * n ** 2 * d // 2,
        "output_projection": 2 * n * d ** 2,
    }
    parts["total"] = sum(parts.values())
    return parts


def flops_score_exponent_swapped(seq_len, d_model):
    N, d = seq_len, d_model
    out = {
        "qkv_projections": 6 * N * d ** 2,
        "scores": 2 * N * d ** 2,
        "weighted_sum": 2 * N ** 2 * d,
        "output_projection": 2 * N * d ** 2,
    }
    out["total"] = sum(out.values())
    return out


def flops_caret_power(seq_len, d_model):
    n, d = seq_len, d_model
    parts = {
        "qkv_projections": 6 * n * d ^ 2,
        "scores": 2 * n ^ 2 * d,
        "weighted_sum": 2 * n ^ 2 * d,
        "output_projection": 2 * n * d ^ 2,
    }
    parts["total"] = sum(parts.values())
    return parts


def flops_numpy_ints(seq_len, d_model):
    def matmul(m, k, n):
        return np.prod([2, m, k, n])

    n, d = seq_len, d_model
    parts = {
        "qkv_projections": 3 * matmul(n, d, d),
        "scores": matmul(n, d, n),
        "weighted_sum": matmul(n, n, d),
        "output_projection": matmul(n, d, d),
    }
    parts["total"] = sum(parts.values())
    return parts


def flops_per_matmul_helper(seq_len, d_model):
    def mm(m, k, n):
        return 2 * m * k * n  # one multiply-add per (row, inner, column)

    heads = 1
    for h in range(2, d_model + 1):  # any head count gives the same work; pick one
        if d_model % h == 0:
            heads = h
            break
    dh = d_model // heads
    result = {
        "qkv_projections": sum(mm(seq_len, d_model, d_model) for _ in "qkv"),
        "scores": sum(mm(seq_len, dh, seq_len) for _ in range(heads)),
        "weighted_sum": sum(mm(seq_len, seq_len, dh) for _ in range(heads)),
        "output_projection": mm(seq_len, d_model, d_model),
    }
    result["total"] = sum(result.values())
    return result


def flops_factored(seq_len, d_model):
    n, d = int(seq_len), int(d_model)
    proj_unit = 2 * n * d * d
    attn_unit = 2 * n * n * d
    return {"qkv_projections": 3 * proj_unit, "scores": attn_unit, "weighted_sum": attn_unit,
            "output_projection": proj_unit, "total": 4 * n * d * (2 * d + n)}


# ============================================================================ crossover_seq_len
def crossover_true_division(d_model):
    return 8 * d_model ** 2 / (4 * d_model)


def crossover_forgets_output_projection(d_model):
    # 4 N^2 d = 6 N d^2
    return 6 * d_model // 4


def crossover_scores_only(d_model):
    # 2 N^2 d = 8 N d^2
    return 8 * d_model // 2


def crossover_macs_vs_flops(d_model):
    # projections 4 N d^2 (multiply-adds) against the N^2 terms 4 N^2 d (FLOPs)
    return 4 * d_model * d_model // (4 * d_model)


def crossover_precedence(d_model):
    return 8 * d_model ** 2 // 4 * d_model


def crossover_first_exceeding(d_model):
    # the first N at which the N^2 terms are larger than the projections
    return 2 * d_model + 1


def crossover_search(d_model):
    n = 1
    while 4 * n * n * d_model < 8 * n * d_model * d_model:
        n += 1
    return n


def crossover_integer_ratio(d_model):
    projection_per_token = 8 * d_model * d_model  # 8 N d^2 / N
    quadratic_per_token_sq = 4 * d_model  # 4 N^2 d / N^2
    return projection_per_token // quadratic_per_token_sq


# ============================================================================ mha_param_count
def params_scalar_bias(d_model, bias=True):
    weights = 4 * d_model * d_model
    return weights + (4 if bias else 0)


def params_three_matrices(d_model, bias=True):
    d = d_model
    total = 3 * d * d
    if bias:
        total += 3 * d
    return total


def params_bias_is_not_none(d_model, bias=True):
    d = d_model
    n = 4 * d * d
    if bias is not None:
        n += 4 * d
    return n


def params_math_pow(d_model, bias=True):
    count = 4 * math.pow(d_model, 2)
    if bias:
        count += 4 * d_model
    return count


def params_conditional_precedence(d_model, bias=True):
    return 4 * d_model ** 2 + 4 * d_model if bias else 0


def params_bytes_fp32(d_model, bias=True):
    n_params = 4 * d_model * d_model + (4 * d_model if bias else 0)
    return n_params * 4  # float32 weights


def params_shape_list(d_model, bias=True):
    shapes = [(d_model, d_model)] * 4  # W_q, W_k, W_v, W_o
    total = sum(rows * cols for rows, cols in shapes)
    if bias:
        total += sum(cols for _, cols in shapes)
    return total


def params_factored(d_model, bias=True):
    return 4 * d_model * (d_model + int(bool(bias)))


ENTRIES = [
    Entry("mha_flops", "wrong", "counts_multiply_adds",
          "Every term counts multiply-adds (e.g. 3 N d^2, N^2 d) instead of FLOPs, so all "
          "values are half the contract's (one multiply-add = 2 FLOPs).",
          flops_counts_macs),
    Entry("mha_flops", "wrong", "total_misses_output_projection",
          "The parts are right but the total adds only the QKV projections and the two N^2 "
          "terms, leaving out the output projection's 2 N d^2.",
          flops_total_misses_output),
    Entry("mha_flops", "wrong", "causal_halving",
          "The scores and weighted-sum terms are halved as if a causal mask saved half the "
          "work, although the contract counts dense attention (2 N^2 d each).",
          flops_causal_halving),
    Entry("mha_flops", "wrong", "scores_exponent_swapped",
          "The scores term is written 2 N d^2 instead of 2 N^2 d (the square on the wrong "
          "variable), which also makes the total wrong unless N == d.",
          flops_score_exponent_swapped),
    Entry("mha_flops", "wrong", "caret_as_power",
          "It writes powers with ^, which in Python is bitwise XOR (and binds looser than *), "
          "so e.g. 6 * n * d ^ 2 computes (6 n d) XOR 2 instead of 6 n d^2.",
          flops_caret_power),
    Entry("mha_flops", "wrong", "numpy_integers",
          "The counts are computed with np.prod, so the dict holds numpy int64 values instead "
          "of the plain Python ints the contract requires.",
          flops_numpy_ints),
    Entry("mha_flops", "right", "per_head_matmul_helper", None, flops_per_matmul_helper),
    Entry("mha_flops", "right", "factored_units", None, flops_factored),

    Entry("crossover_seq_len", "wrong", "true_division_float",
          "It divides with /, so it returns the float 2.0 * d_model instead of a plain int.",
          crossover_true_division),
    Entry("crossover_seq_len", "wrong", "forgets_output_projection",
          "It equates the N^2 terms with the QKV projections only (6 N d^2), returning "
          "3 d_model // 2 instead of 2 d_model.",
          crossover_forgets_output_projection),
    Entry("crossover_seq_len", "wrong", "scores_term_only",
          "Only the scores term 2 N^2 d is compared with the projections, giving 4 d_model "
          "instead of 2 d_model.",
          crossover_scores_only),
    Entry("crossover_seq_len", "wrong", "macs_against_flops",
          "The projections are counted in multiply-adds (4 N d^2) but the N^2 terms in FLOPs "
          "(4 N^2 d), so it returns d_model instead of 2 d_model.",
          crossover_macs_vs_flops),
    Entry("crossover_seq_len", "wrong", "precedence_missing_parentheses",
          "8 * d_model ** 2 // 4 * d_model evaluates as (8 d^2 // 4) * d = 2 d^3 because the "
          "denominator is not parenthesised.",
          crossover_precedence),
    Entry("crossover_seq_len", "wrong", "first_n_exceeding",
          "It returns 2 d_model + 1, the first N where the N^2 terms exceed the projections, "
          "instead of the N where they are equal.",
          crossover_first_exceeding),
    Entry("crossover_seq_len", "right", "linear_search", None, crossover_search),
    Entry("crossover_seq_len", "right", "integer_ratio_of_coefficients", None,
          crossover_integer_ratio),

    Entry("mha_param_count", "wrong", "one_bias_per_matrix",
          "It adds 4 bias parameters (one per matrix) instead of 4 d_model (one bias vector "
          "of length d_model per projection).",
          params_scalar_bias),
    Entry("mha_param_count", "wrong", "forgets_output_projection",
          "Only W_q, W_k and W_v (and their biases) are counted, 3 d^2 + 3 d; the output "
          "projection W_o is left out.",
          params_three_matrices),
    Entry("mha_param_count", "wrong", "bias_checked_against_none",
          "The bias test is `bias is not None`, which is true for bias=False too, so the "
          "4 d_model biases are always added.",
          params_bias_is_not_none),
    Entry("mha_param_count", "wrong", "math_pow_float",
          "math.pow returns a float, so it returns e.g. 2363904.0 instead of a plain int.",
          params_math_pow),
    Entry("mha_param_count", "wrong", "conditional_expression_precedence",
          "The conditional expression binds loosest: `4*d**2 + 4*d if bias else 0` returns 0 "
          "for bias=False instead of 4 d^2.",
          params_conditional_precedence),
    Entry("mha_param_count", "wrong", "bytes_instead_of_count",
          "It multiplies the parameter count by 4 (float32 bytes), returning memory in bytes "
          "instead of the number of parameters.",
          params_bytes_fp32),
    Entry("mha_param_count", "right", "sum_over_shapes", None, params_shape_list),
    Entry("mha_param_count", "right", "factored_formula", None, params_factored),
]
