"""Lesson 05 (FLOPs and parameters, plain Python ints): mha_flops, crossover_seq_len,
mha_param_count."""

import math

import numpy as np

from entry import Entry


# ============================================================================ mha_flops
def _flops(qkv, scores, wsum, out):
    return {"qkv_projections": qkv, "scores": scores, "weighted_sum": wsum,
            "output_projection": out, "total": qkv + scores + wsum + out}


def mf_w_macs(seq_len, d_model):
    n, d = seq_len, d_model
    return _flops(3 * n * d * d, n * n * d, n * n * d, n * d * d)


def mf_w_one_projection(seq_len, d_model):
    n, d = seq_len, d_model
    return _flops(2 * n * d * d, 2 * n * n * d, 2 * n * n * d, 2 * n * d * d)


def mf_w_total_without_output(seq_len, d_model):
    n, d = seq_len, d_model
    r = _flops(6 * n * d * d, 2 * n * n * d, 2 * n * n * d, 2 * n * d * d)
    r["total"] = 6 * n * d * d + 4 * n * n * d
    return r


def mf_w_floats(seq_len, d_model):
    n, d = seq_len, d_model
    return _flops(6 * n * d ** 2.0, 2 * n ** 2.0 * d, 2 * n ** 2.0 * d, 2 * n * d ** 2.0)


def mf_w_causal_scores(seq_len, d_model):
    n, d = seq_len, d_model
    return _flops(6 * n * d * d, n * n * d, n * n * d, 2 * n * d * d)


def mf_w_key_typo(seq_len, d_model):
    n, d = seq_len, d_model
    r = _flops(6 * n * d * d, 2 * n * n * d, 2 * n * n * d, 2 * n * d * d)
    r["qkv_projection"] = r.pop("qkv_projections")
    return r


def mf_w_weighted_sum_projection_shape(seq_len, d_model):
    n, d = seq_len, d_model
    return _flops(6 * n * d * d, 2 * n * n * d, 2 * n * d * d, 2 * n * d * d)


def mf_w_numpy_ints(seq_len, d_model):
    n, d = np.int64(seq_len), np.int64(d_model)
    return _flops(6 * n * d * d, 2 * n * n * d, 2 * n * n * d, 2 * n * d * d)


def _matmul(m, k, n):
    return 2 * m * k * n


def mf_r_matmul_shapes(seq_len, d_model):
    n, d = seq_len, d_model
    qkv = sum(_matmul(n, d, d) for _ in "qkv")
    out = {"qkv_projections": qkv, "scores": _matmul(n, d, n),
           "weighted_sum": _matmul(n, n, d), "output_projection": _matmul(n, d, d)}
    out["total"] = sum(out.values())
    return out


def mf_r_int_cast(seq_len, d_model):
    n, d = int(seq_len), int(d_model)
    proj = 2 * n * d * d
    attn = 2 * n * n * d
    return dict(qkv_projections=3 * proj, scores=attn, weighted_sum=attn,
                output_projection=proj, total=4 * proj + 2 * attn)


# ============================================================================ crossover_seq_len
def cs_w_d(d_model):
    return d_model


def cs_w_float(d_model):
    return 8 * d_model ** 2 / (4 * d_model)


def cs_w_qkv_only(d_model):
    return 3 * d_model // 2


def cs_w_inverted(d_model):
    return d_model // 2


def cs_w_plus_one(d_model):
    return 2 * d_model + 1


def cs_w_round_sqrt(d_model):
    return round(math.sqrt(8 * d_model ** 2 / 4))  # solved N^2 = 2 d^2


def cs_r_search(d_model):
    n = 1
    while 4 * n * n * d_model < 8 * n * d_model * d_model:
        n += 1
    return n


def cs_r_floor_div(d_model):
    return (8 * d_model * d_model) // (4 * d_model)


# ============================================================================ mha_param_count
def pc_w_one_bias(d_model, bias=True):
    return 4 * d_model * d_model + (d_model if bias else 0)


def pc_w_ignores_flag(d_model, bias=True):
    return 4 * d_model * d_model + 4 * d_model


def pc_w_three_matrices(d_model, bias=True):
    return 3 * d_model * d_model + (3 * d_model if bias else 0)


def pc_w_scalar_biases(d_model, bias=True):
    return 4 * d_model * d_model + (4 if bias else 0)


def pc_w_float(d_model, bias=True):
    return 4 * d_model ** 2 + 4.0 * d_model * bias


def pc_w_inverted(d_model, bias=True):
    return 4 * d_model * d_model + (0 if bias else 4 * d_model)


def pc_w_bias_matrix(d_model, bias=True):
    return 4 * d_model * d_model + (4 * d_model * d_model if bias else 0)  # bias as (d, d)


def pc_r_shapes(d_model, bias=True):
    shapes = [(d_model, d_model)] * 4 + ([(d_model,)] * 4 if bias else [])
    return sum(math.prod(s) for s in shapes)


def pc_r_bool_arith(d_model, bias=True):
    return 4 * d_model * (d_model + int(bias))


E = Entry
ENTRIES = [
    E("mha_flops", "wrong", "counts_macs",
      "Counts one multiply-add as one FLOP, halving every entry.", mf_w_macs),
    E("mha_flops", "wrong", "one_projection_for_qkv",
      "Counts the q/k/v projections as one d x d product (2 N d^2) instead of three.",
      mf_w_one_projection),
    E("mha_flops", "wrong", "total_misses_output_projection",
      "Leaves the output projection out of the total.", mf_w_total_without_output),
    E("mha_flops", "wrong", "float_counts",
      "Uses ** 2.0, so every count is a float instead of an int.", mf_w_floats),
    E("mha_flops", "wrong", "causal_half_scores",
      "Halves the N^2 terms for a causal saving the contract excludes.", mf_w_causal_scores),
    E("mha_flops", "wrong", "key_typo",
      "Names the first key 'qkv_projection' instead of 'qkv_projections'.", mf_w_key_typo),
    E("mha_flops", "wrong", "weighted_sum_as_projection",
      "Counts the weighted sum p v as 2 N d^2, as if it were a projection.",
      mf_w_weighted_sum_projection_shape),
    E("mha_flops", "wrong", "numpy_integers",
      "Computes with np.int64 values, returning numpy integers instead of plain ints.",
      mf_w_numpy_ints),
    E("mha_flops", "right", "matmul_shape_helper", None, mf_r_matmul_shapes),
    E("mha_flops", "right", "grouped_terms", None, mf_r_int_cast),
    E("crossover_seq_len", "wrong", "returns_d_model",
      "Returns d_model itself instead of 2 * d_model.", cs_w_d),
    E("crossover_seq_len", "wrong", "float_division",
      "Solves 4 N^2 d = 8 N d^2 with /, returning a float.", cs_w_float),
    E("crossover_seq_len", "wrong", "qkv_projections_only",
      "Equates the N^2 terms with the q/k/v projections alone (6 N d^2), giving 1.5 d.",
      cs_w_qkv_only),
    E("crossover_seq_len", "wrong", "ratio_inverted",
      "Inverts the ratio and returns d_model / 2.", cs_w_inverted),
    E("crossover_seq_len", "wrong", "first_n_beyond",
      "Returns the first N where the N^2 terms exceed the projections, one past the "
      "equality.", cs_w_plus_one),
    E("crossover_seq_len", "wrong", "solved_for_n_squared",
      "Cancels one N too few and solves N^2 = 2 d^2, returning round(sqrt(2) d).",
      cs_w_round_sqrt),
    E("crossover_seq_len", "right", "linear_search", None, cs_r_search),
    E("crossover_seq_len", "right", "floor_division", None, cs_r_floor_div),
    E("mha_param_count", "wrong", "one_bias_vector",
      "Adds a single bias vector of d instead of one per projection.", pc_w_one_bias),
    E("mha_param_count", "wrong", "ignores_bias_flag",
      "Always adds the biases, ignoring bias=False.", pc_w_ignores_flag),
    E("mha_param_count", "wrong", "forgets_output_projection",
      "Counts only the q, k and v projections, not w_o.", pc_w_three_matrices),
    E("mha_param_count", "wrong", "scalar_biases",
      "Counts each bias as a single number, adding 4 instead of 4 d.", pc_w_scalar_biases),
    E("mha_param_count", "wrong", "float_from_bias_product",
      "Multiplies 4.0 * d by the flag, returning a float.", pc_w_float),
    E("mha_param_count", "wrong", "bias_flag_inverted",
      "Adds the biases when bias=False and leaves them out when bias=True.", pc_w_inverted),
    E("mha_param_count", "wrong", "bias_as_matrix",
      "Counts each bias as a d x d matrix.", pc_w_bias_matrix),
    E("mha_param_count", "right", "sum_of_shapes", None, pc_r_shapes),
    E("mha_param_count", "right", "factored_bool_int", None, pc_r_bool_arith),
]
