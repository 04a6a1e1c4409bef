"""Lesson 05 (plain ints): mha_flops, crossover_seq_len, mha_param_count; round j entries."""

import math
from fractions import Fraction

from entry import Entry

# --------------------------------------------------------------------------------- mha_flops


def flops_macs(seq_len, d_model):
    n, d = seq_len, d_model
    parts = {"qkv_projections": 3 * n * d * d, "scores": n * n * d,
             "weighted_sum": n * n * d, "output_projection": n * d * d}
    parts["total"] = sum(parts.values())
    return parts


def flops_total_missing_output(seq_len, d_model):
    n, d = seq_len, d_model
    qkv, sc, ws, op = 6 * n * d * d, 2 * n * n * d, 2 * n * n * d, 2 * n * d * d
    return {"qkv_projections": qkv, "scores": sc, "weighted_sum": ws,
            "output_projection": op, "total": qkv + sc + ws}


def flops_qkv_one_projection(seq_len, d_model):
    n, d = seq_len, d_model
    parts = {"qkv_projections": 2 * n * d * d, "scores": 2 * n * n * d,
             "weighted_sum": 2 * n * n * d, "output_projection": 2 * n * d * d}
    parts["total"] = sum(parts.values())
    return parts


def flops_math_pow(seq_len, d_model):
    n, d = seq_len, d_model
    parts = {"qkv_projections": 6 * n * math.pow(d, 2), "scores": 2 * math.pow(n, 2) * d,
             "weighted_sum": 2 * math.pow(n, 2) * d, "output_projection": 2 * n * math.pow(d, 2)}
    parts["total"] = sum(parts.values())
    return parts


def flops_key_typo(seq_len, d_model):
    n, d = seq_len, d_model
    parts = {"qkv_projection": 6 * n * d * d, "scores": 2 * n * n * d,
             "weighted_sum": 2 * n * n * d, "output_projection": 2 * n * d * d}
    parts["total"] = sum(parts.values())
    return parts


def flops_n_d_swapped(seq_len, d_model):
    n, d = seq_len, d_model
    parts = {"qkv_projections": 6 * n * d * d, "scores": 2 * n * d * d,
             "weighted_sum": 2 * n * d * d, "output_projection": 2 * n * d * d}
    parts["total"] = sum(parts.values())
    return parts


def flops_matmul_helper(seq_len, d_model):
    def mm(m, k, n):
        return 2 * m * k * n

    n, d = seq_len, d_model
    parts = {
        "qkv_projections": sum(mm(n, d, d) for _ in "qkv"),
        "scores": mm(n, d, n),
        "weighted_sum": mm(n, n, d),
        "output_projection": mm(n, d, d),
    }
    parts["total"] = sum(parts.values())
    return parts


def flops_per_head_fraction(seq_len, d_model):
    n, d = seq_len, d_model
    heads = d  # one feature per head: the sum over heads does not depend on H
    per_head = Fraction(d, heads)
    sc = int(sum(2 * n * n * per_head for _ in range(heads)))
    out = {"qkv_projections": int(Fraction(6) * n * d * d), "scores": sc,
           "weighted_sum": sc, "output_projection": 2 * n * d * d}
    out["total"] = 8 * n * d * d + 4 * n * n * d
    return out


# ------------------------------------------------------------------------- crossover_seq_len


def cross_missing_factor_two(d_model):
    return d_model


def cross_float(d_model):
    return 2.0 * d_model


def cross_ratio_inverted(d_model):
    return d_model // 2


def cross_scores_vs_qkv_only(d_model):
    # 2 N^2 d = 6 N d^2
    return 3 * d_model


def cross_squared(d_model):
    return 2 * d_model ** 2


def cross_first_n_exceeding(d_model):
    n = 1
    while 4 * n * n * d_model <= 8 * n * d_model * d_model:
        n += 1
    return n


def cross_search(d_model):
    n = 1
    while 4 * n * n * d_model < 8 * n * d_model * d_model:
        n += 1
    return n


def cross_fraction(d_model):
    return int(Fraction(8 * d_model * d_model, 4 * d_model))


# --------------------------------------------------------------------------- mha_param_count


def params_bias_scalar(d_model, bias=True):
    return 4 * d_model * d_model + (4 if bias else 0)


def params_tuple(d_model, bias=True):
    return (4 * d_model * d_model, 4 * d_model if bias else 0)


def params_three_matrices(d_model, bias=True):
    return 3 * d_model * d_model + (3 * d_model if bias else 0)


def params_precedence(d_model, bias=True):
    return (4 * d_model) ** 2 + (4 * d_model if bias else 0)


def params_float(d_model, bias=True):
    return 4 * d_model ** 2 + (4.0 * d_model if bias else 0.0)


def params_flag_inverted(d_model, bias=True):
    return 4 * d_model * d_model + (4 * d_model if not bias else 0)


def params_prod_list(d_model, bias=True):
    shapes = [(d_model, d_model)] * 4 + ([(d_model,)] * 4 if bias else [])
    return sum(math.prod(s) for s in shapes)


def params_augmented_rows(d_model, bias=True):
    rows = d_model + 1 if bias else d_model
    return 4 * rows * d_model


ENTRIES = [
    Entry("mha_flops", "wrong", "multiply_adds_counted_once",
          "Counts one multiply-add as 1 FLOP instead of 2, so every entry is halved.",
          flops_macs),
    Entry("mha_flops", "wrong", "total_missing_output_projection",
          "Leaves the output projection out of the total.", flops_total_missing_output),
    Entry("mha_flops", "wrong", "qkv_counted_as_one_projection",
          "Counts the q, k, v projections as one (N, d) @ (d, d) product, 2 N d^2 instead of "
          "6 N d^2.", flops_qkv_one_projection),
    Entry("mha_flops", "wrong", "math_pow_gives_floats",
          "Uses math.pow for the squares, so every count comes back as a float instead of a "
          "plain int.", flops_math_pow),
    Entry("mha_flops", "wrong", "key_name_typo",
          "Names the first key 'qkv_projection' instead of 'qkv_projections'.", flops_key_typo),
    Entry("mha_flops", "wrong", "quadratic_terms_use_d_squared",
          "Writes the scores and weighted-sum terms as 2 N d^2 instead of 2 N^2 d, swapping "
          "which size is squared.", flops_n_d_swapped),
    Entry("mha_flops", "right", "matmul_helper", None, flops_matmul_helper),
    Entry("mha_flops", "right", "sum_over_heads_fraction", None, flops_per_head_fraction),

    Entry("crossover_seq_len", "wrong", "missing_factor_two",
          "Returns d_model instead of 2 * d_model.", cross_missing_factor_two),
    Entry("crossover_seq_len", "wrong", "float_result",
          "Returns 2.0 * d_model, a float instead of a plain int.", cross_float),
    Entry("crossover_seq_len", "wrong", "ratio_inverted",
          "Solves the balance upside down and returns d_model // 2 instead of 2 * d_model.",
          cross_ratio_inverted),
    Entry("crossover_seq_len", "wrong", "scores_against_qkv_only",
          "Balances only the scores term 2 N^2 d against the q, k, v projections 6 N d^2, "
          "giving 3 * d_model.", cross_scores_vs_qkv_only),
    Entry("crossover_seq_len", "wrong", "d_model_squared",
          "Returns 2 * d_model ** 2 instead of 2 * d_model.", cross_squared),
    Entry("crossover_seq_len", "wrong", "first_n_past_the_crossover",
          "Searches with <= in the loop condition, so it returns the first N where the N^2 "
          "terms exceed the projections, 2 * d_model + 1.", cross_first_n_exceeding),
    Entry("crossover_seq_len", "right", "linear_search", None, cross_search),
    Entry("crossover_seq_len", "right", "fraction_solve", None, cross_fraction),

    Entry("mha_param_count", "wrong", "one_bias_scalar_per_matrix",
          "Counts one bias number per projection (4) instead of a bias vector of d_model "
          "values each (4 d).", params_bias_scalar),
    Entry("mha_param_count", "wrong", "returns_weight_and_bias_counts",
          "Returns the tuple (weights, biases) instead of their sum.", params_tuple),
    Entry("mha_param_count", "wrong", "output_projection_forgotten",
          "Counts only W_q, W_k, W_v and their biases, leaving out W_o.", params_three_matrices),
    Entry("mha_param_count", "wrong", "parenthesised_square",
          "Writes (4 * d_model) ** 2, which is 16 d^2, instead of 4 * d_model ** 2.",
          params_precedence),
    Entry("mha_param_count", "wrong", "float_bias_term",
          "Adds the bias term as 4.0 * d_model (or 0.0), so the count is a float instead of a "
          "plain int.", params_float),
    Entry("mha_param_count", "wrong", "bias_flag_inverted",
          "Adds the biases when bias is False and leaves them out when it is True.",
          params_flag_inverted),
    Entry("mha_param_count", "right", "prod_of_shapes", None, params_prod_list),
    Entry("mha_param_count", "right", "augmented_weight_rows", None, params_augmented_rows),
]
