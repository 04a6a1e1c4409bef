"""Held-out learners' answers, lesson 05 (mha_flops, crossover_seq_len, mha_param_count)."""

import math
from fractions import Fraction

from entry import Entry


# ============================================================================ mha_flops
def flops_one_per_mac(seq_len, d_model):
    N, d = seq_len, d_model
    out = {
        "qkv_projections": 3 * N * d * d,
        "scores": N * N * d,
        "weighted_sum": N * N * d,
        "output_projection": N * d * d,
    }
    out["total"] = sum(out.values())
    return out


def flops_total_without_output(seq_len, d_model):
    n, d = seq_len, d_model
    qkv = 6 * n * d * d
    scores = 2 * n * n * d
    mix = 2 * n * n * d
    proj = 2 * n * d * d
    return {"qkv_projections": qkv, "scores": scores, "weighted_sum": mix,
            "output_projection": proj, "total": qkv + scores + mix}


def flops_math_pow(seq_len, d_model):
    n2 = math.pow(seq_len, 2)
    d2 = math.pow(d_model, 2)
    res = {
        "qkv_projections": 6 * seq_len * d2,
        "scores": 2 * n2 * d_model,
        "weighted_sum": 2 * n2 * d_model,
        "output_projection": 2 * seq_len * d2,
    }
    res["total"] = res["qkv_projections"] + res["scores"] + res["weighted_sum"] \
        + res["output_projection"]
    return res


def flops_causal_half(seq_len, d_model):
    N, D = seq_len, d_model
    flops = {
        "qkv_projections": 6 * N * D * D,
        "scores": N * N * D,           # only half the pairs are visible
        "weighted_sum": N * N * D,
        "output_projection": 2 * N * D * D,
    }
    flops["total"] = sum(flops.values())
    return flops


def flops_total_swapped(seq_len, d_model):
    N, d = seq_len, d_model
    return {
        "qkv_projections": 6 * N * d ** 2,
        "scores": 2 * N ** 2 * d,
        "weighted_sum": 2 * N ** 2 * d,
        "output_projection": 2 * N * d ** 2,
        "total": 8 * N ** 2 * d + 4 * N * d ** 2,
    }


def flops_with_softmax(seq_len, d_model):
    n, d = seq_len, d_model
    parts = {
        "qkv_projections": 6 * n * d * d,
        "scores": 2 * n * n * d,
        "weighted_sum": 2 * n * n * d,
        "output_projection": 2 * n * d * d,
    }
    softmax = 3 * n * n  # exp, sum and divide per score
    parts["total"] = sum(parts.values()) + softmax
    return parts


def flops_per_product_helper(seq_len, d_model):
    def matmul(m, k, n):
        return 2 * m * k * n

    n, d = seq_len, d_model
    heads = d  # any split works; take d heads of width 1
    qkv = sum(matmul(n, d, d) for _ in ("q", "k", "v"))
    scores = sum(matmul(n, d // heads, n) for _ in range(heads))
    mix = sum(matmul(n, n, d // heads) for _ in range(heads))
    out_proj = matmul(n, d, d)
    return {"qkv_projections": qkv, "scores": scores, "weighted_sum": mix,
            "output_projection": out_proj, "total": qkv + scores + mix + out_proj}


def flops_factored(seq_len, d_model):
    nd = seq_len * d_model
    keys = ("qkv_projections", "scores", "weighted_sum", "output_projection")
    values = (nd * d_model * 6, nd * seq_len << 1, (nd * seq_len) << 1, nd * d_model * 2)
    result = dict(zip(keys, values))
    result["total"] = 4 * nd * (2 * d_model + seq_len)
    return result


# ============================================================================ crossover_seq_len
def crossover_float(d_model):
    return 8 * d_model ** 2 / (4 * d_model)


def crossover_qkv_only(d_model):
    # 4 N^2 d = 6 N d^2
    return 6 * d_model // 4


def crossover_one_quadratic_term(d_model):
    # 2 N^2 d = 8 N d^2
    return (8 * d_model * d_model) // (2 * d_model)


def crossover_sqrt(d_model):
    # 4 N^2 d = 8 d^2  ->  N^2 = 2 d
    return int(math.sqrt(2 * d_model))


def crossover_inverted_ratio(d_model):
    return (4 * d_model) // 8


def crossover_first_exceeding(d_model):
    n = 1
    while 4 * n * n * d_model <= 8 * n * d_model * d_model:
        n += 1
    return n


def crossover_search(d_model):
    n = 1
    while 4 * n * n * d_model < 8 * n * d_model * d_model:
        n += 1
    return n


def crossover_fraction(d_model):
    ratio = Fraction(8 * d_model ** 2, 4 * d_model)
    return ratio.numerator // ratio.denominator


# ============================================================================ mha_param_count
def params_scalar_bias(d_model, bias=True):
    weights = 4 * d_model * d_model
    if bias:
        weights += 4
    return weights


def params_bias_always(d_model, bias=True):
    return 4 * d_model * d_model + 4 * d_model


def params_three_matrices(d_model, bias=True):
    total = 3 * d_model ** 2
    if bias:
        total += 3 * d_model
    return total


def params_conditional_precedence(d_model, bias=True):
    return 4 * d_model ** 2 + 4 * d_model if bias else 0


def params_float_factor(d_model, bias=True):
    return 4 * d_model ** 2 * (1 + bias / d_model)


def params_xor(d_model, bias=True):
    count = 4 * d_model ^ 2
    if bias:
        count += 4 * d_model
    return count


def params_bool_arithmetic(d_model, bias=True):
    return 4 * d_model * (d_model + int(bool(bias)))


def params_from_shapes(d_model, bias=True):
    shapes = [(d_model, d_model)] * 4
    if bias:
        shapes += [(d_model,)] * 4
    return sum(math.prod(s) for s in shapes)


ENTRIES = [
    Entry("mha_flops", "wrong", "one-flop-per-multiply-add",
          "every product is counted as one FLOP per multiply-add instead of 2, so all "
          "counts are half the right ones", flops_one_per_mac),
    Entry("mha_flops", "wrong", "total-misses-output-projection",
          "the total adds the projections, scores and weighted sum but leaves out the "
          "output projection", flops_total_without_output),
    Entry("mha_flops", "wrong", "math-pow-floats",
          "math.pow returns a float, so the counts come out as floats instead of plain "
          "Python ints", flops_math_pow),
    Entry("mha_flops", "wrong", "causal-halving",
          "it halves the scores and weighted-sum counts as if a causal kernel skipped the "
          "masked half, although the count is for dense attention", flops_causal_half),
    Entry("mha_flops", "wrong", "total-n-and-d-swapped",
          "the total's formula swaps N and d (8 N^2 d + 4 N d^2 instead of "
          "8 N d^2 + 4 N^2 d), so it disagrees with the sum of the parts", flops_total_swapped),
    Entry("mha_flops", "wrong", "softmax-counted",
          "the total also counts the softmax's elementwise operations (3 N^2), although "
          "only matrix products are counted", flops_with_softmax),
    Entry("mha_flops", "right", "per-product-helper", None, flops_per_product_helper),
    Entry("mha_flops", "right", "factored-shifts", None, flops_factored),

    Entry("crossover_seq_len", "wrong", "true-division-float",
          "8 d^2 / (4 d) uses true division, so it returns a float instead of an int",
          crossover_float),
    Entry("crossover_seq_len", "wrong", "qkv-only",
          "it sets the N^2 terms equal to the Q/K/V projections only (6 N d^2), leaving out "
          "the output projection, so it returns 3 d / 2 instead of 2 d", crossover_qkv_only),
    Entry("crossover_seq_len", "wrong", "one-quadratic-term",
          "it counts only one of the two N^2 products (2 N^2 d) against the projections, so "
          "it returns 4 d instead of 2 d", crossover_one_quadratic_term),
    Entry("crossover_seq_len", "wrong", "dropped-n-sqrt",
          "the algebra drops the factor N on the projection side (4 N^2 d = 8 d^2), so it "
          "returns sqrt(2 d) instead of 2 d", crossover_sqrt),
    Entry("crossover_seq_len", "wrong", "ratio-inverted",
          "the ratio is inverted (4 d / 8 instead of 8 d / 4), so it returns d / 2",
          crossover_inverted_ratio),
    Entry("crossover_seq_len", "wrong", "first-n-strictly-above",
          "the search loop stops at the first N where the N^2 terms strictly exceed the "
          "projections (<= in the loop condition), one past the crossover: 2 d + 1",
          crossover_first_exceeding),
    Entry("crossover_seq_len", "right", "search-loop", None, crossover_search),
    Entry("crossover_seq_len", "right", "fraction", None, crossover_fraction),

    Entry("mha_param_count", "wrong", "one-scalar-per-bias",
          "it counts each bias as a single number (4 in all) instead of a vector of d_model "
          "values (4 d)", params_scalar_bias),
    Entry("mha_param_count", "wrong", "bias-flag-ignored",
          "it always adds the 4 d biases and ignores bias=False", params_bias_always),
    Entry("mha_param_count", "wrong", "forgets-w_o",
          "it counts only W_q, W_k, W_v (and their biases), forgetting the output "
          "projection W_o", params_three_matrices),
    Entry("mha_param_count", "wrong", "conditional-precedence",
          "the conditional expression binds loosest, so `4*d**2 + 4*d if bias else 0` "
          "returns 0 (not 4 d^2) when bias is False", params_conditional_precedence),
    Entry("mha_param_count", "wrong", "float-result",
          "the factored formula 4 d^2 (1 + bias / d) uses true division and returns a float "
          "instead of an int", params_float_factor),
    Entry("mha_param_count", "wrong", "caret-is-xor",
          "4 * d_model ^ 2 is a bitwise XOR of 4 d with 2 in Python, not 4 d^2",
          params_xor),
    Entry("mha_param_count", "right", "bool-arithmetic", None, params_bool_arithmetic),
    Entry("mha_param_count", "right", "sum-of-shapes", None, params_from_shapes),
]
