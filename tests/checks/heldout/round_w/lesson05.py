"""Held-out catalogue, lesson 05 (FLOPs and parameters, plain Python ints): mha_flops,
crossover_seq_len, mha_param_count. Each function is one learner's answer; wrong ones carry
one slip."""

import math
from fractions import Fraction

import torch

from entry import Entry


# ============================================================================ mha_flops
def flops_macs(seq_len, d_model):
    n, d = seq_len, d_model
    out = {
        "qkv_projections": 3 * n * d * d,
        "scores": n * n * d,
        "weighted_sum": n * n * d,
        "output_projection": n * d * d,
    }
    out["total"] = sum(out.values())
    return out


def flops_total_missing_out(seq_len, d_model):
    qkv = 6 * seq_len * d_model ** 2
    scores = 2 * seq_len ** 2 * d_model
    wsum = 2 * seq_len ** 2 * d_model
    proj = 2 * seq_len * d_model ** 2
    return {"qkv_projections": qkv, "scores": scores, "weighted_sum": wsum,
            "output_projection": proj, "total": qkv + scores + wsum}


def flops_true_division(seq_len, d_model):
    N, d = seq_len, d_model
    qkv = 3 * (2 * N * d * d)
    scores = 4 * N * N * d / 2  # half of the 4 N^2 d attention work
    weighted = 4 * N * N * d / 2
    out_proj = 2 * N * d * d
    return {"qkv_projections": qkv, "scores": scores, "weighted_sum": weighted,
            "output_projection": out_proj, "total": qkv + scores + weighted + out_proj}


def flops_scores_swapped(seq_len, d_model):
    n, d = seq_len, d_model
    parts = {}
    parts["qkv_projections"] = 6 * n * d * d
    parts["scores"] = 2 * n * d * d
    parts["weighted_sum"] = 2 * n * n * d
    parts["output_projection"] = 2 * n * d * d
    parts["total"] = sum(parts.values())
    return parts


def flops_xor(seq_len, d_model):
    N = seq_len
    D = d_model
    result = {
        "qkv_projections": 6 * N * D * D,
        "scores": 2 * N ^ 2 * D,
        "weighted_sum": 2 * N * N * D,
        "output_projection": 2 * N * D * D,
    }
    result["total"] = (result["qkv_projections"] + result["scores"] + result["weighted_sum"]
                       + result["output_projection"])
    return result


def flops_causal_half(seq_len, d_model):
    n, d = seq_len, d_model
    pairs = n * (n + 1) // 2  # query i only sees keys j <= i
    qkv = 6 * n * d * d
    sc = 2 * pairs * d
    ws = 2 * pairs * d
    op = 2 * n * d * d
    return {"qkv_projections": qkv, "scores": sc, "weighted_sum": ws,
            "output_projection": op, "total": qkv + sc + ws + op}


def flops_matmul_shapes(seq_len, d_model):
    def mm(m, k, n):
        return 2 * m * k * n

    N, D = seq_len, d_model
    qkv = sum(mm(N, D, D) for _ in ("q", "k", "v"))
    scores = mm(N, D, N)
    weighted = mm(N, N, D)
    out = mm(N, D, D)
    return {"qkv_projections": qkv, "scores": scores, "weighted_sum": weighted,
            "output_projection": out, "total": qkv + scores + weighted + out}


def flops_per_head_sum(seq_len, d_model):
    n, d = seq_len, d_model
    heads = [h for h in range(1, d + 1) if d % h == 0][-1]  # any divisor works; use d heads
    d_head = d // heads
    scores = sum(2 * n * n * d_head for _ in range(heads))
    weighted = sum(2 * n * d_head * n for _ in range(heads))
    counts = {
        "qkv_projections": 6 * n * d ** 2,
        "scores": scores,
        "weighted_sum": weighted,
        "output_projection": 2 * n * d ** 2,
    }
    counts["total"] = 8 * n * d ** 2 + 4 * n ** 2 * d
    return counts


# ============================================================================ crossover_seq_len
def crossover_d(d_model):
    return d_model


def crossover_float(d_model):
    return 8 * d_model ** 2 / (4 * d_model)


def crossover_qkv_only(d_model):
    return 6 * d_model * d_model // (4 * d_model)


def crossover_precedence(d_model):
    return 8 * d_model ** 2 // 4 * d_model


def crossover_one_n_cancelled(d_model):
    # 4 N^2 d = 8 N d^2  ->  N^2 = 2 d^2
    return int(math.sqrt(8 * d_model ** 2 / 4))


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
    ratio = Fraction(8 * d_model * d_model, 4 * d_model)
    return int(ratio)


# ============================================================================ mha_param_count
def params_no_wo(d_model, bias=True):
    d = d_model
    count = 3 * d * d
    if bias:
        count += 3 * d
    return count


def params_bias_ignored(d_model, bias=True):
    weights = 4 * d_model * d_model
    biases = 4 * d_model
    return weights + biases


def params_ternary_precedence(d_model, bias=True):
    return 4 * d_model ** 2 + 4 * d_model if bias else 0


def params_math_pow(d_model, bias=True):
    total = 4 * math.pow(d_model, 2)
    if bias:
        total += 4 * d_model
    return total


def params_bytes(d_model, bias=True):
    n = 4 * d_model * d_model + (4 * d_model if bias else 0)
    return n * 4  # float32


def params_bias_scalar(d_model, bias=True):
    return 4 * d_model * d_model + 4 * bias


def params_torch_module(d_model, bias=True):
    layer = torch.nn.MultiheadAttention(d_model, 1, bias=bias)
    return sum(p.numel() for p in layer.parameters())


def params_factored(d_model, bias=True):
    return 4 * d_model * (d_model + int(bool(bias)))


ENTRIES = [
    Entry(exercise="mha_flops", kind="wrong", label="multiply_add_as_one",
          mistake="counts one multiply-add as 1 FLOP instead of 2, so every entry is half the "
          "contract's", func=flops_macs),
    Entry(exercise="mha_flops", kind="wrong", label="total_without_output_projection",
          mistake="the `total` leaves out the output projection (6 N d^2 + 4 N^2 d instead of "
          "8 N d^2 + 4 N^2 d)", func=flops_total_missing_out),
    Entry(exercise="mha_flops", kind="wrong", label="true_division_float",
          mistake="computes the N^2 terms with `/ 2`, so `scores`, `weighted_sum` and `total` are "
          "floats, not the plain ints the contract fixes", func=flops_true_division),
    Entry(exercise="mha_flops", kind="wrong", label="scores_n_d_swapped",
          mistake="writes the scores as 2 N d^2, swapping N and d, instead of 2 N^2 d",
          func=flops_scores_swapped),
    Entry(exercise="mha_flops", kind="wrong", label="caret_is_xor",
          mistake="writes `2 * N ^ 2 * D` for the scores: in Python `^` is bitwise XOR (of 2N and 2D), "
          "not a power", func=flops_xor),
    Entry(exercise="mha_flops", kind="wrong", label="causal_saving_counted",
          mistake="counts only the causal (query, key) pairs N(N+1)/2 for scores and weighted sum, but "
          "the contract is dense, with no causal saving", func=flops_causal_half),
    Entry(exercise="mha_flops", kind="right", label="matmul_shape_helper", mistake=None, func=flops_matmul_shapes),
    Entry(exercise="mha_flops", kind="right", label="summed_over_heads", mistake=None, func=flops_per_head_sum),

    Entry(exercise="crossover_seq_len", kind="wrong", label="returns_d_model",
          mistake="returns d_model: it equates one N^2 term with one projection (2 N^2 d = 2 N d^2) "
          "instead of 4 N^2 d with 8 N d^2, losing the factor 2", func=crossover_d),
    Entry(exercise="crossover_seq_len", kind="wrong", label="true_division_float",
          mistake="divides with `/`, so the answer is a float (2.0 * d_model) instead of a plain int",
          func=crossover_float),
    Entry(exercise="crossover_seq_len", kind="wrong", label="qkv_projections_only",
          mistake="balances the N^2 terms against the Q/K/V projections only (6 N d^2), forgetting the "
          "output projection, so it returns 3 d_model // 2", func=crossover_qkv_only),
    Entry(exercise="crossover_seq_len", kind="wrong", label="missing_parentheses",
          mistake="`8 * d ** 2 // 4 * d` multiplies by d after the division instead of dividing by "
          "4 d (parentheses missing), giving 2 d^3", func=crossover_precedence),
    Entry(exercise="crossover_seq_len", kind="wrong", label="cancels_one_n_only",
          mistake="cancels only d, not N, in 4 N^2 d = 8 N d^2 and solves N^2 = 2 d^2, returning "
          "int(sqrt(2) d)", func=crossover_one_n_cancelled),
    Entry(exercise="crossover_seq_len", kind="wrong", label="search_overshoots_by_one",
          mistake="the search loop continues while the N^2 terms are <= the projections, so it returns "
          "the first N where they exceed them, 2 d_model + 1", func=crossover_first_exceeding),
    Entry(exercise="crossover_seq_len", kind="right", label="search_loop", mistake=None, func=crossover_search),
    Entry(exercise="crossover_seq_len", kind="right", label="exact_fraction", mistake=None, func=crossover_fraction),

    Entry(exercise="mha_param_count", kind="wrong", label="forgets_w_o",
          mistake="counts only W_q, W_k, W_v (and their biases), leaving out the output projection "
          "W_o and its bias", func=params_no_wo),
    Entry(exercise="mha_param_count", kind="wrong", label="bias_flag_ignored",
          mistake="always adds the 4 d bias parameters, ignoring `bias=False`", func=params_bias_ignored),
    Entry(exercise="mha_param_count", kind="wrong", label="conditional_expression_precedence",
          mistake="`4*d**2 + 4*d if bias else 0` parses as `(4*d**2 + 4*d) if bias else 0`, so "
          "bias=False returns 0", func=params_ternary_precedence),
    Entry(exercise="mha_param_count", kind="wrong", label="math_pow_float",
          mistake="`math.pow` returns a float, so the count is a float instead of a plain int",
          func=params_math_pow),
    Entry(exercise="mha_param_count", kind="wrong", label="counts_bytes",
          mistake="multiplies by 4 bytes per float32 parameter: returns the layer's size in bytes, "
          "not its number of parameters", func=params_bytes),
    Entry(exercise="mha_param_count", kind="wrong", label="bias_as_one_number",
          mistake="adds `4 * bias` (one number per bias) instead of 4 * d_model: each bias is a vector "
          "of d_model parameters", func=params_bias_scalar),
    Entry(exercise="mha_param_count", kind="right", label="torch_multiheadattention_numel", mistake=None,
          func=params_torch_module),
    Entry(exercise="mha_param_count", kind="right", label="factored_closed_form", mistake=None, func=params_factored),
]
