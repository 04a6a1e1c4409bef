"""Held-out catalogue, lesson 05 (mha_flops, crossover_seq_len, mha_param_count)."""

import math
from fractions import Fraction

from entry import Entry


# ============================================================================ mha_flops, wrong
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


def flops_one_projection(seq_len, d_model):
    proj = 2 * seq_len * d_model ** 2
    attn = 2 * seq_len ** 2 * d_model
    return {
        "qkv_projections": proj,
        "scores": attn,
        "weighted_sum": attn,
        "output_projection": proj,
        "total": 2 * proj + 2 * attn,
    }


def flops_total_missing_output(seq_len, d_model):
    qkv = 6 * seq_len * d_model * d_model
    sc = 2 * seq_len * seq_len * d_model
    ws = 2 * seq_len * seq_len * d_model
    op = 2 * seq_len * d_model * d_model
    return {"qkv_projections": qkv, "scores": sc, "weighted_sum": ws,
            "output_projection": op, "total": qkv + sc + ws}


def flops_math_pow(seq_len, d_model):
    res = {
        "qkv_projections": 6 * seq_len * math.pow(d_model, 2),
        "scores": 2 * math.pow(seq_len, 2) * d_model,
        "weighted_sum": 2 * math.pow(seq_len, 2) * d_model,
        "output_projection": 2 * seq_len * math.pow(d_model, 2),
    }
    res["total"] = sum(res.values())
    return res


def flops_scores_d_squared(seq_len, d_model):
    N, d = seq_len, d_model
    r = {}
    r["qkv_projections"] = 3 * (2 * N * d * d)
    r["scores"] = 2 * N * d * d
    r["weighted_sum"] = 2 * N * N * d
    r["output_projection"] = 2 * N * d * d
    r["total"] = r["qkv_projections"] + r["scores"] + r["weighted_sum"] + r["output_projection"]
    return r


def flops_causal_half(seq_len, d_model):
    n, d = seq_len, d_model
    pairs = n * (n + 1) // 2  # a query only looks at keys up to itself
    parts = {"qkv_projections": 6 * n * d * d, "scores": 2 * pairs * d,
             "weighted_sum": 2 * pairs * d, "output_projection": 2 * n * d * d}
    parts["total"] = sum(parts.values())
    return parts


# ============================================================================ mha_flops, right
def flops_matmul_helper(seq_len, d_model):
    def matmul(m, k, n):
        return 2 * m * k * n

    N, D = int(seq_len), int(d_model)
    result = {
        "qkv_projections": sum(matmul(N, D, D) for _ in ("q", "k", "v")),
        "scores": matmul(N, D, N),
        "weighted_sum": matmul(N, N, D),
        "output_projection": matmul(N, D, D),
    }
    result["total"] = sum(result[key] for key in list(result))
    return result


def flops_per_head_loop(seq_len, d_model):
    heads = d_model  # any divisor works: use one-wide heads and add them up
    d_head = d_model // heads
    scores = weighted = 0
    for _ in range(heads):
        scores += 2 * seq_len * seq_len * d_head
        weighted += 2 * seq_len * seq_len * d_head
    qkv = 6 * seq_len * d_model * d_model
    out_proj = 2 * seq_len * d_model * d_model
    return {"qkv_projections": qkv, "scores": scores, "weighted_sum": weighted,
            "output_projection": out_proj, "total": 8 * seq_len * d_model ** 2
            + 4 * seq_len ** 2 * d_model}


# ============================================================================ crossover, wrong
def cross_equals_d(d_model):
    # N^2 d = N d^2  ->  N = d
    return d_model


def cross_float(d_model):
    return 8 * d_model ** 2 / (4 * d_model)


def cross_qkv_only(d_model):
    # 4 N^2 d = 6 N d^2
    return 6 * d_model // 4


def cross_one_square_term(d_model):
    # 2 N^2 d = 8 N d^2
    return (8 * d_model * d_model) // (2 * d_model)


def cross_first_past(d_model):
    n = 1
    while 4 * n * n * d_model <= 8 * n * d_model * d_model:
        n += 1
    return n


def cross_inverted_ratio(d_model):
    return d_model * 4 // 8


# ============================================================================ crossover, right
def cross_search(d_model):
    n = 1
    while 4 * n * n * d_model < 8 * n * d_model * d_model:
        n += 1
    return n


def cross_fraction(d_model):
    return int(Fraction(8 * d_model ** 2, 4 * d_model))


# ============================================================================ param count, wrong
def params_no_w_o(d_model, bias=True):
    count = 3 * d_model * d_model
    if bias:
        count += 3 * d_model
    return count


def params_one_bias(d_model, bias=True):
    total = 4 * d_model ** 2
    if bias:
        total += d_model
    return total


def params_cond_precedence(d_model, bias=True):
    return 4 * d_model ** 2 + 4 * d_model if bias else 0


def params_times_two(d_model, bias=True):
    weights = 4 * d_model * 2
    return weights + 4 * d_model if bias else weights


def params_factored(d_model, bias=True):
    return 4 * d_model ** 2 * (1 + 1 / d_model) if bias else 4 * d_model ** 2


def params_ignores_flag(d_model, bias=True):
    w = 4 * d_model * d_model
    b = 4 * d_model
    return w + b


# ============================================================================ param count, right
def params_shapes(d_model, bias=True):
    shapes = [(d_model, d_model)] * 4
    if bias:
        shapes += [(d_model,)] * 4
    return sum(math.prod(s) for s in shapes)


def params_bool_arith(d_model, bias=True):
    return 4 * d_model * (d_model + bool(bias))


ENTRIES = [
    Entry("mha_flops", "wrong", "multiply_add_as_one",
          "counts a multiply-add as 1 FLOP instead of 2, so every term is half the right value",
          flops_mac_as_one),
    Entry("mha_flops", "wrong", "one_projection_for_qkv",
          "counts the q, k, v projections as one (N, d) @ (d, d) product, 2 N d^2 instead of "
          "6 N d^2", flops_one_projection),
    Entry("mha_flops", "wrong", "total_without_output_projection",
          "leaves the output projection out of the total", flops_total_missing_output),
    Entry("mha_flops", "wrong", "math_pow_floats",
          "uses math.pow, which returns floats, so the counts are not plain ints",
          flops_math_pow),
    Entry("mha_flops", "wrong", "scores_with_d_squared",
          "counts the scores as 2 N d^2 instead of 2 N^2 d, mixing up which size is squared",
          flops_scores_d_squared),
    Entry("mha_flops", "wrong", "causal_half",
          "counts only the causal half of the (query, key) pairs, N(N+1)/2, although the "
          "exercise is dense", flops_causal_half),
    Entry("mha_flops", "right", "matmul_helper", None, flops_matmul_helper),
    Entry("mha_flops", "right", "per_head_loop", None, flops_per_head_loop),
    Entry("crossover_seq_len", "wrong", "n_equals_d",
          "equates N^2 d with N d^2, dropping the coefficients 4 and 8, and returns d_model",
          cross_equals_d),
    Entry("crossover_seq_len", "wrong", "float_division",
          "divides with /, so it returns a float instead of an int", cross_float),
    Entry("crossover_seq_len", "wrong", "qkv_projections_only",
          "compares the N^2 terms with the q, k, v projections only (6 N d^2), forgetting the "
          "output projection, and gets 1.5 d_model", cross_qkv_only),
    Entry("crossover_seq_len", "wrong", "one_square_term",
          "compares only one N^2 term (2 N^2 d) with the projections and gets 4 d_model",
          cross_one_square_term),
    Entry("crossover_seq_len", "wrong", "first_n_past_crossover",
          "searches with <= and returns the first N where attention dominates, 2 d_model + 1, "
          "instead of the crossover itself", cross_first_past),
    Entry("crossover_seq_len", "wrong", "inverted_ratio",
          "inverts the ratio, returning d_model * 4 / 8 = d_model / 2", cross_inverted_ratio),
    Entry("crossover_seq_len", "right", "integer_search", None, cross_search),
    Entry("crossover_seq_len", "right", "fraction", None, cross_fraction),
    Entry("mha_param_count", "wrong", "forgets_w_o",
          "counts only W_q, W_k, W_v (and their biases), forgetting the output projection",
          params_no_w_o),
    Entry("mha_param_count", "wrong", "one_bias_vector",
          "adds a single bias vector of d_model instead of four", params_one_bias),
    Entry("mha_param_count", "wrong", "conditional_precedence",
          "the conditional expression binds the whole sum, so bias=False returns 0 instead of "
          "4 d^2", params_cond_precedence),
    Entry("mha_param_count", "wrong", "times_two_not_squared",
          "writes d_model * 2 where d_model ** 2 belongs", params_times_two),
    Entry("mha_param_count", "wrong", "factored_float",
          "factors the bias term as 4 d^2 (1 + 1/d), which returns a float instead of an int",
          params_factored),
    Entry("mha_param_count", "wrong", "ignores_bias_flag",
          "always adds the 4 d biases, ignoring bias=False", params_ignores_flag),
    Entry("mha_param_count", "right", "sum_of_shapes", None, params_shapes),
    Entry("mha_param_count", "right", "bool_arithmetic", None, params_bool_arith),
]
