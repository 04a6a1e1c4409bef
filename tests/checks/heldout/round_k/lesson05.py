"""Round k, lesson 05 (plain Python ints): mha_flops, crossover_seq_len, mha_param_count."""

import math
from fractions import Fraction

import torch

from entry import Entry

ENTRIES = []


def add(exercise, kind, label, mistake=None):
    def deco(func):
        ENTRIES.append(Entry(exercise, kind, label, mistake, func))
        return func
    return deco


def _with_total(parts):
    parts["total"] = sum(parts.values())
    return parts


# ============================================================================ mha_flops
@add("mha_flops", "wrong", "macs_not_flops",
     "It counts one multiply-add as 1 operation instead of 2 FLOPs, so every term is half the "
     "contract's.")
def flops_macs(seq_len, d_model):
    n, d = seq_len, d_model
    return _with_total({"qkv_projections": 3 * n * d * d, "scores": n * n * d,
                        "weighted_sum": n * n * d, "output_projection": n * d * d})


@add("mha_flops", "wrong", "total_misses_output_projection",
     "The total adds the projections, scores and weighted sum but leaves out the output "
     "projection, giving 6 N d^2 + 4 N^2 d.")
def flops_total_short(seq_len, d_model):
    n, d = seq_len, d_model
    qkv = 6 * n * d * d
    scores = 2 * n * n * d
    ws = 2 * n * n * d
    out = 2 * n * d * d
    return {"qkv_projections": qkv, "scores": scores, "weighted_sum": ws,
            "output_projection": out, "total": qkv + scores + ws}


@add("mha_flops", "wrong", "math_pow_floats",
     "It writes the squares with math.pow, which returns floats, so the counts are not plain "
     "ints.")
def flops_pow(seq_len, d_model):
    n, d = seq_len, d_model
    return _with_total({"qkv_projections": 6 * n * math.pow(d, 2),
                        "scores": 2 * math.pow(n, 2) * d,
                        "weighted_sum": 2 * math.pow(n, 2) * d,
                        "output_projection": 2 * n * math.pow(d, 2)})


@add("mha_flops", "wrong", "caret_is_xor",
     "It writes d ^ 2 and N ^ 2 for squares, but ^ is bitwise XOR in Python, not a power.")
def flops_xor(seq_len, d_model):
    n, d = seq_len, d_model
    return _with_total({"qkv_projections": 6 * n * (d ^ 2), "scores": 2 * (n ^ 2) * d,
                        "weighted_sum": 2 * (n ^ 2) * d, "output_projection": 2 * n * (d ^ 2)})


@add("mha_flops", "wrong", "causal_halving",
     "It halves the score and weighted-sum terms as if a causal mask skipped half the pairs, "
     "but the contract counts dense attention.")
def flops_causal(seq_len, d_model):
    n, d = seq_len, d_model
    return _with_total({"qkv_projections": 6 * n * d * d, "scores": n * n * d,
                        "weighted_sum": n * n * d, "output_projection": 2 * n * d * d})


@add("mha_flops", "wrong", "n_and_d_swapped_in_scores",
     "It swaps N and d in the two attention terms, writing 2 N d^2 where 2 N^2 d belongs.")
def flops_swapped(seq_len, d_model):
    n, d = seq_len, d_model
    return _with_total({"qkv_projections": 6 * n * d * d, "scores": 2 * n * d * d,
                        "weighted_sum": 2 * n * d * d, "output_projection": 2 * n * d * d})


@add("mha_flops", "right", "matmul_shape_helper")
def flops_shapes(seq_len, d_model):
    def mm(m, k, n):
        return 2 * m * k * n

    n, d = int(seq_len), int(d_model)
    parts = {
        "qkv_projections": sum(mm(n, d, d) for _ in "qkv"),
        "scores": mm(n, d, n),
        "weighted_sum": mm(n, n, d),
        "output_projection": mm(n, d, d),
    }
    parts["total"] = sum(parts.values())
    return parts


@add("mha_flops", "right", "fraction_per_head")
def flops_fraction(seq_len, d_model):
    n, d = Fraction(seq_len), Fraction(d_model)
    heads = 1
    per_head = d / heads
    parts = {
        "qkv_projections": 3 * 2 * n * d * d,
        "scores": heads * 2 * n * n * per_head,
        "weighted_sum": heads * 2 * n * n * per_head,
        "output_projection": 2 * n * d * d,
    }
    parts = {key: int(val) for key, val in parts.items()}
    parts["total"] = int(8 * n * d * d + 4 * n * n * d)
    return parts


# ============================================================================ crossover_seq_len
@add("crossover_seq_len", "wrong", "only_qkv_projections",
     "It equates the N^2 terms with the q/k/v projections alone (6 N d^2), leaving out the "
     "output projection, and gets 3 d / 2 rounded down.")
def cross_qkv_only(d_model):
    return 6 * d_model // 4


@add("crossover_seq_len", "wrong", "true_division_float",
     "It solves 8 N d^2 = 4 N^2 d with a true division, returning a float instead of a plain "
     "int.")
def cross_float(d_model):
    return 8 * d_model ** 2 / (4 * d_model)


@add("crossover_seq_len", "wrong", "rejects_d_model_1",
     "Its guard rejects d_model <= 1 with ValueError although d_model=1 is a valid size.")
def cross_guard(d_model):
    if d_model <= 1:
        raise ValueError(f"d_model={d_model} is too small")
    return 2 * d_model


@add("crossover_seq_len", "wrong", "precedence_times_d",
     "It writes 8 * d**2 // 4 * d, which multiplies by d after dividing by 4 instead of "
     "dividing by 4 d.")
def cross_precedence(d_model):
    d = d_model
    return 8 * d ** 2 // 4 * d


@add("crossover_seq_len", "wrong", "search_overshoots",
     "The search loop keeps going while the N^2 terms are <= the projections, so it stops one "
     "past the crossover and returns 2 d + 1.")
def cross_search(d_model):
    n = 1
    while 4 * n * n * d_model <= 8 * n * d_model * d_model:
        n += 1
    return n


@add("crossover_seq_len", "wrong", "mixed_units",
     "It counts the projections in multiply-adds (4 N d^2) but the attention products in FLOPs "
     "(4 N^2 d), so it returns d instead of 2 d.")
def cross_units(d_model):
    proj_macs = 4 * d_model * d_model
    attn_flops_per_n = 4 * d_model
    return proj_macs // attn_flops_per_n


@add("crossover_seq_len", "right", "fraction_ratio")
def cross_fraction(d_model):
    return int(Fraction(8 * d_model * d_model, 4 * d_model))


@add("crossover_seq_len", "right", "integer_search")
def cross_loop(d_model):
    n = 1
    while 4 * n * n * d_model < 8 * n * d_model * d_model:
        n += 1
    return n


# ============================================================================ mha_param_count
@add("mha_param_count", "wrong", "four_scalar_biases",
     "It adds 4 biases in total instead of one bias vector of d_model per projection (4 d).")
def params_scalar_bias(d_model, bias=True):
    return 4 * d_model * d_model + (4 if bias else 0)


@add("mha_param_count", "wrong", "forgets_w_o",
     "It counts only W_q, W_k and W_v (and their biases), forgetting the output projection.")
def params_no_wo(d_model, bias=True):
    total = 0
    for _ in ("q", "k", "v"):
        total += d_model * d_model + (d_model if bias else 0)
    return total


@add("mha_param_count", "wrong", "bias_condition_inverted",
     "The bias term is added when bias is False and left out when it is True.")
def params_inverted(d_model, bias=True):
    count = 4 * d_model * d_model
    if not bias:
        count += 4 * d_model
    return count


@add("mha_param_count", "wrong", "conditional_expression_precedence",
     "It writes 4 * d**2 + 4 * d if bias else 0, and the conditional expression binds loosest, "
     "so bias=False returns 0.")
def params_precedence(d_model, bias=True):
    d = d_model
    return 4 * d ** 2 + 4 * d if bias else 0


@add("mha_param_count", "wrong", "true_division_float",
     "It factors the count as 4 d^2 (1 + 1/d) with a true division, returning a float instead "
     "of a plain int.")
def params_float(d_model, bias=True):
    d = d_model
    return 4 * d * d * (1 + 1 / d) if bias else 4 * d * d


@add("mha_param_count", "wrong", "bytes_not_params",
     "It returns the float32 memory in bytes (4 bytes per parameter) instead of the number of "
     "parameters.")
def params_bytes(d_model, bias=True):
    n = 4 * d_model * d_model + (4 * d_model if bias else 0)
    return 4 * n


@add("mha_param_count", "right", "nn_linear_numel")
def params_linear(d_model, bias=True):
    layers = [torch.nn.Linear(d_model, d_model, bias=bias, device="meta") for _ in range(4)]
    return sum(p.numel() for layer in layers for p in layer.parameters())


@add("mha_param_count", "right", "shape_product")
def params_shapes(d_model, bias=True):
    shapes = [(d_model, d_model)] * 4 + ([(d_model,)] * 4 if bias else [])
    return sum(math.prod(s) for s in shapes)
