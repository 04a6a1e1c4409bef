"""Held-out catalogue, lesson 08 (what heads learn): previous_token_score, induction_score."""

import torch

from entry import Entry


# ============================================================ previous_token_score: wrong
def prev_loop_stops_early(weights):
    H, N, _ = weights.shape
    total = torch.zeros(H, dtype=torch.float32)
    for i in range(1, N - 1):
        total += weights[:, i, i - 1].float()
    return total / (N - 1)


def prev_divides_by_n(weights):
    diag = torch.diagonal(weights, offset=-1, dim1=-2, dim2=-1).float()
    return diag.sum(dim=-1) / weights.shape[-1]


def prev_mean_over_heads(weights):
    below = torch.diagonal(weights, offset=-1, dim1=1, dim2=2).to(torch.float32)  # (H, N-1)
    return below.mean(dim=0)


def prev_default_diagonal_dims(weights):
    shifted = weights[:, 1:, :-1]  # query i >= 1 against key i - 1
    return torch.diagonal(shifted).float().mean(dim=-1)


def prev_query_key_swapped(weights):
    n = weights.shape[1]
    i = torch.arange(1, n)
    picked = weights[:, i - 1, i]  # (H, N-1)
    return picked.float().mean(dim=1)


def prev_argmax_fraction(weights):
    n = weights.shape[-1]
    top = weights[:, 1:, :].argmax(dim=-1)  # (H, N-1): where each query looks most
    target = torch.arange(n - 1)
    return (top == target).float().mean(dim=-1)


# ============================================================ previous_token_score: right
def prev_python_loops(weights):
    heads, n, _ = weights.shape
    scores = []
    for h in range(heads):
        acc = 0.0
        for i in range(1, n):
            acc += float(weights[h, i, i - 1])
        scores.append(acc / (n - 1))
    return torch.tensor(scores, dtype=torch.float64)


def prev_subdiagonal_mask(weights):
    n = weights.shape[-1]
    sub = torch.diag(torch.ones(n - 1, dtype=torch.float64), diagonal=-1)  # 1 at (i, i-1)
    return torch.einsum("hqk,qk->h", weights.double(), sub) / (n - 1)


# ============================================================ induction_score: wrong
def ind_attends_to_copy(weights, period):
    n = 2 * period
    q_idx = torch.arange(period, n)
    vals = weights[:, q_idx, q_idx - period]  # the earlier copy of the token
    return vals.float().mean(dim=-1)


def ind_slice_wrong_end(weights, period):
    diag = torch.diagonal(weights, offset=1 - period, dim1=-2, dim2=-1)  # (H, period + 1)
    return diag[:, :-1].float().mean(dim=-1)


def ind_divides_by_n(weights, period):
    H = weights.shape[0]
    out = torch.zeros(H, dtype=torch.float64)
    for i in range(period, 2 * period):
        out += weights[:, i, i - period + 1].double()
    return out / weights.shape[-1]


def ind_offset_sign(weights, period):
    d = torch.diagonal(weights, offset=period - 1, dim1=1, dim2=2)
    return d[:, :period].float().mean(-1)


def ind_period_from_head_axis(weights, period):
    N = weights.shape[0]
    p = N // 2
    rows = torch.arange(p, 2 * p)
    return weights[:, rows, rows - p + 1].float().mean(dim=1)


def ind_chained_indexing(weights, period):
    rows = torch.arange(period, 2 * period)
    cols = rows - period + 1
    picked = weights[:, rows][:, :, cols]  # (H, period, period)
    return picked.float().mean(dim=(-2, -1))


# ============================================================ induction_score: right
def ind_gather(weights, period):
    w = weights.double()
    rows = torch.arange(period, 2 * period)
    index = (rows - period + 1).view(1, -1, 1).expand(w.shape[0], -1, 1)  # (H, period, 1)
    picked = torch.gather(w[:, period:, :], 2, index).squeeze(-1)  # (H, period)
    return picked.sum(dim=1) / period


def ind_nested_loops(weights, period):
    res = []
    for head in weights:
        s = 0.0
        for j in range(period):
            query = period + j
            key = j + 1
            s += head[query, key].item()
        res.append(s / period)
    return torch.tensor(res)


ENTRIES = [
    Entry("previous_token_score", "wrong", "loop-misses-last-query",
          "the loop runs over range(1, N - 1), so the last query is left out of the sum "
          "(while the division is still by N - 1)", prev_loop_stops_early),
    Entry("previous_token_score", "wrong", "divides-by-n",
          "sums the N - 1 previous-token weights but divides by N, counting query 0 that "
          "has no previous token", prev_divides_by_n),
    Entry("previous_token_score", "wrong", "mean-over-heads",
          "averages the sub-diagonal over the head axis (dim=0) instead of over the queries, "
          "returning (N - 1,) instead of (H,)", prev_mean_over_heads),
    Entry("previous_token_score", "wrong", "diagonal-default-dims",
          "calls torch.diagonal without dim1/dim2, so it takes the diagonal over the head "
          "and query axes (dims 0 and 1), not over queries and keys", prev_default_diagonal_dims),
    Entry("previous_token_score", "wrong", "query-key-swapped",
          "indexes weights[:, i - 1, i], the weight query i - 1 puts on key i (the next "
          "token, above the diagonal), instead of weights[:, i, i - 1]",
          prev_query_key_swapped),
    Entry("previous_token_score", "wrong", "argmax-fraction",
          "counts how often a query's largest weight sits on key i - 1 (argmax hits) instead "
          "of averaging the weight itself", prev_argmax_fraction),
    Entry("previous_token_score", "right", "python-loops", None, prev_python_loops),
    Entry("previous_token_score", "right", "subdiagonal-einsum", None, prev_subdiagonal_mask),

    Entry("induction_score", "wrong", "attends-to-copy-itself",
          "reads key i - period, the earlier copy of the current token (a duplicate-token "
          "head), instead of key i - period + 1, the token that followed it",
          ind_attends_to_copy),
    Entry("induction_score", "wrong", "diagonal-slice-off-by-one",
          "takes diagonal(offset=1 - period)[:, :-1], i.e. queries period - 1 .. 2 period - 2, "
          "instead of dropping the first entry ([:, 1:]) for queries period .. 2 period - 1",
          ind_slice_wrong_end),
    Entry("induction_score", "wrong", "divides-by-n",
          "sums the period weights of the second half but divides by N = 2 * period instead "
          "of by the number of queries, period", ind_divides_by_n),
    Entry("induction_score", "wrong", "diagonal-offset-sign",
          "uses torch.diagonal offset=period - 1 (above the main diagonal, key i + period - 1) "
          "where offset=1 - period (below it) belongs", ind_offset_sign),
    Entry("induction_score", "wrong", "period-from-head-axis",
          "recomputes the period from weights.shape[0], the number of heads, instead of using "
          "the period argument (or shape[-1] // 2)", ind_period_from_head_axis),
    Entry("induction_score", "wrong", "chained-indexing-block",
          "indexes rows and columns in two steps (weights[:, rows][:, :, cols]), which takes "
          "the whole period x period block instead of pairing row i with column "
          "i - period + 1, and averages that block", ind_chained_indexing),
    Entry("induction_score", "right", "gather", None, ind_gather),
    Entry("induction_score", "right", "nested-loops-item", None, ind_nested_loops),
]
