"""Learner-style answers to lesson 05 (see answers/lesson01.py for the layout)."""

import math


# -- mha_flops: wrong ----------------------------------------------------------------------------
def flops_mac_as_one(seq_len, d_model):
    n, d = seq_len, d_model
    parts = {"qkv_projections": 3 * n * d * d, "scores": n * n * d, "weighted_sum": n * n * d,
             "output_projection": n * d * d}
    parts["total"] = sum(parts.values())
    return parts


def flops_no_output_projection(seq_len, d_model):
    n, d = seq_len, d_model
    parts = {"qkv_projections": 6 * n * d * d, "scores": 2 * n * n * d,
             "weighted_sum": 2 * n * n * d}
    parts["total"] = sum(parts.values())
    parts["output_projection"] = 0
    return parts


def flops_fixed_head_width(seq_len, d_model):
    d_head = 64 if d_model % 64 == 0 else 8  # "each head is 64 wide"
    n, d = seq_len, d_model
    parts = {"qkv_projections": 6 * n * d * d, "scores": 2 * n * n * d_head,
             "weighted_sum": 2 * n * n * d_head, "output_projection": 2 * n * d * d}
    parts["total"] = sum(parts.values())
    return parts


def flops_one_projection(seq_len, d_model):
    n, d = seq_len, d_model
    parts = {"qkv_projections": 2 * n * d * d, "scores": 2 * n * n * d,
             "weighted_sum": 2 * n * n * d, "output_projection": 2 * n * d * d}
    parts["total"] = sum(parts.values())
    return parts


def flops_total_one_n2(seq_len, d_model):
    n, d = seq_len, d_model
    parts = {"qkv_projections": 6 * n * d * d, "scores": 2 * n * n * d,
             "weighted_sum": 2 * n * n * d, "output_projection": 2 * n * d * d}
    parts["total"] = 8 * n * d * d + 2 * n * n * d
    return parts


def flops_causal_only(seq_len, d_model):
    n, d = seq_len, d_model
    parts = {"qkv_projections": 6 * n * d * d, "scores": n * n * d,  # half the matrix is masked
             "weighted_sum": n * n * d, "output_projection": 2 * n * d * d}
    parts["total"] = sum(parts.values())
    return parts


# -- mha_flops: right ----------------------------------------------------------------------------
def flops_by_formula(seq_len, d_model):
    n, d = seq_len, d_model
    parts = {"qkv_projections": 6 * n * d**2, "scores": 2 * n**2 * d, "weighted_sum": 2 * n**2 * d,
             "output_projection": 2 * n * d**2}
    parts["total"] = 8 * n * d**2 + 4 * n**2 * d
    return parts


def matmul_flops(m, k, n):
    return 2 * m * k * n


def flops_per_head_loop(seq_len, d_model):
    heads = 8 if d_model % 8 == 0 else 1
    d_head = d_model // heads
    parts = {
        "qkv_projections": sum(matmul_flops(seq_len, d_model, d_model) for _ in range(3)),
        "scores": sum(matmul_flops(seq_len, d_head, seq_len) for _ in range(heads)),
        "weighted_sum": sum(matmul_flops(seq_len, seq_len, d_head) for _ in range(heads)),
        "output_projection": matmul_flops(seq_len, d_model, d_model),
    }
    parts["total"] = sum(parts.values())
    return parts


def flops_floats(seq_len, d_model):
    return {key: float(value) for key, value in flops_by_formula(seq_len, d_model).items()}


# -- crossover_seq_len ---------------------------------------------------------------------------
def crossover_d_model(d_model):
    return d_model


def crossover_without_output(d_model):
    return 6 * d_model / 4  # 6 N d^2 = 4 N^2 d


def crossover_one_n2(d_model):
    return 8 * d_model // 2  # 8 N d^2 = 2 N^2 d


def crossover_upside_down(d_model):
    return d_model // 2


def crossover_loop_past(d_model):
    n = 0
    while 2 * n * n * d_model * 2 <= 8 * n * d_model * d_model:
        n += 1
    return n


def crossover_two_slips(d_model):
    return 6 * d_model ** 2 // (2 * d_model)  # 6 N d^2 = 2 N^2 d


def crossover_trivial_root(d_model):
    # 4 d N^2 - 8 d^2 N = 0 as a quadratic a N^2 + b N = 0: both roots, the smaller taken
    a, b = 4 * d_model, -8 * d_model * d_model
    return min(0, -b // a)


def crossover_root_two(d_model):
    return math.isqrt(2 * d_model * d_model)  # N^2 = 2 d^2: the N on the right dropped


def crossover_twice(d_model):
    return 2 * d_model


def crossover_solved(d_model):
    projections, quadratic = 8 * d_model**2, 4 * d_model  # per N and per N^2
    return projections // quadratic


def crossover_float(d_model):
    return float(d_model) * 2.0


def crossover_search(d_model):
    n = 1
    while 4 * n * n * d_model < 8 * n * d_model * d_model:
        n += 1
    return n


# -- mha_param_count -----------------------------------------------------------------------------
def params_never_bias(d_model, bias=True):
    return 4 * d_model * d_model


def params_always_bias(d_model, bias=True):
    return 4 * d_model * d_model + 4 * d_model


def params_bias_matrix(d_model, bias=True):
    return 4 * d_model * d_model + (4 * d_model * d_model if bias else 0)


def params_three_matrices(d_model, bias=True):
    return 3 * d_model * d_model + (3 * d_model if bias else 0)


def params_no_output_bias(d_model, bias=True):
    return 4 * d_model * d_model + (3 * d_model if bias else 0)


def params_single_bias(d_model, bias=True):
    weights = 4 * d_model * d_model
    return weights + d_model if bias else weights


def params_bias_when_false(d_model, bias=True):
    total = 4 * d_model ** 2
    if not bias:
        total += 4 * d_model
    return total


def params_formula(d_model, bias=True):
    return 4 * d_model**2 + 4 * d_model * int(bias)


def params_by_shapes(d_model, bias=True):
    shapes = [(d_model, d_model)] * 4 + ([(d_model,)] * 4 if bias else [])
    return sum(math.prod(shape) for shape in shapes)


def params_torch(d_model, bias=True):
    import torch

    layer = torch.nn.MultiheadAttention(d_model, 1, bias=bias, device="meta")
    return sum(p.numel() for p in layer.parameters())


# -- calling the answer key ----------------------------------------------------------------------
def flops_from_reference(seq_len, d_model):
    from mhalib.reference import mha_flops

    return mha_flops(seq_len, d_model)


def flops_from_gqa_accounting(seq_len, d_model):
    from mhalib.accounting.flops import gqa_flops

    return gqa_flops(seq_len, d_model, 1, 1)


def crossover_from_accounting(d_model):
    from mhalib.accounting import crossover_seq_len

    return crossover_seq_len(d_model)


def params_from_reference(d_model, bias=True):
    import mhalib.reference

    return mhalib.reference.mha_param_count(d_model, bias)


def params_from_gqa_count(d_model, bias=True):
    from mhalib.accounting.params import gqa_param_count

    return gqa_param_count(d_model, 1, 1, bias)


WRONG = {
    "mha_flops": {
        "multiply_add_as_one": flops_mac_as_one,
        "no_output_projection": flops_no_output_projection,
        "n2_with_d_head": flops_fixed_head_width,
        "one_projection": flops_one_projection,
        "one_n2_term": flops_total_one_n2,
        "causal_halved": flops_causal_only,
    },
    "crossover_seq_len": {
        "crossover_d_model": crossover_d_model,
        "no_output_projection": crossover_without_output,
        "one_n2_term": crossover_one_n2,
        "inverted_ratio": crossover_upside_down,
        "first_n_past_crossover": crossover_loop_past,
        "no_output_projection_one_n2_term": crossover_two_slips,
        "n_squared_kept": crossover_root_two,
        "zero_root": crossover_trivial_root,
    },
    "mha_param_count": {
        "no_bias": params_never_bias,
        "bias_ignores_flag": params_always_bias,
        "bias_d_squared": params_bias_matrix,
        "three_matrices": params_three_matrices,
        "no_output_bias": params_no_output_bias,
        "one_bias": params_single_bias,
        "bias_flag_inverted": params_bias_when_false,
    },
}

RIGHT = {
    "mha_flops": [flops_by_formula, flops_per_head_loop],
    "crossover_seq_len": [crossover_twice, crossover_solved, crossover_search],
    "mha_param_count": [params_formula, params_by_shapes, params_torch],
}

ANSWER_KEY = {
    "mha_flops": [flops_from_reference, flops_from_gqa_accounting],
    "crossover_seq_len": [crossover_from_accounting],
    "mha_param_count": [params_from_reference, params_from_gqa_count],
}
