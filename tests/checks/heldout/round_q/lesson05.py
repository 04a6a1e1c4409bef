"""Round q, lesson 05 (FLOPs and parameters, plain Python ints): mha_flops,
crossover_seq_len, mha_param_count.

Six wrong answers (one slip each) and two right answers (unusual routes) per exercise.
"""

import math

import numpy as np

from entry import Entry


# ============================================================================ mha_flops
def flops_macs(seq_len, d_model):
    n, d = seq_len, d_model
    # counts one multiply-add as 1 FLOP
    out = {"qkv_projections": 3 * n * d * d, "scores": n * n * d, "weighted_sum": n * n * d,
           "output_projection": n * d * d}
    out["total"] = sum(out.values())
    return out


def flops_one_projection(seq_len, d_model):
    n, d = seq_len, d_model
    qkv = 2 * n * d * d  # one (N, d) @ (d, d) product, but there are three
    scores = 2 * n * n * d
    mix = 2 * n * n * d
    proj = 2 * n * d * d
    return {"qkv_projections": qkv, "scores": scores, "weighted_sum": mix,
            "output_projection": proj, "total": qkv + scores + mix + proj}


def flops_math_pow(seq_len, d_model):
    sq = math.pow(d_model, 2)  # math.pow returns a float
    res = {"qkv_projections": int(6 * seq_len * sq),
           "scores": 2 * seq_len ** 2 * d_model,
           "weighted_sum": 2 * seq_len ** 2 * d_model,
           "output_projection": 2 * seq_len * sq}
    res["total"] = int(sum(res.values()))
    return res


def flops_total_too_early(seq_len, d_model):
    counts = {
        "qkv_projections": 6 * seq_len * d_model ** 2,
        "scores": 2 * seq_len ** 2 * d_model,
        "weighted_sum": 2 * seq_len ** 2 * d_model,
    }
    counts["total"] = sum(counts.values())  # summed before the output projection is added
    counts["output_projection"] = 2 * seq_len * d_model ** 2
    return counts


def flops_xor(seq_len, d_model):
    N, d = seq_len, d_model
    parts = {"qkv_projections": 6 * N * d ^ 2,  # ^ is bitwise xor in Python
             "scores": 2 * N * N * d, "weighted_sum": 2 * N * N * d,
             "output_projection": 2 * N * d * d}
    parts["total"] = 8 * N * d * d + 4 * N * N * d
    return parts


def flops_causal_half(seq_len, d_model):
    n, d = seq_len, d_model
    attn = n * n * d  # halved for causality: the contract counts dense attention
    r = {"qkv_projections": 6 * n * d * d, "scores": attn, "weighted_sum": attn,
         "output_projection": 2 * n * d * d}
    r["total"] = r["qkv_projections"] + 2 * attn + r["output_projection"]
    return r


def _matmul(m, k, n):
    return 2 * m * k * n


def flops_per_product(seq_len, d_model):
    n, d = seq_len, d_model
    r = {
        "qkv_projections": sum(_matmul(n, d, d) for _ in ("q", "k", "v")),
        "scores": _matmul(n, d, n),
        "weighted_sum": _matmul(n, n, d),
        "output_projection": _matmul(n, d, d),
    }
    r["total"] = sum(r.values())
    return r


def flops_per_head_loop(seq_len, d_model):
    # any head count dividing d_model gives the same totals; count head by head with H = d
    n, d = seq_len, d_model
    heads, dh = d, 1
    scores = sum(2 * n * n * dh for _ in range(heads))
    mix = sum(2 * n * n * dh for _ in range(heads))
    qkv = 3 * sum(2 * n * d * dh for _ in range(heads))
    out = 2 * n * d * d
    return {"qkv_projections": qkv, "scores": scores, "weighted_sum": mix,
            "output_projection": out, "total": qkv + scores + mix + out}


# ============================================================================ crossover_seq_len
def cross_true_division(d_model):
    return 8 * d_model ** 2 / (4 * d_model)  # / gives a float


def cross_qkv_only(d_model):
    return 6 * d_model // 4  # 4 N^2 d = 6 N d^2: the output projection left out


def cross_one_quadratic_term(d_model):
    return 8 * d_model * d_model // (2 * d_model)  # only the scores term, 2 N^2 d


def cross_search_off_by_one(d_model):
    n = 1
    while 4 * n * n * d_model < 8 * n * d_model * d_model:
        n += 1
    return n - 1  # steps back one too many: n is already the crossover


def cross_precedence(d_model):
    return 8 * d_model ** 2 // 4 * d_model  # (8 d^2 // 4) * d, not 8 d^2 // (4 d)


def cross_ratio_inverted(d_model):
    return d_model // 2  # solved 8 N^2 d = 4 N d^2: the terms swapped


def cross_fraction(d_model):
    from fractions import Fraction

    n = Fraction(8 * d_model * d_model, 4 * d_model)
    return int(n)


def cross_bisection(d_model):
    lo, hi = 1, 4 * d_model + 1
    while lo < hi:  # smallest N with 4 N^2 d >= 8 N d^2
        mid = (lo + hi) // 2
        if 4 * mid * mid * d_model >= 8 * mid * d_model * d_model:
            hi = mid
        else:
            lo = mid + 1
    return lo


# ============================================================================ mha_param_count
def params_one_bias(d_model, bias=True):
    weights = 4 * d_model * d_model
    return weights + (d_model if bias else 0)  # one bias vector, there are four


def params_three_matrices(d_model, bias=True):
    total = 3 * d_model * d_model  # W_o forgotten
    if bias:
        total += 4 * d_model
    return total


def params_ternary_precedence(d_model, bias=True):
    return 4 * d_model ** 2 + 4 * d_model if bias else 0  # whole sum inside the conditional


def params_bytes(d_model, bias=True):
    n = 4 * d_model * d_model + (4 * d_model if bias else 0)
    return n * 4  # float32 bytes, not a parameter count


def params_numpy_int(d_model, bias=True):
    total = 4 * np.square(d_model)  # numpy integer, not a plain int
    if bias:
        total = total + 4 * d_model
    return total


def params_is_not_none(d_model, bias=True):
    count = 4 * d_model * d_model
    if bias is not None:  # False is not None either
        count += 4 * d_model
    return count


def params_shapes(d_model, bias=True):
    shapes = [(d_model, d_model)] * 4 + ([(d_model,)] * 4 if bias else [])
    return sum(math.prod(s) for s in shapes)


def params_augmented(d_model, bias=True):
    rows = d_model + (1 if bias else 0)  # bias folded in as an extra input row
    return 4 * rows * d_model


ENTRIES = [
    Entry("mha_flops", "wrong", "multiply-add-as-one",
          "It counts one multiply-add as 1 FLOP, so every entry is half the contract's count.",
          flops_macs),
    Entry("mha_flops", "wrong", "one-projection",
          "qkv_projections counts one (N, d) @ (d, d) product, 2 N d^2, instead of the three "
          "for Q, K and V, 6 N d^2 (and the total inherits it).", flops_one_projection),
    Entry("mha_flops", "wrong", "math-pow-float",
          "math.pow returns a float, so output_projection comes out as a float instead of a "
          "plain int.", flops_math_pow),
    Entry("mha_flops", "wrong", "total-before-output-projection",
          "The total is summed before output_projection is added to the dict, so it leaves out "
          "the 2 N d^2 of the output projection.", flops_total_too_early),
    Entry("mha_flops", "wrong", "caret-is-xor",
          "d ^ 2 is bitwise xor in Python, not a power, so qkv_projections is wrong "
          "(6 * N * d ^ 2 even parses as (6 N d) xor 2).", flops_xor),
    Entry("mha_flops", "wrong", "causal-halving",
          "The scores and weighted sum are halved as if a causal mask saved half the work, but "
          "the contract counts dense attention, 2 N^2 d each.", flops_causal_half),
    Entry("mha_flops", "right", "per-product-helper", None, flops_per_product),
    Entry("mha_flops", "right", "head-by-head-sum", None, flops_per_head_loop),

    Entry("crossover_seq_len", "wrong", "true-division-float",
          "The division uses /, so it returns a float (2.0 * d_model) instead of an int.",
          cross_true_division),
    Entry("crossover_seq_len", "wrong", "qkv-projections-only",
          "It equates the N^2 terms with the Q, K, V projections only (6 N d^2), leaving out "
          "the output projection, and gets 1.5 d_model.", cross_qkv_only),
    Entry("crossover_seq_len", "wrong", "one-quadratic-term",
          "It uses only one of the two N^2 terms (2 N^2 d) against the projections, so it "
          "gets 4 d_model instead of 2 d_model.", cross_one_quadratic_term),
    Entry("crossover_seq_len", "wrong", "search-off-by-one",
          "The search loop stops at the first N where the terms are equal, then returns "
          "n - 1, one less than the crossover.", cross_search_off_by_one),
    Entry("crossover_seq_len", "wrong", "precedence",
          "8 * d ** 2 // 4 * d is evaluated left to right as (8 d^2 // 4) * d = 2 d^3, not "
          "8 d^2 // (4 d).", cross_precedence),
    Entry("crossover_seq_len", "wrong", "ratio-inverted",
          "The roles of the terms are swapped (8 N^2 d = 4 N d^2), giving d_model // 2 instead "
          "of 2 * d_model.", cross_ratio_inverted),
    Entry("crossover_seq_len", "right", "fraction", None, cross_fraction),
    Entry("crossover_seq_len", "right", "bisection", None, cross_bisection),

    Entry("mha_param_count", "wrong", "one-bias-vector",
          "With bias it adds one bias vector (d) instead of four (4 d), one per projection.",
          params_one_bias),
    Entry("mha_param_count", "wrong", "three-matrices",
          "It counts three weight matrices (3 d^2), forgetting the output projection W_o.",
          params_three_matrices),
    Entry("mha_param_count", "wrong", "conditional-precedence",
          "The conditional expression takes in the whole sum: `4 d^2 + 4 d if bias else 0` "
          "returns 0 when bias is False instead of 4 d^2.", params_ternary_precedence),
    Entry("mha_param_count", "wrong", "bytes-not-count",
          "It multiplies by 4 bytes per float32 parameter, returning bytes instead of the "
          "number of parameters.", params_bytes),
    Entry("mha_param_count", "wrong", "numpy-integer",
          "np.square returns a numpy integer, so the result is a numpy int64 instead of a "
          "plain Python int.", params_numpy_int),
    Entry("mha_param_count", "wrong", "is-not-none-guard",
          "The bias test is `bias is not None`, which is also true for False, so biases are "
          "always counted.", params_is_not_none),
    Entry("mha_param_count", "right", "sum-of-shapes", None, params_shapes),
    Entry("mha_param_count", "right", "augmented-matrix", None, params_augmented),
]
