"""Held-out catalogue, lesson 05 (FLOPs): mha_flops, crossover_seq_len, mha_param_count."""

import math
from fractions import Fraction

from entry import Entry


# ============================================================================ mha_flops
def flops_one_per_madd(seq_len, d_model):
    n, d = seq_len, d_model
    out = {
        "qkv_projections": 3 * n * d * d,
        "scores": n * n * d,
        "weighted_sum": n * n * d,
        "output_projection": n * d * d,
    }
    out["total"] = sum(out.values())
    return out


def flops_one_projection(seq_len, d_model):
    proj = 2 * seq_len * d_model * d_model
    attn = 2 * seq_len * seq_len * d_model
    parts = {"qkv_projections": proj, "scores": attn, "weighted_sum": attn,
             "output_projection": 2 * seq_len * d_model * d_model}
    parts["total"] = proj + 2 * attn + parts["output_projection"]
    return parts


def flops_float_heads(seq_len, d_model):
    num_heads = 8
    d_head = d_model / num_heads
    N = seq_len
    qkv = 3 * 2 * N * d_model * d_model
    scores = num_heads * 2 * N * N * d_head
    weighted = num_heads * 2 * N * N * d_head
    out_proj = 2 * N * d_model * d_model
    return {"qkv_projections": qkv, "scores": scores, "weighted_sum": weighted,
            "output_projection": out_proj, "total": qkv + scores + weighted + out_proj}


def flops_total_misses_output(seq_len, d_model):
    n, d = seq_len, d_model
    r = {}
    r["qkv_projections"] = 6 * n * d * d
    r["scores"] = 2 * n * n * d
    r["weighted_sum"] = 2 * n * n * d
    r["output_projection"] = 2 * n * d * d
    r["total"] = r["qkv_projections"] + r["scores"] + r["weighted_sum"]
    return r


def flops_xor_power(seq_len, d_model):
    N, d = seq_len, d_model
    qkv = 6 * N * d ^ 2
    sc = 2 * N ^ 2 * d
    ws = 2 * N ^ 2 * d
    op = 2 * N * d ^ 2
    return {"qkv_projections": qkv, "scores": sc, "weighted_sum": ws,
            "output_projection": op, "total": qkv + sc + ws + op}


def flops_scores_swapped(seq_len, d_model):
    n, d = seq_len, d_model
    scores = 2 * n * d * d
    weighted = 2 * n * n * d
    qkv = 6 * n * d * d
    out = 2 * n * d * d
    return dict(qkv_projections=qkv, scores=scores, weighted_sum=weighted,
                output_projection=out, total=qkv + scores + weighted + out)


def flops_matmul_shapes(seq_len, d_model):
    def mm(m, k, n):
        return 2 * m * k * n

    N, D = seq_len, d_model
    parts = {
        "qkv_projections": sum(mm(N, D, D) for _ in ("q", "k", "v")),
        "scores": mm(N, D, N),
        "weighted_sum": mm(N, N, D),
        "output_projection": mm(N, D, D),
    }
    parts["total"] = sum(parts.values())
    return parts


def flops_one_dim_heads(seq_len, d_model):
    n = int(seq_len)
    d = int(d_model)
    scores = 0
    weighted = 0
    for _ in range(d):  # d heads of size 1: same work as any split
        scores += 2 * n * n * 1
        weighted += 2 * n * n * 1
    proj = 2 * n * d * d
    return {"qkv_projections": 3 * proj, "scores": scores, "weighted_sum": weighted,
            "output_projection": proj, "total": 4 * proj + scores + weighted}


# ============================================================================ crossover_seq_len
def crossover_true_division(d_model):
    return 8 * d_model * d_model / (4 * d_model)


def crossover_scores_only(d_model):
    # 2 N^2 d = 8 N d^2
    return 8 * d_model * d_model // (2 * d_model)


def crossover_qkv_only(d_model):
    # 4 N^2 d = 6 N d^2
    return 6 * d_model * d_model // (4 * d_model)


def crossover_precedence(d_model):
    d = d_model
    return 8 * d ** 2 // 4 * d


def crossover_first_exceeding(d_model):
    return 2 * d_model + 1


def crossover_ratio_inverted(d_model):
    return (4 * d_model) // 8


def crossover_search(d_model):
    d = d_model
    n = 1
    while 4 * n * n * d < 8 * n * d * d:
        n += 1
    return n


def crossover_fraction(d_model):
    ratio = Fraction(8 * d_model ** 2, 4 * d_model)
    return int(ratio)


# ============================================================================ mha_param_count
def params_in_bytes(d_model, bias=True):
    n = 4 * d_model * d_model + (4 * d_model if bias else 0)
    return n * 4


def params_three_matrices(d_model, bias=True):
    count = 3 * d_model * d_model
    if bias:
        count += 3 * d_model
    return count


def params_conditional_precedence(d_model, bias=True):
    return 4 * d_model * d_model + 4 * d_model if bias else 0


def params_augmented_matrix(d_model, bias=True):
    if bias:
        return 4 * (d_model + 1) ** 2
    return 4 * d_model ** 2


def params_math_pow(d_model, bias=True):
    total = 4 * math.pow(d_model, 2)
    if bias:
        total += 4 * d_model
    return total


def params_qkv_bias_only(d_model, bias=True):
    weights = 4 * d_model * d_model
    biases = 3 * d_model if bias else 0
    return weights + biases


def params_augmented_rows(d_model, bias=True):
    rows = d_model + 1 if bias else d_model
    return 4 * rows * d_model


def params_shape_table(d_model, bias=True):
    shapes = {f"w_{n}": (d_model, d_model) for n in "qkvo"}
    if bias:
        shapes.update({f"b_{n}": (d_model,) for n in "qkvo"})
    return int(sum(math.prod(s) for s in shapes.values()))


ENTRIES = [
    Entry("mha_flops", "wrong", "multiply_add_as_one",
          "counts one multiply-add as 1 FLOP instead of 2, so every term is halved",
          flops_one_per_madd),
    Entry("mha_flops", "wrong", "one_projection_for_qkv",
          "counts a single projection (2 N d^2) for queries, keys and values together "
          "instead of three (6 N d^2)", flops_one_projection),
    Entry("mha_flops", "wrong", "float_per_head",
          "splits into 8 heads with d_head = d_model / 8 (true division), so the score terms "
          "come out as floats instead of ints", flops_float_heads),
    Entry("mha_flops", "wrong", "total_misses_output_projection",
          "leaves the output projection out of the total", flops_total_misses_output),
    Entry("mha_flops", "wrong", "xor_for_power",
          "writes d ^ 2 and N ^ 2 for the squares, but ^ is bitwise XOR in Python, not a "
          "power", flops_xor_power),
    Entry("mha_flops", "wrong", "scores_as_n_d_squared",
          "counts the score product as 2 N d^2 (the projection shape) instead of 2 N^2 d",
          flops_scores_swapped),
    Entry("mha_flops", "right", "matmul_shape_helper", None, flops_matmul_shapes),
    Entry("mha_flops", "right", "one_dim_heads_loop", None, flops_one_dim_heads),

    Entry("crossover_seq_len", "wrong", "true_division",
          "solves with true division /, so it returns a float (2.0 * d) instead of an int",
          crossover_true_division),
    Entry("crossover_seq_len", "wrong", "scores_term_only",
          "equates only the scores term 2 N^2 d with the projections instead of both N^2 "
          "terms, giving 4 d", crossover_scores_only),
    Entry("crossover_seq_len", "wrong", "qkv_projections_only",
          "equates the N^2 terms with the q/k/v projections alone (6 N d^2), leaving out the "
          "output projection, giving 1.5 d", crossover_qkv_only),
    Entry("crossover_seq_len", "wrong", "division_precedence",
          "writes 8 * d ** 2 // 4 * d, which multiplies by d after dividing by 4 (2 d^3) "
          "instead of dividing by 4 d", crossover_precedence),
    Entry("crossover_seq_len", "wrong", "first_length_exceeding",
          "returns the first length where the N^2 terms exceed the projections (2 d + 1) "
          "instead of where they are equal", crossover_first_exceeding),
    Entry("crossover_seq_len", "wrong", "ratio_inverted",
          "solves 4 N^2 d = 8 N d^2 upside down as N = 4 d / 8, giving d / 2 instead of 2 d",
          crossover_ratio_inverted),
    Entry("crossover_seq_len", "right", "linear_search", None, crossover_search),
    Entry("crossover_seq_len", "right", "fraction", None, crossover_fraction),

    Entry("mha_param_count", "wrong", "bytes_not_count",
          "multiplies by 4 bytes per float32 parameter, returning the size in bytes instead "
          "of the number of parameters", params_in_bytes),
    Entry("mha_param_count", "wrong", "three_projections",
          "counts only the query, key and value projections (3 d^2 + 3 d) and forgets the "
          "output projection", params_three_matrices),
    Entry("mha_param_count", "wrong", "conditional_precedence",
          "writes 4*d*d + 4*d if bias else 0, which Python reads as (4*d*d + 4*d) if bias "
          "else 0, so bias=False gives 0", params_conditional_precedence),
    Entry("mha_param_count", "wrong", "augmented_square",
          "treats the bias as an extra row and an extra column of each matrix, 4 (d+1)^2, "
          "instead of one extra vector of d", params_augmented_matrix),
    Entry("mha_param_count", "wrong", "math_pow_float",
          "uses math.pow, which returns a float, so the count is a float instead of an int",
          params_math_pow),
    Entry("mha_param_count", "wrong", "bias_on_qkv_only",
          "counts biases only on the query, key and value projections (3 d), not on the "
          "output projection", params_qkv_bias_only),
    Entry("mha_param_count", "right", "augmented_rows", None, params_augmented_rows),
    Entry("mha_param_count", "right", "shape_table", None, params_shape_table),
]
