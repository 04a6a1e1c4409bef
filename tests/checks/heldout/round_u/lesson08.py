"""Held-out catalogue, lesson 08 (what heads learn): previous_token_score, induction_score."""

import numpy as np
import torch

from entry import Entry


# ============================================================ previous_token_score: wrong
def prev_upper_diagonal(weights):
    diag = torch.diagonal(weights, offset=1, dim1=-2, dim2=-1)  # w[h, i, i+1]
    return diag.float().mean(dim=-1).to(weights.dtype)


def prev_divide_by_n(weights):
    H, N, _ = weights.shape
    total = torch.zeros(H, dtype=torch.float64)
    for i in range(1, N):
        total += weights[:, i, i - 1].double()
    return (total / N).to(weights.dtype)


def prev_mean_over_heads(weights):
    on_prev = torch.diagonal(weights, -1, 1, 2).to(torch.float32)  # (H, N - 1)
    return on_prev.mean(0).to(weights.dtype)


def prev_diagonal_default_dims(weights):
    d = torch.diagonal(weights, offset=-1)
    return d.float().mean(-1).to(weights.dtype)


def prev_argmax_fraction(weights):
    top = weights[:, 1:, :].argmax(dim=-1)  # (H, N - 1): key each query looks at most
    target = torch.arange(weights.shape[-1] - 1)  # i - 1 for queries 1..N-1
    return (top == target).float().mean(dim=-1).to(weights.dtype)


def prev_subblock_mean(weights):
    block = weights[:, 1:, :-1].float()  # rows i >= 1, columns i - 1
    return block.mean(dim=(-2, -1)).to(weights.dtype)


# ============================================================ previous_token_score: right
def prev_python_loop(weights):
    H, N = weights.shape[0], weights.shape[1]
    scores = []
    for h in range(H):
        acc = 0.0
        for i in range(1, N):
            acc += float(weights[h, i, i - 1])
        scores.append(acc / (N - 1))
    return torch.tensor(scores, dtype=weights.dtype)


def prev_shift_matrix(weights):
    n = weights.shape[-1]
    sel = torch.diag(torch.ones(n - 1, dtype=torch.float64), -1)  # 1 at (i, i-1)
    picked = (weights.double() * sel).sum(dim=(1, 2))
    return (picked / (n - 1)).to(weights.dtype)


# ============================================================ induction_score: wrong
def ind_points_at_copy(weights, period):
    n = weights.shape[-1]
    rows = torch.arange(period, n)
    vals = weights[:, rows, rows - period].float()  # the earlier copy of token i itself
    return vals.mean(-1).to(weights.dtype)


def ind_wrong_end_of_diagonal(weights, period):
    diag = torch.diagonal(weights, offset=1 - period, dim1=1, dim2=2)  # (H, period + 1)
    return diag[:, :-1].float().mean(dim=1).to(weights.dtype)


def ind_divide_by_n(weights, period):
    heads = weights.shape[0]
    n = 2 * period
    out = torch.zeros(heads, dtype=torch.float64)
    for i in range(period, n):
        out += weights[:, i, i - period + 1].double()
    return (out / n).to(weights.dtype)


def ind_query_key_swapped(weights, period):
    idx = torch.arange(period, 2 * period)
    picked = weights[:, idx - period + 1, idx]
    return picked.to(torch.float32).mean(-1).to(weights.dtype)


def ind_mean_over_heads(weights, period):
    i = torch.arange(period, 2 * period)
    sel = weights[:, i, i - period + 1].float()  # (H, period)
    return sel.mean(dim=0).to(weights.dtype)


def ind_numpy_result(weights, period):
    w = weights.detach().cpu().double().numpy()
    H = w.shape[0]
    res = np.zeros(H)
    for h in range(H):
        res[h] = np.mean([w[h, i, i - period + 1] for i in range(period, 2 * period)])
    return res


# ============================================================ induction_score: right
def ind_gather_index(weights, period):
    n = weights.shape[-1]
    q_idx = torch.arange(period, n)
    k_idx = (q_idx - period + 1).view(1, -1, 1).expand(weights.shape[0], -1, 1)
    rows = weights[:, period:, :].double()  # (H, period, N)
    picked = torch.gather(rows, 2, k_idx).squeeze(-1)
    return picked.mean(-1).to(weights.dtype)


def ind_einsum_selector(weights, period):
    n = 2 * period
    sel = torch.zeros(n, n, dtype=torch.float64)
    for i in range(period, n):
        sel[i, i - period + 1] = 1.0 / period
    return torch.einsum("hqk,qk->h", weights.double(), sel).to(weights.dtype)


ENTRIES = [
    Entry("previous_token_score", "wrong", "upper-diagonal",
          "takes the diagonal at offset +1, the weight on key i + 1 (the next token), where "
          "the previous token is offset -1",
          prev_upper_diagonal),
    Entry("previous_token_score", "wrong", "divide-by-N",
          "sums the weights on key i - 1 over queries 1..N-1 but divides by N instead of the "
          "N - 1 queries that have a previous token",
          prev_divide_by_n),
    Entry("previous_token_score", "wrong", "mean-over-heads",
          "averages the diagonal over dim 0 (the heads) instead of over the queries, so it "
          "returns one value per query, shape (N-1,), not one per head",
          prev_mean_over_heads),
    Entry("previous_token_score", "wrong", "diagonal-default-dims",
          "calls torch.diagonal(weights, offset=-1) without dim1/dim2, which takes the "
          "diagonal of the (H, N) axes 0 and 1 instead of the (N, N) query-key axes",
          prev_diagonal_default_dims),
    Entry("previous_token_score", "wrong", "argmax-fraction",
          "counts how often key i - 1 is the query's most-attended key instead of averaging "
          "the weight put on it",
          prev_argmax_fraction),
    Entry("previous_token_score", "wrong", "subblock-mean",
          "averages the whole block weights[:, 1:, :-1] instead of only its diagonal, so "
          "every key before i enters the mean",
          prev_subblock_mean),
    Entry("previous_token_score", "right", "python-loop-floats", None, prev_python_loop),
    Entry("previous_token_score", "right", "shift-matrix-mask", None, prev_shift_matrix),
    Entry("induction_score", "wrong", "points-at-copy",
          "reads key i - period (the earlier copy of the current token, a duplicate-token "
          "head) instead of key i - period + 1, the token that followed it",
          ind_points_at_copy),
    Entry("induction_score", "wrong", "wrong-end-of-diagonal",
          "slices the offset 1 - period diagonal with [:, :-1] instead of [:, 1:], which keeps "
          "query period - 1 and drops the last query 2 * period - 1",
          ind_wrong_end_of_diagonal),
    Entry("induction_score", "wrong", "divide-by-N",
          "sums over the period queries of the second half but divides by N = 2 * period "
          "instead of period",
          ind_divide_by_n),
    Entry("induction_score", "wrong", "query-key-swapped",
          "indexes weights[h, i - period + 1, i], query and key swapped, instead of "
          "weights[h, i, i - period + 1]",
          ind_query_key_swapped),
    Entry("induction_score", "wrong", "mean-over-heads",
          "averages over dim 0 (the heads) instead of over the queries, returning one value "
          "per query instead of one per head",
          ind_mean_over_heads),
    Entry("induction_score", "wrong", "numpy-result",
          "computes the scores in numpy and returns an np.ndarray where the lesson returns a "
          "torch.Tensor",
          ind_numpy_result),
    Entry("induction_score", "right", "gather", None, ind_gather_index),
    Entry("induction_score", "right", "einsum-selector", None, ind_einsum_selector),
]
