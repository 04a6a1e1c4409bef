"""Round d, lesson 05 (plain Python ints): mha_flops, crossover_seq_len, mha_param_count."""

from fractions import Fraction

import numpy as np

from entry import Entry


# ----------------------------------------------------------------------------- mha_flops
def flops_one_per_mac(seq_len, d_model):
    n, d = seq_len, d_model
    parts = {"qkv_projections": 3 * n * d * d, "scores": n * n * d, "weighted_sum": n * n * d,
             "output_projection": n * d * d}
    parts["total"] = sum(parts.values())
    return parts


def flops_one_projection(seq_len, d_model):
    n, d = seq_len, d_model
    parts = {"qkv_projections": 2 * n * d * d, "scores": 2 * n * n * d,
             "weighted_sum": 2 * n * n * d, "output_projection": 2 * n * d * d}
    parts["total"] = sum(parts.values())
    return parts


def flops_total_without_output(seq_len, d_model):
    n, d = seq_len, d_model
    parts = {"qkv_projections": 6 * n * d * d, "scores": 2 * n * n * d,
             "weighted_sum": 2 * n * n * d, "output_projection": 2 * n * d * d}
    parts["total"] = parts["qkv_projections"] + parts["scores"] + parts["weighted_sum"]
    return parts


def flops_numpy_ints(seq_len, d_model):
    n, d = np.int64(seq_len), np.int64(d_model)
    parts = {"qkv_projections": 6 * n * d * d, "scores": 2 * n * n * d,
             "weighted_sum": 2 * n * n * d, "output_projection": 2 * n * d * d}
    parts["total"] = np.sum(list(parts.values()))
    return parts


def flops_key_typo(seq_len, d_model):
    n, d = seq_len, d_model
    parts = {"qkv_projection": 6 * n * d * d, "scores": 2 * n * n * d,
             "weighted_sum": 2 * n * n * d, "output_projection": 2 * n * d * d}
    parts["total"] = sum(parts.values())
    return parts


def flops_causal_saving(seq_len, d_model):
    n, d = seq_len, d_model
    pairs = n * (n + 1) // 2
    parts = {"qkv_projections": 6 * n * d * d, "scores": 2 * pairs * d,
             "weighted_sum": 2 * pairs * d, "output_projection": 2 * n * d * d}
    parts["total"] = sum(parts.values())
    return parts


def _mm(m, k, n):
    return 2 * m * k * n


def flops_by_products(seq_len, d_model):
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
    nd = n * d
    return {"qkv_projections": 6 * nd * d, "scores": 2 * nd * n, "weighted_sum": 2 * nd * n,
            "output_projection": 2 * nd * d, "total": 4 * nd * (2 * d + n)}


# ----------------------------------------------------------------------------- crossover_seq_len
def cross_d(d_model):
    return d_model


def cross_float(d_model):
    return 2.0 * d_model


def cross_four_d(d_model):
    return 4 * d_model


def cross_half_d(d_model):
    return d_model // 2


def cross_without_output_projection(d_model):
    return 6 * d_model // 4


def cross_fraction(d_model):
    # 4 N^2 d = 8 N d^2  ->  N = 8 d^2 / (4 d)
    return int(Fraction(8 * d_model * d_model, 4 * d_model))


def cross_search(d_model):
    n = 1
    while 4 * n * n * d_model < 8 * n * d_model * d_model:
        n += 1
    return n


# ----------------------------------------------------------------------------- mha_param_count
def params_no_w_o(d_model, bias=True):
    return 3 * d_model * d_model + (3 * d_model if bias else 0)


def params_one_bias(d_model, bias=True):
    return 4 * d_model * d_model + (d_model if bias else 0)


def params_ignores_bias(d_model, bias=True):
    return 4 * d_model * d_model + 4 * d_model


def params_bias_as_row_and_column(d_model, bias=True):
    d = d_model + 1 if bias else d_model
    return 4 * d * d


def params_float_zero(d_model, bias=True):
    return 4 * d_model ** 2 + (4 * d_model if bias else 0.0)


def params_sum_shapes(d_model, bias=True):
    shapes = [(d_model, d_model)] * 4 + ([(d_model,)] * 4 if bias else [])
    total = 0
    for shape in shapes:
        size = 1
        for s in shape:
            size *= s
        total += size
    return total


def params_factored(d_model, bias=True):
    return 4 * d_model * (d_model + int(bool(bias)))


ENTRIES = [
    Entry("mha_flops", "wrong", "one_flop_per_multiply_add",
          "Counts one multiply-add as 1 FLOP instead of 2, halving every term.",
          flops_one_per_mac),
    Entry("mha_flops", "wrong", "one_projection_not_three",
          "Counts the Q, K, V projections as a single (N, d) @ (d, d) product (2 N d^2) instead of three.",
          flops_one_projection),
    Entry("mha_flops", "wrong", "total_forgets_output_projection",
          "Leaves the output projection out of the total.",
          flops_total_without_output),
    Entry("mha_flops", "wrong", "numpy_integers",
          "Computes with numpy integers and returns np.int64 values instead of plain Python ints.",
          flops_numpy_ints),
    Entry("mha_flops", "wrong", "misspelt_key",
          "Names the key 'qkv_projection' instead of the contract's 'qkv_projections'.",
          flops_key_typo),
    Entry("mha_flops", "wrong", "causal_saving",
          "Counts only the causal half N(N+1)/2 of the score pairs, although the contract is dense.",
          flops_causal_saving),
    Entry("mha_flops", "right", "per_product_helper", None, flops_by_products),
    Entry("mha_flops", "right", "factored_total", None, flops_factored),

    Entry("crossover_seq_len", "wrong", "returns_d_model",
          "Returns d_model, dropping the factor 2 when solving 4 N^2 d = 8 N d^2.",
          cross_d),
    Entry("crossover_seq_len", "wrong", "float_result",
          "Returns a float (2.0 * d_model) instead of a plain int.",
          cross_float),
    Entry("crossover_seq_len", "wrong", "four_d_model",
          "Equates only one N^2 term (2 N^2 d) with the projections, getting 4 d_model.",
          cross_four_d),
    Entry("crossover_seq_len", "wrong", "half_d_model",
          "Inverts the ratio when solving and returns d_model / 2.",
          cross_half_d),
    Entry("crossover_seq_len", "wrong", "projection_terms_without_w_o",
          "Uses only the Q, K, V projections (6 N d^2) as the projection terms, getting 1.5 d_model.",
          cross_without_output_projection),
    Entry("crossover_seq_len", "right", "fraction_algebra", None, cross_fraction),
    Entry("crossover_seq_len", "right", "linear_search", None, cross_search),

    Entry("mha_param_count", "wrong", "forgets_w_o",
          "Counts only W_q, W_k, W_v (and their biases), forgetting the output projection.",
          params_no_w_o),
    Entry("mha_param_count", "wrong", "one_bias_vector",
          "Adds a single bias vector of d parameters instead of one per projection (4 d).",
          params_one_bias),
    Entry("mha_param_count", "wrong", "ignores_bias_flag",
          "Always adds the biases, ignoring bias=False.",
          params_ignores_bias),
    Entry("mha_param_count", "wrong", "bias_as_extra_row_and_column",
          "Counts the bias by growing each matrix to (d+1) x (d+1) instead of adding d per projection.",
          params_bias_as_row_and_column),
    Entry("mha_param_count", "wrong", "float_when_no_bias",
          "Adds 0.0 when bias is False, so the count comes back as a float.",
          params_float_zero),
    Entry("mha_param_count", "right", "sum_of_shapes", None, params_sum_shapes),
    Entry("mha_param_count", "right", "factored", None, params_factored),
]
