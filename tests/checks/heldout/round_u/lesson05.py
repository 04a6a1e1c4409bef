"""Held-out catalogue, lesson 05 (FLOPs and parameters, plain ints): mha_flops,
crossover_seq_len, mha_param_count."""

import math
from fractions import Fraction

import numpy as np
from torch import nn

from entry import Entry


# --------------------------------------------------------------------------- mha_flops, wrong
def flops_one_per_mac(seq_len, d_model):
    n, d = seq_len, d_model
    parts = {
        "qkv_projections": 3 * n * d * d,
        "scores": n * n * d,
        "weighted_sum": n * n * d,
        "output_projection": n * d * d,
    }
    parts["total"] = sum(parts.values())
    return parts


def flops_one_projection(seq_len, d_model):
    qkv = 2 * seq_len * d_model ** 2
    scores = 2 * seq_len ** 2 * d_model
    weighted = 2 * seq_len ** 2 * d_model
    out = 2 * seq_len * d_model ** 2
    return {"qkv_projections": qkv, "scores": scores, "weighted_sum": weighted,
            "output_projection": out, "total": qkv + scores + weighted + out}


def flops_total_misses_output(seq_len, d_model):
    N, d = seq_len, d_model
    qkv = 6 * N * d * d
    sc = 2 * N * N * d
    ws = 2 * N * N * d
    op = 2 * N * d * d
    return dict(qkv_projections=qkv, scores=sc, weighted_sum=ws, output_projection=op,
                total=qkv + sc + ws)


def flops_true_division(seq_len, d_model):
    n, d = seq_len, d_model
    macs = {
        "qkv_projections": 3 * n * d * d,
        "scores": n * n * d,
        "weighted_sum": n * n * d,
        "output_projection": n * d * d,
    }
    result = {key: 4 * value / 2 for key, value in macs.items()}
    result["total"] = sum(result.values())
    return result


def flops_squares_swapped(seq_len, d_model):
    n, d = seq_len, d_model
    out = {"qkv_projections": 6 * n * d ** 2,
           "scores": 2 * n * d ** 2,
           "weighted_sum": 2 * n * d ** 2,
           "output_projection": 2 * n * d ** 2}
    out["total"] = sum(out.values())
    return out


def flops_causal_half(seq_len, d_model):
    n, d = seq_len, d_model
    flops = {}
    flops["qkv_projections"] = 6 * n * d * d
    flops["scores"] = n * n * d  # only the lower triangle is needed
    flops["weighted_sum"] = n * n * d
    flops["output_projection"] = 2 * n * d * d
    flops["total"] = sum(flops.values())
    return flops


# --------------------------------------------------------------------------- mha_flops, right
def flops_from_product_shapes(seq_len, d_model):
    def matmul(m, k, n):
        return 2 * m * k * n

    n, d = int(seq_len), int(d_model)
    parts = {
        "qkv_projections": sum(matmul(n, d, d) for _ in ("q", "k", "v")),
        "scores": matmul(n, d, n),
        "weighted_sum": matmul(n, n, d),
        "output_projection": matmul(n, d, d),
    }
    parts["total"] = sum(parts.values())
    return parts


def flops_closed_total(seq_len, d_model):
    n, d = seq_len, d_model
    keys = ("qkv_projections", "scores", "weighted_sum", "output_projection")
    coeff = {"qkv_projections": (6, 1, 2), "scores": (2, 2, 1), "weighted_sum": (2, 2, 1),
             "output_projection": (2, 1, 2)}
    res = {key: c * n ** pn * d ** pd for key, (c, pn, pd) in coeff.items()}
    res = {key: res[key] for key in keys}
    res["total"] = 8 * n * d * d + 4 * n * n * d
    return res


# ------------------------------------------------------------------- crossover_seq_len, wrong
def crossover_one_quadratic_term(d_model):
    # 2 N^2 d = 8 N d^2
    return 4 * d_model


def crossover_precedence(d_model):
    return 8 * d_model ** 2 // 4 * d_model


def crossover_qkv_only(d_model):
    # 4 N^2 d = 6 N d^2
    return 3 * d_model // 2


def crossover_square_root(d_model):
    return int(math.sqrt(2 * d_model))


def crossover_search_past_equality(d_model):
    d = d_model
    n = 1
    while 4 * n * n * d <= 8 * n * d * d:
        n += 1
    return n


def crossover_argmax_numpy(d_model):
    ns = np.arange(1, 4 * d_model + 2)
    quadratic = 4 * ns ** 2 * d_model
    linear = 8 * ns * d_model ** 2
    return ns[np.argmax(quadratic >= linear)]


# ------------------------------------------------------------------- crossover_seq_len, right
def crossover_fraction(d_model):
    ratio = Fraction(8 * d_model * d_model, 4 * d_model)
    return int(ratio)


def crossover_bisection(d_model):
    lo, hi = 1, 16 * d_model
    while lo < hi:  # smallest N with 4 N^2 d >= 8 N d^2
        mid = (lo + hi) // 2
        if 4 * mid * mid * d_model >= 8 * mid * d_model * d_model:
            hi = mid
        else:
            lo = mid + 1
    return lo


# --------------------------------------------------------------------- mha_param_count, wrong
def params_scalar_biases(d_model, bias=True):
    return 4 * d_model * d_model + (4 if bias else 0)


def params_conditional_precedence(d_model, bias=True):
    return 4 * d_model * d_model + 4 * d_model if bias else 0


def params_no_output_matrix(d_model, bias=True):
    count = 3 * d_model ** 2
    if bias:
        count += 3 * d_model
    return count


def params_math_pow(d_model, bias=True):
    total = 4 * math.pow(d_model, 2)
    if bias:
        total += 4 * d_model
    return total


def params_augmented_matrix(d_model, bias=True):
    rows = d_model + 1 if bias else d_model
    cols = d_model + 1 if bias else d_model
    return 4 * rows * cols


def params_in_bytes(d_model, bias=True):
    n_params = 4 * d_model * d_model + (4 * d_model if bias else 0)
    return 2 * n_params  # fp16


# --------------------------------------------------------------------- mha_param_count, right
def params_shape_list(d_model, bias=True):
    shapes = [(d_model, d_model)] * 4
    if bias:
        shapes += [(d_model,)] * 4
    return sum(math.prod(s) for s in shapes)


def params_torch_module(d_model, bias=True):
    layer = nn.MultiheadAttention(d_model, 1, bias=bias)
    return int(sum(p.numel() for p in layer.parameters()))


E = Entry
ENTRIES = [
    E(exercise="mha_flops", kind="wrong", label="one_flop_per_mac",
      mistake="Counts one multiply-add as 1 FLOP instead of 2, so every term is half the "
              "expected count.",
      func=flops_one_per_mac),
    E(exercise="mha_flops", kind="wrong", label="qkv_as_one_product",
      mistake="Counts the Q, K and V projections as a single (N, d) @ (d, d) product, "
              "2 N d^2 instead of 6 N d^2.",
      func=flops_one_projection),
    E(exercise="mha_flops", kind="wrong", label="total_omits_output_projection",
      mistake="Leaves the output projection out of the total: total = 6 N d^2 + 4 N^2 d "
              "instead of 8 N d^2 + 4 N^2 d.",
      func=flops_total_misses_output),
    E(exercise="mha_flops", kind="wrong", label="float_counts",
      mistake="Converts with `/ 2`, so every count is a float instead of the plain Python "
              "int the contract asks for.",
      func=flops_true_division),
    E(exercise="mha_flops", kind="wrong", label="scores_n_d_squared",
      mistake="Writes the scores and weighted-sum terms as 2 N d^2 (squaring d) instead of "
              "2 N^2 d (squaring N).",
      func=flops_squares_swapped),
    E(exercise="mha_flops", kind="wrong", label="causal_halving",
      mistake="Halves the scores and weighted-sum terms for a causal mask, although the "
              "contract counts dense attention (no causal saving).",
      func=flops_causal_half),
    E(exercise="mha_flops", kind="right", label="matmul_shape_helper", mistake=None,
      func=flops_from_product_shapes),
    E(exercise="mha_flops", kind="right", label="coefficient_table_closed_total",
      mistake=None, func=flops_closed_total),

    E(exercise="crossover_seq_len", kind="wrong", label="one_quadratic_term",
      mistake="Sets only one of the two N^2 terms (2 N^2 d) equal to the projections, "
              "getting 4 d_model instead of 2 d_model.",
      func=crossover_one_quadratic_term),
    E(exercise="crossover_seq_len", kind="wrong", label="floordiv_precedence",
      mistake="Writes `8 * d ** 2 // 4 * d`, which evaluates left to right as "
              "(8 d^2 // 4) * d = 2 d^3 instead of 8 d^2 / (4 d) = 2 d.",
      func=crossover_precedence),
    E(exercise="crossover_seq_len", kind="wrong", label="qkv_projections_only",
      mistake="Compares the N^2 terms with the Q/K/V projections only (6 N d^2), leaving out "
              "the output projection, so it returns 1.5 d_model.",
      func=crossover_qkv_only),
    E(exercise="crossover_seq_len", kind="wrong", label="square_root",
      mistake="Solves N^2 = 2 d_model (a square root) instead of cancelling one N from both "
              "sides: N = 2 d_model.",
      func=crossover_square_root),
    E(exercise="crossover_seq_len", kind="wrong", label="search_past_equality",
      mistake="Searches with `<=` in the loop condition, so it steps past the equality and "
              "returns 2 d_model + 1.",
      func=crossover_search_past_equality),
    E(exercise="crossover_seq_len", kind="wrong", label="numpy_int",
      mistake="Returns an element of a numpy array (`np.int64`) instead of the plain Python "
              "int the contract asks for.",
      func=crossover_argmax_numpy),
    E(exercise="crossover_seq_len", kind="right", label="fraction", mistake=None,
      func=crossover_fraction),
    E(exercise="crossover_seq_len", kind="right", label="bisection", mistake=None,
      func=crossover_bisection),

    E(exercise="mha_param_count", kind="wrong", label="scalar_biases",
      mistake="Counts each bias as one number (+4) instead of a vector of d_model numbers "
              "(+4 d_model).",
      func=params_scalar_biases),
    E(exercise="mha_param_count", kind="wrong", label="conditional_expression_precedence",
      mistake="Writes `4*d*d + 4*d if bias else 0`: the conditional expression covers the "
              "whole sum, so bias=False returns 0 instead of 4 d^2.",
      func=params_conditional_precedence),
    E(exercise="mha_param_count", kind="wrong", label="forgets_w_o",
      mistake="Counts only the Q, K and V projections (3 d^2 + 3 d), leaving out the output "
              "projection W_o and its bias.",
      func=params_no_output_matrix),
    E(exercise="mha_param_count", kind="wrong", label="math_pow_float",
      mistake="Uses `math.pow`, which returns a float, so the count is a float instead of a "
              "plain int.",
      func=params_math_pow),
    E(exercise="mha_param_count", kind="wrong", label="augmented_matrix",
      mistake="Treats each biased projection as a (d+1) x (d+1) augmented matrix, counting "
              "4 (d+1)^2 instead of 4 d^2 + 4 d.",
      func=params_augmented_matrix),
    E(exercise="mha_param_count", kind="wrong", label="bytes_not_params",
      mistake="Returns the size in bytes at 2 bytes per fp16 parameter instead of the number "
              "of parameters.",
      func=params_in_bytes),
    E(exercise="mha_param_count", kind="right", label="sum_of_shapes", mistake=None,
      func=params_shape_list),
    E(exercise="mha_param_count", kind="right", label="torch_multiheadattention_numel",
      mistake=None, func=params_torch_module),
]
