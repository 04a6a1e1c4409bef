"""Held-out catalogue, lesson 05 (mha_flops, crossover_seq_len, mha_param_count): plain ints."""

import fractions
import math

import numpy as np

from entry import Entry


# ============================================================================ mha_flops
def _flops_dict(qkv, scores, wsum, oproj, total=None):
    d = {"qkv_projections": qkv, "scores": scores, "weighted_sum": wsum,
         "output_projection": oproj}
    d["total"] = sum(d.values()) if total is None else total
    return d


def flops_macs(seq_len, d_model):
    n, d = seq_len, d_model
    return _flops_dict(3 * n * d * d, n * n * d, n * n * d, n * d * d)


def flops_one_projection(seq_len, d_model):
    n, d = seq_len, d_model
    return _flops_dict(2 * n * d * d, 2 * n * n * d, 2 * n * n * d, 2 * n * d * d)


def flops_total_without_output(seq_len, d_model):
    n, d = seq_len, d_model
    qkv, sc, ws, op = 6 * n * d * d, 2 * n * n * d, 2 * n * n * d, 2 * n * d * d
    return _flops_dict(qkv, sc, ws, op, total=qkv + sc + ws)


def flops_true_division(seq_len, d_model):
    n, d = seq_len, d_model
    attn = 4 * n * n * d
    return _flops_dict(6 * n * d * d, attn / 2, attn / 2, 2 * n * d * d)


def flops_scores_d_squared(seq_len, d_model):
    n, d = seq_len, d_model
    return _flops_dict(6 * n * d * d, 2 * n * d * d, 2 * n * n * d, 2 * n * d * d)


def flops_pow_precedence(seq_len, d_model):
    N, D = seq_len, d_model
    return _flops_dict(6 * N * D ** 2, (2 * N) ** 2 * D, 2 * N ** 2 * D, 2 * N * D ** 2)


def flops_per_matmul(seq_len, d_model):
    def mm(m, k, n):  # (m, k) @ (k, n)
        return 2 * m * k * n
    N, D = int(seq_len), int(d_model)
    out = {
        "qkv_projections": sum(mm(N, D, D) for _ in "qkv"),
        "scores": mm(N, D, N),
        "weighted_sum": mm(N, N, D),
        "output_projection": mm(N, D, D),
    }
    out["total"] = sum(out.values())
    return out


def flops_factorised(seq_len, d_model):
    n, d = seq_len, d_model
    return {"qkv_projections": 6 * n * d * d, "scores": 2 * n * n * d,
            "weighted_sum": 2 * n * n * d, "output_projection": 2 * n * d * d,
            "total": 4 * n * d * (2 * d + n)}


# ============================================================================ crossover_seq_len
def crossover_no_output_projection(d_model):
    return 3 * d_model // 2


def crossover_float(d_model):
    return 8 * d_model ** 2 / (4 * d_model)


def crossover_precedence(d_model):
    return 8 * d_model ** 2 // 4 * d_model


def crossover_loop_le(d_model):
    n = 1
    while 4 * n * n * d_model <= 8 * n * d_model * d_model:
        n += 1
    return n


def crossover_algebra(d_model):
    return 8 * d_model * d_model // 4


def crossover_numpy_scan(d_model):
    ns = np.arange(1, 10 * d_model + 1)
    reached = 4 * ns ** 2 * d_model >= 8 * ns * d_model ** 2
    return ns[np.argmax(reached)]


def crossover_fraction(d_model):
    ratio = fractions.Fraction(8 * d_model * d_model, 4 * d_model)
    return int(ratio)


def crossover_loop_lt(d_model):
    n = 1
    while 4 * n * n * d_model < 8 * n * d_model * d_model:
        n += 1
    return n


# ============================================================================ mha_param_count
def params_output_bias_forgotten(d_model, bias=True):
    d = d_model
    return 4 * d * d + (3 * d if bias else 0)


def params_conditional_precedence(d_model, bias=True):
    d = d_model
    return 4 * d * d + 4 * d if bias else 0


def params_math_pow(d_model, bias=True):
    total = 4 * math.pow(d_model, 2)
    if bias:
        total += 4 * d_model
    return total


def params_bytes(d_model, bias=True):
    count = 4 * d_model * d_model + (4 * d_model if bias else 0)
    return count * 4  # float32


def params_condition_inverted(d_model, bias=True):
    n = 4 * d_model * d_model
    if not bias:
        n += 4 * d_model
    return n


def params_augmented_square(d_model, bias=True):
    side = d_model + 1 if bias else d_model
    return 4 * side ** 2


def params_shape_table(d_model, bias=True):
    shapes = [(d_model, d_model)] * 4
    if bias:
        shapes += [(d_model,)] * 4
    return sum(math.prod(s) for s in shapes)


def params_closed_form(d_model, bias=True):
    return 4 * d_model * (d_model + int(bool(bias)))


ENTRIES = [
    Entry("mha_flops", "wrong", "multiply_add_as_one",
          "counts one multiply-add as 1 FLOP instead of 2, halving every entry", flops_macs),
    Entry("mha_flops", "wrong", "one_projection_counted",
          "counts the Q/K/V projections as one (N, d) @ (d, d) product, 2 N d^2, instead of "
          "three, 6 N d^2", flops_one_projection),
    Entry("mha_flops", "wrong", "total_misses_output_projection",
          "the total adds the projections, scores and weighted sum but leaves out the output "
          "projection", flops_total_without_output),
    Entry("mha_flops", "wrong", "true_division_float",
          "splits 4 N^2 d with / 2, so scores and weighted_sum (and the total) are floats, "
          "not plain ints", flops_true_division),
    Entry("mha_flops", "wrong", "scores_n_d_squared",
          "counts the scores as 2 N d^2 (the squared factor on d) instead of 2 N^2 d",
          flops_scores_d_squared),
    Entry("mha_flops", "wrong", "pow_precedence",
          "writes (2 * N) ** 2 * D for the scores, which squares the factor 2 too: 4 N^2 d "
          "instead of 2 N^2 d", flops_pow_precedence),
    Entry("mha_flops", "right", "per_matmul_helper", None, flops_per_matmul),
    Entry("mha_flops", "right", "factorised_total", None, flops_factorised),

    Entry("crossover_seq_len", "wrong", "output_projection_left_out",
          "equates the N^2 terms with the Q/K/V projections only (6 N d^2), forgetting the "
          "output projection, so it returns 1.5 d_model", crossover_no_output_projection),
    Entry("crossover_seq_len", "wrong", "float_division",
          "solves with /, returning the float 2.0 * d_model instead of an int",
          crossover_float),
    Entry("crossover_seq_len", "wrong", "precedence_times_d",
          "writes 8 * d ** 2 // 4 * d, which multiplies by d instead of dividing by 4 d "
          "(2 d^3)", crossover_precedence),
    Entry("crossover_seq_len", "wrong", "search_loop_le",
          "the search loop keeps going while the N^2 terms are <= the projections, so it stops "
          "one past the crossover (2 d_model + 1)", crossover_loop_le),
    Entry("crossover_seq_len", "wrong", "algebra_d_not_cancelled",
          "cancels only N from 4 N^2 d = 8 N d^2 and forgets to divide by d, returning "
          "2 d_model^2", crossover_algebra),
    Entry("crossover_seq_len", "wrong", "numpy_int_returned",
          "finds N with a numpy scan and returns a numpy int64, not a plain Python int",
          crossover_numpy_scan),
    Entry("crossover_seq_len", "right", "fraction_solve", None, crossover_fraction),
    Entry("crossover_seq_len", "right", "search_loop_lt", None, crossover_loop_lt),

    Entry("mha_param_count", "wrong", "output_bias_forgotten",
          "with bias counts only the three Q/K/V bias vectors (3 d) and forgets the output "
          "projection's bias", params_output_bias_forgotten),
    Entry("mha_param_count", "wrong", "conditional_precedence",
          "writes 4*d*d + 4*d if bias else 0, which Python reads as (4*d*d + 4*d) if bias "
          "else 0, so bias=False returns 0", params_conditional_precedence),
    Entry("mha_param_count", "wrong", "math_pow_float",
          "uses math.pow, which returns a float, so the count is not a plain int",
          params_math_pow),
    Entry("mha_param_count", "wrong", "bytes_not_count",
          "multiplies by 4 bytes per float32 parameter, returning the size in bytes instead of "
          "the number of parameters", params_bytes),
    Entry("mha_param_count", "wrong", "bias_condition_inverted",
          "adds the biases when bias is False (if not bias) instead of when it is True",
          params_condition_inverted),
    Entry("mha_param_count", "wrong", "augmented_square_matrix",
          "folds the bias into each weight as a (d+1) x (d+1) matrix instead of (d+1) x d, "
          "counting 4 (d+1)^2", params_augmented_square),
    Entry("mha_param_count", "right", "shape_table_prod", None, params_shape_table),
    Entry("mha_param_count", "right", "closed_form", None, params_closed_form),
]
