"""Held-out catalogue, lesson 05 (mha_flops, crossover_seq_len, mha_param_count), written blind."""

import math

import numpy as np

from entry import Entry


# ---------------------------------------------------------------------------- mha_flops, wrong
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


def flops_single_projection(seq_len, d_model):
    N, D = seq_len, d_model
    proj = 2 * N * D * D  # x @ W is an (N, D) @ (D, D) product
    qk = 2 * N * N * D
    av = 2 * N * N * D
    o = 2 * N * D * D
    return {"qkv_projections": proj, "scores": qk, "weighted_sum": av,
            "output_projection": o, "total": proj + qk + av + o}


def flops_total_without_output(seq_len, d_model):
    n, d = seq_len, d_model
    counts = dict(qkv_projections=6 * n * d * d, scores=2 * n * n * d,
                  weighted_sum=2 * n * n * d, output_projection=2 * n * d * d)
    counts["total"] = counts["qkv_projections"] + counts["scores"] + counts["weighted_sum"]
    return counts


def flops_math_pow(seq_len, d_model):
    n, d = seq_len, d_model
    qkv = 6 * n * math.pow(d, 2)
    scores = 2 * math.pow(n, 2) * d
    wsum = 2 * math.pow(n, 2) * d
    oproj = 2 * n * math.pow(d, 2)
    return {"qkv_projections": qkv, "scores": scores, "weighted_sum": wsum,
            "output_projection": oproj, "total": qkv + scores + wsum + oproj}


def flops_caret_power(seq_len, d_model):
    n, d = seq_len, d_model
    qkv = 6 * n * d ^ 2
    scores = 2 * n ** 2 * d
    weighted = 2 * n ** 2 * d
    out_proj = 2 * n * d ** 2
    return {"qkv_projections": qkv, "scores": scores, "weighted_sum": weighted,
            "output_projection": out_proj, "total": qkv + scores + weighted + out_proj}


def flops_causal_pairs(seq_len, d_model):
    scores = 0
    weighted = 0
    for i in range(seq_len):
        visible = i + 1  # keys 0..i
        scores += 2 * visible * d_model
        weighted += 2 * visible * d_model
    qkv = 3 * 2 * seq_len * d_model * d_model
    out = 2 * seq_len * d_model * d_model
    return {"qkv_projections": qkv, "scores": scores, "weighted_sum": weighted,
            "output_projection": out, "total": qkv + scores + weighted + out}


# ---------------------------------------------------------------------------- mha_flops, right
def flops_per_head_sum(seq_len, d_model):
    # count with H = d_model heads of size 1, then add the heads up
    heads = d_model
    d_head = d_model // heads
    per_matmul = lambda m, k, n: 2 * m * k * n  # noqa: E731
    qkv = 3 * per_matmul(seq_len, d_model, d_model)
    scores = sum(per_matmul(seq_len, d_head, seq_len) for _ in range(heads))
    weighted = sum(per_matmul(seq_len, seq_len, d_head) for _ in range(heads))
    out = per_matmul(seq_len, d_model, d_model)
    return {"qkv_projections": qkv, "scores": scores, "weighted_sum": weighted,
            "output_projection": out, "total": qkv + scores + weighted + out}


def flops_closed_form(seq_len, d_model):
    n, d = int(seq_len), int(d_model)
    result = {
        "total": 8 * n * d * d + 4 * n * n * d,
        "qkv_projections": 6 * n * d * d,
        "output_projection": 2 * n * d * d,
    }
    result["scores"] = result["weighted_sum"] = (result["total"] - 8 * n * d * d) // 2
    return result


# -------------------------------------------------------------------- crossover_seq_len, wrong
def crossover_scores_only(d_model):
    # 2 N^2 d = 8 N d^2
    return 4 * d_model


def crossover_qkv_only(d_model):
    # 4 N^2 d = 6 N d^2  (the three projections)
    return 6 * d_model // 4


def crossover_ratio_inverted(d_model):
    # 4 N^2 d = 8 N d^2  ->  N = 4 d / 8
    return (4 * d_model) // 8


def crossover_float(d_model):
    return 8 * d_model ** 2 / (4 * d_model)


def crossover_precedence(d_model):
    return 8 * d_model ** 2 // 4 * d_model


def crossover_first_exceeding(d_model):
    n = 1
    while 4 * n * n * d_model <= 8 * n * d_model * d_model:
        n += 1
    return n


# -------------------------------------------------------------------- crossover_seq_len, right
def crossover_search(d_model):
    n = 1
    while 4 * n ** 2 * d_model < 8 * n * d_model ** 2:
        n += 1
    return n


def crossover_fraction(d_model):
    from fractions import Fraction
    ratio = Fraction(8 * d_model ** 2, 4 * d_model)
    return int(ratio)


# ---------------------------------------------------------------------- mha_param_count, wrong
def params_scalar_bias(d_model, bias=True):
    total = 4 * d_model * d_model
    if bias:
        total += 4
    return total


def params_qkv_bias_only(d_model, bias=True):
    weights = 4 * d_model ** 2
    biases = 3 * d_model if bias else 0
    return weights + biases


def params_bias_is_not_none(d_model, bias=True):
    n = 4 * d_model * d_model
    if bias is not None:
        n += 4 * d_model
    return n


def params_np_square(d_model, bias=True):
    count = 4 * np.square(d_model)
    if bias:
        count = count + 4 * d_model
    return count


def params_conditional_precedence(d_model, bias=True):
    return 4 * d_model ** 2 + 4 * d_model if bias else 0


def params_times_two(d_model, bias=True):
    per_matrix = d_model * 2
    per_bias = d_model
    return 4 * per_matrix + (4 * per_bias if bias else 0)


# ---------------------------------------------------------------------- mha_param_count, right
def params_augmented(d_model, bias=True):
    rows = d_model + 1 if bias else d_model  # a bias is one more input row of W
    return 4 * rows * d_model


def params_enumerated(d_model, bias=True):
    shapes = [(d_model, d_model)] * 4
    if bias:
        shapes += [(d_model,)] * 4
    return sum(math.prod(s) for s in shapes)


ENTRIES = [
    Entry("mha_flops", "wrong", "one-flop-per-mac",
          "counts one FLOP per multiply-add instead of two, so every entry is halved",
          flops_one_per_mac),
    Entry("mha_flops", "wrong", "qkv-counts-one-projection",
          "qkv_projections counts a single (N, d) @ (d, d) product, 2 N d^2, instead of the "
          "three of q, k and v, 6 N d^2", flops_single_projection),
    Entry("mha_flops", "wrong", "total-misses-output-projection",
          "the total adds up the q/k/v projections, scores and weighted sum but leaves out the "
          "output projection", flops_total_without_output),
    Entry("mha_flops", "wrong", "math-pow-floats",
          "uses math.pow, which returns floats, so the dict holds floats instead of plain ints",
          flops_math_pow),
    Entry("mha_flops", "wrong", "caret-for-power",
          "writes d ^ 2 for d squared in the q/k/v term: ^ is bitwise XOR in Python (and it "
          "binds after *)", flops_caret_power),
    Entry("mha_flops", "wrong", "causal-pair-count",
          "counts only the causally visible (query, key) pairs, N(N+1) d per N^2 product, "
          "although the exercise is dense with no causal saving", flops_causal_pairs),
    Entry("mha_flops", "right", "sum-over-heads", None, flops_per_head_sum),
    Entry("mha_flops", "right", "closed-form-from-total", None, flops_closed_form),
    Entry("crossover_seq_len", "wrong", "scores-term-only",
          "equates only the scores term 2 N^2 d (not both N^2 terms) with the projections: "
          "N = 4 d_model", crossover_scores_only),
    Entry("crossover_seq_len", "wrong", "qkv-projections-only",
          "equates the N^2 terms with the q/k/v projections only (6 N d^2), forgetting the "
          "output projection: N = 1.5 d_model", crossover_qkv_only),
    Entry("crossover_seq_len", "wrong", "ratio-inverted",
          "solves 4 N^2 d = 8 N d^2 upside down and returns d_model / 2 instead of 2 d_model",
          crossover_ratio_inverted),
    Entry("crossover_seq_len", "wrong", "true-division-float",
          "divides with `/`, so the answer is a float (e.g. 128.0) instead of a plain int",
          crossover_float),
    Entry("crossover_seq_len", "wrong", "division-precedence",
          "writes 8 * d ** 2 // 4 * d, which Python reads as (8 d^2 // 4) * d = 2 d^3: the "
          "denominator needs parentheses", crossover_precedence),
    Entry("crossover_seq_len", "wrong", "first-n-exceeding",
          "searches with <= and so returns the first N where the N^2 terms exceed the "
          "projections, 2 d_model + 1, not where they are equal", crossover_first_exceeding),
    Entry("crossover_seq_len", "right", "linear-search", None, crossover_search),
    Entry("crossover_seq_len", "right", "fraction", None, crossover_fraction),
    Entry("mha_param_count", "wrong", "scalar-bias-per-matrix",
          "adds 4 for the biases, one number per projection, instead of four vectors of "
          "d_model entries", params_scalar_bias),
    Entry("mha_param_count", "wrong", "bias-only-on-qkv",
          "counts biases for q, k and v only (3 d), forgetting the output projection's bias",
          params_qkv_bias_only),
    Entry("mha_param_count", "wrong", "bias-is-not-none",
          "tests `bias is not None`, which is true for bias=False too, so the biases are always "
          "counted", params_bias_is_not_none),
    Entry("mha_param_count", "wrong", "np-square-int64",
          "uses np.square, which returns a numpy integer, so the count is not a plain Python "
          "int", params_np_square),
    Entry("mha_param_count", "wrong", "conditional-precedence",
          "writes `4 d**2 + 4 d if bias else 0`: the conditional covers the whole sum, so "
          "bias=False returns 0", params_conditional_precedence),
    Entry("mha_param_count", "wrong", "d-times-two-for-square",
          "writes d_model * 2 where d_model ** 2 belongs for each weight matrix",
          params_times_two),
    Entry("mha_param_count", "right", "augmented-weight-rows", None, params_augmented),
    Entry("mha_param_count", "right", "enumerate-tensor-shapes", None, params_enumerated),
]
