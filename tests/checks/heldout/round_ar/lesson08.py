"""Held-out catalogue, lesson 08 (heads): previous_token_score, induction_score."""

import torch

from entry import Entry


# ================================================================ previous_token_score: wrong
def prev_upper_diagonal(weights):
    diag = torch.diagonal(weights, offset=1, dim1=-2, dim2=-1)
    return diag.float().mean(dim=-1).to(weights.dtype)


def prev_submatrix_mean(weights):
    block = weights[:, 1:, :-1]
    return block.float().mean(dim=(-2, -1)).to(weights.dtype)


def prev_mean_over_heads(weights):
    d = torch.diagonal(weights, offset=-1, dim1=1, dim2=2)  # (H, N-1)
    return d.float().mean(dim=0).to(weights.dtype)


def prev_default_diagonal_dims(weights):
    sub = torch.diagonal(weights, -1)
    return sub.to(torch.float32).mean(-1).to(weights.dtype)


def prev_includes_query_zero(weights):
    n = weights.shape[-1]
    i = torch.arange(n)
    picked = weights[:, i, i - 1]  # (H, N)
    return picked.float().mean(dim=1).to(weights.dtype)


def prev_sum_not_mean(weights):
    heads, n, _ = weights.shape
    total = torch.zeros(heads, dtype=torch.float32)
    for i in range(1, n):
        total += weights[:, i, i - 1].float()
    return total.to(weights.dtype)


# ================================================================ previous_token_score: right
def prev_python_loop_float64(weights):
    heads, n, _ = weights.shape
    scores = []
    for h in range(heads):
        acc = 0.0
        for i in range(1, n):
            acc += float(weights[h, i, i - 1])
        scores.append(acc / (n - 1))
    return torch.tensor(scores, dtype=torch.float64).to(weights.dtype)


def prev_band_mask(weights):
    n = weights.shape[-1]
    band = torch.ones(n, n, dtype=torch.float64).tril(-1).triu(-1)  # ones exactly at (i, i-1)
    return ((weights.double() * band).sum(dim=(1, 2)) / (n - 1)).to(weights.dtype)


# ===================================================================== induction_score: wrong
def induction_copy_not_next(weights, period):
    rows = torch.arange(period, 2 * period)
    return weights[:, rows, rows - period].float().mean(-1).to(weights.dtype)


def induction_half_from_wrong_axis(weights, period):
    half = weights.shape[0] // 2
    vals = [weights[:, i, i - half + 1].float() for i in range(half, 2 * half)]
    return torch.stack(vals, dim=-1).mean(-1).to(weights.dtype)


def induction_offset_sign(weights, period):
    diag = torch.diagonal(weights, offset=period - 1, dim1=-2, dim2=-1)
    return diag[:, 1:].float().mean(-1).to(weights.dtype)


def induction_includes_first_half_query(weights, period):
    diag = torch.diagonal(weights, offset=1 - period, dim1=1, dim2=2)  # (H, period + 1)
    return diag.to(torch.float32).mean(dim=1).to(weights.dtype)


def induction_scalar_mean(weights, period):
    n = 2 * period
    q_idx = torch.arange(period, n)
    k_idx = q_idx - period + 1
    return weights[:, q_idx, k_idx].float().mean().to(weights.dtype)


def induction_argmax_hits(weights, period):
    q_idx = torch.arange(period, 2 * period)
    target = q_idx - period + 1
    top = weights[:, period:, :].argmax(dim=-1)  # (H, period)
    return (top == target).float().mean(dim=-1).to(weights.dtype)


# ===================================================================== induction_score: right
def induction_loop_float64(weights, period):
    H = weights.shape[0]
    out = torch.zeros(H, dtype=torch.float64)
    for i in range(period, 2 * period):
        out += weights[:, i, i - period + 1].double()
    return (out / period).to(weights.dtype)


def induction_selector_matrix(weights, period):
    n = weights.shape[-1]
    sel = torch.zeros(n, n, dtype=torch.float64)
    for i in range(period, n):
        sel[i, i - period + 1] = 1.0
    picked = torch.einsum("hij,ij->h", weights.double(), sel)
    return (picked / sel.sum()).to(weights.dtype)


ENTRIES = [
    Entry("previous_token_score", "wrong", "upper_diagonal",
          "Takes the diagonal at offset +1 (weight of query i on key i+1, the next token) "
          "instead of offset -1 (key i-1).",
          prev_upper_diagonal),
    Entry("previous_token_score", "wrong", "submatrix_mean",
          "Slices weights[:, 1:, :-1] and averages the whole (N-1) x (N-1) block, not just its "
          "diagonal entries w[h, i, i-1].",
          prev_submatrix_mean),
    Entry("previous_token_score", "wrong", "mean_over_heads",
          "Averages the sub-diagonal over the head axis (dim 0) instead of over the queries, "
          "so the result is per query, not per head.",
          prev_mean_over_heads),
    Entry("previous_token_score", "wrong", "diagonal_default_dims",
          "Calls torch.diagonal(weights, -1) with its default dim1=0, dim2=1, so it takes a "
          "diagonal across the head and query axes rather than the query-key axes.",
          prev_default_diagonal_dims),
    Entry("previous_token_score", "wrong", "includes_query_zero",
          "Indexes weights[:, i, i - 1] for every i from 0, so query 0 reads key -1 (Python "
          "wraps it to the last key) and the mean is over N queries instead of N - 1.",
          prev_includes_query_zero),
    Entry("previous_token_score", "wrong", "sum_not_mean",
          "Sums the weights on the previous token over the queries but never divides by "
          "N - 1, so it returns a total, not a mean.",
          prev_sum_not_mean),
    Entry("previous_token_score", "right", "python_loop_float64", None,
          prev_python_loop_float64),
    Entry("previous_token_score", "right", "subdiagonal_band_mask", None, prev_band_mask),
    Entry("induction_score", "wrong", "earlier_copy_not_next_token",
          "Reads key i - period (the earlier copy of the current token) instead of "
          "i - period + 1, the token that followed it.",
          induction_copy_not_next),
    Entry("induction_score", "wrong", "half_from_head_axis",
          "Ignores period and takes the half length from weights.shape[0], the head count, "
          "instead of the sequence axis.",
          induction_half_from_wrong_axis),
    Entry("induction_score", "wrong", "diagonal_offset_sign",
          "Uses torch.diagonal with offset period - 1 (above the main diagonal) instead of "
          "1 - period, so it reads keys after the query.",
          induction_offset_sign),
    Entry("induction_score", "wrong", "keeps_query_period_minus_1",
          "Averages the whole diagonal at offset 1 - period (period + 1 entries), which "
          "includes query period - 1 from the first half; the first entry should be dropped.",
          induction_includes_first_half_query),
    Entry("induction_score", "wrong", "mean_over_heads_too",
          "Calls .mean() with no dim, averaging over heads and queries together: one scalar "
          "instead of a score per head.",
          induction_scalar_mean),
    Entry("induction_score", "wrong", "argmax_hit_rate",
          "Counts how often the target key is each query's argmax (a hit rate) instead of "
          "averaging the weight put on it.",
          induction_argmax_hits),
    Entry("induction_score", "right", "loop_float64", None, induction_loop_float64),
    Entry("induction_score", "right", "selector_matrix_einsum", None, induction_selector_matrix),
]
