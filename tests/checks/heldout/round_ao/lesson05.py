"""Held-out catalogue, lesson 05 (flops): mha_flops, crossover_seq_len, mha_param_count."""

import math
from fractions import Fraction

import torch

from entry import Entry


# ============================================================================ mha_flops
def flops_no_factor_two(seq_len, d_model):
    n, d = seq_len, d_model
    out = {
        "qkv_projections": 3 * n * d * d,
        "scores": n * n * d,
        "weighted_sum": n * n * d,
        "output_projection": n * d * d,
    }
    out["total"] = sum(out.values())
    return out


def flops_total_misses_weighted_sum(seq_len, d_model):
    qkv = 6 * seq_len * d_model ** 2
    scores = 2 * seq_len ** 2 * d_model
    weighted = 2 * seq_len ** 2 * d_model
    proj = 2 * seq_len * d_model ** 2
    return {"qkv_projections": qkv, "scores": scores, "weighted_sum": weighted,
            "output_projection": proj, "total": qkv + scores + proj}


def flops_math_pow(seq_len, d_model):
    result = {}
    result["qkv_projections"] = 6 * seq_len * math.pow(d_model, 2)
    result["scores"] = 2 * math.pow(seq_len, 2) * d_model
    result["weighted_sum"] = 2 * math.pow(seq_len, 2) * d_model
    result["output_projection"] = 2 * seq_len * math.pow(d_model, 2)
    result["total"] = (result["qkv_projections"] + result["scores"] + result["weighted_sum"]
                       + result["output_projection"])
    return result


def flops_caret_power(seq_len, d_model):
    N, d = seq_len, d_model
    qkv = 6 * N * d ^ 2
    s = 2 * N ^ 2 * d
    ws = 2 * N ^ 2 * d
    o = 2 * N * d ^ 2
    return {"qkv_projections": qkv, "scores": s, "weighted_sum": ws,
            "output_projection": o, "total": qkv + s + ws + o}


def flops_causal_half(seq_len, d_model):
    n, d = seq_len, d_model
    pairs = n * (n + 1) // 2  # a query only looks at keys up to itself
    flops = {
        "qkv_projections": 6 * n * d * d,
        "scores": 2 * pairs * d,
        "weighted_sum": 2 * pairs * d,
        "output_projection": 2 * n * d * d,
    }
    flops["total"] = sum(flops.values())
    return flops


def flops_scores_quadratic_in_d(seq_len, d_model):
    n, d = seq_len, d_model
    parts = {
        "qkv_projections": 6 * n * d * d,
        "scores": 2 * n * d * d,
        "weighted_sum": 2 * n * n * d,
        "output_projection": 2 * n * d * d,
    }
    parts["total"] = sum(parts.values())
    return parts


def flops_matmul_shapes(seq_len, d_model):
    def matmul(m, k, n):  # (m, k) @ (k, n)
        return 2 * m * k * n

    N, D = seq_len, d_model
    counts = {
        "qkv_projections": sum(matmul(N, D, D) for _ in ("q", "k", "v")),
        "scores": matmul(N, D, N),
        "weighted_sum": matmul(N, N, D),
        "output_projection": matmul(N, D, D),
    }
    counts["total"] = sum(counts.values())
    return counts


def flops_per_token_loop(seq_len, d_model):
    keys = ("qkv_projections", "scores", "weighted_sum", "output_projection", "total")
    tally = dict.fromkeys(keys, 0)
    for _token in range(seq_len):
        tally["qkv_projections"] += 3 * (2 * d_model * d_model)
        tally["scores"] += seq_len * (2 * d_model)
        tally["weighted_sum"] += seq_len * (2 * d_model)
        tally["output_projection"] += 2 * d_model * d_model
    tally["total"] = (tally["qkv_projections"] + tally["scores"] + tally["weighted_sum"]
                      + tally["output_projection"])
    return tally


# ============================================================================ crossover_seq_len
def crossover_inverted(d_model):
    return d_model // 2


def crossover_float(d_model):
    return 8 * d_model ** 2 / (4 * d_model)


def crossover_qkv_only(d_model):
    # 4 N^2 d = 6 N d^2
    return 6 * d_model // 4


def crossover_one_quadratic_term(d_model):
    # 2 N^2 d = 8 N d^2
    return 8 * d_model // 2


def crossover_first_n_above(d_model):
    n = 2 * d_model
    return n + 1  # first N where attention is strictly bigger


def crossover_d_not_cancelled(d_model):
    # 4 N^2 d = 8 N d^2  ->  divide by 4N
    return 2 * d_model ** 2


def crossover_search(d_model):
    n = 1
    while 4 * n * n * d_model < 8 * n * d_model * d_model:
        n += 1
    return n


def crossover_fraction(d_model):
    ratio = Fraction(8 * d_model * d_model, 4 * d_model)  # N = 8 d^2 / 4 d
    return int(ratio)


# ============================================================================ mha_param_count
def params_bias_matrices(d_model, bias=True):
    total = 4 * d_model * d_model
    if bias:
        total += 4 * d_model * d_model
    return total


def params_three_biases(d_model, bias=True):
    weights = 4 * d_model ** 2
    biases = 3 * d_model  # q, k, v
    return weights + biases if bias else weights


def params_ternary_precedence(d_model, bias=True):
    return 4 * d_model ** 2 + 4 * d_model if bias else 0


def params_math_pow(d_model, bias=True):
    n = 4 * math.pow(d_model, 2)
    if bias:
        n += 4 * d_model
    return n


def params_times_two(d_model, bias=True):
    count = 4 * (d_model * 2)
    if bias:
        count += 4 * d_model
    return count


def params_scalar_bias(d_model, bias=True):
    return 4 * d_model * d_model + 4 * int(bias)


def params_torch_module(d_model, bias=True):
    layer = torch.nn.MultiheadAttention(d_model, 1, bias=bias)
    return int(sum(p.numel() for p in layer.parameters()))


def params_shape_list(d_model, bias=True):
    shapes = [(d_model, d_model)] * 4
    if bias:
        shapes += [(d_model,)] * 4
    return sum(math.prod(s) for s in shapes)


ENTRIES = [
    # mha_flops
    Entry("mha_flops", "wrong", "multiply_add_counted_once",
          "counts one multiply-add as 1 FLOP instead of 2, so every entry is half the answer",
          flops_no_factor_two),
    Entry("mha_flops", "wrong", "total_misses_weighted_sum",
          "the total adds the projections, the scores and the output projection but leaves out "
          "the weighted sum (8 N d^2 + 2 N^2 d instead of 8 N d^2 + 4 N^2 d)",
          flops_total_misses_weighted_sum),
    Entry("mha_flops", "wrong", "math_pow_floats",
          "uses math.pow for the squares, which returns floats, so the dict holds floats "
          "instead of plain ints",
          flops_math_pow),
    Entry("mha_flops", "wrong", "caret_as_power",
          "writes d ^ 2 for d squared, but ^ is bitwise XOR in Python and binds looser than *, "
          "so 6 * N * d ^ 2 is (6 N d) XOR 2",
          flops_caret_power),
    Entry("mha_flops", "wrong", "causal_half_counted",
          "counts only the N(N+1)/2 causal (query, key) pairs for the scores and the weighted "
          "sum, although the contract counts dense attention",
          flops_causal_half),
    Entry("mha_flops", "wrong", "scores_quadratic_in_d",
          "counts the scores as 2 N d^2 (like a projection) instead of 2 N^2 d",
          flops_scores_quadratic_in_d),
    Entry("mha_flops", "right", "matmul_shape_helper", None, flops_matmul_shapes),
    Entry("mha_flops", "right", "per_token_loop", None, flops_per_token_loop),
    # crossover_seq_len
    Entry("crossover_seq_len", "wrong", "ratio_inverted",
          "solves 4 N^2 d = 8 N d^2 upside down and returns d_model // 2 instead of 2 * d_model",
          crossover_inverted),
    Entry("crossover_seq_len", "wrong", "true_division_float",
          "divides with `/`, so it returns a float (2.0 * d_model) instead of a plain int",
          crossover_float),
    Entry("crossover_seq_len", "wrong", "forgets_output_projection",
          "compares the N^2 terms with the three q/k/v projections only (6 N d^2), leaving out "
          "the output projection, so it returns 6 * d_model // 4 (1.5 d_model rounded down)",
          crossover_qkv_only),
    Entry("crossover_seq_len", "wrong", "one_quadratic_term",
          "counts only one N^2 term (2 N^2 d) against the projections, leaving out the "
          "weighted sum, so it returns 4 d_model",
          crossover_one_quadratic_term),
    Entry("crossover_seq_len", "wrong", "first_n_strictly_above",
          "returns 2 * d_model + 1, the first N where the N^2 terms are strictly larger, instead "
          "of the N where they are equal",
          crossover_first_n_above),
    Entry("crossover_seq_len", "wrong", "d_model_not_cancelled",
          "divides 4 N^2 d = 8 N d^2 by 4 N but not by d, returning 2 * d_model ** 2",
          crossover_d_not_cancelled),
    Entry("crossover_seq_len", "right", "search_loop", None, crossover_search),
    Entry("crossover_seq_len", "right", "fraction", None, crossover_fraction),
    # mha_param_count
    Entry("mha_param_count", "wrong", "bias_as_matrices",
          "counts each bias as a d x d matrix (4 d^2 more) instead of a vector of d numbers",
          params_bias_matrices),
    Entry("mha_param_count", "wrong", "output_bias_forgotten",
          "counts biases for q, k and v only (3 d) and forgets the output projection's bias",
          params_three_biases),
    Entry("mha_param_count", "wrong", "conditional_expression_precedence",
          "writes `4 * d ** 2 + 4 * d if bias else 0`; the conditional expression binds "
          "loosest, so bias=False returns 0 instead of 4 d^2",
          params_ternary_precedence),
    Entry("mha_param_count", "wrong", "math_pow_float",
          "uses math.pow(d_model, 2), which returns a float, so the count is a float instead of "
          "a plain int",
          params_math_pow),
    Entry("mha_param_count", "wrong", "times_two_not_squared",
          "writes d_model * 2 where d_model ** 2 belongs, counting 8 d weights instead of 4 d^2",
          params_times_two),
    Entry("mha_param_count", "wrong", "one_bias_number_per_matrix",
          "adds a single bias number per matrix (4 in all) instead of one per output feature "
          "(4 d)",
          params_scalar_bias),
    Entry("mha_param_count", "right", "torch_multiheadattention", None, params_torch_module),
    Entry("mha_param_count", "right", "shape_list_prod", None, params_shape_list),
]
