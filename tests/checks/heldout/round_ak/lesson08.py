"""Held-out catalogue, lesson 08 (heads): previous_token_score, induction_score."""

import torch

from entry import Entry


# ============================================================ previous_token_score: wrong
def prev_offset_plus_one(weights):
    diag = torch.diagonal(weights, offset=1, dim1=-2, dim2=-1)  # (H, N - 1)
    return diag.float().mean(dim=-1).to(weights.dtype)


def prev_divides_by_n(weights):
    H, N, _ = weights.shape
    total = torch.zeros(H, dtype=torch.float64)
    for i in range(1, N):
        total += weights[:, i, i - 1].double()
    return (total / N).to(weights.dtype)


def prev_mean_over_heads(weights):
    sub = torch.diagonal(weights, -1, 1, 2)  # (H, N - 1)
    return sub.to(torch.float32).mean(dim=0).to(weights.dtype)


def prev_argmax_hits(weights):
    n = weights.shape[-1]
    best = weights[:, 1:, :].argmax(dim=-1)  # (H, N - 1): the favourite key of each query
    target = torch.arange(n - 1)  # key i - 1 for queries 1 .. N-1
    return (best == target).to(torch.float32).mean(dim=-1)


def prev_block_not_diagonal(weights):
    below = weights[:, 1:, :-1]  # (H, N-1, N-1): meant to be the (i, i-1) entries
    return below.to(torch.float32).mean(dim=(-2, -1)).to(weights.dtype)


def prev_returns_list(weights):
    heads, n, _ = weights.shape
    scores = []
    for h in range(heads):
        vals = [float(weights[h, i, i - 1]) for i in range(1, n)]
        scores.append(sum(vals) / len(vals))
    return scores


# ============================================================ previous_token_score: right
def prev_fancy_index_f64(weights):
    n = weights.shape[1]
    rows = torch.arange(1, n)
    picked = weights[:, rows, rows - 1].to(torch.float64)  # (H, N - 1)
    return picked.sum(dim=1) / (n - 1)


def prev_subdiagonal_mask(weights):
    n = weights.shape[-1]
    mask = torch.diag(torch.ones(n - 1, dtype=torch.float64), -1)  # ones at (i, i - 1)
    w = weights.to(torch.float64)
    return torch.einsum("hij,ij->h", w, mask) / mask.sum()


# ============================================================ induction_score: wrong
def ind_key_is_copy(weights, period):
    diag = torch.diagonal(weights, offset=-period, dim1=-2, dim2=-1)  # w[h, i, i - period]
    return diag.float().mean(dim=-1).to(weights.dtype)


def ind_skips_query_period(weights, period):
    H = weights.shape[0]
    acc = torch.zeros(H, dtype=torch.float64)
    for i in range(period + 1, 2 * period):
        acc = acc + weights[:, i, i - period + 1].double()
    return (acc / (period - 1)).to(weights.dtype)


def ind_offset_sign(weights, period):
    diag = torch.diagonal(weights, offset=period - 1, dim1=-2, dim2=-1)  # (H, period + 1)
    return diag[:, 1:].to(torch.float32).mean(dim=-1).to(weights.dtype)


def ind_mean_over_heads(weights, period):
    q = torch.arange(period, 2 * period)
    vals = weights[:, q, q - period + 1]  # (H, period)
    return vals.float().mean(dim=0).to(weights.dtype)


def ind_divides_by_n(weights, period):
    q = torch.arange(period, 2 * period)
    vals = weights[:, q, q - period + 1].double()
    n = weights.shape[-1]
    return (vals.sum(dim=-1) / n).to(weights.dtype)


def ind_first_half_queries(weights, period):
    heads = weights.shape[0]
    out = []
    for h in range(heads):
        s = 0.0
        for i in range(period):
            s += float(weights[h, i, i - period + 1])
        out.append(s / period)
    return torch.tensor(out, dtype=weights.dtype)


# ============================================================ induction_score: right
def ind_gather_f64(weights, period):
    H, N, _ = weights.shape
    queries = torch.arange(period, N)
    keys = (queries - period + 1).view(1, -1, 1).expand(H, -1, 1)
    rows = weights[:, period:, :].to(torch.float64)  # (H, period, N)
    picked = torch.gather(rows, 2, keys).squeeze(-1)  # (H, period)
    return picked.mean(dim=1)


def ind_python_loops(weights, period):
    per_head = []
    for head in weights:
        total = torch.zeros((), dtype=torch.float64)
        for i in range(period, 2 * period):
            total = total + head[i, i - period + 1].to(torch.float64)
        per_head.append(total / period)
    return torch.stack(per_head)


ENTRIES = [
    Entry("previous_token_score", "wrong", "diagonal_offset_plus_one", (
        "torch.diagonal(..., offset=1) is the diagonal above the main one, weights[h, i, i + 1]: "
        "it scores the next token instead of the previous one (offset=-1)"),
        prev_offset_plus_one),
    Entry("previous_token_score", "wrong", "divides_by_N", (
        "sums the N - 1 previous-token weights but divides by N, counting query 0 that has no "
        "previous token"),
        prev_divides_by_n),
    Entry("previous_token_score", "wrong", "mean_over_head_axis", (
        "averages the (H, N - 1) sub-diagonal over dim 0, the heads, so it returns one value per "
        "query (shape (N - 1,)) instead of one per head"),
        prev_mean_over_heads),
    Entry("previous_token_score", "wrong", "argmax_hit_rate", (
        "counts the fraction of queries whose largest weight is on key i - 1 (a hard argmax "
        "hit rate) instead of averaging the weight itself"),
        prev_argmax_hits),
    Entry("previous_token_score", "wrong", "block_instead_of_diagonal", (
        "slices weights[:, 1:, :-1] and averages the whole (N-1) x (N-1) block, instead of "
        "only its diagonal, the (i, i - 1) entries"),
        prev_block_not_diagonal),
    Entry("previous_token_score", "wrong", "returns_python_list", (
        "builds the per-head scores as Python floats and returns a list instead of an (H,) "
        "tensor"),
        prev_returns_list),
    Entry("previous_token_score", "right", "fancy_index_float64", None, prev_fancy_index_f64),
    Entry("previous_token_score", "right", "subdiagonal_mask_einsum", None,
          prev_subdiagonal_mask),

    Entry("induction_score", "wrong", "key_is_the_copy", (
        "reads key i - period, the earlier copy of the current token, instead of the token that "
        "followed it, i - period + 1"),
        ind_key_is_copy),
    Entry("induction_score", "wrong", "skips_query_period", (
        "the query loop starts at period + 1 and divides by period - 1, so query i = period is "
        "left out (and period 1 divides by zero)"),
        ind_skips_query_period),
    Entry("induction_score", "wrong", "diagonal_offset_sign", (
        "torch.diagonal with offset=period - 1 reads the diagonal above the main one, "
        "w[i, i + period - 1]; the key i - period + 1 lies below it, offset 1 - period"),
        ind_offset_sign),
    Entry("induction_score", "wrong", "mean_over_head_axis", (
        "averages the (H, period) picked weights over dim 0, the heads, returning one value "
        "per query instead of one per head"),
        ind_mean_over_heads),
    Entry("induction_score", "wrong", "divides_by_N", (
        "sums the period induction weights but divides by N = 2 * period, as if every query "
        "counted"),
        ind_divides_by_n),
    Entry("induction_score", "wrong", "first_half_queries", (
        "averages over the first copy, queries i < period, where i - period + 1 is negative "
        "and Python indexing silently wraps to a column at the end of the row"),
        ind_first_half_queries),
    Entry("induction_score", "right", "gather_float64", None, ind_gather_f64),
    Entry("induction_score", "right", "python_loops_stack", None, ind_python_loops),
]
