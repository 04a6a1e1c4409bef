"""Lesson 05 (plain Python ints): mha_flops, crossover_seq_len, mha_param_count."""

import math
from fractions import Fraction

import torch

from entry import Entry


# ---------------------------------------------------------------- mha_flops, wrong
def _pack(qkv, scores, weighted, out):
    return {"qkv_projections": qkv, "scores": scores, "weighted_sum": weighted,
            "output_projection": out, "total": qkv + scores + weighted + out}


def flops_one_projection(seq_len, d_model):
    n, d = seq_len, d_model
    return _pack(2 * n * d * d, 2 * n * n * d, 2 * n * n * d, 2 * n * d * d)


def flops_macs(seq_len, d_model):
    n, d = seq_len, d_model
    return _pack(3 * n * d * d, n * n * d, n * n * d, n * d * d)


def flops_total_without_output(seq_len, d_model):
    n, d = seq_len, d_model
    parts = {"qkv_projections": 6 * n * d * d, "scores": 2 * n * n * d,
             "weighted_sum": 2 * n * n * d, "output_projection": 2 * n * d * d}
    parts["total"] = parts["qkv_projections"] + parts["scores"] + parts["weighted_sum"]
    return parts


def flops_causal_half(seq_len, d_model):
    n, d = seq_len, d_model
    return _pack(6 * n * d * d, n * n * d, n * n * d, 2 * n * d * d)


def flops_qkv_swapped_exponents(seq_len, d_model):
    n, d = seq_len, d_model
    return _pack(6 * n * n * d, 2 * n * n * d, 2 * n * n * d, 2 * n * d * d)


def flops_weighted_sum_nd2(seq_len, d_model):
    n, d = seq_len, d_model
    return _pack(6 * n * d * d, 2 * n * n * d, 2 * n * d * d, 2 * n * d * d)


# ---------------------------------------------------------------- mha_flops, right
def flops_from_shapes(seq_len, d_model):
    def mm(m, k, n):  # (m, k) @ (k, n)
        return 2 * m * k * n

    n, d = seq_len, d_model
    parts = {
        "qkv_projections": sum(mm(n, d, d) for _ in ("q", "k", "v")),
        "scores": mm(n, d, n),
        "weighted_sum": mm(n, n, d),
        "output_projection": mm(n, d, d),
    }
    parts["total"] = sum(parts.values())
    return parts


def flops_factored(seq_len, d_model):
    n, d = int(seq_len), int(d_model)
    return {"total": 4 * n * d * (2 * d + n), "scores": 2 * d * n ** 2,
            "weighted_sum": 2 * d * n ** 2, "qkv_projections": 6 * n * d ** 2,
            "output_projection": 2 * n * d ** 2}


# ---------------------------------------------------------------- crossover_seq_len, wrong
def cross_d(d_model):
    return d_model


def cross_true_division(d_model):
    return 8 * d_model ** 2 / (4 * d_model)


def cross_qkv_only(d_model):
    return 3 * d_model // 2


def cross_inverted_ratio(d_model):
    return d_model // 2


def cross_sqrt(d_model):
    return int(math.sqrt(2 * d_model))


def cross_scores_term_only(d_model):
    return 4 * d_model


# ---------------------------------------------------------------- crossover_seq_len, right
def cross_fraction(d_model):
    ratio = Fraction(8 * d_model * d_model, 4 * d_model)
    assert ratio.denominator == 1
    return int(ratio.numerator)


def cross_search(d_model):
    lo, hi = 1, 1
    while 4 * hi * hi * d_model < 8 * hi * d_model * d_model:
        hi *= 2
    while lo < hi:  # smallest N with 4 N^2 d >= 8 N d^2
        mid = (lo + hi) // 2
        if 4 * mid * mid * d_model >= 8 * mid * d_model * d_model:
            hi = mid
        else:
            lo = mid + 1
    return lo


# ---------------------------------------------------------------- mha_param_count, wrong
def params_one_bias(d_model, bias=True):
    return 4 * d_model ** 2 + (d_model if bias else 0)


def params_three_biases(d_model, bias=True):
    return 4 * d_model ** 2 + (3 * d_model if bias else 0)


def params_bias_is_not_none(d_model, bias=True):
    total = 4 * d_model * d_model
    if bias is not None:
        total += 4 * d_model
    return total


def params_three_matrices(d_model, bias=True):
    return 3 * d_model * d_model + (4 * d_model if bias else 0)


def params_math_pow(d_model, bias=True):
    return 4 * math.pow(d_model, 2) + (4 * d_model if bias else 0)


def params_square_augmented(d_model, bias=True):
    side = d_model + 1 if bias else d_model
    return 4 * side * side


# ---------------------------------------------------------------- mha_param_count, right
def params_torch_module(d_model, bias=True):
    layer = torch.nn.MultiheadAttention(d_model, 1, bias=bias, device="meta")
    return sum(p.numel() for p in layer.parameters())


def params_shape_table(d_model, bias=True):
    shapes = [(d_model, d_model)] * 4 + ([(d_model,)] * 4 if bias else [])
    return sum(math.prod(s) for s in shapes)


E = Entry
ENTRIES = [
    E("mha_flops", "wrong", "qkv_counted_once",
      "Counts the Q/K/V projections as a single (N, d) @ (d, d) product, 2 N d^2 instead of "
      "6 N d^2.", flops_one_projection),
    E("mha_flops", "wrong", "multiply_adds_not_flops",
      "Counts multiply-adds (one per product term) instead of FLOPs, halving every entry.",
      flops_macs),
    E("mha_flops", "wrong", "total_omits_output_projection",
      "Leaves the output projection out of the total.", flops_total_without_output),
    E("mha_flops", "wrong", "causal_saving_applied",
      "Halves the scores and weighted-sum terms for a causal mask although the count is "
      "dense.", flops_causal_half),
    E("mha_flops", "wrong", "qkv_exponents_swapped",
      "Writes the projections as 6 N^2 d instead of 6 N d^2 (exponents of N and d swapped).",
      flops_qkv_swapped_exponents),
    E("mha_flops", "wrong", "weighted_sum_as_n_d2",
      "Counts the weighted sum (N, N) @ (N, d) as 2 N d^2 instead of 2 N^2 d.",
      flops_weighted_sum_nd2),
    E("mha_flops", "right", "matmul_shape_helper", None, flops_from_shapes),
    E("mha_flops", "right", "factored_total", None, flops_factored),

    E("crossover_seq_len", "wrong", "equals_d_model",
      "Sets one N^2 term equal to one projection term, getting N = d_model instead of "
      "2 d_model.", cross_d),
    E("crossover_seq_len", "wrong", "true_division_float",
      "Solves 4 N^2 d = 8 N d^2 with /, returning a float instead of an int.",
      cross_true_division),
    E("crossover_seq_len", "wrong", "qkv_projections_only",
      "Compares with the Q/K/V projections only (6 N d^2), forgetting the output projection: "
      "N = 3 d / 2.", cross_qkv_only),
    E("crossover_seq_len", "wrong", "ratio_inverted",
      "Inverts the ratio when solving, giving d_model / 2.", cross_inverted_ratio),
    E("crossover_seq_len", "wrong", "dropped_factor_of_n",
      "Drops a factor of N while solving and takes sqrt(2 d_model).", cross_sqrt),
    E("crossover_seq_len", "wrong", "scores_term_only",
      "Compares only the scores term (2 N^2 d) with all the projections (8 N d^2), giving "
      "4 d_model.", cross_scores_term_only),
    E("crossover_seq_len", "right", "exact_fraction", None, cross_fraction),
    E("crossover_seq_len", "right", "bisection_search", None, cross_search),

    E("mha_param_count", "wrong", "one_bias_vector",
      "Adds a single bias vector of d instead of one per projection (4 d).", params_one_bias),
    E("mha_param_count", "wrong", "output_bias_forgotten",
      "Counts biases for Q, K and V but forgets the output projection's bias (3 d).",
      params_three_biases),
    E("mha_param_count", "wrong", "bias_is_not_none_test",
      "Tests `bias is not None`, which is also true for bias=False, so the biases are always "
      "counted.", params_bias_is_not_none),
    E("mha_param_count", "wrong", "output_matrix_forgotten",
      "Counts three weight matrices (3 d^2), forgetting W_o.", params_three_matrices),
    E("mha_param_count", "wrong", "math_pow_float",
      "Uses math.pow for d^2, which returns a float instead of the plain int the contract "
      "asks for.", params_math_pow),
    E("mha_param_count", "wrong", "bias_as_square_augmented_matrix",
      "Counts each biased projection as a (d+1) x (d+1) matrix instead of d x d weights plus "
      "d biases.", params_square_augmented),
    E("mha_param_count", "right", "torch_module_on_meta", None, params_torch_module),
    E("mha_param_count", "right", "shape_table", None, params_shape_table),
]
