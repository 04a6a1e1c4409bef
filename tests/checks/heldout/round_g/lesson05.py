"""Lesson 05 (FLOPs and parameters, plain ints)."""

import math
from fractions import Fraction

from entry import Entry


# ----------------------------------------------------------------------------- mha_flops
def flops_qkv_no_factor2(seq_len, d_model):
    N, d = seq_len, d_model
    parts = {"qkv_projections": 3 * N * d * d, "scores": 2 * N * N * d,
             "weighted_sum": 2 * N * N * d, "output_projection": 2 * N * d * d}
    parts["total"] = sum(parts.values())
    return parts


def flops_total_no_out(seq_len, d_model):
    N, d = seq_len, d_model
    qkv = 6 * N * d * d
    sc = 2 * N * N * d
    ws = 2 * N * N * d
    out = 2 * N * d * d
    return {"qkv_projections": qkv, "scores": sc, "weighted_sum": ws,
            "output_projection": out, "total": qkv + sc + ws}


def flops_float(seq_len, d_model):
    N, d = seq_len, d_model
    proj = 2.0 * N * d * d  # one (N, d) @ (d, d) product
    return {"qkv_projections": 3 * proj, "scores": 2 * N ** 2 * d,
            "weighted_sum": 2 * N ** 2 * d, "output_projection": proj,
            "total": 4 * proj + 4 * N ** 2 * d}


def flops_scores_macs(seq_len, d_model):
    n, d = seq_len, d_model
    r = {"qkv_projections": 6 * n * d * d, "scores": n * n * d, "weighted_sum": n * n * d,
         "output_projection": 2 * n * d * d}
    r["total"] = sum(r.values())
    return r


def flops_out_copy_paste(seq_len, d_model):
    n, d = seq_len, d_model
    r = {"qkv_projections": 6 * n * d * d, "scores": 2 * n * n * d, "weighted_sum": 2 * n * n * d,
         "output_projection": 6 * n * d * d}
    r["total"] = 8 * n * d * d + 4 * n * n * d
    return r


def flops_total_one_square(seq_len, d_model):
    n, d = seq_len, d_model
    r = {"qkv_projections": 6 * n * d * d, "scores": 2 * n * n * d, "weighted_sum": 2 * n * n * d,
         "output_projection": 2 * n * d * d}
    r["total"] = 8 * n * d * d + 2 * n * n * d
    return r


def flops_matmul_helper(seq_len, d_model):
    def mm(m, k, n):
        return 2 * m * k * n

    N, d = seq_len, d_model
    r = {"qkv_projections": 3 * mm(N, d, d), "scores": mm(N, d, N),
         "weighted_sum": mm(N, N, d), "output_projection": mm(N, d, d)}
    r["total"] = r["qkv_projections"] + r["scores"] + r["weighted_sum"] + r["output_projection"]
    return r


def flops_per_head_sum(seq_len, d_model):
    N, d = seq_len, d_model
    H = 1
    for cand in (8, 4, 2):
        if d % cand == 0:
            H = cand
            break
    dh = d // H
    scores = sum(2 * N * dh * N for _ in range(H))
    weighted = sum(2 * N * N * dh for _ in range(H))
    out = dict(qkv_projections=int(6 * N * d ** 2), scores=scores, weighted_sum=weighted,
               output_projection=2 * N * d ** 2)
    out["total"] = sum(out.values())
    return out


# ----------------------------------------------------------------------------- crossover_seq_len
def cross_no_factor(d_model):
    return d_model


def cross_float(d_model):
    return 8 * d_model / 4


def cross_one_square_term(d_model):
    # 2 N^2 d = 8 N d^2
    return 4 * d_model


def cross_inverted(d_model):
    return d_model // 2


def cross_sqrt(d_model):
    return int(math.sqrt(2 * d_model))


def cross_fraction(d_model):
    ratio = Fraction(8 * d_model * d_model, 4 * d_model)  # 8 N d^2 / (4 N d) per unit N
    return int(ratio)


def cross_search(d_model):
    n = 1
    while 4 * n * n * d_model < 8 * n * d_model * d_model:
        n += 1
    return n


# ----------------------------------------------------------------------------- mha_param_count
def params_bias_one_each(d_model, bias=True):
    return 4 * d_model * d_model + (4 if bias else 0)


def params_bias_ignored(d_model, bias=True):
    return 4 * d_model ** 2 + 4 * d_model


def params_no_wo(d_model, bias=True):
    n = 3 * d_model * d_model
    if bias:
        n += 3 * d_model
    return n


def params_float(d_model, bias=True):
    total = 4 * d_model ** 2
    if bias:
        total = total * (1 + 1 / d_model)
    return total


def params_precedence(d_model, bias=True):
    return 4 * d_model * d_model + 4 * d_model if bias else 0


def params_bias_qkv_only(d_model, bias=True):
    weights = 4 * d_model * d_model
    biases = 3 * d_model if bias else 0
    return weights + biases


def params_shapes(d_model, bias=True):
    shapes = [(d_model, d_model)] * 4
    if bias:
        shapes += [(d_model,)] * 4
    return sum(math.prod(s) for s in shapes)


def params_factored(d_model, bias=True):
    return 4 * d_model * (d_model + int(bool(bias)))


ENTRIES = [
    Entry("mha_flops", "wrong", "qkv-no-factor-2", "Counts the Q/K/V projections as 3 N d^2 (one FLOP per multiply-add) while the other terms use 2.", flops_qkv_no_factor2),
    Entry("mha_flops", "wrong", "total-missing-output", "Leaves the output projection out of the total.", flops_total_no_out),
    Entry("mha_flops", "wrong", "float-values", "Builds the counts from a float (2.0 * N * d * d), so the dict holds floats instead of ints.", flops_float),
    Entry("mha_flops", "wrong", "scores-as-macs", "Counts the two N^2 terms in multiply-adds (N^2 d) instead of FLOPs (2 N^2 d).", flops_scores_macs),
    Entry("mha_flops", "wrong", "output-copy-paste", "Copy-paste slip: the output projection is given the 6 N d^2 of the three input projections.", flops_out_copy_paste),
    Entry("mha_flops", "wrong", "total-one-square-term", "The total adds only one of the two N^2 terms (2 N^2 d instead of 4 N^2 d).", flops_total_one_square),
    Entry("mha_flops", "right", "matmul-helper", None, flops_matmul_helper),
    Entry("mha_flops", "right", "per-head-sum", None, flops_per_head_sum),
    Entry("crossover_seq_len", "wrong", "missing-factor-2", "Returns d_model, dropping the factor 2 when solving 4 N^2 d = 8 N d^2.", cross_no_factor),
    Entry("crossover_seq_len", "wrong", "float-division", "Solves with true division (8 d / 4), returning a float instead of an int.", cross_float),
    Entry("crossover_seq_len", "wrong", "one-square-term", "Equates only the scores term 2 N^2 d with the projections, giving 4 d_model.", cross_one_square_term),
    Entry("crossover_seq_len", "wrong", "inverted-ratio", "Inverts the ratio and returns d_model // 2.", cross_inverted),
    Entry("crossover_seq_len", "wrong", "square-root", "Treats the balance as N^2 = 2 d and returns sqrt(2 d_model).", cross_sqrt),
    Entry("crossover_seq_len", "right", "fraction", None, cross_fraction),
    Entry("crossover_seq_len", "right", "search", None, cross_search),
    Entry("mha_param_count", "wrong", "one-bias-per-matrix", "Counts one bias number per matrix (4) instead of a bias vector of d_model each (4 d).", params_bias_one_each),
    Entry("mha_param_count", "wrong", "bias-flag-ignored", "Ignores the bias flag and always adds the 4 d bias parameters.", params_bias_ignored),
    Entry("mha_param_count", "wrong", "forgets-wo", "Counts only W_q, W_k, W_v (and their biases), forgetting the output projection.", params_no_wo),
    Entry("mha_param_count", "wrong", "float-factorised", "Factorises the count as 4 d^2 (1 + 1/d), which returns a float.", params_float),
    Entry("mha_param_count", "wrong", "conditional-precedence", "Writes `4*d*d + 4*d if bias else 0`, so the conditional swallows the whole sum and bias=False returns 0.", params_precedence),
    Entry("mha_param_count", "wrong", "bias-qkv-only", "Counts biases only on the Q, K, V projections (3 d), not on the output projection.", params_bias_qkv_only),
    Entry("mha_param_count", "right", "shape-list", None, params_shapes),
    Entry("mha_param_count", "right", "factored", None, params_factored),
]
