"""Held-out catalogue, lesson 08 (heads): previous_token_score, induction_score."""

import torch

from entry import Entry


# ============================================================ previous_token_score: wrong
def pts_offset_plus_one(weights):
    diag = torch.diagonal(weights, offset=1, dim1=-2, dim2=-1)  # (H, N - 1)
    return diag.float().mean(dim=-1).to(weights.dtype)


def pts_divide_by_n(weights):
    n = weights.shape[-1]
    on_prev = torch.diagonal(weights, -1, -2, -1)
    return on_prev.to(torch.float32).sum(-1).div(n).to(weights.dtype)


def pts_mean_over_heads(weights):
    n = weights.shape[1]
    rows = torch.arange(1, n)
    vals = weights[:, rows, rows - 1]  # (H, N - 1)
    return vals.double().mean(dim=0).to(weights.dtype)


def pts_all_earlier_keys(weights):
    n = weights.shape[-1]
    before = torch.tril(weights.double(), diagonal=-1)  # keys j < i
    per_query = before.sum(dim=-1)[:, 1:]  # queries i >= 1
    return per_query.sum(dim=-1).div(n - 1).to(weights.dtype)


def pts_argmax_hit_rate(weights):
    heads, n, _ = weights.shape
    best = weights[:, 1:, :].argmax(dim=-1)  # (H, N - 1)
    target = torch.arange(n - 1)
    return (best == target).to(torch.float64).mean(dim=-1).to(weights.dtype)


def pts_python_list(weights):
    heads, n, _ = weights.shape
    scores = []
    for h in range(heads):
        total = 0.0
        for i in range(1, n):
            total += float(weights[h, i, i - 1])
        scores.append(total / (n - 1))
    return scores


# ============================================================ previous_token_score: right
def pts_loops_float64(weights):
    heads, n, _ = weights.shape
    out = torch.zeros(heads, dtype=torch.float64)
    for h in range(heads):
        acc = 0.0
        for i in range(1, n):
            acc += weights[h, i, i - 1].item()
        out[h] = acc / (n - 1)
    return out.to(weights.dtype)


def pts_subdiagonal_mask(weights):
    n = weights.shape[-1]
    sub = torch.diag(torch.ones(n - 1, dtype=torch.float64), -1)  # 1 at (i, i - 1)
    return torch.einsum("hij,ij->h", weights.double(), sub).div(n - 1).to(weights.dtype)


# ============================================================ induction_score: wrong
def ind_key_i_minus_period(weights, period):
    d = torch.diagonal(weights, offset=-period, dim1=1, dim2=2)  # (H, period): w[h, i, i - period]
    return d.float().mean(-1).to(weights.dtype)


def ind_diag_slice_off_by_one(weights, period):
    d = torch.diagonal(weights, offset=1 - period, dim1=1, dim2=2)  # (H, period + 1)
    return d[:, :period].float().mean(-1).to(weights.dtype)


def ind_index_outer_block(weights, period):
    queries = torch.arange(period, 2 * period)
    keys = queries - period + 1
    block = weights[:, queries][:, :, keys]  # (H, period, period)
    return block.double().mean(dim=(1, 2)).to(weights.dtype)


def ind_keepdim(weights, period):
    q = torch.arange(period, 2 * period)
    picked = weights[:, q, q - period + 1]  # (H, period)
    return picked.to(torch.float32).mean(dim=-1, keepdim=True).to(weights.dtype)


def ind_divide_by_n(weights, period):
    n = weights.shape[-1]
    total = torch.zeros(weights.shape[0], dtype=torch.float64)
    for i in range(period, 2 * period):
        total += weights[:, i, i - period + 1].double()
    return (total / n).to(weights.dtype)


def ind_transposed(weights, period):
    q = torch.arange(period, 2 * period)
    picked = weights[:, q - period + 1, q]  # reads w[h, key, query]
    return picked.double().mean(-1).to(weights.dtype)


# ============================================================ induction_score: right
def ind_loops(weights, period):
    heads = weights.shape[0]
    res = []
    for h in range(heads):
        s = 0.0
        for i in range(period, 2 * period):
            s += weights[h, i, i - period + 1].item()
        res.append(s / period)
    return torch.tensor(res, dtype=torch.float64).to(weights.dtype)


def ind_gather(weights, period):
    heads = weights.shape[0]
    second_half = weights[:, period:, :].double()  # (H, period, N)
    idx = (torch.arange(period) + 1).view(1, period, 1).expand(heads, period, 1)
    picked = torch.gather(second_half, 2, idx).squeeze(-1)  # (H, period)
    return (picked.sum(-1) / period).to(weights.dtype)


E = Entry
ENTRIES = [
    E("previous_token_score", "wrong", "diagonal_offset_plus_one",
      "takes torch.diagonal with offset=+1, the weights on key i + 1 (the next token), where "
      "the previous token is the diagonal at offset -1", pts_offset_plus_one),
    E("previous_token_score", "wrong", "divides_by_n",
      "sums the N - 1 weights on key i - 1 but divides by N, as if query 0 (which has no "
      "previous token) were counted", pts_divide_by_n),
    E("previous_token_score", "wrong", "mean_over_heads_axis",
      "averages the picked weights over dim 0 (the heads) instead of over the queries, so it "
      "returns one value per query instead of one per head", pts_mean_over_heads),
    E("previous_token_score", "wrong", "all_earlier_keys",
      "sums the weight on every earlier key (tril with offset -1) instead of the weight on "
      "key i - 1 only", pts_all_earlier_keys),
    E("previous_token_score", "wrong", "argmax_hit_rate",
      "counts how often key i - 1 is the query's argmax instead of averaging the weight put "
      "on it", pts_argmax_hit_rate),
    E("previous_token_score", "wrong", "returns_python_list",
      "returns a Python list of floats instead of an (H,) tensor", pts_python_list),
    E("previous_token_score", "right", "item_loops_float64", None, pts_loops_float64),
    E("previous_token_score", "right", "einsum_with_subdiagonal", None, pts_subdiagonal_mask),

    E("induction_score", "wrong", "key_of_earlier_copy",
      "reads key i - period, the earlier copy of the current token itself (a duplicate-token "
      "head), instead of key i - period + 1, the token that followed it",
      ind_key_i_minus_period),
    E("induction_score", "wrong", "diagonal_slice_off_by_one",
      "keeps entries 0 .. period - 1 of the diagonal at offset 1 - period, i.e. queries "
      "period - 1 .. 2 period - 2: one query too early, entries 1 .. period were meant",
      ind_diag_slice_off_by_one),
    E("induction_score", "wrong", "outer_index_block",
      "indexes weights[:, queries][:, :, keys], which takes every (query, key) combination "
      "(a period x period block) rather than the matching pairs, and averages that block",
      ind_index_outer_block),
    E("induction_score", "wrong", "mean_keepdim",
      "averages with keepdim=True and returns shape (H, 1) instead of (H,)", ind_keepdim),
    E("induction_score", "wrong", "divides_by_sequence_length",
      "adds the period picked weights but divides by N = 2 period instead of by the period "
      "queries it sums over", ind_divide_by_n),
    E("induction_score", "wrong", "query_key_axes_swapped",
      "reads weights[h, i - period + 1, i], with the query and key axes swapped (rows are "
      "queries, columns keys)", ind_transposed),
    E("induction_score", "right", "item_loops", None, ind_loops),
    E("induction_score", "right", "gather_second_half", None, ind_gather),
]
