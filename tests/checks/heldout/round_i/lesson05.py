"""Lesson 05 (flops): mha_flops, crossover_seq_len, mha_param_count, plain Python ints."""

import math

import numpy as np

from entry import Entry


# ---------------------------------------------------------------- mha_flops
def flops_proj_mac_as_one(seq_len, d_model):
    n, d = seq_len, d_model
    parts = {"qkv_projections": 3 * n * d * d, "scores": 2 * n * n * d,
             "weighted_sum": 2 * n * n * d, "output_projection": 2 * n * d * d}
    parts["total"] = sum(parts.values())
    return parts


def flops_square_precedence(seq_len, d_model):
    n, d = seq_len, d_model
    parts = {"qkv_projections": 6 * n * d ** 2, "scores": (2 * n) ** 2 * d,
             "weighted_sum": 2 * n ** 2 * d, "output_projection": 2 * n * d ** 2}
    parts["total"] = sum(parts.values())
    return parts


def flops_floats(seq_len, d_model):
    n, d = seq_len, d_model
    parts = {"qkv_projections": 6.0 * n * d * d, "scores": 2.0 * n * n * d,
             "weighted_sum": 2.0 * n * n * d, "output_projection": 2.0 * n * d * d}
    parts["total"] = sum(parts.values())
    return parts


def flops_key_name(seq_len, d_model):
    n, d = seq_len, d_model
    parts = {"qkv_projections": 6 * n * d * d, "scores": 2 * n * n * d,
             "weighted_sum": 2 * n * n * d, "out_projection": 2 * n * d * d}
    parts["total"] = sum(parts.values())
    return parts


def flops_total_without_output(seq_len, d_model):
    n, d = seq_len, d_model
    qkv, scores, wsum, out = 6 * n * d * d, 2 * n * n * d, 2 * n * n * d, 2 * n * d * d
    return {"qkv_projections": qkv, "scores": scores, "weighted_sum": wsum,
            "output_projection": out, "total": qkv + scores + wsum}


def flops_weighted_sum_nd2(seq_len, d_model):
    n, d = seq_len, d_model
    parts = {"qkv_projections": 6 * n * d * d, "scores": 2 * n * n * d,
             "weighted_sum": 2 * n * d * d, "output_projection": 2 * n * d * d}
    parts["total"] = sum(parts.values())
    return parts


def flops_matmul_helper(seq_len, d_model):
    def mm(m, k, n):
        return 2 * m * k * n

    n, d = int(seq_len), int(d_model)
    parts = {
        "qkv_projections": sum(mm(n, d, d) for _ in "qkv"),
        "scores": mm(n, d, n),
        "weighted_sum": mm(n, n, d),
        "output_projection": mm(n, d, d),
    }
    parts["total"] = parts["qkv_projections"] + parts["scores"] + parts["weighted_sum"] \
        + parts["output_projection"]
    return parts


def flops_factored(seq_len, d_model):
    n, d = seq_len, d_model
    proj_unit = 2 * n * d * d
    attn_unit = 2 * n * n * d
    return {"qkv_projections": 3 * proj_unit, "scores": attn_unit, "weighted_sum": attn_unit,
            "output_projection": proj_unit, "total": 4 * proj_unit + 2 * attn_unit}


# ---------------------------------------------------------------- crossover_seq_len
def cross_inverted(d_model):
    return d_model // 2


def cross_true_division(d_model):
    return 8 * d_model * d_model / (4 * d_model)


def cross_qkv_only(d_model):
    return 6 * d_model * d_model // (4 * d_model)


def cross_scores_only(d_model):
    return 8 * d_model * d_model // (2 * d_model)


def cross_search_steps_back(d_model):
    d = d_model
    n = 1
    while 4 * n * n * d < 8 * n * d * d:
        n += 1
    return n - 1


def cross_extra_d(d_model):
    return 8 * d_model ** 2 // 4


def cross_search(d_model):
    n = 1
    while 4 * n * n * d_model != 8 * n * d_model * d_model:
        n += 1
    return n


def cross_ratio(d_model):
    return (8 * d_model * d_model) // (4 * d_model)


# ---------------------------------------------------------------- mha_param_count
def params_one_bias(d_model, bias=True):
    return 4 * d_model * d_model + (d_model if bias else 0)


def params_bias_is_not_none(d_model, bias=True):
    total = 4 * d_model * d_model
    if bias is not None:
        total += 4 * d_model
    return total


def params_float_power(d_model, bias=True):
    return 4 * d_model ** 2.0 + (4 * d_model if bias else 0)


def params_forgets_w_o(d_model, bias=True):
    return 3 * d_model * d_model + (3 * d_model if bias else 0)


def params_conditional_precedence(d_model, bias=True):
    return 4 * d_model ** 2 + 4 * d_model if bias else 0


def params_square_precedence(d_model, bias=True):
    return (4 * d_model) ** 2 + (4 * d_model if bias else 0)


def params_bool_arithmetic(d_model, bias=True):
    return 4 * d_model * (d_model + bias)


def params_shapes(d_model, bias=True):
    shapes = [(d_model, d_model)] * 4
    if bias:
        shapes += [(d_model,)] * 4
    return sum(math.prod(s) for s in shapes)


E = "mha_flops"
ENTRIES = [
    Entry(E, "wrong", "projection_mac_as_one", "The Q/K/V projections count one FLOP per "
          "multiply-add (3 N d^2) instead of two (6 N d^2).", flops_proj_mac_as_one),
    Entry(E, "wrong", "square_precedence", "The scores are written (2 * n) ** 2 * d, which "
          "squares the 2 as well, instead of 2 * n ** 2 * d.", flops_square_precedence),
    Entry(E, "wrong", "float_counts", "Writing 6.0, 2.0 makes every count a float instead of "
          "the plain int the contract asks for.", flops_floats),
    Entry(E, "wrong", "misspelt_key", "The output projection is stored under the key "
          "'out_projection' instead of 'output_projection'.", flops_key_name),
    Entry(E, "wrong", "total_without_output_projection", "The total adds up the Q/K/V, scores "
          "and weighted-sum terms but leaves out the output projection.",
          flops_total_without_output),
    Entry(E, "wrong", "weighted_sum_as_nd2", "The weighted sum is counted as 2 N d^2 instead of "
          "2 N^2 d, mixing up N and d.", flops_weighted_sum_nd2),
    Entry(E, "right", "matmul_helper", None, flops_matmul_helper),
    Entry(E, "right", "factored_units", None, flops_factored),
]

E = "crossover_seq_len"
ENTRIES += [
    Entry(E, "wrong", "ratio_inverted", "It solves the balance upside down and returns "
          "d_model // 2 instead of 2 * d_model.", cross_inverted),
    Entry(E, "wrong", "true_division", "It divides with /, returning a float instead of a "
          "plain int.", cross_true_division),
    Entry(E, "wrong", "qkv_only", "It balances the N^2 terms against the Q/K/V projections "
          "only (6 N d^2), forgetting the output projection.", cross_qkv_only),
    Entry(E, "wrong", "scores_only", "It counts only the scores product (2 N^2 d) as the "
          "N^2 term, forgetting the weighted sum.", cross_scores_only),
    Entry(E, "wrong", "search_steps_back", "The search loop stops at the first N where the "
          "terms balance but then returns n - 1, one short.", cross_search_steps_back),
    Entry(E, "wrong", "keeps_an_extra_d", "It cancels N but forgets to cancel one factor of d, "
          "returning 2 d^2.", cross_extra_d),
    Entry(E, "right", "linear_search", None, cross_search),
    Entry(E, "right", "ratio_of_coefficients", None, cross_ratio),
]

E = "mha_param_count"
ENTRIES += [
    Entry(E, "wrong", "one_bias_vector", "With bias it adds d (one bias vector) instead of 4 d "
          "(one per projection).", params_one_bias),
    Entry(E, "wrong", "bias_is_not_none", "The guard tests bias is not None, so bias=False "
          "still adds the biases.", params_bias_is_not_none),
    Entry(E, "wrong", "float_power", "d_model ** 2.0 makes the count a float instead of a "
          "plain int.", params_float_power),
    Entry(E, "wrong", "forgets_w_o", "It counts only W_q, W_k, W_v (and their biases), "
          "forgetting the output projection.", params_forgets_w_o),
    Entry(E, "wrong", "conditional_precedence", "The conditional expression binds loosest, so "
          "4d^2 + 4d if bias else 0 returns 0 when bias is False.",
          params_conditional_precedence),
    Entry(E, "wrong", "square_precedence", "It writes (4 * d) ** 2, squaring the 4, instead of "
          "4 * d ** 2.", params_square_precedence),
    Entry(E, "right", "bool_arithmetic", None, params_bool_arithmetic),
    Entry(E, "right", "sum_of_shapes", None, params_shapes),
]
