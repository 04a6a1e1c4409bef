"""Held-out learners' answers, lesson 08 (what heads learn): previous_token_score,
induction_score."""

import numpy as np
import torch

from entry import Entry


# ============================================================ previous_token_score
def prev_upper_diagonal(weights):
    diag = torch.diagonal(weights, offset=1, dim1=-2, dim2=-1)
    return diag.float().mean(dim=-1).to(weights.dtype)


def prev_divides_by_n(weights):
    n = weights.shape[-1]
    diag = torch.diagonal(weights, offset=-1, dim1=1, dim2=2)
    return diag.sum(dim=-1) / n


def prev_default_diagonal_dims(weights):
    # take the sub-diagonal and average it
    sub = torch.diagonal(weights, -1)
    return sub.mean(-1)


def prev_loop_starts_at_two(weights):
    H, N, _ = weights.shape
    scores = torch.zeros(H, dtype=torch.float64)
    for h in range(H):
        total = 0.0
        for i in range(2, N):
            total += float(weights[h, i, i - 1])
        scores[h] = total / (N - 1)
    return scores


def prev_returns_numpy(weights):
    H, N, _ = weights.shape
    out = []
    for h in range(H):
        vals = [weights[h, i, i - 1].item() for i in range(1, N)]
        out.append(sum(vals) / len(vals))
    return np.array(out)


def prev_mean_without_dim(weights):
    on_prev = torch.diagonal(weights, offset=-1, dim1=-2, dim2=-1)
    return on_prev.double().mean()


def prev_mask_with_shifted_eye(weights):
    n = weights.shape[-1]
    sel = torch.diag(torch.ones(n - 1, dtype=torch.float64), diagonal=-1)  # 1 at (i, i-1)
    picked = (weights.double() * sel).sum(dim=(-2, -1))
    return picked / (n - 1)


def prev_gather_index(weights):
    H, N, _ = weights.shape
    rows = torch.arange(1, N)
    return weights[:, rows, rows - 1].to(torch.float64).mean(dim=1)


# ============================================================ induction_score
def ind_copy_not_successor(weights, period):
    H, N, _ = weights.shape
    q = torch.arange(period, N)
    return weights[:, q, q - period].double().mean(-1)


def ind_diagonal_from_period_minus_one(weights, period):
    d = torch.diagonal(weights, offset=1 - period, dim1=1, dim2=2)
    return d[:, :period].float().mean(dim=1)


def ind_positive_offset(weights, period):
    d = torch.diagonal(weights, offset=period - 1, dim1=-2, dim2=-1)
    return d[:, -period:].double().mean(dim=-1)


def ind_mean_over_heads(weights, period):
    n = weights.shape[1]
    idx = torch.arange(period, n)
    picked = weights[:, idx, idx - period + 1]  # (H, period)
    return picked.double().mean(dim=0)


def ind_divides_by_n(weights, period):
    H, N, _ = weights.shape
    res = torch.zeros(H, dtype=torch.float64)
    for i in range(period, 2 * period):
        res += weights[:, i, i - period + 1].double()
    return res / N


def ind_swapped_indices(weights, period):
    H = weights.shape[0]
    scores = []
    for h in range(H):
        acc = 0.0
        for i in range(period, 2 * period):
            acc += weights[h, i - period + 1, i].item()
        scores.append(acc / period)
    return torch.tensor(scores, dtype=torch.float64)


def ind_gather(weights, period):
    H, N, _ = weights.shape
    rows = torch.arange(period, 2 * period)
    cols = (rows - period + 1).unsqueeze(0).expand(H, -1)  # (H, period)
    w = weights.double()[:, period:, :]  # (H, period, N)
    return torch.gather(w, 2, cols.unsqueeze(-1)).squeeze(-1).mean(-1)


def ind_python_loop(weights, period):
    w = weights.detach().to(torch.float64).numpy()
    H = w.shape[0]
    scores = np.zeros(H)
    for h in range(H):
        for j in range(period):  # j-th query of the second half
            scores[h] += w[h, period + j, j + 1]
    return torch.from_numpy(scores / period)


ENTRIES = [
    Entry("previous_token_score", "wrong", "upper_diagonal",
          "reads the diagonal at offset +1 (key i+1, the next token) instead of -1 (key i-1)",
          prev_upper_diagonal),
    Entry("previous_token_score", "wrong", "divides_by_n",
          "sums the N-1 previous-token weights but divides by N instead of N-1",
          prev_divides_by_n),
    Entry("previous_token_score", "wrong", "diagonal_default_dims",
          "calls torch.diagonal(weights, -1) with the default dim1=0, dim2=1, so it walks "
          "the head and query axes instead of the query and key axes (wrong shape)",
          prev_default_diagonal_dims),
    Entry("previous_token_score", "wrong", "loop_starts_at_two",
          "the loop over queries starts at i = 2 instead of 1, leaving out query 1",
          prev_loop_starts_at_two),
    Entry("previous_token_score", "wrong", "returns_numpy",
          "collects Python floats and returns a numpy array where the contract asks for a "
          "torch tensor",
          prev_returns_numpy),
    Entry("previous_token_score", "wrong", "mean_without_dim",
          ".mean() without dim=-1 averages over every head too and returns one scalar "
          "instead of an (H,) tensor",
          prev_mean_without_dim),
    Entry("previous_token_score", "right", "shifted_eye_mask", None, prev_mask_with_shifted_eye),
    Entry("previous_token_score", "right", "advanced_indexing", None, prev_gather_index),
    Entry("induction_score", "wrong", "copy_not_successor",
          "reads key i - period (the earlier copy of the token itself) instead of "
          "i - period + 1, the token that followed it",
          ind_copy_not_successor),
    Entry("induction_score", "wrong", "starts_at_query_period_minus_one",
          "keeps the first period entries of the diagonal, i.e. queries period-1 .. 2*period-2, "
          "instead of dropping entry 0: off by one query",
          ind_diagonal_from_period_minus_one),
    Entry("induction_score", "wrong", "positive_offset",
          "takes the diagonal at offset period - 1 (above the main diagonal) instead of "
          "1 - period: keys after the query",
          ind_positive_offset),
    Entry("induction_score", "wrong", "mean_over_heads",
          "averages over dim 0 (the heads) instead of over the queries, returning one value "
          "per query",
          ind_mean_over_heads),
    Entry("induction_score", "wrong", "divides_by_n",
          "sums over the period queries of the second half but divides by N = 2 * period",
          ind_divides_by_n),
    Entry("induction_score", "wrong", "swapped_query_key",
          "indexes weights[h, key, query] instead of weights[h, query, key]: rows are queries",
          ind_swapped_indices),
    Entry("induction_score", "right", "gather", None, ind_gather),
    Entry("induction_score", "right", "numpy_loop", None, ind_python_loop),
]
