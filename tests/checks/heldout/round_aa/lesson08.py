"""Held-out catalogue, lesson 08 (what heads learn): previous_token_score, induction_score."""

import torch

from entry import Entry


# ============================================================ previous_token_score: wrong
def prev_superdiagonal(weights):
    acc = torch.promote_types(weights.dtype, torch.float32)
    diag = torch.diagonal(weights, offset=1, dim1=-2, dim2=-1)
    return diag.to(acc).mean(dim=-1).to(weights.dtype)


def prev_divides_by_n(weights):
    n = weights.shape[-1]
    w = weights.float()
    total = torch.zeros(weights.shape[0])
    for i in range(1, n):
        total = total + w[:, i, i - 1]
    return (total / n).to(weights.dtype)


def prev_mean_over_heads(weights):
    sub = torch.diagonal(weights.float(), offset=-1, dim1=1, dim2=2)  # (H, N - 1)
    return sub.mean(dim=0).to(weights.dtype)


def prev_wraps_query_zero(weights):
    n = weights.shape[1]
    rows = list(range(n))
    cols = [i - 1 for i in rows]  # query 0 -> key -1
    picked = weights[:, rows, cols].float()
    return picked.mean(dim=1).to(weights.dtype)


def prev_returns_list(weights):
    heads, n, _ = weights.shape
    scores = []
    for h in range(heads):
        vals = [float(weights[h, i, i - 1]) for i in range(1, n)]
        scores.append(sum(vals) / len(vals))
    return scores


def prev_diagonal_default_dims(weights):
    d = torch.diagonal(weights.float(), -1)
    return d.mean(dim=-1).to(weights.dtype)


# ============================================================ previous_token_score: right
def prev_index_arrays_f64(weights):
    n = weights.shape[-1]
    i = torch.arange(1, n)
    return weights[:, i, i - 1].double().mean(dim=-1).to(weights.dtype)


def prev_band_mask_sum(weights):
    n = weights.shape[-1]
    band = torch.ones(n, n).tril(-1).triu(-1)  # ones exactly on j = i - 1
    total = (weights.float() * band).sum(dim=(-2, -1))
    return (total / (n - 1)).to(weights.dtype)


# ============================================================ induction_score: wrong
def ind_no_plus_one(weights, period):
    idx = torch.arange(period, 2 * period)
    return weights[:, idx, idx - period].float().mean(-1).to(weights.dtype)


def ind_diagonal_wrong_end(weights, period):
    diag = torch.diagonal(weights, offset=1 - period, dim1=-2, dim2=-1)
    return diag[:, :-1].float().mean(dim=-1).to(weights.dtype)


def ind_divides_by_n(weights, period):
    n = weights.shape[-1]
    total = 0
    for i in range(period, n):
        total = total + weights[:, i, i - period + 1].float()
    return (total / n).to(weights.dtype)


def ind_row_col_swapped(weights, period):
    q = torch.arange(period, 2 * period)
    kcol = q - period + 1
    return weights[:, kcol, q].to(torch.float32).mean(dim=1).to(weights.dtype)


def ind_keepdim(weights, period):
    i = torch.arange(period, 2 * period)
    vals = weights[:, i, i - period + 1].to(torch.float32)
    return vals.mean(dim=-1, keepdim=True).to(weights.dtype)


def ind_mean_over_heads(weights, period):
    rows = torch.arange(period, 2 * period)
    vals = weights[:, rows, rows + 1 - period].float()  # (H, period)
    return vals.mean(dim=0).to(weights.dtype)


# ============================================================ induction_score: right
def ind_gather_f64(weights, period):
    h, n, _ = weights.shape
    rows = torch.arange(period, n)
    cols = (rows - period + 1).view(1, -1, 1).expand(h, -1, 1)
    picked = torch.gather(weights[:, period:, :].double(), 2, cols).squeeze(-1)
    return picked.mean(dim=1).to(weights.dtype)


def ind_selector_einsum(weights, period):
    n = weights.shape[-1]
    sel = torch.zeros(n, n, dtype=torch.float64)
    for i in range(period, n):
        sel[i, i - period + 1] = 1.0
    score = torch.einsum("hij,ij->h", weights.double(), sel) / period
    return score.to(weights.dtype)


ENTRIES = [
    Entry("previous_token_score", "wrong", "superdiagonal",
          "torch.diagonal with offset=+1 reads the diagonal above the main one, the weight of "
          "query i on key i + 1, instead of offset=-1 for key i - 1",
          prev_superdiagonal),
    Entry("previous_token_score", "wrong", "divides_by_n",
          "sums the N - 1 weights on the previous token but divides by N, as if query 0 "
          "counted",
          prev_divides_by_n),
    Entry("previous_token_score", "wrong", "mean_over_heads",
          "averages the sub-diagonal over dim 0, the heads, instead of over the queries: it "
          "returns one value per query, not one per head",
          prev_mean_over_heads),
    Entry("previous_token_score", "wrong", "query_zero_wraps",
          "includes query 0 with key index -1, which Python wraps to the last key, so the "
          "mean takes in w[h, 0, N-1] and divides by N",
          prev_wraps_query_zero),
    Entry("previous_token_score", "wrong", "returns_python_list",
          "returns a Python list of floats (one per head) instead of an (H,) tensor",
          prev_returns_list),
    Entry("previous_token_score", "wrong", "diagonal_default_dims",
          "calls torch.diagonal(weights, -1) without dim1/dim2: the default dims 0 and 1 take "
          "the diagonal across heads and queries instead of across queries and keys",
          prev_diagonal_default_dims),
    Entry("previous_token_score", "right", "index_arrays_float64", None,
          prev_index_arrays_f64),
    Entry("previous_token_score", "right", "band_mask_sum", None, prev_band_mask_sum),

    Entry("induction_score", "wrong", "copy_not_successor",
          "reads key i - period, the earlier copy of token i itself, instead of key "
          "i - period + 1, the token that followed it",
          ind_no_plus_one),
    Entry("induction_score", "wrong", "diagonal_wrong_end",
          "takes the diagonal at offset 1 - period but drops its last entry instead of its "
          "first, so it averages queries period - 1 .. 2 period - 2 instead of "
          "period .. 2 period - 1",
          ind_diagonal_wrong_end),
    Entry("induction_score", "wrong", "divides_by_n",
          "sums the weights of the period queries of the second half but divides by "
          "N = 2 * period",
          ind_divides_by_n),
    Entry("induction_score", "wrong", "row_col_swapped",
          "indexes weights[h, key, query] instead of weights[h, query, key]: reads what key "
          "i - period + 1 (as a query) puts on position i",
          ind_row_col_swapped),
    Entry("induction_score", "wrong", "keepdim_shape",
          "averages with keepdim=True, so it returns shape (H, 1) instead of (H,)",
          ind_keepdim),
    Entry("induction_score", "wrong", "mean_over_heads",
          "averages over dim 0, the heads, instead of the queries: it returns one value per "
          "query of the second half",
          ind_mean_over_heads),
    Entry("induction_score", "right", "gather_float64", None, ind_gather_f64),
    Entry("induction_score", "right", "selector_einsum", None, ind_selector_einsum),
]
