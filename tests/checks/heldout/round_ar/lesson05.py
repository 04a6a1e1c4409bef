"""Held-out learners' answers, lesson 05 (mha_flops, crossover_seq_len, mha_param_count).
Plain Python ints; no mhalib."""

import math
from fractions import Fraction

import numpy as np

from entry import Entry

# ============================================================================ mha_flops


def flops_one_per_mac(seq_len, d_model):
    N, d = seq_len, d_model
    qkv = 3 * N * d * d
    scores = N * N * d
    weighted = N * N * d
    out = N * d * d
    return {"qkv_projections": qkv, "scores": scores, "weighted_sum": weighted,
            "output_projection": out, "total": qkv + scores + weighted + out}


def flops_single_projection(seq_len, d_model):
    n, d = seq_len, d_model
    parts = {
        "qkv_projections": 2 * n * d * d,
        "scores": 2 * n * n * d,
        "weighted_sum": 2 * n * n * d,
        "output_projection": 2 * n * d * d,
    }
    parts["total"] = sum(parts.values())
    return parts


def flops_weighted_sum_copy_paste(seq_len, d_model):
    res = {}
    res["qkv_projections"] = 6 * seq_len * d_model * d_model
    res["scores"] = 2 * seq_len * seq_len * d_model
    res["weighted_sum"] = 2 * seq_len * d_model * d_model
    res["output_projection"] = 2 * seq_len * d_model * d_model
    res["total"] = (res["qkv_projections"] + res["scores"] + res["weighted_sum"]
                    + res["output_projection"])
    return res


def flops_total_missing_output(seq_len, d_model):
    qkv = 6 * seq_len * d_model ** 2
    sc = 2 * seq_len ** 2 * d_model
    ws = 2 * seq_len ** 2 * d_model
    op = 2 * seq_len * d_model ** 2
    return {"qkv_projections": qkv, "scores": sc, "weighted_sum": ws,
            "output_projection": op, "total": qkv + sc + ws}


def flops_math_pow(seq_len, d_model):
    proj = 2 * seq_len * math.pow(d_model, 2)
    attn = 2 * math.pow(seq_len, 2) * d_model
    out = {"qkv_projections": 3 * proj, "scores": attn, "weighted_sum": attn,
           "output_projection": proj}
    out["total"] = 4 * proj + 2 * attn
    return out


def flops_xor(seq_len, d_model):
    N, d = seq_len, d_model
    result = {
        "qkv_projections": 6 * N * d ^ 2,
        "scores": 2 * N ** 2 * d,
        "weighted_sum": 2 * N ** 2 * d,
        "output_projection": 2 * N * d ** 2,
    }
    result["total"] = 8 * N * d ** 2 + 4 * N ** 2 * d
    return result


def flops_matmul_helper(seq_len, d_model):
    def mm(m, k, n):  # (m, k) @ (k, n): m*n dot products of length k
        return 2 * m * k * n

    n, d = seq_len, d_model
    counts = {
        "qkv_projections": sum(mm(n, d, d) for _ in ("q", "k", "v")),
        "scores": mm(n, d, n),
        "weighted_sum": mm(n, n, d),
        "output_projection": mm(n, d, d),
    }
    counts["total"] = sum(counts.values())
    return counts


def flops_factored(seq_len, d_model):
    n, d = int(seq_len), int(d_model)
    nd = n * d
    return {
        "qkv_projections": 6 * nd * d,
        "scores": 2 * nd * n,
        "weighted_sum": 2 * nd * n,
        "output_projection": 2 * nd * d,
        "total": 4 * nd * (2 * d + n),
    }


# ============================================================================ crossover_seq_len


def crossover_scores_only(d_model):
    # 2 N^2 d (scores) = 8 N d^2  ->  N = 4 d
    return 4 * d_model


def crossover_without_output_proj(d_model):
    # 4 N^2 d = 6 N d^2 (q, k, v)  ->  N = 3 d / 2
    return 3 * d_model // 2


def crossover_precedence(d_model):
    return 8 * d_model ** 2 // 4 * d_model


def crossover_dropped_n(d_model):
    # N^2 * 4 d = 8 d^2  ->  N = sqrt(2 d)
    return math.isqrt(2 * d_model)


def crossover_loop_off_by_one(d_model):
    n = 1
    while 4 * n * n * d_model < 8 * n * d_model * d_model:
        n += 1
    return n - 1


def crossover_numpy_search(d_model):
    ns = np.arange(1, 4 * d_model + 1)
    reached = 4 * ns ** 2 * d_model >= 8 * ns * d_model ** 2
    return ns[np.argmax(reached)]


def crossover_loop_search(d_model):
    n = 1
    while 4 * n * n * d_model < 8 * n * d_model * d_model:
        n += 1
    return n


def crossover_fraction(d_model):
    return int(Fraction(8 * d_model * d_model, 4 * d_model))


# ============================================================================ mha_param_count


def params_single_bias(d_model, bias=True):
    d = d_model
    return 4 * d * d + (d if bias else 0)


def params_bias_is_not_none(d_model, bias=True):
    total = 4 * d_model * d_model
    if bias is not None:
        total += 4 * d_model
    return total


def params_conditional_precedence(d_model, bias=True):
    return 4 * d_model * d_model + 4 * d_model if bias else 0


def params_three_matrices(d_model, bias=True):
    weights = 3 * d_model ** 2
    biases = 3 * d_model
    return weights + biases if bias else weights


def params_float_power(d_model, bias=True):
    n = 4 * d_model ** 2.0
    if bias:
        n += 4 * d_model
    return n


def params_homogeneous(d_model, bias=True):
    if bias:
        return 4 * (d_model + 1) ** 2
    return 4 * d_model ** 2


def params_shape_list(d_model, bias=True):
    shapes = [(d_model, d_model)] * 4
    if bias:
        shapes += [(d_model,)] * 4
    return sum(int(np.prod(s)) for s in shapes)


def params_torch_module(d_model, bias=True):
    import torch

    layer = torch.nn.MultiheadAttention(d_model, 1, bias=bias)
    return int(sum(p.numel() for p in layer.parameters()))


ENTRIES = [
    Entry("mha_flops", "wrong", "one_flop_per_multiply_add",
          "counts one multiply-add as 1 FLOP instead of 2, so every term is half the "
          "contract's",
          flops_one_per_mac),
    Entry("mha_flops", "wrong", "one_projection_for_qkv",
          "counts the q, k, v projections as a single (N, d) @ (d, d) product, 2 N d^2 instead "
          "of 6 N d^2",
          flops_single_projection),
    Entry("mha_flops", "wrong", "weighted_sum_copy_paste",
          "the weighted sum is written 2 N d^2 (copied from the projection line) instead of "
          "2 N^2 d",
          flops_weighted_sum_copy_paste),
    Entry("mha_flops", "wrong", "total_without_output_projection",
          "the total adds the q/k/v projections and the two N^2 terms but forgets the output "
          "projection",
          flops_total_missing_output),
    Entry("mha_flops", "wrong", "math_pow_floats",
          "math.pow returns floats, so the counts are floats instead of the plain ints the "
          "contract asks for",
          flops_math_pow),
    Entry("mha_flops", "wrong", "xor_for_power",
          "`6 * N * d ^ 2` uses ^, Python's bitwise XOR, not a power, so the projection count "
          "is (6 N d) XOR 2",
          flops_xor),
    Entry("mha_flops", "right", "matmul_helper", None, flops_matmul_helper),
    Entry("mha_flops", "right", "factored_closed_form", None, flops_factored),

    Entry("crossover_seq_len", "wrong", "scores_term_only",
          "sets only the scores term 2 N^2 d equal to the projections, leaving out the "
          "weighted sum, and gets 4 d_model instead of 2 d_model",
          crossover_scores_only),
    Entry("crossover_seq_len", "wrong", "output_projection_left_out",
          "compares the N^2 terms with the q/k/v projections only (6 N d^2), forgetting the "
          "output projection, so it returns 3 d_model // 2",
          crossover_without_output_proj),
    Entry("crossover_seq_len", "wrong", "floor_division_precedence",
          "`8 * d ** 2 // 4 * d` evaluates as (8 d^2 // 4) * d = 2 d^3: the denominator 4 d "
          "needs parentheses",
          crossover_precedence),
    Entry("crossover_seq_len", "wrong", "n_not_cancelled",
          "drops the N on the projection side of 4 N^2 d = 8 N d^2 and solves N^2 = 2 d, "
          "returning isqrt(2 d_model)",
          crossover_dropped_n),
    Entry("crossover_seq_len", "wrong", "loop_returns_n_minus_1",
          "the search loop stops at the crossover but returns n - 1, one short",
          crossover_loop_off_by_one),
    Entry("crossover_seq_len", "wrong", "numpy_integer",
          "the vectorised search returns a numpy integer (np.int64) picked from an array, not "
          "the plain Python int the contract asks for",
          crossover_numpy_search),
    Entry("crossover_seq_len", "right", "loop_search", None, crossover_loop_search),
    Entry("crossover_seq_len", "right", "exact_fraction", None, crossover_fraction),

    Entry("mha_param_count", "wrong", "one_bias_vector",
          "adds a single bias vector of d_model instead of one for each of the four "
          "projections (4 d_model)",
          params_single_bias),
    Entry("mha_param_count", "wrong", "bias_is_not_none",
          "tests `bias is not None`, which is true for bias=False too, so the biases are "
          "always counted",
          params_bias_is_not_none),
    Entry("mha_param_count", "wrong", "conditional_precedence",
          "`4 d^2 + 4 d if bias else 0` applies the conditional to the whole sum, so "
          "bias=False returns 0 instead of 4 d^2",
          params_conditional_precedence),
    Entry("mha_param_count", "wrong", "output_projection_forgotten",
          "counts only W_q, W_k, W_v (3 d^2, 3 d) and forgets the output projection W_o",
          params_three_matrices),
    Entry("mha_param_count", "wrong", "float_exponent",
          "`d_model ** 2.0` is a float, so the count is a float instead of a plain int",
          params_float_power),
    Entry("mha_param_count", "wrong", "bias_as_extra_row_and_column",
          "folds the bias into an augmented (d+1) x (d+1) matrix, counting 4 (d+1)^2 instead "
          "of 4 d^2 + 4 d",
          params_homogeneous),
    Entry("mha_param_count", "right", "shape_list_product", None, params_shape_list),
    Entry("mha_param_count", "right", "torch_multihead_module", None, params_torch_module),
]
