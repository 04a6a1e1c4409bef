"""Lesson 05 (plain Python ints): mha_flops, crossover_seq_len, mha_param_count, as learners write
them."""

import math

import torch

from entry import Entry


# ----------------------------------------------------------------------------- mha_flops: wrong
def flops_multiply_add_as_one(seq_len, d_model):
    n, d = seq_len, d_model
    f = {"qkv_projections": 3 * n * d * d, "scores": n * n * d, "weighted_sum": n * n * d,
         "output_projection": n * d * d}
    f["total"] = sum(f.values())
    return f


def flops_one_projection(seq_len, d_model):
    n, d = seq_len, d_model
    f = {"qkv_projections": 2 * n * d * d, "scores": 2 * n * n * d, "weighted_sum": 2 * n * n * d,
         "output_projection": 2 * n * d * d}
    f["total"] = sum(f.values())
    return f


def flops_causal_half(seq_len, d_model):
    n, d = seq_len, d_model
    f = {"qkv_projections": 6 * n * d * d,
         "scores": 2 * n * n * d // 2,  # only the lower triangle is needed
         "weighted_sum": 2 * n * n * d // 2,
         "output_projection": 2 * n * d * d}
    f["total"] = sum(f.values())
    return f


def flops_wrong_key_names(seq_len, d_model):
    n, d = seq_len, d_model
    f = {"qkv": 6 * n * d * d, "scores": 2 * n * n * d, "weighted_sum": 2 * n * n * d,
         "out_proj": 2 * n * d * d}
    f["total"] = sum(f.values())
    return f


def flops_swapped_quadratic(seq_len, d_model):
    n, d = seq_len, d_model
    f = {"qkv_projections": 6 * n * d * d, "scores": 2 * n * d * d, "weighted_sum": 2 * n * d * d,
         "output_projection": 2 * n * d * d}
    f["total"] = sum(f.values())
    return f


def flops_total_misses_output(seq_len, d_model):
    n, d = seq_len, d_model
    f = {"qkv_projections": 6 * n * d * d, "scores": 2 * n * n * d, "weighted_sum": 2 * n * n * d,
         "output_projection": 2 * n * d * d}
    f["total"] = f["qkv_projections"] + f["scores"] + f["weighted_sum"]
    return f


def flops_float_powers(seq_len, d_model):
    n, d = seq_len, d_model
    f = {"qkv_projections": 6 * n * math.pow(d, 2), "scores": 2 * math.pow(n, 2) * d,
         "weighted_sum": 2 * math.pow(n, 2) * d, "output_projection": 2 * n * math.pow(d, 2)}
    f["total"] = sum(f.values())
    return f


# ----------------------------------------------------------------------------- mha_flops: right
def flops_per_head_products(seq_len, d_model):
    def matmul(m, k, n):  # FLOPs of an (m, k) @ (k, n) product
        return 2 * m * k * n

    heads, d_head = d_model, 1  # any split gives the same totals; d_model heads of width 1
    f = {
        "qkv_projections": sum(matmul(seq_len, d_model, d_model) for _ in "qkv"),
        "scores": sum(matmul(seq_len, d_head, seq_len) for _ in range(heads)),
        "weighted_sum": sum(matmul(seq_len, seq_len, d_head) for _ in range(heads)),
        "output_projection": matmul(seq_len, d_model, d_model),
    }
    f["total"] = 8 * seq_len * d_model ** 2 + 4 * seq_len ** 2 * d_model
    return f


def flops_from_torch_counter(seq_len, d_model):
    from torch.utils.flop_counter import FlopCounterMode

    x = torch.zeros(seq_len, d_model)
    w = torch.zeros(d_model, d_model)
    counts = {}
    for name, fn in [
        ("qkv_projections", lambda: (x @ w, x @ w, x @ w)),
        ("scores", lambda: x @ x.T),
        ("weighted_sum", lambda: torch.zeros(seq_len, seq_len) @ x),
        ("output_projection", lambda: x @ w),
    ]:
        with FlopCounterMode(display=False) as counter:
            fn()
        counts[name] = int(counter.get_total_flops())
    counts["total"] = sum(counts.values())
    return counts


# ----------------------------------------------------------------------------- crossover: wrong
def crossover_scores_only(d_model):
    # 2 N^2 d = 8 N d^2
    return 4 * d_model


def crossover_without_output_projection(d_model):
    # 4 N^2 d = 6 N d^2
    return 6 * d_model / 4


def crossover_inverted_ratio(d_model):
    # 8 N^2 d = 4 N d^2
    return d_model // 2


def crossover_float(d_model):
    return 8 * d_model ** 2 / (4 * d_model)


def crossover_drops_constants(d_model):
    # N^2 d = N d^2
    return d_model


# ----------------------------------------------------------------------------- crossover: right
def crossover_search(d_model):
    n = 1
    while 4 * n * n * d_model < 8 * n * d_model * d_model:
        n += 1
    return n


def crossover_integer_ratio(d_model):
    return (8 * d_model * d_model) // (4 * d_model)


# ----------------------------------------------------------------------------- param count: wrong
def params_ignores_bias(d_model, bias=True):
    return 4 * d_model * d_model


def params_three_biases(d_model, bias=True):
    return 4 * d_model * d_model + (3 * d_model if bias else 0)


def params_forgets_w_o(d_model, bias=True):
    return 3 * d_model * d_model + (3 * d_model if bias else 0)


def params_bias_condition_inverted(d_model, bias=True):
    return 4 * d_model * d_model + (0 if bias else 4 * d_model)


def params_scalar_biases(d_model, bias=True):
    return 4 * d_model * d_model + (4 if bias else 0)


def params_bias_matrices(d_model, bias=True):
    per_projection = d_model * d_model + (d_model * d_model if bias else 0)
    return 4 * per_projection


# ----------------------------------------------------------------------------- param count: right
def params_torch_module(d_model, bias=True):
    layer = torch.nn.MultiheadAttention(d_model, num_heads=1, bias=bias, device="meta")
    return sum(p.numel() for p in layer.parameters())


def params_shapes(d_model, bias=True):
    shapes = [(d_model, d_model)] * 4 + ([(d_model,)] * 4 if bias else [])
    return sum(math.prod(s) for s in shapes)


ENTRIES = [
    Entry("mha_flops", "wrong", "multiply_add_as_one",
          "Counts one multiply-add as 1 FLOP instead of 2, halving every entry.",
          flops_multiply_add_as_one),
    Entry("mha_flops", "wrong", "one_projection",
          "Counts a single (N, d) @ (d, d) product for Q, K and V together (2 N d^2 instead of "
          "6 N d^2).", flops_one_projection),
    Entry("mha_flops", "wrong", "causal_half",
          "Halves the score and weighted-sum terms as if a causal mask saved half the work; the "
          "exercise counts dense attention.", flops_causal_half),
    Entry("mha_flops", "wrong", "wrong_key_names",
          "Uses its own key names ('qkv', 'out_proj') instead of the required ones.",
          flops_wrong_key_names),
    Entry("mha_flops", "wrong", "swapped_quadratic_term",
          "Swaps N and d in the attention products, counting 2 N d^2 for the scores and the "
          "weighted sum instead of 2 N^2 d.", flops_swapped_quadratic),
    Entry("mha_flops", "wrong", "total_misses_output_projection",
          "Leaves the output projection out of the total.", flops_total_misses_output),
    Entry("mha_flops", "wrong", "float_counts",
          "Computes the powers with math.pow, so every count is a float instead of an int.",
          flops_float_powers),
    Entry("mha_flops", "right", "per_head_products", None, flops_per_head_products),
    Entry("mha_flops", "right", "torch_flop_counter", None, flops_from_torch_counter),

    Entry("crossover_seq_len", "wrong", "scores_only",
          "Sets only the score term 2 N^2 d equal to the projections, forgetting the weighted "
          "sum (N = 4 d instead of 2 d).", crossover_scores_only),
    Entry("crossover_seq_len", "wrong", "without_output_projection",
          "Compares the N^2 terms with the Q/K/V projections only (6 N d^2), leaving out the "
          "output projection.", crossover_without_output_projection),
    Entry("crossover_seq_len", "wrong", "inverted_ratio",
          "Solves the equation upside down and returns d_model / 2.", crossover_inverted_ratio),
    Entry("crossover_seq_len", "wrong", "float_result",
          "Divides with /, returning a float instead of an integer sequence length.",
          crossover_float),
    Entry("crossover_seq_len", "wrong", "drops_constants",
          "Drops the constant factors and sets N^2 d = N d^2, returning d_model.",
          crossover_drops_constants),
    Entry("crossover_seq_len", "right", "search", None, crossover_search),
    Entry("crossover_seq_len", "right", "integer_ratio", None, crossover_integer_ratio),

    Entry("mha_param_count", "wrong", "ignores_bias",
          "Never adds the biases: returns 4 d^2 whatever bias says.", params_ignores_bias),
    Entry("mha_param_count", "wrong", "three_biases",
          "Counts biases only for Q, K and V (3 d) and forgets the output projection's bias.",
          params_three_biases),
    Entry("mha_param_count", "wrong", "forgets_w_o",
          "Counts only W_Q, W_K, W_V (and their biases), forgetting the output projection.",
          params_forgets_w_o),
    Entry("mha_param_count", "wrong", "bias_condition_inverted",
          "Adds the biases when bias is False and leaves them out when it is True.",
          params_bias_condition_inverted),
    Entry("mha_param_count", "wrong", "scalar_biases",
          "Counts each bias as a single number (+4) instead of a vector of d_model.",
          params_scalar_biases),
    Entry("mha_param_count", "wrong", "bias_matrices",
          "Counts each bias as a d x d matrix instead of a vector of d_model entries.",
          params_bias_matrices),
    Entry("mha_param_count", "right", "torch_module_on_meta", None, params_torch_module),
    Entry("mha_param_count", "right", "sum_of_shapes", None, params_shapes),
]
