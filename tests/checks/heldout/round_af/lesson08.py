"""Held-out catalogue, lesson 08 (what heads learn): previous_token_score, induction_score."""

import numpy as np
import torch

from entry import Entry


# ================================================================ previous_token_score: wrong
def prev_offset_plus_one(weights):
    diag = torch.diagonal(weights, offset=1, dim1=-2, dim2=-1)  # one step off the diagonal
    return diag.float().mean(dim=-1)


def prev_default_dims(weights):
    sub = torch.diagonal(weights, -1)  # the entries w[i, i - 1]
    return sub.to(torch.float32).mean(-1)


def prev_divides_by_n(weights):
    n = weights.shape[-1]
    total = torch.zeros(weights.shape[0], dtype=torch.float64)
    for i in range(1, n):
        total += weights[:, i, i - 1].double()
    return total / n


def prev_mean_over_heads(weights):
    picked = weights.diagonal(offset=-1, dim1=1, dim2=2)  # (H, N - 1)
    return picked.to(torch.float32).mean(dim=0)


def prev_numpy_result(weights):
    w = weights.detach().to(torch.float64)
    heads, n, _ = w.shape
    out = []
    for h in range(heads):
        vals = [float(w[h, i, i - 1]) for i in range(1, n)]
        out.append(sum(vals) / len(vals))
    return np.array(out)


def prev_precedence(weights):
    n = weights.size(-1)
    on_prev = torch.diagonal(weights.float(), offset=-1, dim1=1, dim2=2)
    return on_prev.sum(-1) / n - 1


# ================================================================ previous_token_score: right
def prev_python_loops(weights):
    H, N, _ = weights.shape
    w = weights.double()
    res = torch.empty(H, dtype=torch.float64)
    for h in range(H):
        acc = 0.0
        for i in range(1, N):
            acc += w[h, i, i - 1].item()
        res[h] = acc / (N - 1)
    return res.to(weights.dtype)


def prev_shift_matrix_einsum(weights):
    n = weights.shape[-1]
    below = torch.diag(torch.ones(n - 1, dtype=torch.float64), -1)  # ones at [i, i - 1]
    return torch.einsum("hij,ij->h", weights.double(), below) / (n - 1)


# ==================================================================== induction_score: wrong
def ind_copy_not_next(weights, period):
    diag = torch.diagonal(weights, offset=-period, dim1=1, dim2=2)  # (H, period)
    return diag.float().mean(-1)


def ind_slice_wrong_end(weights, period):
    d = torch.diagonal(weights, offset=1 - period, dim1=-2, dim2=-1)  # (H, period + 1)
    return d[:, :-1].to(torch.float32).mean(dim=-1)


def ind_swapped_axes(weights, period):
    q_idx = torch.arange(period, 2 * period)
    k_idx = q_idx - period + 1
    picked = weights[:, k_idx, q_idx]
    return picked.double().mean(dim=1)


def ind_precedence(weights, period):
    heads = weights.shape[0]
    acc = torch.zeros(heads, dtype=torch.float64)
    for i in range(period, 2 * period):
        acc += weights[:, i, i - (period + 1)].double()
    return acc / period


def ind_floor_division(weights, period):
    d = weights.diagonal(1 - period, 1, 2)[:, 1:]
    return d.double().sum(-1) // period


def ind_default_dims(weights, period):
    diagonal = torch.diagonal(weights, 1 - period)  # entries w[i, i - period + 1]
    return diagonal[..., 1:].double().mean(-1)


# ==================================================================== induction_score: right
def ind_fancy_index(weights, period):
    queries = torch.arange(period, 2 * period)
    keys = queries - period + 1
    return weights[:, queries, keys].double().mean(dim=-1).to(weights.dtype)


def ind_numpy_loop(weights, period):
    w = weights.detach().cpu().double().numpy()
    scores = np.zeros(w.shape[0])
    for h in range(w.shape[0]):
        scores[h] = np.mean([w[h, i, i - period + 1] for i in range(period, 2 * period)])
    return torch.from_numpy(scores)


ENTRIES = [
    Entry("previous_token_score", "wrong", "offset_plus_one",
          "torch.diagonal with offset=+1 reads the superdiagonal w[i, i + 1] (the next token), "
          "not w[i, i - 1]: the offset sign is flipped",
          prev_offset_plus_one),
    Entry("previous_token_score", "wrong", "diagonal_default_dims",
          "torch.diagonal(weights, -1) takes the diagonal over dims 0 and 1 (heads and queries) "
          "by default, not over the last two axes, so the result has the wrong shape",
          prev_default_dims),
    Entry("previous_token_score", "wrong", "divides_by_n",
          "it sums the N - 1 previous-token weights but divides by N, as if query 0 counted",
          prev_divides_by_n),
    Entry("previous_token_score", "wrong", "mean_over_heads",
          "the mean is taken over dim 0 (the heads) instead of the last axis (the queries), so "
          "it returns one value per query instead of one per head",
          prev_mean_over_heads),
    Entry("previous_token_score", "wrong", "numpy_result",
          "it returns a numpy array built from Python floats instead of the torch tensor the "
          "torch lessons return",
          prev_numpy_result),
    Entry("previous_token_score", "wrong", "precedence_n_minus_1",
          "`sum / n - 1` divides by n and then subtracts 1: the parentheses around (n - 1) "
          "are missing",
          prev_precedence),
    Entry("previous_token_score", "right", "python_loops_float64", None, prev_python_loops),
    Entry("previous_token_score", "right", "shift_matrix_einsum", None,
          prev_shift_matrix_einsum),

    Entry("induction_score", "wrong", "copy_not_next",
          "it reads key i - period, the earlier copy of token i itself, instead of key "
          "i - period + 1, the token that followed it (a duplicate-token score, not induction)",
          ind_copy_not_next),
    Entry("induction_score", "wrong", "slice_wrong_end",
          "the diagonal at offset 1 - period has period + 1 entries and it drops the last "
          "instead of the first, so it averages queries period - 1 .. 2 period - 2",
          ind_slice_wrong_end),
    Entry("induction_score", "wrong", "query_key_swapped",
          "it indexes weights[:, key, query] instead of weights[:, query, key], reading the "
          "transposed entry (zero for a causal pattern)",
          ind_swapped_axes),
    Entry("induction_score", "wrong", "precedence_period_plus_one",
          "`i - (period + 1)` subtracts period + 1 instead of `i - period + 1`, so it reads two "
          "keys too early",
          ind_precedence),
    Entry("induction_score", "wrong", "floor_division",
          "the mean divides with `//`, which floors the tensor quotient (to 0 for weights "
          "below 1), instead of true division",
          ind_floor_division),
    Entry("induction_score", "wrong", "diagonal_default_dims",
          "torch.diagonal(weights, 1 - period) uses dims 0 and 1 by default (heads and "
          "queries), not the query and key axes, so it averages the wrong entries and shape",
          ind_default_dims),
    Entry("induction_score", "right", "fancy_index", None, ind_fancy_index),
    Entry("induction_score", "right", "numpy_loop", None, ind_numpy_loop),
]
