"""Held-out catalogue, lesson 05 (mha_flops, crossover_seq_len, mha_param_count): plain ints."""

import functools
import math
import operator
from fractions import Fraction

from entry import Entry


# ============================================================================ mha_flops
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


def flops_total_without_output(seq_len, d_model):
    qkv = 6 * seq_len * d_model ** 2
    scores = 2 * seq_len ** 2 * d_model
    mix = 2 * seq_len ** 2 * d_model
    proj = 2 * seq_len * d_model ** 2
    return {"qkv_projections": qkv, "scores": scores, "weighted_sum": mix,
            "output_projection": proj, "total": qkv + scores + mix}


def flops_true_division(seq_len, d_model):
    N, d = seq_len, d_model
    attn = 4 * N ** 2 * d
    result = {
        "qkv_projections": 6 * N * d ** 2,
        "scores": attn / 2,
        "weighted_sum": attn / 2,
        "output_projection": 2 * N * d ** 2,
    }
    result["total"] = 8 * N * d ** 2 + attn
    return result


def flops_precedence(seq_len, d_model):
    d = d_model
    scores = (2 * seq_len) ** 2 * d
    weighted = (2 * seq_len) ** 2 * d
    qkv = 3 * 2 * seq_len * d * d
    out_proj = 2 * seq_len * d * d
    return {"qkv_projections": qkv, "scores": scores, "weighted_sum": weighted,
            "output_projection": out_proj, "total": qkv + scores + weighted + out_proj}


def flops_causal_half(seq_len, d_model):
    n, d = seq_len, d_model
    pairs = n * (n + 1) // 2  # a causal model only needs the lower triangle
    parts = {
        "qkv_projections": 6 * n * d * d,
        "scores": 2 * pairs * d,
        "weighted_sum": 2 * pairs * d,
        "output_projection": 2 * n * d * d,
    }
    parts["total"] = sum(parts.values())
    return parts


def flops_qkv_single(seq_len, d_model):
    n, d = seq_len, d_model
    proj = 2 * n * d * d
    parts = {"qkv_projections": proj, "scores": 2 * n * n * d, "weighted_sum": 2 * n * n * d,
             "output_projection": proj}
    parts["total"] = sum(parts.values())
    return parts


def flops_from_matmul_shapes(seq_len, d_model):
    def matmul(m, k, n):
        return 2 * m * k * n

    N, D = seq_len, d_model
    res = {
        "qkv_projections": sum(matmul(N, D, D) for _ in "qkv"),
        "scores": matmul(N, D, N),
        "weighted_sum": matmul(N, N, D),
        "output_projection": matmul(N, D, D),
    }
    res["total"] = functools.reduce(operator.add, res.values())
    return res


def flops_closed_form(seq_len, d_model):
    n, d = int(seq_len), int(d_model)
    total = 8 * n * d * d + 4 * n * n * d
    return dict(qkv_projections=6 * n * d * d, scores=2 * n * n * d,
                weighted_sum=2 * n * n * d, output_projection=2 * n * d * d, total=total)


# ============================================================================ crossover_seq_len
def crossover_scores_only(d_model):
    # 2 N^2 d = 8 N d^2
    return 4 * d_model


def crossover_ratio_inverted(d_model):
    return (4 * d_model) // 8


def crossover_true_division(d_model):
    return 8 * d_model ** 2 / (4 * d_model)


def crossover_no_output_projection(d_model):
    # 4 N^2 d = 6 N d^2
    return 6 * d_model // 4


def crossover_precedence(d_model):
    return 8 * d_model ** 2 // 4 * d_model


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
    return int(Fraction(8 * d_model ** 2, 4 * d_model))


# ============================================================================ mha_param_count
def params_no_w_o(d_model, bias=True):
    count = 3 * d_model * d_model
    if bias:
        count += 4 * d_model
    return count


def params_conditional_precedence(d_model, bias=True):
    return 4 * d_model ** 2 + 4 * d_model if bias else 0


def params_float_formula(d_model, bias=True):
    if bias:
        return 4 * d_model ** 2 * (1 + 1 / d_model)
    return 4 * d_model ** 2


def params_bias_ignored(d_model, bias=True):
    weights = 4 * d_model * d_model
    biases = 4 * d_model
    return weights + biases


def params_scalar_bias(d_model, bias=True):
    total = 4 * d_model * d_model
    if bias:
        total += 4  # one bias per matrix
    return total


def params_one_bias_vector(d_model, bias=True):
    return 4 * d_model * d_model + int(bias) * d_model


def params_bool_arithmetic(d_model, bias=True):
    return 4 * d_model * (d_model + bias)


def params_shapes(d_model, bias=True):
    shapes = {name: (d_model, d_model) for name in ("w_q", "w_k", "w_v", "w_o")}
    if bias:
        shapes.update({name: (d_model,) for name in ("b_q", "b_k", "b_v", "b_o")})
    return sum(math.prod(s) for s in shapes.values())


ENTRIES = [
    Entry("mha_flops", "wrong", "one_flop_per_multiply_add",
          "counts one FLOP per multiply-add, so every term is half the course's count",
          flops_one_per_mac),
    Entry("mha_flops", "wrong", "total_without_output_projection",
          "the total adds the projections, scores and weighted sum but leaves out the output "
          "projection", flops_total_without_output),
    Entry("mha_flops", "wrong", "true_division_gives_floats",
          "splits the attention FLOPs with `/ 2`, so scores and weighted_sum come back as floats "
          "instead of plain ints", flops_true_division),
    Entry("mha_flops", "wrong", "squares_the_factor_two",
          "writes (2 * N) ** 2 * d, squaring the factor 2 as well, so scores and weighted_sum "
          "are 4 N^2 d each instead of 2 N^2 d", flops_precedence),
    Entry("mha_flops", "wrong", "causal_saving_applied",
          "counts only the causal lower triangle of (query, key) pairs, N(N+1)/2, although the "
          "exercise asks for dense attention", flops_causal_half),
    Entry("mha_flops", "wrong", "qkv_counted_once",
          "counts the Q, K and V projections as a single (N, d) @ (d, d) product, 2 N d^2 "
          "instead of 6 N d^2", flops_qkv_single),
    Entry("mha_flops", "right", "matmul_shape_helper", None, flops_from_matmul_shapes),
    Entry("mha_flops", "right", "closed_form_total", None, flops_closed_form),

    Entry("crossover_seq_len", "wrong", "scores_term_only",
          "equates only the scores term (2 N^2 d) with the projections, giving 4 d_model "
          "instead of 2 d_model", crossover_scores_only),
    Entry("crossover_seq_len", "wrong", "ratio_inverted",
          "solves the equation upside down, N = 4 d / 8 = d_model / 2", crossover_ratio_inverted),
    Entry("crossover_seq_len", "wrong", "true_division_float",
          "divides with `/`, so it returns a float (2.0 * d_model) instead of an int",
          crossover_true_division),
    Entry("crossover_seq_len", "wrong", "output_projection_left_out",
          "compares the N^2 terms with the Q, K, V projections only (6 N d^2), leaving out the "
          "output projection, so it returns 1.5 d_model", crossover_no_output_projection),
    Entry("crossover_seq_len", "wrong", "precedence_multiplies_d",
          "`8 * d ** 2 // 4 * d` is (8 d^2 // 4) * d = 2 d^3: the trailing * d multiplies "
          "instead of dividing", crossover_precedence),
    Entry("crossover_seq_len", "wrong", "first_n_past_crossover",
          "searches with <= and returns the first N where the N^2 terms exceed the projections, "
          "one past the crossover", crossover_first_exceeding),
    Entry("crossover_seq_len", "right", "linear_search", None, crossover_search),
    Entry("crossover_seq_len", "right", "fraction_ratio", None, crossover_fraction),

    Entry("mha_param_count", "wrong", "no_output_matrix",
          "counts three weight matrices (Q, K, V) and forgets W_o", params_no_w_o),
    Entry("mha_param_count", "wrong", "conditional_expression_precedence",
          "`4*d**2 + 4*d if bias else 0` applies the conditional to the whole sum, so "
          "bias=False returns 0 instead of 4 d^2", params_conditional_precedence),
    Entry("mha_param_count", "wrong", "float_formula",
          "uses 4 d^2 (1 + 1/d) for the bias case, which returns a float instead of a plain int",
          params_float_formula),
    Entry("mha_param_count", "wrong", "bias_flag_ignored",
          "always adds the 4 d biases, ignoring bias=False", params_bias_ignored),
    Entry("mha_param_count", "wrong", "scalar_bias_per_matrix",
          "counts one scalar bias per matrix (+4) instead of a bias vector of d_model per matrix "
          "(+4 d)", params_scalar_bias),
    Entry("mha_param_count", "wrong", "single_bias_vector",
          "adds one bias vector of d_model instead of four (one per projection)",
          params_one_bias_vector),
    Entry("mha_param_count", "right", "bool_arithmetic", None, params_bool_arithmetic),
    Entry("mha_param_count", "right", "sum_of_shapes", None, params_shapes),
]
