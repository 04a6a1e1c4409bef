"""Lesson 05 (FLOPs and parameters, plain Python ints)."""

from entry import Entry


# ------------------------------------------------------------------ mha_flops: wrong
def flops_mac_as_one(seq_len, d_model):
    n, d = seq_len, d_model
    parts = {"qkv_projections": 3 * n * d * d, "scores": n * n * d,
             "weighted_sum": n * n * d, "output_projection": n * d * d}
    parts["total"] = sum(parts.values())
    return parts


def flops_one_projection(seq_len, d_model):
    n, d = seq_len, d_model
    parts = {"qkv_projections": 2 * n * d * d, "scores": 2 * n * n * d,
             "weighted_sum": 2 * n * n * d, "output_projection": 2 * n * d * d}
    parts["total"] = sum(parts.values())
    return parts


def flops_total_no_out(seq_len, d_model):
    n, d = seq_len, d_model
    qkv = 6 * n * d * d
    scores = 2 * n * n * d
    wsum = 2 * n * n * d
    out = 2 * n * d * d
    return {"qkv_projections": qkv, "scores": scores, "weighted_sum": wsum,
            "output_projection": out, "total": qkv + scores + wsum}


def flops_true_division(seq_len, d_model):
    n, d = seq_len, d_model
    macs = {"qkv_projections": 3 * n * d * d, "scores": n * n * d,
            "weighted_sum": n * n * d, "output_projection": n * d * d}
    flops = {key: value * 4 / 2 for key, value in macs.items()}
    flops["total"] = sum(flops.values())
    return flops


def flops_weighted_sum_swapped(seq_len, d_model):
    n, d = seq_len, d_model
    parts = {"qkv_projections": 6 * n * d ** 2, "scores": 2 * n ** 2 * d,
             "weighted_sum": 2 * n * d ** 2, "output_projection": 2 * n * d ** 2}
    parts["total"] = sum(parts.values())
    return parts


def flops_causal_half(seq_len, d_model):
    n, d = seq_len, d_model
    pairs = n * (n + 1) // 2  # only the visible (query, key) pairs
    parts = {"qkv_projections": 6 * n * d * d, "scores": 2 * pairs * d,
             "weighted_sum": 2 * pairs * d, "output_projection": 2 * n * d * d}
    parts["total"] = sum(parts.values())
    return parts


# ------------------------------------------------------------------ mha_flops: right
def flops_matmul_list(seq_len, d_model):
    def mm(m, k, n):
        return 2 * m * k * n

    n, d = seq_len, d_model
    parts = {
        "qkv_projections": sum(mm(n, d, d) for _ in ("q", "k", "v")),
        "scores": mm(n, d, n),
        "weighted_sum": mm(n, n, d),
        "output_projection": mm(n, d, d),
    }
    parts["total"] = parts["qkv_projections"] + parts["scores"] + parts["weighted_sum"] \
        + parts["output_projection"]
    return parts


def flops_per_head(seq_len, d_model):
    n, d = int(seq_len), int(d_model)
    heads, d_head = d, 1  # any split gives the same count; use width-1 heads
    scores = sum(2 * n * n * d_head for _ in range(heads))
    wsum = sum(2 * n * n * d_head for _ in range(heads))
    result = dict(qkv_projections=6 * n * d * d, scores=scores, weighted_sum=wsum,
                  output_projection=2 * n * d * d)
    result["total"] = 8 * n * d * d + 4 * n * n * d
    return result


# ------------------------------------------------------------------ crossover_seq_len: wrong
def cross_scores_only(d_model):
    return 3 * d_model


def cross_forget_out(d_model):
    return 6 * d_model * d_model / (4 * d_model)


def cross_float(d_model):
    return (8 * d_model ** 2) / (4 * d_model)


def cross_upside_down(d_model):
    return (4 * d_model) // 8


def cross_mixed_units(d_model):
    return 4 * d_model


# ------------------------------------------------------------------ crossover_seq_len: right
def cross_search(d_model):
    n = 1
    while 4 * n * n * d_model < 8 * n * d_model * d_model:
        n += 1
    return n


def cross_ratio(d_model):
    return (8 * d_model * d_model) // (4 * d_model)


# ------------------------------------------------------------------ mha_param_count: wrong
def params_one_bias(d_model, bias=True):
    d = d_model
    return 4 * d * d + (d if bias else 0)


def params_no_w_o(d_model, bias=True):
    d = d_model
    total = 3 * d * d
    if bias:
        total += 3 * d
    return total


def params_bias_ignored(d_model, bias=True):
    return 4 * d_model * d_model + 4 * d_model


def params_precedence(d_model, bias=True):
    d = d_model
    return 4 * d ** 2 + 4 * d if bias else 0


def params_bias_square(d_model, bias=True):
    d = d_model
    weights = 4 * d * d
    biases = 4 * d * d if bias else 0
    return weights + biases


# ------------------------------------------------------------------ mha_param_count: right
def params_shapes(d_model, bias=True):
    shapes = [(d_model, d_model)] * 4
    if bias:
        shapes += [(d_model,)] * 4
    total = 0
    for shape in shapes:
        size = 1
        for s in shape:
            size *= s
        total += size
    return total


def params_factored(d_model, bias=True):
    return 4 * d_model * (d_model + int(bias))


ENTRIES = [
    Entry("mha_flops", "wrong", "mac-as-one-flop",
          "Counts one multiply-add as one FLOP instead of two, halving every term.",
          flops_mac_as_one),
    Entry("mha_flops", "wrong", "one-projection",
          "Counts a single projection (2 N d^2) for Q, K and V together instead of three.",
          flops_one_projection),
    Entry("mha_flops", "wrong", "total-without-output",
          "Leaves the output projection out of the total.", flops_total_no_out),
    Entry("mha_flops", "wrong", "true-division-floats",
          "Converts multiply-adds to FLOPs with true division, so every count comes back as a "
          "float instead of an int.", flops_true_division),
    Entry("mha_flops", "wrong", "weighted-sum-d-squared",
          "Writes the weighted sum as 2 N d^2, squaring the wrong size (it is 2 N^2 d).",
          flops_weighted_sum_swapped),
    Entry("mha_flops", "wrong", "causal-saving",
          "Counts only the causally visible (query, key) pairs for the N^2 terms, although the "
          "contract counts dense attention.", flops_causal_half),
    Entry("mha_flops", "right", "matmul-helper", None, flops_matmul_list),
    Entry("mha_flops", "right", "per-head-sum", None, flops_per_head),

    Entry("crossover_seq_len", "wrong", "scores-vs-qkv",
          "Equates only the scores product (2 N^2 d) with the Q/K/V projections (6 N d^2), "
          "giving 3 d_model.", cross_scores_only),
    Entry("crossover_seq_len", "wrong", "output-projection-forgotten",
          "Leaves the output projection out of the projection side (4 N^2 d = 6 N d^2), "
          "giving 1.5 d_model as a float.", cross_forget_out),
    Entry("crossover_seq_len", "wrong", "float-result",
          "Solves 4 N^2 d = 8 N d^2 with true division, returning a float instead of an int.",
          cross_float),
    Entry("crossover_seq_len", "wrong", "ratio-upside-down",
          "Solves the equation upside down, returning d_model / 2 instead of 2 d_model.",
          cross_upside_down),
    Entry("crossover_seq_len", "wrong", "mixed-flop-units",
          "Counts the projections at 2 FLOPs per multiply-add but the N^2 terms at 1, "
          "giving 4 d_model.", cross_mixed_units),
    Entry("crossover_seq_len", "right", "search-loop", None, cross_search),
    Entry("crossover_seq_len", "right", "integer-ratio", None, cross_ratio),

    Entry("mha_param_count", "wrong", "single-bias-vector",
          "Adds a single bias vector of d instead of one per projection (4 d).",
          params_one_bias),
    Entry("mha_param_count", "wrong", "w_o-forgotten",
          "Counts only W_q, W_k, W_v and their biases, forgetting the output projection.",
          params_no_w_o),
    Entry("mha_param_count", "wrong", "bias-flag-ignored",
          "Ignores the bias flag and always adds the 4 d biases.", params_bias_ignored),
    Entry("mha_param_count", "wrong", "conditional-precedence",
          "Writes 4*d**2 + 4*d if bias else 0, so the conditional takes the whole sum and "
          "returns 0 without bias.", params_precedence),
    Entry("mha_param_count", "wrong", "bias-as-matrices",
          "Counts each bias as a d x d matrix (4 d^2) instead of a vector of d.",
          params_bias_square),
    Entry("mha_param_count", "right", "sum-of-shapes", None, params_shapes),
    Entry("mha_param_count", "right", "factored", None, params_factored),
]
