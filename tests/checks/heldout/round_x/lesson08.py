"""Held-out catalogue, lesson 08 (what heads learn): previous_token_score, induction_score."""

import numpy as np
import torch

from entry import Entry


# ============================================================ previous_token_score: wrong
def prev_next_token_diagonal(weights):
    diag = torch.diagonal(weights, offset=1, dim1=1, dim2=2)
    return diag.float().mean(dim=-1).to(weights.dtype)


def prev_loop_wraps_at_zero(weights):
    H, N, _ = weights.shape
    scores = []
    for h in range(H):
        total = 0.0
        for i in range(N):
            total += float(weights[h, i, i - 1])
        scores.append(total / N)
    return torch.tensor(scores, dtype=weights.dtype)


def prev_mean_over_heads(weights):
    on_prev = torch.diagonal(weights, -1, 1, 2)  # (H, N-1)
    return on_prev.to(torch.float32).mean(dim=0).to(weights.dtype)


def prev_sum_not_mean(weights):
    idx = torch.arange(1, weights.shape[-1])
    picked = weights[:, idx, idx - 1]
    return picked.to(torch.float32).sum(dim=1).to(weights.dtype)


def prev_returns_numpy(weights):
    w = weights.detach().cpu().to(torch.float32).numpy()
    n = w.shape[1]
    rows = np.arange(1, n)
    return w[:, rows, rows - 1].mean(axis=1)


def prev_all_earlier_keys(weights):
    n = weights.shape[-1]
    below = torch.tril(torch.ones(n, n, dtype=torch.float32), diagonal=-1)
    per_head = (weights.to(torch.float32) * below).sum(dim=(1, 2))
    return (per_head / (n - 1)).to(weights.dtype)


# ============================================================ previous_token_score: right
def prev_python_loops(weights):
    H, N = weights.shape[0], weights.shape[1]
    out = []
    for h in range(H):
        acc = 0.0
        for i in range(1, N):
            acc += weights[h, i, i - 1].item()
        out.append(acc / (N - 1))
    return torch.tensor(out, dtype=weights.dtype)


def prev_einsum_shift_matrix(weights):
    n = weights.shape[-1]
    shift = torch.diag(torch.ones(n - 1, dtype=torch.float64), -1)  # 1 at (i, i-1)
    picked = torch.einsum("hij,ij->h", weights.to(torch.float64), shift)
    return (picked / (n - 1)).to(weights.dtype)


# ============================================================ induction_score: wrong
def ind_attends_to_copy(weights, period):
    d = torch.diagonal(weights, offset=-period, dim1=-2, dim2=-1)  # w[h, i, i - period]
    return d.to(torch.float32).mean(-1).to(weights.dtype)


def ind_keeps_first_entry(weights, period):
    d = torch.diagonal(weights, offset=1 - period, dim1=-2, dim2=-1)
    return d.to(torch.float32).mean(dim=-1).to(weights.dtype)


def ind_n_from_shape0(weights, period):
    n = weights.shape[0]
    heads = weights.shape[0]
    res = torch.zeros(heads, dtype=torch.float32)
    count = 0
    for i in range(period, n):
        res += weights[:, i, i - period + 1].float()
        count += 1
    return (res / count).to(weights.dtype)


def ind_divides_by_n(weights, period):
    n = weights.shape[-1]
    q = torch.arange(period, 2 * period)
    total = weights[:, q, q - period + 1].double().sum(dim=-1)
    return (total / n).to(weights.dtype)


def ind_query_key_swapped(weights, period):
    picks = [weights[:, i - period + 1, i] for i in range(period, 2 * period)]
    return torch.stack(picks, dim=-1).float().mean(dim=-1).to(weights.dtype)


def ind_mean_over_everything(weights, period):
    diag = torch.diagonal(weights, offset=1 - period, dim1=1, dim2=2)[:, 1:]
    return diag.float().mean().to(weights.dtype)


# ============================================================ induction_score: right
def ind_fancy_index(weights, period):
    queries = torch.arange(period, 2 * period)
    keys = queries - period + 1
    return weights[:, queries, keys].to(torch.float64).mean(dim=1).to(weights.dtype)


def ind_mask_loop(weights, period):
    n = weights.shape[-1]
    mask = torch.zeros(n, n, dtype=torch.float64)
    for i in range(period, n):
        mask[i, i + 1 - period] = 1.0
    scores = (weights.to(torch.float64) * mask).sum(dim=(-2, -1)) / period
    return scores.to(weights.dtype)


ENTRIES = [
    Entry("previous_token_score", "wrong", "next_token_diagonal",
          "reads the diagonal at offset +1, the weight on key i+1 (the next token), instead of "
          "offset -1, the previous token",
          prev_next_token_diagonal),
    Entry("previous_token_score", "wrong", "loop_wraps_at_query_0",
          "loops over every query from i = 0, where weights[h, 0, -1] wraps around to the last "
          "key, and divides by N instead of N - 1",
          prev_loop_wraps_at_zero),
    Entry("previous_token_score", "wrong", "mean_over_heads",
          "averages the previous-token diagonal over dim 0 (the heads) instead of over the "
          "queries, so it returns one value per query, shape (N-1,), not (H,)",
          prev_mean_over_heads),
    Entry("previous_token_score", "wrong", "sum_not_mean",
          "sums the weights on the previous token over the queries instead of averaging them",
          prev_sum_not_mean),
    Entry("previous_token_score", "wrong", "returns_numpy",
          "converts the weights to numpy and returns an np.ndarray instead of a torch.Tensor",
          prev_returns_numpy),
    Entry("previous_token_score", "wrong", "all_earlier_keys",
          "adds up the weight on every earlier key (the whole strictly lower triangle) instead "
          "of on the immediately previous key i - 1 only",
          prev_all_earlier_keys),
    Entry("previous_token_score", "right", "python_loops", None, prev_python_loops),
    Entry("previous_token_score", "right", "einsum_shift_matrix", None, prev_einsum_shift_matrix),

    Entry("induction_score", "wrong", "attends_to_copy_itself",
          "reads key i - period, the earlier copy of the current token (a duplicate-token "
          "head), instead of key i - period + 1, the token that followed it",
          ind_attends_to_copy),
    Entry("induction_score", "wrong", "keeps_first_diagonal_entry",
          "averages the whole diagonal at offset 1 - period, which also holds query period - 1 "
          "from the first half: the first entry should be dropped",
          ind_keeps_first_entry),
    Entry("induction_score", "wrong", "n_from_shape0",
          "takes N from weights.shape[0], which is the number of heads, so the loop over "
          "queries stops at H and often never runs (0 / 0 = NaN scores)",
          ind_n_from_shape0),
    Entry("induction_score", "wrong", "divides_by_n",
          "divides the summed weights by N = 2 * period instead of by the period queries "
          "that were scored",
          ind_divides_by_n),
    Entry("induction_score", "wrong", "query_key_swapped",
          "indexes weights[:, i - period + 1, i], query and key swapped: rows are queries, so "
          "this reads key i of an earlier query",
          ind_query_key_swapped),
    Entry("induction_score", "wrong", "mean_over_everything",
          "calls .mean() without a dim, averaging over the heads too, so it returns one scalar "
          "instead of one score per head",
          ind_mean_over_everything),
    Entry("induction_score", "right", "fancy_index", None, ind_fancy_index),
    Entry("induction_score", "right", "mask_loop", None, ind_mask_loop),
]
