"""Round m catalogue, lesson 05 (FLOPs and parameters, plain Python ints):
mha_flops, crossover_seq_len, mha_param_count."""

import math
from fractions import Fraction

from entry import Entry


# ============================================================================ mha_flops
def flops_macs(seq_len, d_model):
    n, d = seq_len, d_model
    parts = {
        "qkv_projections": 3 * n * d * d,
        "scores": n * n * d,
        "weighted_sum": n * n * d,
        "output_projection": n * d * d,
    }
    parts["total"] = sum(parts.values())
    return parts


def flops_total_missing_output(seq_len, d_model):
    qkv = 6 * seq_len * d_model ** 2
    scores = 2 * seq_len ** 2 * d_model
    weighted = 2 * seq_len ** 2 * d_model
    out_proj = 2 * seq_len * d_model ** 2
    return {"qkv_projections": qkv, "scores": scores, "weighted_sum": weighted,
            "output_projection": out_proj, "total": qkv + scores + weighted}


def flops_math_pow(seq_len, d_model):
    result = {
        "qkv_projections": 6 * seq_len * d_model * d_model,
        "scores": 2 * math.pow(seq_len, 2) * d_model,
        "weighted_sum": 2 * math.pow(seq_len, 2) * d_model,
        "output_projection": 2 * seq_len * d_model * d_model,
    }
    result["total"] = sum(result.values())
    return result


def flops_scores_swapped(seq_len, d_model):
    n, d = seq_len, d_model
    scores = 2 * n * d * d  # (N, d) @ (d, N)
    weighted = 2 * n * n * d  # (N, N) @ (N, d)
    qkv, out = 6 * n * d * d, 2 * n * d * d
    return {"qkv_projections": qkv, "scores": scores, "weighted_sum": weighted,
            "output_projection": out, "total": qkv + scores + weighted + out}


def flops_causal_pairs(seq_len, d_model):
    n, d = seq_len, d_model
    pairs = n * (n + 1) // 2  # a query only looks at keys up to itself
    parts = {"qkv_projections": 6 * n * d * d, "scores": 2 * pairs * d,
             "weighted_sum": 2 * pairs * d, "output_projection": 2 * n * d * d}
    parts["total"] = sum(parts.values())
    return parts


def flops_key_typo(seq_len, d_model):
    n, d = seq_len, d_model
    parts = {"qkv_projection": 6 * n * d * d, "scores": 2 * n * n * d,
             "weighted_sum": 2 * n * n * d, "output_projection": 2 * n * d * d}
    parts["total"] = sum(parts.values())
    return parts


def _mm(m, k, n):
    """FLOPs of an (m, k) @ (k, n) product: m*n dot products of k multiply-adds."""
    return 2 * m * k * n


def flops_product_shapes(seq_len, d_model):
    n, d = seq_len, d_model
    out = {
        "qkv_projections": sum(_mm(n, d, d) for _ in ("q", "k", "v")),
        "scores": _mm(n, d, n),
        "weighted_sum": _mm(n, n, d),
        "output_projection": _mm(n, d, d),
    }
    out["total"] = out["qkv_projections"] + out["scores"] + out["weighted_sum"] \
        + out["output_projection"]
    return out


def flops_factored(seq_len, d_model):
    n, d = int(seq_len), int(d_model)
    return {
        "qkv_projections": 6 * n * d * d,
        "scores": 2 * n * n * d,
        "weighted_sum": 2 * n * n * d,
        "output_projection": 2 * n * d * d,
        "total": 4 * n * d * (2 * d + n),
    }


# ============================================================================ crossover_seq_len
def crossover_float_division(d_model):
    return 8 * d_model ** 2 / (4 * d_model)


def crossover_output_only(d_model):
    # 4 N^2 d = 2 N d^2
    return d_model // 2


def crossover_one_square_term(d_model):
    # 2 N^2 d = 8 N d^2
    return 4 * d_model


def crossover_mixed_units(d_model):
    # 4 N^2 d (FLOPs) = 4 N d^2 (projections counted in multiply-adds)
    return d_model


def crossover_cancel_once(d_model):
    # 4 N^2 d = 8 N d^2  ->  N^2 = 2 d^2  ->  N = sqrt(2) d
    return int(math.sqrt(2) * d_model)


def crossover_first_exceeding(d_model):
    # the first length at which attention costs more than the projections
    return 2 * d_model + 1


def crossover_search(d_model):
    d = d_model
    n = 1
    while 4 * n * n * d < 8 * n * d * d:
        n += 1
    return n


def crossover_fraction(d_model):
    ratio = Fraction(8 * d_model * d_model, 4 * d_model)
    return ratio.numerator // ratio.denominator


# ============================================================================ mha_param_count
def params_one_bias(d_model, bias=True):
    total = 4 * d_model * d_model
    if bias:
        total += d_model
    return total


def params_three_matrices(d_model, bias=True):
    weights = 3 * d_model * d_model  # W_q, W_k, W_v
    biases = 3 * d_model if bias else 0
    return weights + biases


def params_is_not_none(d_model, bias=True):
    n = 4 * d_model * d_model
    if bias is not None:
        n += 4 * d_model
    return n


def params_float_power(d_model, bias=True):
    count = 4 * d_model ** 2.0
    return count + 4 * d_model if bias else count


def params_ternary_precedence(d_model, bias=True):
    return 4 * d_model * d_model + 4 * d_model if bias else 0


def params_xor(d_model, bias=True):
    weights = 4 * d_model ^ 2
    return weights + (4 * d_model if bias else 0)


def params_shapes_list(d_model, bias=True):
    shapes = [(d_model, d_model)] * 4
    count = sum(rows * cols for rows, cols in shapes)
    if bias:
        count += sum(cols for _, cols in shapes)
    return count


def params_factored(d_model, bias=True):
    return 4 * d_model * (d_model + int(bool(bias)))


ENTRIES = [
    # mha_flops --------------------------------------------------------------------
    Entry("mha_flops", "wrong", "multiply_adds_not_flops",
          "It counts one multiply-add as 1 FLOP instead of 2, so every entry is half the "
          "contract's value.",
          flops_macs),
    Entry("mha_flops", "wrong", "total_omits_output_projection",
          "The total adds the projections, scores and weighted sum but leaves out the output "
          "projection, so it is 6 N d^2 + 4 N^2 d instead of 8 N d^2 + 4 N^2 d.",
          flops_total_missing_output),
    Entry("mha_flops", "wrong", "math_pow_gives_floats",
          "math.pow returns a float, so scores, weighted_sum and total are floats instead of "
          "plain ints.",
          flops_math_pow),
    Entry("mha_flops", "wrong", "scores_with_d_squared",
          "The scores product (N, d) @ (d, N) is counted as 2 N d^2 instead of 2 N^2 d (the "
          "roles of N and d are swapped), which also changes the total.",
          flops_scores_swapped),
    Entry("mha_flops", "wrong", "causal_pairs_only",
          "It counts only the N(N+1)/2 causal query-key pairs for scores and weighted_sum, "
          "but the contract asks for dense attention with no causal saving (2 N^2 d each).",
          flops_causal_pairs),
    Entry("mha_flops", "wrong", "singular_key_name",
          "The first key is spelled \"qkv_projection\" instead of \"qkv_projections\", so the "
          "dict does not have the contract's keys.",
          flops_key_typo),
    Entry("mha_flops", "right", "product_shape_helper", None, flops_product_shapes),
    Entry("mha_flops", "right", "factored_total", None, flops_factored),
    # crossover_seq_len -------------------------------------------------------------
    Entry("crossover_seq_len", "wrong", "true_division_float",
          "It solves the equation with `/`, so it returns the float 2.0 * d_model instead of a "
          "plain int.",
          crossover_float_division),
    Entry("crossover_seq_len", "wrong", "output_projection_only",
          "It sets the N^2 terms equal to the output projection 2 N d^2 alone instead of all "
          "four projections, getting d_model // 2 instead of 2 * d_model.",
          crossover_output_only),
    Entry("crossover_seq_len", "wrong", "one_square_term",
          "It uses only one of the two N^2 terms (2 N^2 d = 8 N d^2), so it returns "
          "4 * d_model instead of 2 * d_model.",
          crossover_one_square_term),
    Entry("crossover_seq_len", "wrong", "projections_in_multiply_adds",
          "It counts the projections in multiply-adds (4 N d^2) but the N^2 terms in FLOPs, "
          "so it returns d_model instead of 2 * d_model.",
          crossover_mixed_units),
    Entry("crossover_seq_len", "wrong", "cancels_n_once_too_few",
          "In the algebra it drops the factor N from the projection side, solving "
          "N^2 = 2 d^2 and returning "
          "int(sqrt(2) * d_model) instead of 2 * d_model.",
          crossover_cancel_once),
    Entry("crossover_seq_len", "wrong", "first_length_exceeding",
          "It returns the first N at which the N^2 terms are strictly larger, 2 * d_model + 1, "
          "instead of the N where they are equal.",
          crossover_first_exceeding),
    Entry("crossover_seq_len", "right", "search_loop", None, crossover_search),
    Entry("crossover_seq_len", "right", "fraction_ratio", None, crossover_fraction),
    # mha_param_count ------------------------------------------------------------
    Entry("mha_param_count", "wrong", "single_bias_vector",
          "With bias it adds only one bias vector of d_model values instead of four (one per "
          "projection).",
          params_one_bias),
    Entry("mha_param_count", "wrong", "forgets_output_projection",
          "It counts only W_q, W_k and W_v (and their biases), leaving out the output "
          "projection W_o and its bias.",
          params_three_matrices),
    Entry("mha_param_count", "wrong", "bias_is_not_none",
          "The test `bias is not None` is true for bias=False too, so the biases are always "
          "counted.",
          params_is_not_none),
    Entry("mha_param_count", "wrong", "float_exponent",
          "d_model ** 2.0 is a float, so the count is returned as a float instead of a plain "
          "int.",
          params_float_power),
    Entry("mha_param_count", "wrong", "conditional_expression_precedence",
          "The conditional expression binds loosest, so `4*d*d + 4*d if bias else 0` returns "
          "0 (not 4 d^2) when bias is False.",
          params_ternary_precedence),
    Entry("mha_param_count", "wrong", "caret_is_xor",
          "`d_model ^ 2` is bitwise XOR in Python, not a power, so the weight count is "
          "(4 * d_model) XOR 2 instead of 4 d^2.",
          params_xor),
    Entry("mha_param_count", "right", "sum_over_weight_shapes", None, params_shapes_list),
    Entry("mha_param_count", "right", "factored_d_plus_bias", None, params_factored),
]
