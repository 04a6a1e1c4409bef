"""Held-out catalogue, lesson 08 (what heads learn): previous_token_score, induction_score."""

import torch

from entry import Entry


# ============================================================ previous_token_score: wrong
def prev_next_token_diagonal(weights):
    acc = torch.promote_types(weights.dtype, torch.float32)
    diag = torch.diagonal(weights, offset=1, dim1=-2, dim2=-1)
    return diag.to(acc).mean(dim=-1).to(weights.dtype)


def prev_sum_not_mean(weights):
    w = weights.float()
    on_prev = torch.diagonal(w, offset=-1, dim1=1, dim2=2)
    return on_prev.sum(dim=1).to(weights.dtype)


def prev_diagonal_default_dims(weights):
    w = weights.to(torch.promote_types(weights.dtype, torch.float32))
    return torch.diagonal(w, -1).mean(-1).to(weights.dtype)


def prev_all_earlier_keys(weights):
    n = weights.shape[-1]
    w = weights.double()
    earlier = torch.tril(w, diagonal=-1).sum(dim=-1)  # (H, N)
    return (earlier[:, 1:].sum(dim=-1) / (n - 1)).to(weights.dtype)


def prev_loop_stops_early(weights):
    heads, n, _ = weights.shape
    total = torch.zeros(heads, dtype=torch.float64)
    for i in range(1, n - 1):
        total += weights[:, i, i - 1].double()
    return (total / (n - 1)).to(weights.dtype)


def prev_roll_wraps(weights):
    shifted = torch.roll(weights.float(), shifts=1, dims=-1)  # shifted[h, i, i] = w[h, i, i-1]
    return torch.diagonal(shifted, dim1=-2, dim2=-1).mean(-1).to(weights.dtype)


# ============================================================ previous_token_score: right
def prev_fancy_index(weights):
    n = weights.shape[-1]
    rows = torch.arange(1, n)
    picked = weights[:, rows, rows - 1].to(torch.float64)  # (H, N - 1)
    return (picked.sum(-1) / picked.shape[-1]).to(weights.dtype)


def prev_shifted_identity_einsum(weights):
    n = weights.shape[-1]
    sel = torch.eye(n, dtype=torch.float64).roll(-1, dims=1)  # sel[i, i-1] = 1 for i >= 1
    sel[0] = 0.0
    per_head = torch.einsum("hij,ij->h", weights.double(), sel)
    return (per_head / (n - 1)).to(weights.dtype)


# ============================================================ induction_score: wrong
def ind_attends_to_copy(weights, period):
    acc = torch.promote_types(weights.dtype, torch.float32)
    q = torch.arange(period, 2 * period)
    return weights[:, q, q - period].to(acc).mean(-1).to(weights.dtype)


def ind_keeps_first_entry(weights, period):
    acc = torch.promote_types(weights.dtype, torch.float32)
    diag = torch.diagonal(weights, offset=1 - period, dim1=-2, dim2=-1)  # (H, period + 1)
    return diag.to(acc).mean(-1).to(weights.dtype)


def ind_mean_without_dim(weights, period):
    vals = []
    for i in range(period, 2 * period):
        vals.append(weights[:, i, i - period + 1].float())
    return torch.stack(vals, dim=1).mean().to(weights.dtype)


def ind_divides_by_n(weights, period):
    n = weights.shape[-1]
    total = torch.zeros(weights.shape[0], dtype=torch.float64)
    for i in range(period, n):
        total = total + weights[:, i, i - period + 1].double()
    return (total / n).to(weights.dtype)


def ind_diagonal_offset_sign(weights, period):
    diag = torch.diagonal(weights.float(), offset=period - 1, dim1=1, dim2=2)
    return diag[:, 1:].mean(dim=1).to(weights.dtype)


def ind_first_half_keys_only(weights, period):
    block = weights[:, period:, :period].double()  # second-half queries x first-half keys
    on_next = torch.diagonal(block, offset=1, dim1=-2, dim2=-1)
    return on_next.mean(-1).to(weights.dtype)


# ============================================================ induction_score: right
def ind_loop_float64(weights, period):
    h = weights.shape[0]
    out = torch.empty(h, dtype=torch.float64)
    for head in range(h):
        s = 0.0
        for i in range(period, 2 * period):
            s += float(weights[head, i, i - period + 1])
        out[head] = s / period
    return out.to(weights.dtype)


def ind_gather(weights, period):
    n = weights.shape[-1]
    queries = weights[:, period:n, :].double()  # (H, period, N)
    target = (torch.arange(period, n) - period + 1).view(1, -1, 1).expand(weights.shape[0], -1, 1)
    picked = torch.gather(queries, 2, target).squeeze(-1)  # (H, period)
    return picked.mean(1).to(weights.dtype)


P = "previous_token_score"
I = "induction_score"
ENTRIES = [
    Entry(P, "wrong", "next_token_diagonal", "It reads the diagonal at offset +1, the weight "
          "of query i on key i+1 (the next token), instead of offset -1, key i-1.",
          prev_next_token_diagonal),
    Entry(P, "wrong", "sum_not_mean", "It sums the weights on key i-1 over the queries "
          "instead of averaging them: the total is never divided by N-1.", prev_sum_not_mean),
    Entry(P, "wrong", "diagonal_default_dims", "torch.diagonal(weights, -1) without dim1/dim2 "
          "takes the diagonal of the first two axes (heads x queries), not of the (N, N) "
          "pattern: it should be dim1=-2, dim2=-1.", prev_diagonal_default_dims),
    Entry(P, "wrong", "all_earlier_keys", "It averages the weight each query puts on all "
          "earlier keys (tril(-1) summed over the row), not on the single previous key i-1.",
          prev_all_earlier_keys),
    Entry(P, "wrong", "loop_stops_early", "The loop runs range(1, n - 1), so the last query "
          "i = N-1 is left out of the sum while the mean still divides by N-1.",
          prev_loop_stops_early),
    Entry(P, "wrong", "roll_wraps_around", "torch.roll wraps around: after rolling the keys by "
          "one, the diagonal also picks w[0, N-1] for query 0 and the mean runs over all N "
          "queries instead of the N-1 queries i >= 1.", prev_roll_wraps),
    Entry(P, "right", "fancy_index_float64", None, prev_fancy_index),
    Entry(P, "right", "shifted_identity_einsum", None, prev_shifted_identity_einsum),
    Entry(I, "wrong", "attends_to_copy", "It reads key i - period, the earlier copy of token i "
          "itself, instead of key i - period + 1, the token that followed that copy.",
          ind_attends_to_copy),
    Entry(I, "wrong", "keeps_first_diagonal_entry", "The diagonal at offset 1 - period has "
          "period + 1 entries and the first belongs to query period - 1: it is kept in the "
          "mean instead of dropping it ([:, 1:]).", ind_keeps_first_entry),
    Entry(I, "wrong", "mean_without_dim", "It calls .mean() without dim, averaging over heads "
          "and queries together into one scalar instead of one score per head.",
          ind_mean_without_dim),
    Entry(I, "wrong", "divides_by_n", "It sums over the period second-half queries but divides "
          "by N = 2 * period, so every score is half what it should be.", ind_divides_by_n),
    Entry(I, "wrong", "diagonal_offset_sign", "torch.diagonal's offset has the wrong sign: "
          "offset=period - 1 is above the main diagonal (key i + period - 1 of query i), where "
          "the induction target lies below it at offset 1 - period.",
          ind_diagonal_offset_sign),
    Entry(I, "wrong", "first_half_keys_only", "It cuts the pattern to second-half queries x "
          "first-half keys before taking the diagonal, so the last query, whose target key "
          "(position period) is in the second half, is lost and the mean runs over period - 1 "
          "queries.", ind_first_half_keys_only),
    Entry(I, "right", "python_loop_float64", None, ind_loop_float64),
    Entry(I, "right", "gather", None, ind_gather),
]
