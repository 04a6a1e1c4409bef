"""Held-out catalogue, lesson 05 (mha_flops, crossover_seq_len, mha_param_count): plain ints."""

import math
from fractions import Fraction

import numpy as np

from entry import Entry


# ============================================================================ mha_flops
def flops_one_per_madd(seq_len, d_model):
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
    qkv = 6 * seq_len * d_model ** 2
    scores = 2 * seq_len ** 2 * d_model
    weighted = 2 * seq_len ** 2 * d_model
    out_proj = 2 * seq_len * d_model ** 2
    return {"qkv_projections": qkv, "scores": scores, "weighted_sum": weighted,
            "output_projection": out_proj, "total": qkv + scores + weighted}


def flops_math_pow(seq_len, d_model):
    sq = math.pow(seq_len, 2)
    res = {
        "qkv_projections": 6 * seq_len * d_model * d_model,
        "scores": 2 * sq * d_model,
        "weighted_sum": 2 * sq * d_model,
        "output_projection": 2 * seq_len * d_model * d_model,
    }
    res["total"] = sum(res.values())
    return res


def flops_key_name(seq_len, d_model):
    N, D = seq_len, d_model
    counts = {}
    counts["qkv_projections"] = 3 * (2 * N * D * D)
    counts["scores"] = 2 * N * N * D
    counts["weighted_sum"] = 2 * N * N * D
    counts["out_projection"] = 2 * N * D * D
    counts["total"] = sum(counts.values())
    return counts


def flops_scores_swapped(seq_len, d_model):
    n, d = seq_len, d_model
    qkv = 6 * n * d * d
    scores = 2 * n * d * d
    weighted_sum = 2 * n * n * d
    output = 2 * n * d * d
    return {"qkv_projections": qkv, "scores": scores, "weighted_sum": weighted_sum,
            "output_projection": output, "total": qkv + scores + weighted_sum + output}


def flops_causal_half(seq_len, d_model):
    n, d = seq_len, d_model
    proj = 2 * n * d * d
    pairs = n * (n + 1) // 2  # causal: each query sees only its past
    r = {"qkv_projections": 3 * proj, "scores": 2 * pairs * d, "weighted_sum": 2 * pairs * d,
         "output_projection": proj}
    r["total"] = sum(r.values())
    return r


def flops_matmul_helper(seq_len, d_model):
    def mm(m, k, n):
        return 2 * m * k * n

    N, d = seq_len, d_model
    result = {
        "qkv_projections": 3 * mm(N, d, d),
        "scores": mm(N, d, N),
        "weighted_sum": mm(N, N, d),
        "output_projection": mm(N, d, d),
    }
    result["total"] = (result["qkv_projections"] + result["scores"]
                       + result["weighted_sum"] + result["output_projection"])
    return result


def flops_heads_of_size_one(seq_len, d_model):
    n = int(seq_len)
    d = int(d_model)
    scores = 0
    weighted = 0
    for _head in range(d):  # d heads of width 1: same work as any split
        scores += 2 * n * n * 1
        weighted += 2 * n * n * 1
    qkv = sum(2 * n * d * d for _ in ("q", "k", "v"))
    out = 2 * n * d * d
    return {"qkv_projections": qkv, "scores": scores, "weighted_sum": weighted,
            "output_projection": out, "total": qkv + scores + weighted + out}


# ============================================================================ crossover_seq_len
def crossover_float(d_model):
    return 8 * d_model ** 2 / (4 * d_model)


def crossover_one_term_each(d_model):
    return d_model


def crossover_qkv_only(d_model):
    return 3 * d_model // 2


def crossover_scores_only(d_model):
    return 4 * d_model


def crossover_first_past(d_model):
    return 2 * d_model + 1


def crossover_inverted_ratio(d_model):
    return (4 * d_model) // 8


def crossover_search(d_model):
    d = int(d_model)
    n = 1
    while 4 * n * n * d < 8 * n * d * d:
        n += 1
    return n


def crossover_fraction(d_model):
    return int(Fraction(8 * d_model * d_model, 4 * d_model))


# ============================================================================ mha_param_count
def params_no_output_bias(d_model, bias=True):
    weights = 4 * d_model * d_model
    return weights + 3 * d_model if bias else weights


def params_is_not_none(d_model, bias=True):
    total = 4 * d_model ** 2
    if bias is not None:
        total += 4 * d_model
    return total


def params_three_matrices(d_model, bias=True):
    n = 3 * d_model * d_model
    if bias:
        n += 4 * d_model
    return n


def params_conditional_precedence(d_model, bias=True):
    return 4 * d_model ** 2 + 4 * d_model if bias else 0


def params_numpy_int(d_model, bias=True):
    count = 4 * np.square(d_model)
    if bias:
        count = count + 4 * d_model
    return count


def params_augmented_square(d_model, bias=True):
    per_matrix = (d_model + 1) ** 2 if bias else d_model ** 2
    return 4 * per_matrix


def params_per_layer_sum(d_model, bias=True):
    layers = ["q", "k", "v", "o"]
    total = 0
    for _ in layers:
        total += d_model * d_model
        if bias:
            total += d_model
    return total


def params_factored(d_model, bias=True):
    return 4 * d_model * (d_model + int(bool(bias)))


ENTRIES = [
    Entry("mha_flops", "wrong", "one_flop_per_multiply_add",
          "counts a multiply-add as one FLOP, so every term is half of what it should be",
          flops_one_per_madd),
    Entry("mha_flops", "wrong", "total_without_output_projection",
          "the total leaves out output_projection: 6 N d^2 + 4 N^2 d instead of 8 N d^2 + 4 N^2 d",
          flops_total_without_output),
    Entry("mha_flops", "wrong", "math_pow_float",
          "squares N with math.pow, which returns a float, so scores, weighted_sum and total are "
          "floats instead of plain ints",
          flops_math_pow),
    Entry("mha_flops", "wrong", "key_name_out_projection",
          "names the last product 'out_projection' instead of the contract's key "
          "'output_projection'",
          flops_key_name),
    Entry("mha_flops", "wrong", "scores_n_and_d_swapped",
          "writes the score term as 2 N d^2 (N and d swapped) instead of 2 N^2 d",
          flops_scores_swapped),
    Entry("mha_flops", "wrong", "causal_half",
          "counts only the causal (query, key) pairs, N(N+1)/2, for scores and weighted_sum, but "
          "the exercise asks for dense attention with no causal saving",
          flops_causal_half),
    Entry("mha_flops", "right", "matmul_helper", None, flops_matmul_helper),
    Entry("mha_flops", "right", "loop_over_width_one_heads", None, flops_heads_of_size_one),

    Entry("crossover_seq_len", "wrong", "true_division_float",
          "computes 8 d^2 / (4 d) with true division, returning a float instead of an int",
          crossover_float),
    Entry("crossover_seq_len", "wrong", "one_term_each_side",
          "equates a single N^2 term (2 N^2 d) with a single projection (2 N d^2), giving "
          "N = d_model instead of 2 d_model",
          crossover_one_term_each),
    Entry("crossover_seq_len", "wrong", "qkv_projections_only",
          "compares the N^2 terms with the q/k/v projections only (6 N d^2), forgetting the output "
          "projection, so it returns 3 d_model // 2",
          crossover_qkv_only),
    Entry("crossover_seq_len", "wrong", "scores_term_only",
          "keeps only the scores term (2 N^2 d) on the N^2 side, forgetting the weighted sum, so "
          "it returns 4 d_model",
          crossover_scores_only),
    Entry("crossover_seq_len", "wrong", "first_length_past_crossover",
          "returns the first N at which the N^2 terms are larger (2 d + 1) instead of the N where "
          "they are equal (off by one)",
          crossover_first_past),
    Entry("crossover_seq_len", "wrong", "ratio_inverted",
          "solves 4 N^2 d = 8 N d^2 as N = 4 d / 8 (ratio upside down), returning d_model // 2",
          crossover_inverted_ratio),
    Entry("crossover_seq_len", "right", "linear_search", None, crossover_search),
    Entry("crossover_seq_len", "right", "fraction", None, crossover_fraction),

    Entry("mha_param_count", "wrong", "no_output_bias",
          "counts biases for q, k and v only (3 d), forgetting the output projection's bias",
          params_no_output_bias),
    Entry("mha_param_count", "wrong", "bias_is_not_none",
          "tests `bias is not None`, which is also true for bias=False, so the biases are always "
          "counted",
          params_is_not_none),
    Entry("mha_param_count", "wrong", "three_weight_matrices",
          "counts three weight matrices (3 d^2), forgetting W_o",
          params_three_matrices),
    Entry("mha_param_count", "wrong", "conditional_expression_precedence",
          "`4*d**2 + 4*d if bias else 0` parses as (4 d^2 + 4 d) if bias else 0, so bias=False "
          "returns 0 instead of 4 d^2",
          params_conditional_precedence),
    Entry("mha_param_count", "wrong", "numpy_integer",
          "uses np.square, so the result is a numpy int64, not the plain Python int the lesson "
          "asks for",
          params_numpy_int),
    Entry("mha_param_count", "wrong", "augmented_matrix_squared",
          "folds the bias into the weight as a (d+1) x (d+1) matrix instead of (d+1) x d, counting "
          "4 (d+1)^2 with bias",
          params_augmented_square),
    Entry("mha_param_count", "right", "loop_over_projections", None, params_per_layer_sum),
    Entry("mha_param_count", "right", "factored_closed_form", None, params_factored),
]
