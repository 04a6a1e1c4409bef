"""Round l, lesson 05 (FLOPs and parameters, plain Python ints)."""

from __future__ import annotations

import math
from fractions import Fraction

import torch

from entry import Entry

# ============================================================================ mha_flops


def flops_macs(seq_len, d_model):
    n, d = seq_len, d_model
    parts = {
        "qkv_projections": 3 * n * d * d,
        "scores": n * n * d,
        "weighted_sum": n * n * d,
        "output_projection": n * d * d,
    }
    parts["total"] = sum(parts.values())
    return parts


def flops_xor(seq_len, d_model):
    n, d = seq_len, d_model
    qkv = 6 * n * d ^ 2
    scores = 2 * n ^ 2 * d
    weighted = 2 * n ^ 2 * d
    out = 2 * n * d ^ 2
    return {"qkv_projections": qkv, "scores": scores, "weighted_sum": weighted,
            "output_projection": out, "total": qkv + scores + weighted + out}


def flops_four_projections(seq_len, d_model):
    n, d = seq_len, d_model
    proj = 2 * n * d * d
    parts = {
        "qkv_projections": 4 * proj,
        "scores": 2 * n * n * d,
        "weighted_sum": 2 * n * n * d,
        "output_projection": proj,
    }
    parts["total"] = parts["qkv_projections"] + parts["scores"] + parts["weighted_sum"]
    return parts


def flops_causal_pairs(seq_len, d_model):
    n, d = seq_len, d_model
    pairs = n * (n + 1) // 2
    parts = {
        "qkv_projections": 6 * n * d * d,
        "scores": 2 * pairs * d,
        "weighted_sum": 2 * pairs * d,
        "output_projection": 2 * n * d * d,
    }
    parts["total"] = sum(parts.values())
    return parts


def flops_total_missing_term(seq_len, d_model):
    n, d = seq_len, d_model
    qkv = 6 * n * d * d
    scores = 2 * n * n * d
    weighted = 2 * n * n * d
    out = 2 * n * d * d
    return {"qkv_projections": qkv, "scores": scores, "weighted_sum": weighted,
            "output_projection": out, "total": qkv + scores + out}


def flops_fsum(seq_len, d_model):
    n, d = seq_len, d_model
    parts = {
        "qkv_projections": 6 * n * d * d,
        "scores": 2 * n * n * d,
        "weighted_sum": 2 * n * n * d,
        "output_projection": 2 * n * d * d,
    }
    parts["total"] = math.fsum(parts.values())
    return parts


def _mm(m, k, n):
    return 2 * m * k * n


def flops_by_products(seq_len, d_model):
    n, d = seq_len, d_model
    parts = {
        "qkv_projections": sum(_mm(n, d, d) for _ in ("q", "k", "v")),
        "scores": _mm(n, d, n),
        "weighted_sum": _mm(n, n, d),
        "output_projection": _mm(n, d, d),
    }
    parts["total"] = sum(parts.values())
    return parts


def flops_fraction_per_head(seq_len, d_model):
    n, d = Fraction(seq_len), Fraction(d_model)
    heads = 4
    d_head = d / heads
    scores = sum(2 * n * n * d_head for _ in range(heads))
    parts = {
        "qkv_projections": int(3 * 2 * n * d * d),
        "scores": int(scores),
        "weighted_sum": int(scores),
        "output_projection": int(2 * n * d * d),
    }
    parts["total"] = sum(parts.values())
    return parts


# ============================================================================ crossover_seq_len


def crossover_qkv_only(d_model):
    return int(6 * d_model ** 2 / (4 * d_model))


def crossover_scores_only(d_model):
    return 8 * d_model * d_model // (2 * d_model)


def crossover_float(d_model):
    return 8 * d_model ** 2 / (4 * d_model)


def crossover_loop_le(d_model):
    n = 1
    while 4 * n * n * d_model <= 8 * n * d_model * d_model:
        n += 1
    return n


def crossover_mixed_units(d_model):
    projections_per_token = 4 * d_model * d_model
    quadratic_per_token_pair = 4 * d_model
    return projections_per_token // quadratic_per_token_pair


def crossover_precedence(d_model):
    return 8 * d_model ** 2 // 4 * d_model


def crossover_fraction(d_model):
    n = Fraction(8 * d_model * d_model, 4 * d_model)
    assert n.denominator == 1
    return int(n)


def crossover_bisect(d_model):
    lo, hi = 1, 1
    while 4 * hi * hi * d_model < 8 * hi * d_model * d_model:
        hi *= 2
    while lo < hi:
        mid = (lo + hi) // 2
        if 4 * mid * mid * d_model < 8 * mid * d_model * d_model:
            lo = mid + 1
        else:
            hi = mid
    return lo


# ============================================================================ mha_param_count


def params_one_bias(d_model, bias=True):
    d = d_model
    return 4 * d * d + (d if bias else 0)


def params_conditional_precedence(d_model, bias=True):
    d = d_model
    return 4 * d ** 2 + 4 * d if bias else 0


def params_three_matrices(d_model, bias=True):
    d = d_model
    per_matrix = d * d + (d if bias else 0)
    return 3 * per_matrix


def params_math_pow(d_model, bias=True):
    total = 4 * math.pow(d_model, 2)
    if bias:
        total += 4 * d_model
    return total


def params_augmented(d_model, bias=True):
    return 4 * (d_model + int(bias)) ** 2


def params_none_guard(d_model, bias=True):
    count = 4 * d_model * d_model
    if bias is not None:
        count += 4 * d_model
    return count


def params_shapes(d_model, bias=True):
    shapes = [(d_model, d_model)] * 4
    if bias:
        shapes += [(d_model,)] * 4
    return sum(math.prod(s) for s in shapes)


def params_torch_module(d_model, bias=True):
    layer = torch.nn.MultiheadAttention(d_model, num_heads=1, bias=bias, device="meta")
    return int(sum(p.numel() for p in layer.parameters()))


ENTRIES = [
    Entry("mha_flops", "wrong", "macs",
          "Counts one multiply-add as 1 FLOP instead of 2, so every entry is half the "
          "contract's.",
          flops_macs),
    Entry("mha_flops", "wrong", "xor",
          "Writes the powers with ^, which in Python is bitwise XOR applied after the "
          "multiplications, not exponentiation.",
          flops_xor),
    Entry("mha_flops", "wrong", "four_projections",
          "Counts the output projection inside qkv_projections (8 N d^2 instead of 6 N d^2) "
          "and then leaves it out of the total.",
          flops_four_projections),
    Entry("mha_flops", "wrong", "causal_pairs",
          "Counts only the N(N+1)/2 causal (query, key) pairs for the scores and the weighted "
          "sum, but the contract counts dense attention.",
          flops_causal_pairs),
    Entry("mha_flops", "wrong", "total_missing_term",
          "Leaves the weighted sum out of the total.",
          flops_total_missing_term),
    Entry("mha_flops", "wrong", "fsum",
          "Adds up the total with math.fsum, which returns a float rather than the plain int "
          "the contract asks for.",
          flops_fsum),
    Entry("mha_flops", "right", "by_products", None, flops_by_products),
    Entry("mha_flops", "right", "fraction_per_head", None, flops_fraction_per_head),

    Entry("crossover_seq_len", "wrong", "qkv_only",
          "Sets the N^2 terms equal to the Q, K, V projections only (6 N d^2), leaving out "
          "the output projection, so it gets 1.5 d_model.",
          crossover_qkv_only),
    Entry("crossover_seq_len", "wrong", "scores_only",
          "Sets only the scores term (2 N^2 d) equal to all projections, forgetting the "
          "weighted sum, so it gets 4 d_model.",
          crossover_scores_only),
    Entry("crossover_seq_len", "wrong", "float",
          "Divides with /, returning a float instead of the plain int the contract asks for.",
          crossover_float),
    Entry("crossover_seq_len", "wrong", "loop_le",
          "Keeps stepping while the quadratic terms are <= the projections, so the loop "
          "overshoots the crossover by one.",
          crossover_loop_le),
    Entry("crossover_seq_len", "wrong", "mixed_units",
          "Counts the projections in multiply-adds (4 d^2 per token) but the quadratic terms "
          "in FLOPs (4 d per pair), so it gets d_model instead of 2 d_model.",
          crossover_mixed_units),
    Entry("crossover_seq_len", "wrong", "precedence",
          "Writes 8 * d ** 2 // 4 * d, which Python evaluates left to right as "
          "(8 d^2 // 4) * d = 2 d^3 instead of dividing by 4 d.",
          crossover_precedence),
    Entry("crossover_seq_len", "right", "fraction", None, crossover_fraction),
    Entry("crossover_seq_len", "right", "bisect", None, crossover_bisect),

    Entry("mha_param_count", "wrong", "one_bias",
          "Adds a single bias vector of d values instead of one per projection (4 d).",
          params_one_bias),
    Entry("mha_param_count", "wrong", "conditional_precedence",
          "Writes 4 d^2 + 4 d if bias else 0, where the conditional expression covers the "
          "whole sum, so bias=False gives 0.",
          params_conditional_precedence),
    Entry("mha_param_count", "wrong", "three_matrices",
          "Counts only W_q, W_k and W_v and forgets the output projection W_o.",
          params_three_matrices),
    Entry("mha_param_count", "wrong", "math_pow",
          "Uses math.pow, which returns a float, so the count is not the plain int the "
          "contract asks for.",
          params_math_pow),
    Entry("mha_param_count", "wrong", "augmented",
          "Treats the bias as an extra row and column of each matrix, (d+1)^2 per matrix "
          "instead of d^2 + d.",
          params_augmented),
    Entry("mha_param_count", "wrong", "none_guard",
          "Tests bias is not None, which is also true for bias=False, so the biases are "
          "always counted.",
          params_none_guard),
    Entry("mha_param_count", "right", "shapes", None, params_shapes),
    Entry("mha_param_count", "right", "torch_module", None, params_torch_module),
]
