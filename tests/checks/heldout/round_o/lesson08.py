"""Held-out catalogue, lesson 08 (heads): previous_token_score, induction_score."""

import torch

from entry import Entry

EX_P = "previous_token_score"
EX_I = "induction_score"


# ============================================================ previous_token_score: wrong
def prev_next_token(weights):
    diag = torch.diagonal(weights, offset=1, dim1=-2, dim2=-1)
    return diag.float().mean(dim=-1).to(weights.dtype)


def prev_loop_skips_last(weights):
    H, N, _ = weights.shape
    scores = []
    for h in range(H):
        total = 0.0
        for i in range(1, N - 1):
            total += float(weights[h, i, i - 1])
        scores.append(total / (N - 1))
    return torch.tensor(scores, dtype=weights.dtype)


def prev_diagonal_default_dims(weights):
    on_prev = torch.diagonal(weights, offset=-1)
    return on_prev.to(torch.float32).mean(-1).to(weights.dtype)


def prev_mean_over_heads(weights):
    w = weights.to(torch.float32)
    prev = w[:, 1:, :-1].diagonal(dim1=1, dim2=2)  # (H, N-1)
    return prev.mean(dim=0).to(weights.dtype)


def prev_all_earlier(weights):
    n = weights.shape[-1]
    below = torch.tril(weights.to(torch.float32), diagonal=-1)
    return (below.sum(dim=(-2, -1)) / (n - 1)).to(weights.dtype)


def prev_divide_by_n(weights):
    n = weights.shape[-1]
    d = torch.diagonal(weights.to(torch.float32), -1, -2, -1)
    return (d.sum(-1) / n).to(weights.dtype)


# ============================================================ previous_token_score: right
def prev_python_float64(weights):
    H, N, _ = weights.shape
    out = []
    for h in range(H):
        vals = [float(weights[h, i, i - 1]) for i in range(1, N)]
        out.append(sum(vals) / len(vals))
    return torch.tensor(out, dtype=torch.float64).to(weights.dtype)


def prev_shifted_identity_mask(weights):
    n = weights.shape[-1]
    mask = torch.diag(torch.ones(n - 1, dtype=torch.float64), -1)  # ones at (i, i-1)
    picked = weights.to(torch.float64) * mask
    return (picked.sum(dim=(1, 2)) / mask.sum()).to(weights.dtype)


# ============================================================ induction_score: wrong
def ind_same_token(weights, period):
    diag = torch.diagonal(weights, offset=-period, dim1=-2, dim2=-1)  # w[i, i - period]
    return diag.to(torch.float32).mean(-1).to(weights.dtype)


def ind_first_entry_kept(weights, period):
    diag = torch.diagonal(weights, offset=1 - period, dim1=1, dim2=2)  # (H, period + 1)
    return diag.to(torch.float32).mean(dim=-1).to(weights.dtype)


def ind_divide_by_n(weights, period):
    n = weights.shape[-1]
    rows = torch.arange(period, 2 * period)
    cols = rows - period + 1
    picked = weights[:, rows, cols].to(torch.float32)
    return (picked.sum(-1) / n).to(weights.dtype)


def ind_offset_sign(weights, period):
    diag = weights.diagonal(period - 1, -2, -1)
    return diag[:, 1:].to(torch.float32).mean(-1).to(weights.dtype)


def ind_block_indexing(weights, period):
    q_idx = torch.arange(period, 2 * period)
    k_idx = q_idx - period + 1
    picked = weights[:, q_idx][:, :, k_idx]  # meant: the pairs (q_idx[j], k_idx[j])
    return picked.to(torch.float32).mean(dim=(-2, -1)).to(weights.dtype)


def ind_mean_over_heads(weights, period):
    H = weights.shape[0]
    vals = torch.stack([weights[:, i, i - period + 1] for i in range(period, 2 * period)])
    # vals: (period, H)
    return vals.to(torch.float32).mean(dim=-1).to(weights.dtype)


# ============================================================ induction_score: right
def ind_gather(weights, period):
    H = weights.shape[0]
    second = weights[:, period:, :].to(torch.float64)  # (H, period, N)
    idx = (torch.arange(period, 2 * period) - period + 1).expand(H, period)[..., None]
    picked = second.gather(-1, idx).squeeze(-1)
    return picked.mean(-1).to(weights.dtype)


def ind_paired_index_sum(weights, period):
    rows = torch.arange(period, 2 * period)
    cols = torch.arange(1, period + 1)
    picked = weights[:, rows, cols].double()  # (H, period) pairs
    return (picked.sum(dim=1) / period).to(weights.dtype)


ENTRIES = [
    Entry(EX_P, "wrong", "next_token_diagonal", "It reads the diagonal at offset +1, the "
          "weight on key i+1 (the next token), instead of offset -1 for key i-1.",
          prev_next_token),
    Entry(EX_P, "wrong", "loop_skips_last_query", "The query loop runs range(1, N - 1), so "
          "the last query's weight on its previous token is never added (while the sum is "
          "still divided by N - 1).", prev_loop_skips_last),
    Entry(EX_P, "wrong", "diagonal_default_dims", "torch.diagonal is called without dim1/dim2, "
          "so it takes the diagonal over the first two axes (heads and queries), not over "
          "queries and keys.", prev_diagonal_default_dims),
    Entry(EX_P, "wrong", "mean_over_heads", "The previous-token weights (H, N-1) are averaged "
          "over the head axis (dim 0) instead of over the queries, giving one value per query "
          "instead of one per head.", prev_mean_over_heads),
    Entry(EX_P, "wrong", "all_earlier_keys", "It sums the whole strictly lower triangle (all "
          "earlier keys j < i) instead of only the key i-1 just before each query.",
          prev_all_earlier),
    Entry(EX_P, "wrong", "divides_by_n", "The previous-token weights are summed and divided "
          "by N, although only the N-1 queries i >= 1 take part.", prev_divide_by_n),
    Entry(EX_P, "right", "python_loop_float64", None, prev_python_float64),
    Entry(EX_P, "right", "subdiagonal_mask", None, prev_shifted_identity_mask),
    Entry(EX_I, "wrong", "same_token_not_next", "It reads key i - period (the earlier copy of "
          "the same token) instead of i - period + 1 (the token that followed it).",
          ind_same_token),
    Entry(EX_I, "wrong", "first_diagonal_entry_kept", "The whole diagonal at offset 1 - period "
          "is averaged: its first entry (query period-1, still in the first half) is not "
          "dropped, so period+1 values are averaged.", ind_first_entry_kept),
    Entry(EX_I, "wrong", "divides_by_n", "The period picked weights are summed and divided by "
          "N = 2*period instead of by the number of queries, period, halving the score.",
          ind_divide_by_n),
    Entry(EX_I, "wrong", "diagonal_above", "The diagonal offset has the wrong sign "
          "(period - 1 instead of 1 - period), so it reads keys after the query instead of "
          "i - period + 1.", ind_offset_sign),
    Entry(EX_I, "wrong", "block_not_pairs", "Indexing with [:, q_idx][:, :, k_idx] selects "
          "the whole period x period block of those queries and keys, not the pairs "
          "(q_idx[j], k_idx[j]); the mean then averages off-target weights too.",
          ind_block_indexing),
    Entry(EX_I, "wrong", "mean_over_heads", "The stacked weights (period, H) are averaged over "
          "the last axis, the heads, so the result has one value per query instead of one per "
          "head.", ind_mean_over_heads),
    Entry(EX_I, "right", "gather_float64", None, ind_gather),
    Entry(EX_I, "right", "paired_advanced_index", None, ind_paired_index_sum),
]
