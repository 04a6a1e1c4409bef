"""Held-out catalogue, lesson 05 (FLOPs, plain Python ints): mha_flops, crossover_seq_len,
mha_param_count."""

import math
from functools import reduce
from operator import mul

import numpy as np

from entry import Entry


# ============================================================================ mha_flops
def flops_multiply_add_as_one(seq_len, d_model):
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
    qkv = 6 * seq_len * d_model ** 2
    scores = 2 * seq_len ** 2 * d_model
    mix = 2 * seq_len ** 2 * d_model
    proj = 2 * seq_len * d_model ** 2
    return {"qkv_projections": qkv, "scores": scores, "weighted_sum": mix,
            "output_projection": proj, "total": qkv + scores + mix}


def flops_math_pow_float(seq_len, d_model):
    qkv = 6 * seq_len * math.pow(d_model, 2)
    o = 2 * seq_len * math.pow(d_model, 2)
    s = 2 * seq_len * seq_len * d_model
    w = 2 * seq_len * seq_len * d_model
    return {"qkv_projections": qkv, "scores": s, "weighted_sum": w,
            "output_projection": o, "total": qkv + s + w + o}


def flops_one_projection(seq_len, d_model):
    def matmul(m, k, n):
        return 2 * m * k * n

    parts = {
        "qkv_projections": matmul(seq_len, d_model, d_model),
        "scores": matmul(seq_len, d_model, seq_len),
        "weighted_sum": matmul(seq_len, seq_len, d_model),
        "output_projection": matmul(seq_len, d_model, d_model),
    }
    parts["total"] = sum(parts.values())
    return parts


def flops_scores_n_d_d(seq_len, d_model):
    N, d = seq_len, d_model
    scores = 2 * N * d * d
    weighted = 2 * N * N * d
    qkv = 6 * N * d * d
    out_proj = 2 * N * d * d
    return {"qkv_projections": qkv, "scores": scores, "weighted_sum": weighted,
            "output_projection": out_proj, "total": qkv + scores + weighted + out_proj}


def flops_square_precedence(seq_len, d_model):
    attn = (2 * seq_len) ** 2 * d_model
    res = {
        "qkv_projections": 6 * seq_len * d_model * d_model,
        "scores": attn,
        "weighted_sum": attn,
        "output_projection": 2 * seq_len * d_model * d_model,
    }
    res["total"] = sum(res.values())
    return res


def flops_right_matmul_shapes(seq_len, d_model):
    def cost(a_shape, b_shape):
        (m, k), (k2, n) = a_shape, b_shape
        assert k == k2
        return 2 * m * k * n

    x, w = (seq_len, d_model), (d_model, d_model)
    qkv = sum(cost(x, w) for _ in ("q", "k", "v"))
    scores = cost((seq_len, d_model), (d_model, seq_len))
    weighted = cost((seq_len, seq_len), (seq_len, d_model))
    output = cost(x, w)
    return {"qkv_projections": qkv, "scores": scores, "weighted_sum": weighted,
            "output_projection": output, "total": qkv + scores + weighted + output}


def flops_right_closed_form(seq_len, d_model):
    # one head of width d_model does what H heads of d_model / H do: count one head
    n, d = int(seq_len), int(d_model)
    total = 8 * n * d * d + 4 * n * n * d
    counts = dict(qkv_projections=6 * n * d * d, scores=2 * n * n * d,
                  weighted_sum=2 * n * n * d, output_projection=2 * n * d * d)
    counts["total"] = total
    return counts


# ============================================================================ crossover_seq_len
def crossover_floor_div_precedence(d_model):
    return 8 * d_model * d_model // 4 * d_model


def crossover_ratio_inverted(d_model):
    # 4 N^2 d = 8 N d^2  ->  N = (4 d) / (8 d^2) * d^2 = d / 2
    return d_model // 2


def crossover_one_quadratic_term(d_model):
    # 2 N^2 d = 8 N d^2
    return 8 * d_model * d_model // (2 * d_model)


def crossover_search_off_by_one(d_model):
    n = 1
    while 4 * n * n * d_model <= 8 * n * d_model * d_model:
        n += 1
    return n


def crossover_numpy_search(d_model):
    n = np.arange(1, 4 * d_model + 1)
    quad = 4 * n ** 2 * d_model
    proj = 8 * n * d_model ** 2
    return n[np.argmax(quad >= proj)]


def crossover_wrong_root(d_model):
    a, b, c = 4 * d_model, -8 * d_model ** 2, 0
    root = (-b - math.isqrt(b * b - 4 * a * c)) // (2 * a)
    return int(root)


def crossover_right_solve(d_model):
    # 4 N^2 d = 8 N d^2, divide by 4 N d (N > 0)
    quadratic_coeff = 4 * d_model
    linear_coeff = 8 * d_model * d_model
    return linear_coeff // quadratic_coeff


def crossover_right_bisect(d_model):
    lo, hi = 1, 10 * d_model + 10
    while lo < hi:
        mid = (lo + hi) // 2
        if 4 * mid * mid * d_model >= 8 * mid * d_model * d_model:
            hi = mid
        else:
            lo = mid + 1
    return lo


# ============================================================================ mha_param_count
def params_four_scalar_biases(d_model, bias=True):
    weights = 4 * d_model * d_model
    if bias:
        weights += 4
    return weights


def params_bias_is_not_none(d_model, bias=True):
    count = 4 * d_model ** 2
    if bias is not None:
        count += 4 * d_model
    return count


def params_conditional_precedence(d_model, bias=True):
    return 4 * d_model ** 2 + 4 * d_model if bias else 0


def params_float_factorised(d_model, bias=True):
    base = 4 * d_model ** 2
    return base * (1 + 1 / d_model) if bias else base


def params_three_weight_matrices(d_model, bias=True):
    d = d_model
    mats = [(d, d), (d, d), (d, d)]  # W_q, W_k, W_v
    total = sum(r * c for r, c in mats)
    if bias:
        total += 4 * d
    return total


def params_output_bias_forgotten(d_model, bias=True):
    total = 4 * d_model * d_model
    if bias:
        total += 3 * d_model  # b_q, b_k, b_v
    return total


def params_right_bool_arithmetic(d_model, bias=True):
    return 4 * d_model * (d_model + int(bias))


def params_right_shape_list(d_model, bias=True):
    shapes = [(d_model, d_model)] * 4
    if bias:
        shapes += [(d_model,)] * 4
    return sum(reduce(mul, s, 1) for s in shapes)


ENTRIES = [
    Entry("mha_flops", "wrong", "multiply_add_counted_once",
          "counts one multiply-add as 1 FLOP instead of 2, so every entry is half the answer",
          flops_multiply_add_as_one),
    Entry("mha_flops", "wrong", "total_misses_output_projection",
          "the total adds the projections, scores and weighted sum but leaves out the output "
          "projection", flops_total_missing_output),
    Entry("mha_flops", "wrong", "math_pow_gives_floats",
          "uses math.pow(d_model, 2), which returns a float, so the projection counts and the "
          "total are floats instead of plain ints", flops_math_pow_float),
    Entry("mha_flops", "wrong", "one_projection_for_qkv",
          "counts a single (N, d) @ (d, d) product for the Q, K and V projections instead of "
          "three, so qkv_projections is 2 N d^2 instead of 6 N d^2", flops_one_projection),
    Entry("mha_flops", "wrong", "scores_n_d_squared",
          "writes the scores as 2 N d^2 (d where N belongs) instead of 2 N^2 d",
          flops_scores_n_d_d),
    Entry("mha_flops", "wrong", "square_precedence",
          "writes `(2 * seq_len) ** 2 * d_model`, squaring the factor 2 too, so the scores and "
          "weighted sum are 4 N^2 d instead of 2 N^2 d", flops_square_precedence),
    Entry("mha_flops", "right", "matmul_shape_costs", None, flops_right_matmul_shapes),
    Entry("mha_flops", "right", "closed_form_total", None, flops_right_closed_form),

    Entry("crossover_seq_len", "wrong", "floor_division_precedence",
          "writes `8 * d * d // 4 * d`, which by left-to-right precedence multiplies by d "
          "instead of dividing, giving 2 d^3", crossover_floor_div_precedence),
    Entry("crossover_seq_len", "wrong", "ratio_inverted",
          "solves 4 N^2 d = 8 N d^2 upside down and returns d_model // 2 instead of 2 d_model",
          crossover_ratio_inverted),
    Entry("crossover_seq_len", "wrong", "only_one_quadratic_term",
          "sets only one of the two N^2 terms (2 N^2 d) equal to the projections, giving "
          "4 d_model", crossover_one_quadratic_term),
    Entry("crossover_seq_len", "wrong", "search_stops_one_late",
          "its search loop keeps going while the N^2 terms are <= the projections, so it steps "
          "past the equality and returns 2 d_model + 1", crossover_search_off_by_one),
    Entry("crossover_seq_len", "wrong", "numpy_integer_result",
          "finds N with a numpy search and returns the np.int64 element instead of a plain "
          "Python int", crossover_numpy_search),
    Entry("crossover_seq_len", "wrong", "wrong_quadratic_root",
          "takes the minus root of 4 d N^2 - 8 d^2 N = 0, the trivial N = 0, instead of the "
          "positive one", crossover_wrong_root),
    Entry("crossover_seq_len", "right", "divide_by_4_n_d", None, crossover_right_solve),
    Entry("crossover_seq_len", "right", "integer_bisection", None, crossover_right_bisect),

    Entry("mha_param_count", "wrong", "four_scalar_biases",
          "adds 4 for the biases, as if each bias were one number, instead of 4 d_model",
          params_four_scalar_biases),
    Entry("mha_param_count", "wrong", "bias_is_not_none",
          "tests `bias is not None`, which is true for bias=False too, so the biases are always "
          "counted", params_bias_is_not_none),
    Entry("mha_param_count", "wrong", "conditional_expression_precedence",
          "writes `4*d**2 + 4*d if bias else 0`; the conditional binds loosest, so bias=False "
          "returns 0 instead of 4 d^2", params_conditional_precedence),
    Entry("mha_param_count", "wrong", "float_factorised",
          "factorises the count as 4 d^2 (1 + 1/d), whose `/` makes the result a float instead "
          "of a plain int", params_float_factorised),
    Entry("mha_param_count", "wrong", "output_projection_weights_forgotten",
          "counts only W_q, W_k and W_v (3 d^2) and forgets the output projection W_o",
          params_three_weight_matrices),
    Entry("mha_param_count", "wrong", "output_bias_forgotten",
          "counts the biases of Q, K and V (3 d_model) but forgets the output projection's "
          "bias", params_output_bias_forgotten),
    Entry("mha_param_count", "right", "bool_as_int_factorised", None,
          params_right_bool_arithmetic),
    Entry("mha_param_count", "right", "product_of_shapes", None, params_right_shape_list),
]
