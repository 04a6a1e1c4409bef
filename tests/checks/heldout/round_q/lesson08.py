"""Held-out catalogue, lesson 08 (heads): previous_token_score, induction_score."""

import torch

from entry import Entry


# ============================================================== previous_token_score
def prev_next_token_diagonal(weights):
    acc = torch.promote_types(weights.dtype, torch.float32)
    diag = torch.diagonal(weights, offset=1, dim1=-2, dim2=-1)
    return diag.to(acc).mean(dim=-1).to(weights.dtype)


def prev_python_wraparound(weights):
    H, N, _ = weights.shape
    total = torch.zeros(H, dtype=torch.float64)
    for i in range(N):
        total += weights[:, i, i - 1].double()
    return (total / N).to(weights.dtype)


def prev_diagonal_default_dims(weights):
    w = weights.float()
    return torch.diagonal(w, -1).mean(-1).to(weights.dtype)


def prev_sum_not_mean(weights):
    heads, n, _ = weights.shape
    rows = torch.arange(1, n)
    picked = weights[:, rows, rows - 1].to(torch.float32)
    return picked.sum(dim=1).to(weights.dtype)


def prev_argmax_hit_rate(weights):
    n = weights.shape[-1]
    top_key = weights[:, 1:, :].argmax(dim=-1)  # (H, N - 1)
    expected = torch.arange(n - 1)
    return (top_key == expected).to(torch.float32).mean(dim=-1).to(weights.dtype)


def prev_returns_list(weights):
    H, N = weights.shape[0], weights.shape[1]
    scores = []
    for h in range(H):
        vals = [float(weights[h, i, i - 1]) for i in range(1, N)]
        scores.append(sum(vals) / len(vals))
    return scores


def prev_loop_float64(weights):
    H, N, _ = weights.shape
    out = torch.empty(H, dtype=torch.float64)
    for h in range(H):
        s = 0.0
        for i in range(1, N):
            s += float(weights[h, i, i - 1])
        out[h] = s / (N - 1)
    return out.to(weights.dtype)


def prev_einsum_shift_matrix(weights):
    n = weights.shape[-1]
    sel = torch.diag(torch.ones(n - 1, dtype=torch.float64), -1)  # 1 at (i, i - 1)
    total = torch.einsum("hij,ij->h", weights.double(), sel)
    return (total / (n - 1)).to(weights.dtype)


# ============================================================== induction_score
def ind_points_at_copy(weights, period):
    acc = torch.promote_types(weights.dtype, torch.float32)
    diag = torch.diagonal(weights, offset=-period, dim1=-2, dim2=-1)  # w[h, i, i - period]
    return diag.to(acc).mean(dim=-1).to(weights.dtype)


def ind_slice_wrong_end(weights, period):
    d = torch.diagonal(weights, offset=1 - period, dim1=1, dim2=2)  # (H, period + 1)
    return d[:, :-1].to(torch.float32).mean(dim=-1).to(weights.dtype)


def ind_offset_sign(weights, period):
    d = torch.diagonal(weights, offset=period - 1, dim1=-2, dim2=-1)
    return d[:, -period:].to(torch.float32).mean(-1).to(weights.dtype)


def ind_divides_by_n(weights, period):
    H, N, _ = weights.shape
    q = torch.arange(period, 2 * period)
    vals = weights[:, q, q - period + 1].double()
    return (vals.sum(dim=-1) / N).to(weights.dtype)


def ind_mean_over_heads(weights, period):
    q = torch.arange(period, 2 * period)
    vals = weights[:, q, q - period + 1].to(torch.float32)  # (H, period)
    return vals.mean(dim=0).to(weights.dtype)


def ind_two_step_indexing(weights, period):
    queries = torch.arange(period, 2 * period)
    keys = queries - period + 1
    picked = weights[:, queries][:, :, keys]  # rows first, then columns
    return picked.to(torch.float32).mean(dim=(-2, -1)).to(weights.dtype)


def ind_loops_float64(weights, period):
    heads = weights.shape[0]
    res = []
    for h in range(heads):
        acc = 0.0
        for i in range(period, 2 * period):
            acc += weights[h, i, i - period + 1].item()
        res.append(acc / period)
    return torch.tensor(res, dtype=torch.float64).to(weights.dtype)


def ind_selection_mask(weights, period):
    n = 2 * period
    sel = torch.zeros(n, n, dtype=torch.bool)
    i = torch.arange(period, n)
    sel[i, i - period + 1] = True
    w = weights.double()
    total = torch.where(sel, w, torch.zeros_like(w)).sum(dim=(1, 2))
    return (total / sel.sum()).to(weights.dtype)


ENTRIES = [
    Entry("previous_token_score", "wrong", "next_token_diagonal",
          "takes the diagonal at offset +1, the weight query i puts on key i + 1, instead of "
          "offset -1 (key i - 1)",
          prev_next_token_diagonal),
    Entry("previous_token_score", "wrong", "python_negative_index_query0",
          "loops over every query from 0, where weights[:, 0, -1] wraps round to the last "
          "key, and averages over N queries instead of the N - 1 queries i >= 1",
          prev_python_wraparound),
    Entry("previous_token_score", "wrong", "diagonal_default_dims",
          "calls torch.diagonal(weights, -1) without dim1/dim2, so it takes the diagonal of "
          "the head and query axes (dims 0 and 1) instead of the query and key axes",
          prev_diagonal_default_dims),
    Entry("previous_token_score", "wrong", "sum_not_mean",
          "sums the weights on key i - 1 over the queries instead of averaging them (no "
          "division by N - 1)",
          prev_sum_not_mean),
    Entry("previous_token_score", "wrong", "argmax_hit_rate",
          "scores the fraction of queries whose largest weight falls on key i - 1 (an argmax "
          "hit rate) instead of the mean weight on key i - 1",
          prev_argmax_hit_rate),
    Entry("previous_token_score", "wrong", "returns_python_list",
          "computes the right per-head means but returns them as a Python list of floats "
          "instead of a (H,) torch.Tensor",
          prev_returns_list),
    Entry("previous_token_score", "right", "double_loop_float64", None, prev_loop_float64),
    Entry("previous_token_score", "right", "einsum_subdiagonal_selector", None,
          prev_einsum_shift_matrix),
    Entry("induction_score", "wrong", "key_is_earlier_copy",
          "reads key i - period, the earlier copy of token i itself, instead of key "
          "i - period + 1, the token that followed it",
          ind_points_at_copy),
    Entry("induction_score", "wrong", "diagonal_sliced_wrong_end",
          "takes the diagonal at offset 1 - period but drops its last entry instead of its "
          "first, so it averages queries period - 1 .. 2 period - 2",
          ind_slice_wrong_end),
    Entry("induction_score", "wrong", "offset_sign_flipped",
          "uses the diagonal at offset period - 1 (above the main diagonal, key "
          "i + period - 1) instead of 1 - period",
          ind_offset_sign),
    Entry("induction_score", "wrong", "divides_by_sequence_length",
          "sums the right weights but divides by N = 2 * period instead of by the period "
          "queries of the second half",
          ind_divides_by_n),
    Entry("induction_score", "wrong", "mean_over_heads_axis",
          "averages over dim 0, the heads, instead of over the queries, returning (period,) "
          "instead of (H,)",
          ind_mean_over_heads),
    Entry("induction_score", "wrong", "two_step_fancy_indexing",
          "indexes rows then columns in two steps (weights[:, q][:, :, k]), which takes the "
          "whole period x period block instead of the pairs (i, i - period + 1), and "
          "averages that block",
          ind_two_step_indexing),
    Entry("induction_score", "right", "scalar_loops", None, ind_loops_float64),
    Entry("induction_score", "right", "boolean_selection_mask", None, ind_selection_mask),
]
