"""Held-out catalogue (round y), lesson 05: mha_flops, crossover_seq_len, mha_param_count
(plain Python ints)."""

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


def flops_single_projection(seq_len, d_model):
    N, d = seq_len, d_model
    qkv = 2 * N * d * d
    scores = 2 * N * N * d
    wsum = 2 * N * N * d
    oproj = 2 * N * d * d
    return {"qkv_projections": qkv, "scores": scores, "weighted_sum": wsum,
            "output_projection": oproj, "total": qkv + scores + wsum + oproj}


def flops_total_without_output(seq_len, d_model):
    qkv = 6 * seq_len * d_model * d_model
    scores = 2 * seq_len * seq_len * d_model
    weighted = 2 * seq_len * seq_len * d_model
    out_proj = 2 * seq_len * d_model * d_model
    total = qkv + scores + weighted
    return {"qkv_projections": qkv, "scores": scores, "weighted_sum": weighted,
            "output_projection": out_proj, "total": total}


def flops_caret_square(seq_len, d_model):
    n, d = seq_len, d_model
    result = {
        "qkv_projections": 6 * n * d ^ 2,
        "scores": 2 * n ** 2 * d,
        "weighted_sum": 2 * n ** 2 * d,
        "output_projection": 2 * n * d ** 2,
    }
    result["total"] = (result["qkv_projections"] + result["scores"] + result["weighted_sum"]
                       + result["output_projection"])
    return result


def flops_numpy_prod(seq_len, d_model):
    parts = {
        "qkv_projections": np.prod([6, seq_len, d_model, d_model]),
        "scores": np.prod([2, seq_len, seq_len, d_model]),
        "weighted_sum": np.prod([2, seq_len, seq_len, d_model]),
        "output_projection": np.prod([2, seq_len, d_model, d_model]),
    }
    parts["total"] = sum(parts.values())
    return parts


def flops_causal_pairs(seq_len, d_model):
    n, d = seq_len, d_model
    pairs = n * (n + 1) // 2  # query i only looks at keys 0..i
    flops = {
        "qkv_projections": 6 * n * d * d,
        "scores": 2 * pairs * d,
        "weighted_sum": 2 * pairs * d,
        "output_projection": 2 * n * d * d,
    }
    flops["total"] = sum(flops.values())
    return flops


def flops_from_matmul_shapes(seq_len, d_model):
    def mm(m, k, n):  # (m, k) @ (k, n)
        return 2 * m * k * n

    n, d = int(seq_len), int(d_model)
    qkv = sum(mm(n, d, d) for _ in ("q", "k", "v"))
    scores = mm(n, d, n)  # all heads together: (N, d/H) @ (d/H, N), H times
    weighted = mm(n, n, d)
    out_proj = mm(n, d, d)
    return {"qkv_projections": qkv, "scores": scores, "weighted_sum": weighted,
            "output_projection": out_proj, "total": qkv + scores + weighted + out_proj}


def flops_closed_total(seq_len, d_model):
    N, D = seq_len, d_model
    return {
        "total": 4 * N * D * (2 * D + N),
        "qkv_projections": 6 * N * D * D,
        "output_projection": 2 * N * D * D,
        "scores": 2 * D * N * N,
        "weighted_sum": 2 * D * N * N,
    }


# ============================================================================ crossover_seq_len
def crossover_float(d_model):
    return 8 * d_model * d_model / (4 * d_model)


def crossover_scores_only(d_model):
    # 2 N^2 d = 8 N d^2
    return 8 * d_model ** 2 // (2 * d_model)


def crossover_qkv_only(d_model):
    # 4 N^2 d = 6 N d^2
    return (6 * d_model * d_model) // (4 * d_model)


def crossover_precedence(d_model):
    return 8 * d_model ** 2 // 4 * d_model


def crossover_half(d_model):
    # 4 N d^2 = 8 N^2 d  ->  N = d / 2
    return d_model // 2


def crossover_loop_minus_one(d_model):
    n = 1
    while 4 * n * n * d_model < 8 * n * d_model * d_model:
        n += 1
    return n - 1


def crossover_search(d_model):
    n = 1
    while 4 * n * n * d_model != 8 * n * d_model * d_model:
        n += 1
    return n


def crossover_fraction(d_model):
    # divide 4 N^2 d = 8 N d^2 by 4 N d
    n = Fraction(8 * d_model * d_model, 4 * d_model)
    return int(n)


# ============================================================================ mha_param_count
def params_scalar_bias(d_model, bias=True):
    weights = 4 * d_model * d_model
    return weights + (4 if bias else 0)


def params_no_output_bias(d_model, bias=True):
    d = d_model
    n = 4 * d * d
    if bias:
        n += 3 * d  # biases of q, k, v
    return n


def params_conditional_precedence(d_model, bias=True):
    return 4 * d_model ** 2 + 4 * d_model if bias else 0


def params_math_pow(d_model, bias=True):
    total = 4 * math.pow(d_model, 2)
    if bias:
        total += 4 * d_model
    return total


def params_eq_plus_typo(d_model, bias=True):
    total = 4 * d_model * d_model
    if bias:
        total =+ 4 * d_model
    return total


def params_bias_is_not_none(d_model, bias=True):
    count = 4 * d_model * d_model
    if bias is not None:
        count += 4 * d_model
    return count


def params_shape_table(d_model, bias=True):
    shapes = {"w_q": (d_model, d_model), "w_k": (d_model, d_model),
              "w_v": (d_model, d_model), "w_o": (d_model, d_model)}
    if bias:
        shapes.update({"b_q": (d_model,), "b_k": (d_model,), "b_v": (d_model,), "b_o": (d_model,)})
    return sum(math.prod(s) for s in shapes.values())


def params_factored(d_model, bias=True):
    return 4 * d_model * (d_model + int(bool(bias)))


ENTRIES = [
    Entry("mha_flops", "wrong", "madd-counts-one",
          "a multiply-add is counted as 1 FLOP instead of 2, so every entry is half the right count",
          flops_one_per_madd),
    Entry("mha_flops", "wrong", "qkv-one-projection",
          "qkv_projections counts a single (N, d) @ (d, d) product, 2 N d^2, instead of three "
          "(6 N d^2), and the total inherits the error", flops_single_projection),
    Entry("mha_flops", "wrong", "total-misses-output-projection",
          "the total adds the QKV projections, scores and weighted sum but leaves out the output "
          "projection", flops_total_without_output),
    Entry("mha_flops", "wrong", "caret-for-power",
          "6 * n * d ^ 2 uses ^, which is bitwise XOR in Python and binds after *, so it computes "
          "(6 n d) XOR 2 instead of 6 n d^2", flops_caret_square),
    Entry("mha_flops", "wrong", "numpy-int64",
          "np.prod returns numpy int64 values, not the plain Python ints the contract asks for",
          flops_numpy_prod),
    Entry("mha_flops", "wrong", "causal-saving",
          "scores and weighted_sum count only the N(N+1)/2 causal pairs, although the exercise is "
          "dense (no causal saving)", flops_causal_pairs),
    Entry("mha_flops", "right", "matmul-shape-helper", None, flops_from_matmul_shapes),
    Entry("mha_flops", "right", "closed-form-total", None, flops_closed_total),

    Entry("crossover_seq_len", "wrong", "true-division-float",
          "the / division returns a float (2.0 * d_model) instead of a plain int", crossover_float),
    Entry("crossover_seq_len", "wrong", "scores-term-only",
          "only the scores term 2 N^2 d is set equal to the projections 8 N d^2 (the weighted sum is "
          "forgotten), giving N = 4 d_model instead of 2 d_model", crossover_scores_only),
    Entry("crossover_seq_len", "wrong", "qkv-projections-only",
          "the N^2 terms are compared with the QKV projections alone (6 N d^2), forgetting the output "
          "projection, giving N = 1.5 d_model (floored) instead of 2 d_model", crossover_qkv_only),
    Entry("crossover_seq_len", "wrong", "precedence-times-d",
          "8 * d ** 2 // 4 * d_model parses as ((8 d^2) // 4) * d, so it multiplies by d_model "
          "instead of dividing: 2 d^3 instead of 2 d", crossover_precedence),
    Entry("crossover_seq_len", "wrong", "terms-swapped",
          "the linear and quadratic terms are swapped (4 N d^2 = 8 N^2 d), so it returns d_model // 2 "
          "instead of 2 d_model", crossover_half),
    Entry("crossover_seq_len", "wrong", "loop-returns-n-minus-1",
          "the search loop already stops at the crossover but then returns n - 1, one less than "
          "2 d_model", crossover_loop_minus_one),
    Entry("crossover_seq_len", "right", "search-equality", None, crossover_search),
    Entry("crossover_seq_len", "right", "fraction", None, crossover_fraction),

    Entry("mha_param_count", "wrong", "scalar-bias",
          "each bias is counted as one number (+ 4) instead of a vector of d_model numbers (+ 4 d)",
          params_scalar_bias),
    Entry("mha_param_count", "wrong", "no-output-bias",
          "only the Q, K and V biases are counted (3 d); the output projection's bias is forgotten",
          params_no_output_bias),
    Entry("mha_param_count", "wrong", "conditional-precedence",
          "the conditional expression covers the whole sum, so bias=False returns 0 instead of 4 d^2",
          params_conditional_precedence),
    Entry("mha_param_count", "wrong", "math-pow-float",
          "math.pow returns a float, so the count is a float instead of a plain int",
          params_math_pow),
    Entry("mha_param_count", "wrong", "eq-plus-typo",
          "total =+ 4 * d_model (typo for +=) replaces the total by 4 d, so with bias the weights "
          "are lost", params_eq_plus_typo),
    Entry("mha_param_count", "wrong", "bias-is-not-none",
          "the test 'bias is not None' is also true for bias=False, so the biases are always counted",
          params_bias_is_not_none),
    Entry("mha_param_count", "right", "shape-table", None, params_shape_table),
    Entry("mha_param_count", "right", "factored", None, params_factored),
]
