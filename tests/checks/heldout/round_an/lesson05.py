"""Held-out catalogue, lesson 05 (FLOPs and parameters): mha_flops, crossover_seq_len,
mha_param_count. Plain Python ints.

Each function is one learner's answer; wrong ones carry exactly one slip.
"""

import math
from fractions import Fraction

import numpy as np

from entry import Entry


# ============================================================================ mha_flops
def flops_one_per_multiply_add(seq_len, d_model):
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
    n, d = seq_len, d_model
    qkv = 6 * n * d ** 2
    scores = 2 * n ** 2 * d
    wsum = 2 * n ** 2 * d
    proj = 2 * n * d ** 2
    return {"qkv_projections": qkv, "scores": scores, "weighted_sum": wsum,
            "output_projection": proj, "total": qkv + scores + wsum}


def flops_math_pow(seq_len, d_model):
    qkv = 6 * seq_len * d_model * d_model
    scores = 2 * math.pow(seq_len, 2) * d_model
    weighted = 2 * seq_len * seq_len * d_model
    out_proj = 2 * seq_len * d_model * d_model
    return {"qkv_projections": qkv, "scores": scores, "weighted_sum": weighted,
            "output_projection": out_proj, "total": qkv + scores + weighted + out_proj}


def flops_one_projection_for_qkv(seq_len, d_model):
    def matmul(m, k, n):
        return 2 * m * k * n

    res = {
        "qkv_projections": matmul(seq_len, d_model, d_model),
        "scores": matmul(seq_len, d_model, seq_len),
        "weighted_sum": matmul(seq_len, seq_len, d_model),
        "output_projection": matmul(seq_len, d_model, d_model),
    }
    res["total"] = sum(res.values())
    return res


def flops_scores_d_squared(seq_len, d_model):
    N, d = seq_len, d_model
    parts = dict(
        qkv_projections=6 * N * d * d,
        scores=2 * N * d * d,
        weighted_sum=2 * N * N * d,
        output_projection=2 * N * d * d,
    )
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


def flops_right_product_list(seq_len, d_model):
    products = {  # name: list of (m, k, n) matrix products
        "qkv_projections": [(seq_len, d_model, d_model)] * 3,
        "scores": [(seq_len, d_model, seq_len)],
        "weighted_sum": [(seq_len, seq_len, d_model)],
        "output_projection": [(seq_len, d_model, d_model)],
    }
    counts = {name: sum(2 * m * k * n for m, k, n in shapes)
              for name, shapes in products.items()}
    counts["total"] = sum(counts.values())
    return counts


def flops_right_factored(seq_len, d_model):
    nd = seq_len * d_model
    total = 4 * nd * (2 * d_model + seq_len)
    return {
        "qkv_projections": 6 * nd * d_model,
        "scores": 2 * nd * seq_len,
        "weighted_sum": 2 * nd * seq_len,
        "output_projection": 2 * nd * d_model,
        "total": int(total),
    }


# ============================================================================ crossover_seq_len
def crossover_one_quadratic_term(d_model):
    # 2 N^2 d = 8 N d^2  ->  N = 4 d
    return 4 * d_model


def crossover_qkv_only(d_model):
    # 4 N^2 d = 6 N d^2  ->  N = 6 d / 4
    return int(6 * d_model / 4)


def crossover_true_division(d_model):
    return 8 * d_model ** 2 / (4 * d_model)


def crossover_square_root(d_model):
    # 4 N^2 d = 8 N d^2  ->  N^2 = 2 d^2
    return int(math.sqrt(2) * d_model)


def crossover_no_coefficients(d_model):
    # N^2 d = N d^2
    return d_model


def crossover_ratio_upside_down(d_model):
    return d_model * 4 // 8


def crossover_right_search(d_model):
    n = 1
    while 4 * n * n * d_model < 8 * n * d_model * d_model:
        n += 1
    return n


def crossover_right_fraction(d_model):
    return int(Fraction(8 * d_model * d_model, 4 * d_model))


# ============================================================================ mha_param_count
def params_scalar_bias(d_model, bias=True):
    count = 4 * d_model * d_model
    if bias:
        count += 4
    return count


def params_bias_is_not_none(d_model, bias=True):
    total = 4 * d_model ** 2
    if bias is not None:
        total += 4 * d_model
    return total


def params_forgot_w_o(d_model, bias=True):
    per_matrix = d_model * d_model + (d_model if bias else 0)
    return 3 * per_matrix


def params_numpy_prod(d_model, bias=True):
    weights = 4 * np.prod((d_model, d_model))
    biases = 4 * d_model if bias else 0
    return weights + biases


def params_conditional_precedence(d_model, bias=True):
    return 4 * d_model ** 2 + 4 * d_model if bias else 0


def params_augmented_matrix(d_model, bias=True):
    if bias:
        return 4 * (d_model + 1) ** 2
    return 4 * d_model ** 2


def params_right_shapes(d_model, bias=True):
    shapes = [(d_model, d_model)] * 4
    if bias:
        shapes += [(d_model,)] * 4
    return sum(math.prod(s) for s in shapes)


def params_right_factored(d_model, bias=True):
    return 4 * d_model * (d_model + int(bool(bias)))


ENTRIES = [
    Entry("mha_flops", "wrong", "multiply-add-as-one",
          "it counts one multiply-add as 1 FLOP instead of 2, so every entry is half the "
          "contract's",
          flops_one_per_multiply_add),
    Entry("mha_flops", "wrong", "total-misses-output-projection",
          "the total adds the q/k/v projections and the two N^2 terms but leaves out the "
          "output projection (6 N d^2 + 4 N^2 d instead of 8 N d^2 + 4 N^2 d)",
          flops_total_without_output),
    Entry("mha_flops", "wrong", "math-pow-float",
          "math.pow returns a float, so `scores` and `total` are floats instead of plain ints",
          flops_math_pow),
    Entry("mha_flops", "wrong", "one-projection-for-qkv",
          "qkv_projections counts one (N, d) @ (d, d) product instead of three (2 N d^2 "
          "instead of 6 N d^2), and the total with it",
          flops_one_projection_for_qkv),
    Entry("mha_flops", "wrong", "scores-n-d-squared",
          "the scores are counted as 2 N d^2 (d where N belongs) instead of 2 N^2 d",
          flops_scores_d_squared),
    Entry("mha_flops", "wrong", "causal-saving",
          "it counts only the causal (query, key) pairs, N (N + 1) / 2, for the scores and the "
          "weighted sum, although the contract counts dense attention (no causal saving)",
          flops_causal_pairs),
    Entry("mha_flops", "right", "list-of-products", None, flops_right_product_list),
    Entry("mha_flops", "right", "factored-closed-form", None, flops_right_factored),

    Entry("crossover_seq_len", "wrong", "one-quadratic-term",
          "it equates only one N^2 term (2 N^2 d) with the projections, giving 4 d_model "
          "instead of 2 d_model",
          crossover_one_quadratic_term),
    Entry("crossover_seq_len", "wrong", "qkv-projections-only",
          "it equates the N^2 terms with the q/k/v projections only (6 N d^2), leaving out "
          "the output projection, so it returns 1.5 d_model (rounded down)",
          crossover_qkv_only),
    Entry("crossover_seq_len", "wrong", "true-division-float",
          "the ratio is computed with `/`, so it returns a float (2.0 * d_model) instead of a "
          "plain int",
          crossover_true_division),
    Entry("crossover_seq_len", "wrong", "square-root-algebra",
          "an algebra slip turns 4 N^2 d = 8 N d^2 into N^2 = 2 d^2, so it returns "
          "int(sqrt(2) * d_model) instead of 2 d_model",
          crossover_square_root),
    Entry("crossover_seq_len", "wrong", "coefficients-dropped",
          "it compares N^2 d with N d^2 without the coefficients 4 and 8 and returns d_model",
          crossover_no_coefficients),
    Entry("crossover_seq_len", "wrong", "ratio-upside-down",
          "the ratio is upside down: d_model * 4 / 8 = d_model / 2 instead of 8 / 4 * d_model",
          crossover_ratio_upside_down),
    Entry("crossover_seq_len", "right", "linear-search", None, crossover_right_search),
    Entry("crossover_seq_len", "right", "fraction", None, crossover_right_fraction),

    Entry("mha_param_count", "wrong", "one-scalar-bias-per-matrix",
          "it adds 4 (one bias number per matrix) instead of 4 d_model (one bias vector of "
          "length d_model per projection)",
          params_scalar_bias),
    Entry("mha_param_count", "wrong", "bias-is-not-none",
          "the flag is tested with `bias is not None`, which is true for bias=False too, so "
          "the biases are always counted",
          params_bias_is_not_none),
    Entry("mha_param_count", "wrong", "forgot-w_o",
          "it counts only W_q, W_k and W_v (and their biases) and forgets the output "
          "projection W_o",
          params_forgot_w_o),
    Entry("mha_param_count", "wrong", "numpy-int",
          "np.prod returns a numpy int64, so the result is not a plain Python int",
          params_numpy_prod),
    Entry("mha_param_count", "wrong", "conditional-precedence",
          "`4 d^2 + 4 d if bias else 0` parses as (4 d^2 + 4 d) if bias else 0, so with "
          "bias=False it returns 0 instead of 4 d^2",
          params_conditional_precedence),
    Entry("mha_param_count", "wrong", "augmented-matrix",
          "it treats each biased projection as a (d+1) x (d+1) matrix, counting (d+1)^2 "
          "instead of d^2 + d parameters per projection",
          params_augmented_matrix),
    Entry("mha_param_count", "right", "sum-of-shapes", None, params_right_shapes),
    Entry("mha_param_count", "right", "factored", None, params_right_factored),
]
