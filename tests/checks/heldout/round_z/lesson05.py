"""Held-out catalogue, lesson 05 (mha_flops, crossover_seq_len, mha_param_count): plain ints."""

import math
from fractions import Fraction

import numpy as np
import torch

from entry import Entry


# ------------------------------------------------------------------------------ mha_flops (wrong)
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


def flops_paren_output(seq_len, d_model):
    qkv = 6 * seq_len * d_model ** 2
    scores = 2 * seq_len ** 2 * d_model
    mix = 2 * seq_len ** 2 * d_model
    proj = 2 * (seq_len * d_model) ** 2
    return {"qkv_projections": qkv, "scores": scores, "weighted_sum": mix,
            "output_projection": proj, "total": qkv + scores + mix + proj}


def flops_math_pow(seq_len, d_model):
    N, d = seq_len, d_model
    res = {
        "qkv_projections": 6 * N * math.pow(d, 2),
        "scores": 2 * math.pow(N, 2) * d,
        "weighted_sum": 2 * math.pow(N, 2) * d,
        "output_projection": 2 * N * math.pow(d, 2),
    }
    res["total"] = 8 * N * math.pow(d, 2) + 4 * math.pow(N, 2) * d
    return res


def flops_key_typo(seq_len, d_model):
    n, d = seq_len, d_model
    qkv, sc, ws, op = 6 * n * d * d, 2 * n * n * d, 2 * n * n * d, 2 * n * d * d
    return {"qkv_projections": qkv, "scores": sc, "weighted_sums": ws,
            "output_projection": op, "total": qkv + sc + ws + op}


def flops_scores_n_d_swapped(seq_len, d_model):
    n, d = seq_len, d_model
    proj_qkv = 3 * (2 * n * d * d)
    scores = 2 * n * d * d  # (N, d) @ (d, N)
    weighted = 2 * n * n * d
    out_proj = 2 * n * d * d
    return {"qkv_projections": proj_qkv, "scores": scores, "weighted_sum": weighted,
            "output_projection": out_proj,
            "total": proj_qkv + scores + weighted + out_proj}


def flops_total_without_output(seq_len, d_model):
    n, d = seq_len, d_model
    parts = {"qkv_projections": 6 * n * d * d, "scores": 2 * n * n * d,
             "weighted_sum": 2 * n * n * d}
    parts["total"] = sum(parts.values())
    parts["output_projection"] = 2 * n * d * d
    return parts


# ------------------------------------------------------------------------------ mha_flops (right)
def flops_from_shapes(seq_len, d_model):
    def mm(m, k, n):  # (m, k) @ (k, n): m*n dot products of length k, 2 FLOPs per multiply-add
        return 2 * m * k * n

    N, D = int(seq_len), int(d_model)
    table = {
        "qkv_projections": sum(mm(N, D, D) for _ in ("q", "k", "v")),
        "scores": mm(N, D, N),
        "weighted_sum": mm(N, N, D),
        "output_projection": mm(N, D, D),
    }
    table["total"] = sum(table.values())
    return table


def flops_factored(seq_len, d_model):
    n, d = seq_len, d_model
    nd = n * d
    return {"qkv_projections": 6 * nd * d, "scores": 2 * nd * n, "weighted_sum": 2 * nd * n,
            "output_projection": 2 * nd * d, "total": 4 * nd * (2 * d + n)}


# ---------------------------------------------------------------------- crossover_seq_len (wrong)
def crossover_no_factor(d_model):
    return d_model


def crossover_true_division(d_model):
    return 8 * d_model ** 2 / (4 * d_model)


def crossover_one_quadratic_term(d_model):
    # 2 N^2 d = 8 N d^2
    return 4 * d_model


def crossover_without_output_projection(d_model):
    # 4 N^2 d = 6 N d^2
    return 6 * d_model // 4


def crossover_cancel_n_twice(d_model):
    # 4 N^2 d = 8 N d^2  ->  N^2 = 2 d^2
    return int(math.sqrt(2 * d_model ** 2))


def crossover_first_exceeding(d_model):
    n = 1
    while 4 * n * n * d_model <= 8 * n * d_model * d_model:
        n += 1
    return n


# ---------------------------------------------------------------------- crossover_seq_len (right)
def crossover_search(d_model):
    n = 1
    while 4 * n * n * d_model < 8 * n * d_model * d_model:
        n += 1
    return n


def crossover_fraction(d_model):
    return int(Fraction(8 * d_model * d_model, 4 * d_model))


# ------------------------------------------------------------------------ mha_param_count (wrong)
def params_conditional_precedence(d_model, bias=True):
    return 4 * d_model ** 2 + 4 * d_model if bias else 0


def params_no_output_projection(d_model, bias=True):
    weights = 3 * d_model * d_model
    biases = 3 * d_model if bias else 0
    return weights + biases


def params_one_bias_vector(d_model, bias=True):
    total = 4 * d_model * d_model
    if bias:
        total += d_model
    return total


def params_float_accumulator(d_model, bias=True):
    extra = 0.0
    if bias:
        extra = 4 * d_model
    return 4 * d_model ** 2 + extra


def params_bias_flag_as_width(d_model, bias=True):
    return 4 * d_model ** 2 + (4 * bias if bias else 0)


def params_flag_ignored(d_model, bias=True):
    return 4 * d_model * (d_model + 1)


# ------------------------------------------------------------------------ mha_param_count (right)
def params_count_array_sizes(d_model, bias=True):
    mats = [np.zeros((d_model, d_model)) for _ in range(4)]
    vecs = [np.zeros(d_model) for _ in range(4)] if bias else []
    return sum(a.size for a in mats + vecs)


def params_torch_module(d_model, bias=True):
    layer = torch.nn.MultiheadAttention(d_model, 1, bias=bias, device="meta")
    return sum(p.numel() for p in layer.parameters())


ENTRIES = [
    Entry("mha_flops", "wrong", "one_flop_per_multiply_add", "counts a multiply-add as 1 FLOP, "
          "so every term is half the contract's", flops_one_per_madd),
    Entry("mha_flops", "wrong", "output_projection_parenthesised", "writes 2 * (N * d) ** 2 for "
          "the output projection, squaring N too: 2 N^2 d^2 instead of 2 N d^2",
          flops_paren_output),
    Entry("mha_flops", "wrong", "math_pow_floats", "uses math.pow, which returns floats, where "
          "the contract asks for plain ints", flops_math_pow),
    Entry("mha_flops", "wrong", "key_weighted_sums", "names the key 'weighted_sums' instead of "
          "the contract's 'weighted_sum'", flops_key_typo),
    Entry("mha_flops", "wrong", "scores_n_and_d_swapped", "counts the scores as 2 N d^2 (as if "
          "they were a projection) instead of 2 N^2 d", flops_scores_n_d_swapped),
    Entry("mha_flops", "wrong", "total_before_output_projection", "sums the total before the "
          "output projection is added, so the total misses 2 N d^2", flops_total_without_output),
    Entry("mha_flops", "right", "matmul_shape_table", None, flops_from_shapes),
    Entry("mha_flops", "right", "factored_closed_form", None, flops_factored),
    Entry("crossover_seq_len", "wrong", "returns_d_model", "solves N^2 d = N d^2, dropping "
          "the factors 4 and 8, and returns d_model instead of 2 d_model", crossover_no_factor),
    Entry("crossover_seq_len", "wrong", "true_division_float", "divides with /, so it returns a "
          "float (2.0 * d_model) where the contract asks for an int", crossover_true_division),
    Entry("crossover_seq_len", "wrong", "one_quadratic_term", "compares only the scores term "
          "(2 N^2 d) with the projections, giving 4 d_model instead of 2 d_model",
          crossover_one_quadratic_term),
    Entry("crossover_seq_len", "wrong", "without_output_projection", "compares the N^2 terms "
          "with the q, k, v projections only (6 N d^2), giving 1.5 d_model",
          crossover_without_output_projection),
    Entry("crossover_seq_len", "wrong", "cancels_n_twice", "cancels N twice in the algebra "
          "(N^2 = 2 d^2) and returns int(sqrt(2) d_model)", crossover_cancel_n_twice),
    Entry("crossover_seq_len", "wrong", "first_n_past_crossover", "returns the first N where "
          "the N^2 terms exceed the projections (2 d_model + 1), one past the crossover",
          crossover_first_exceeding),
    Entry("crossover_seq_len", "right", "search_loop", None, crossover_search),
    Entry("crossover_seq_len", "right", "exact_fraction", None, crossover_fraction),
    Entry("mha_param_count", "wrong", "conditional_precedence", "`4*d**2 + 4*d if bias else 0` "
          "parses as (4 d^2 + 4 d) if bias else 0, so bias=False returns 0",
          params_conditional_precedence),
    Entry("mha_param_count", "wrong", "no_output_projection", "counts only W_q, W_k, W_v and "
          "their biases (3 d^2 + 3 d), forgetting the output projection",
          params_no_output_projection),
    Entry("mha_param_count", "wrong", "one_bias_vector", "adds a single bias vector of d_model "
          "instead of four", params_one_bias_vector),
    Entry("mha_param_count", "wrong", "float_accumulator", "starts the bias count at 0.0, so "
          "bias=False returns a float instead of a plain int", params_float_accumulator),
    Entry("mha_param_count", "wrong", "bias_flag_as_width", "multiplies the bool `bias` by 4 "
          "where d_model belongs, adding 4 instead of 4 d_model", params_bias_flag_as_width),
    Entry("mha_param_count", "wrong", "bias_flag_ignored", "always adds the biases, 4 d (d + 1), "
          "ignoring bias=False", params_flag_ignored),
    Entry("mha_param_count", "right", "numpy_array_sizes", None, params_count_array_sizes),
    Entry("mha_param_count", "right", "torch_multiheadattention_meta", None, params_torch_module),
]
