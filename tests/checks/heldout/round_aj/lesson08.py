"""Held-out catalogue, lesson 08 (heads): previous_token_score, induction_score."""

import torch

from entry import Entry


# ============================================================ previous_token_score: wrong
def prev_offset_plus_one(weights):
    diag = torch.diagonal(weights, offset=1, dim1=-2, dim2=-1)
    return diag.float().mean(dim=-1).to(weights.dtype)


def prev_mean_over_heads(weights):
    on_prev = weights.diagonal(offset=-1, dim1=1, dim2=2)  # (H, N - 1)
    return on_prev.to(torch.float32).mean(dim=0)


def prev_loop_from_zero(weights):
    heads, n, _ = weights.shape
    out = torch.zeros(heads, dtype=torch.float64)
    for i in range(n):
        out += weights[:, i, i - 1].double()
    return (out / n).to(weights.dtype)


def prev_sum_not_mean(weights):
    w = weights.double()
    n = w.shape[-1]
    idx = torch.arange(1, n)
    return w[:, idx, idx - 1].sum(dim=-1).to(weights.dtype)


def prev_argmax_fraction(weights):
    n = weights.shape[-1]
    best = weights.argmax(dim=-1)  # (H, N): the key each query attends to most
    hits = best[:, 1:] == torch.arange(n - 1)
    return hits.double().mean(dim=-1)


def prev_drops_last_query(weights):
    H, N, _ = weights.shape
    scores = []
    for h in range(H):
        vals = [float(weights[h, i, i - 1]) for i in range(1, N - 1)]
        scores.append(sum(vals) / len(vals) if vals else float("nan"))
    return torch.tensor(scores, dtype=torch.float64)


# ============================================================ previous_token_score: right
def prev_fancy_index(weights):
    n = weights.shape[1]
    q_idx = torch.arange(1, n)
    return weights[:, q_idx, q_idx - 1].to(torch.float64).mean(dim=1).to(weights.dtype)


def prev_mask_einsum(weights):
    n = weights.shape[-1]
    sub = torch.diag(torch.ones(n - 1, dtype=torch.float64), -1)  # ones at (i, i - 1)
    total = torch.einsum("hij,ij->h", weights.double(), sub)
    return total / (n - 1)


# ============================================================ induction_score: wrong
def ind_copy_not_next(weights, period):
    rows = torch.arange(period, 2 * period)
    picked = weights[:, rows, rows - period]
    return picked.double().mean(-1)


def ind_offset_sign(weights, period):
    d = torch.diagonal(weights, offset=period - 1, dim1=-2, dim2=-1)
    return d[:, 1:].to(torch.float32).mean(dim=-1).to(weights.dtype)


def ind_diag_slice_from_zero(weights, period):
    d = torch.diagonal(weights, offset=1 - period, dim1=-2, dim2=-1)  # (H, period + 1)
    return d[:, :period].to(torch.float32).mean(dim=-1).to(weights.dtype)


def ind_mean_over_heads(weights, period):
    n = weights.shape[-1]
    i = torch.arange(period, n)
    vals = weights[:, i, i - period + 1].double()  # (H, period)
    return vals.mean(dim=0)


def ind_divides_by_n(weights, period):
    H, N, _ = weights.shape
    acc = torch.zeros(H, dtype=torch.float64)
    for i in range(period, 2 * period):
        acc = acc + weights[:, i, i - period + 1].double()
    return acc / N


def ind_parenthesised_key(weights, period):
    H = weights.shape[0]
    out = torch.zeros(H, dtype=torch.float64)
    for i in range(period, 2 * period):
        key = i - (period + 1)
        out += weights[:, i, key].double()
    return out / period


# ============================================================ induction_score: right
def ind_index_gather(weights, period):
    q = torch.arange(period, 2 * period)
    k = q - (period - 1)
    cols = k.expand(weights.shape[0], period).unsqueeze(-1)  # (H, period, 1)
    rows = weights[:, period:, :].double()  # (H, period, N)
    return torch.gather(rows, 2, cols).squeeze(-1).mean(-1).to(weights.dtype)


def ind_selection_mask(weights, period):
    n = 2 * period
    sel = torch.zeros(n, n, dtype=torch.float64)
    for i in range(period, n):
        sel[i, i - period + 1] = 1.0
    return (weights.double() * sel).sum(dim=(1, 2)) / period


ENTRIES = [
    Entry("previous_token_score", "wrong", "diagonal_offset_plus_one",
          "uses torch.diagonal(offset=1), the diagonal above the main one (key i + 1), "
          "misremembering that the previous token is offset=-1", prev_offset_plus_one),
    Entry("previous_token_score", "wrong", "mean_over_heads_axis",
          "averages the (H, N - 1) diagonal over dim 0 (the heads) instead of over the "
          "queries, returning N - 1 numbers instead of one per head", prev_mean_over_heads),
    Entry("previous_token_score", "wrong", "loop_from_query_zero",
          "loops over every query from i = 0, so weights[:, 0, -1] wraps around to the last "
          "key and the mean is over N queries instead of the N - 1 that have a previous token",
          prev_loop_from_zero),
    Entry("previous_token_score", "wrong", "sum_not_mean",
          "sums the weights on key i - 1 over the queries and forgets to divide by their "
          "number N - 1", prev_sum_not_mean),
    Entry("previous_token_score", "wrong", "argmax_hit_rate",
          "measures how often key i - 1 is each query's argmax instead of the mean weight put "
          "on it", prev_argmax_fraction),
    Entry("previous_token_score", "wrong", "range_stops_before_last_query",
          "loops with range(1, N - 1), leaving out the last query (and for N = 2 averaging "
          "nothing, NaN)", prev_drops_last_query),
    Entry("previous_token_score", "right", "fancy_index_float64", None, prev_fancy_index),
    Entry("previous_token_score", "right", "subdiagonal_mask_einsum", None, prev_mask_einsum),

    Entry("induction_score", "wrong", "earlier_copy_not_its_successor",
          "reads key i - period, the earlier copy of token i itself, instead of key "
          "i - period + 1, the token that followed it", ind_copy_not_next),
    Entry("induction_score", "wrong", "diagonal_offset_sign",
          "takes torch.diagonal at offset period - 1 (above the main diagonal) instead of "
          "1 - period, reading keys ahead of the query", ind_offset_sign),
    Entry("induction_score", "wrong", "diagonal_entries_from_zero",
          "keeps entries 0 .. period - 1 of the offset 1 - period diagonal instead of 1 .. "
          "period, so query period - 1 is counted and the last query 2 * period - 1 is "
          "dropped", ind_diag_slice_from_zero),
    Entry("induction_score", "wrong", "mean_over_heads_axis",
          "averages the (H, period) picked weights over dim 0 (the heads) instead of over the "
          "queries", ind_mean_over_heads),
    Entry("induction_score", "wrong", "divides_by_n",
          "sums the period picked weights but divides by N = 2 * period, halving the score",
          ind_divides_by_n),
    Entry("induction_score", "wrong", "key_parenthesised_wrong",
          "writes the key index as i - (period + 1) instead of i - period + 1: the "
          "parentheses change the +1 into a -1 (and wrap to the end for period 1)",
          ind_parenthesised_key),
    Entry("induction_score", "right", "gather_rows", None, ind_index_gather),
    Entry("induction_score", "right", "selection_mask_sum", None, ind_selection_mask),
]
