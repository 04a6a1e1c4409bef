"""Held-out learners' answers, lesson 05 (mha_flops, crossover_seq_len, mha_param_count)."""

import math
from fractions import Fraction

import numpy as np
import torch

from entry import Entry


# ----------------------------------------------------------------------------- mha_flops, wrong
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


def flops_total_missing_output(seq_len, d_model):
    N, d = seq_len, d_model
    qkv = 6 * N * d * d
    scores = 2 * N * N * d
    wsum = 2 * N * N * d
    out_proj = 2 * N * d * d
    return {"qkv_projections": qkv, "scores": scores, "weighted_sum": wsum,
            "output_projection": out_proj, "total": qkv + scores + wsum}


def flops_single_projection(seq_len, d_model):
    proj = 2 * seq_len * d_model * d_model
    attn = 2 * seq_len * seq_len * d_model
    result = {"qkv_projections": proj, "scores": attn, "weighted_sum": attn,
              "output_projection": proj}
    result["total"] = sum(result.values())
    return result


def flops_math_pow(seq_len, d_model):
    r = {
        "qkv_projections": 6 * seq_len * math.pow(d_model, 2),
        "scores": 2 * math.pow(seq_len, 2) * d_model,
        "weighted_sum": 2 * math.pow(seq_len, 2) * d_model,
        "output_projection": 2 * seq_len * math.pow(d_model, 2),
    }
    r["total"] = r["qkv_projections"] + r["scores"] + r["weighted_sum"] + r["output_projection"]
    return r


def flops_causal_half(seq_len, d_model):
    n, d = seq_len, d_model
    pairs = n * (n + 1) // 2  # query i looks at keys 0..i
    parts = {
        "qkv_projections": 6 * n * d * d,
        "scores": 2 * pairs * d,
        "weighted_sum": 2 * pairs * d,
        "output_projection": 2 * n * d * d,
    }
    parts["total"] = sum(parts.values())
    return parts


def flops_caret_power(seq_len, d_model):
    N, d = seq_len, d_model
    f = {
        "qkv_projections": 6 * N * d ^ 2,
        "scores": 2 * N ^ 2 * d,
        "weighted_sum": 2 * N ^ 2 * d,
        "output_projection": 2 * N * d ^ 2,
    }
    f["total"] = 8 * N * d ^ 2 + 4 * N ^ 2 * d
    return f


# ----------------------------------------------------------------------------- mha_flops, right
def flops_from_matmul_shapes(seq_len, d_model):
    def mm(m, k, n):  # an (m, k) @ (k, n) product: m*n dot products of k multiply-adds
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


def flops_per_head_loop(seq_len, d_model):
    heads = 1
    for h in range(1, d_model + 1):  # any head count that divides d_model gives the same work
        if d_model % h == 0:
            heads = h
    d_head = d_model // heads
    scores = sum(2 * seq_len * d_head * seq_len for _ in range(heads))
    wsum = sum(2 * seq_len * seq_len * d_head for _ in range(heads))
    qkv = int(np.prod([3, 2, seq_len, d_model, d_model], dtype=object))
    out = 2 * seq_len * d_model * d_model
    return {"qkv_projections": qkv, "scores": scores, "weighted_sum": wsum,
            "output_projection": out, "total": qkv + scores + wsum + out}


# ----------------------------------------------------------------------------- crossover, wrong
def crossover_equals_d(d_model):
    return d_model


def crossover_true_division(d_model):
    return 8 * d_model ** 2 / (4 * d_model)


def crossover_ratio_inverted(d_model):
    return (4 * d_model) // 8


def crossover_one_n2_term(d_model):
    # 2 N^2 d = 8 N d^2
    return 8 * d_model // 2


def crossover_three_projections(d_model):
    # 4 N^2 d = 6 N d^2
    return 6 * d_model // 4


def crossover_precedence(d_model):
    return 8 * d_model * d_model // 4 * d_model


# ----------------------------------------------------------------------------- crossover, right
def crossover_search(d_model):
    n = 1
    while 4 * n * n * d_model < 8 * n * d_model * d_model:
        n += 1
    return n


def crossover_fraction(d_model):
    return int(Fraction(8 * d_model * d_model, 4 * d_model))


# ----------------------------------------------------------------------------- param count, wrong
def params_scalar_bias(d_model, bias=True):
    return 4 * d_model * d_model + (4 if bias else 0)


def params_bias_ignored(d_model, bias=True):
    weights = 4 * d_model ** 2
    biases = 4 * d_model
    return weights + biases


def params_three_matrices(d_model, bias=True):
    d = d_model
    total = 3 * d * d
    if bias:
        total += 3 * d
    return total


def params_conditional_precedence(d_model, bias=True):
    return 4 * d_model ** 2 + 4 * d_model if bias else 0


def params_float(d_model, bias=True):
    count = 4 * d_model ** 2
    if bias:
        count = count * (1 + 1 / d_model)
    return count


def params_no_output_bias(d_model, bias=True):
    n = 4 * d_model * d_model
    if bias:
        n += 3 * d_model  # q, k, v biases
    return n


# ----------------------------------------------------------------------------- param count, right
def params_from_shapes(d_model, bias=True):
    shapes = [(d_model, d_model)] * 4
    if bias:
        shapes += [(d_model,)] * 4
    return int(sum(np.prod(s) for s in shapes))


def params_torch_module(d_model, bias=True):
    layer = torch.nn.MultiheadAttention(d_model, 1, bias=bias)
    return sum(p.numel() for p in layer.parameters())


ENTRIES = [
    Entry("mha_flops", "wrong", "one_flop_per_mac",
          "it counts a multiply-add as 1 FLOP instead of 2, so every entry is halved",
          flops_one_per_mac),
    Entry("mha_flops", "wrong", "total_without_output_projection",
          "the total adds the projections, scores and weighted sum but leaves out the output "
          "projection", flops_total_missing_output),
    Entry("mha_flops", "wrong", "one_projection_for_qkv",
          "qkv_projections counts one (N, d) @ (d, d) product, 2 N d^2, instead of three, "
          "6 N d^2", flops_single_projection),
    Entry("mha_flops", "wrong", "math_pow_floats",
          "math.pow returns floats, so the counts are floats instead of the plain ints the "
          "contract fixes", flops_math_pow),
    Entry("mha_flops", "wrong", "causal_half",
          "it counts only the N(N+1)/2 causal (query, key) pairs for scores and weighted sum; "
          "the exercise is dense, N^2 pairs", flops_causal_half),
    Entry("mha_flops", "wrong", "caret_as_power",
          "`^` is bitwise XOR in Python, not a power, so `6 * N * d ^ 2` is (6 N d) XOR 2",
          flops_caret_power),
    Entry("mha_flops", "right", "from_matmul_shapes", None, flops_from_matmul_shapes),
    Entry("mha_flops", "right", "per_head_sum", None, flops_per_head_loop),
    Entry("crossover_seq_len", "wrong", "returns_d_model",
          "it returns d_model, equating one N^2 term with one projection, instead of 2 d_model",
          crossover_equals_d),
    Entry("crossover_seq_len", "wrong", "true_division_float",
          "`/` returns a float (2.0 * d_model) where the contract asks for an int",
          crossover_true_division),
    Entry("crossover_seq_len", "wrong", "ratio_inverted",
          "the ratio is inverted: 4 d / 8 = d/2 instead of 8 d^2 / (4 d) = 2 d", crossover_ratio_inverted),
    Entry("crossover_seq_len", "wrong", "one_n2_term",
          "it equates only one of the two N^2 terms (2 N^2 d) with the projections, giving 4 d "
          "instead of 2 d", crossover_one_n2_term),
    Entry("crossover_seq_len", "wrong", "qkv_projections_only",
          "it leaves the output projection out of the projection terms (4 N^2 d = 6 N d^2), "
          "giving 1.5 d instead of 2 d", crossover_three_projections),
    Entry("crossover_seq_len", "wrong", "precedence",
          "`8 * d * d // 4 * d` multiplies by d after dividing by 4 instead of dividing by 4 d, "
          "giving 2 d^3", crossover_precedence),
    Entry("crossover_seq_len", "right", "search_first_n", None, crossover_search),
    Entry("crossover_seq_len", "right", "fraction", None, crossover_fraction),
    Entry("mha_param_count", "wrong", "bias_as_scalars",
          "it adds 4 (one number per matrix) for the biases instead of 4 d_model",
          params_scalar_bias),
    Entry("mha_param_count", "wrong", "bias_flag_ignored",
          "the biases are always counted, whatever `bias` says", params_bias_ignored),
    Entry("mha_param_count", "wrong", "three_matrices",
          "it counts only W_q, W_k, W_v (and their biases) and forgets the output projection "
          "W_o", params_three_matrices),
    Entry("mha_param_count", "wrong", "conditional_precedence",
          "`4*d**2 + 4*d if bias else 0` applies the conditional to the whole sum, so bias=False "
          "returns 0 instead of 4 d^2", params_conditional_precedence),
    Entry("mha_param_count", "wrong", "float_count",
          "4 d^2 (1 + 1/d) is computed with `/`, so with bias the count is a float instead of a "
          "plain int", params_float),
    Entry("mha_param_count", "wrong", "no_output_bias",
          "only the q, k, v biases are counted (3 d) and the output projection's bias is "
          "left out", params_no_output_bias),
    Entry("mha_param_count", "right", "sum_of_shapes", None, params_from_shapes),
    Entry("mha_param_count", "right", "torch_multiheadattention", None, params_torch_module),
]
