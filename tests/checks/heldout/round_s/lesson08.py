"""Held-out catalogue, lesson 08 (heads): previous_token_score, induction_score."""

import numpy as np
import torch

from entry import Entry


# ============================================================== previous_token_score: wrong
def prev_next_token(weights):
    w = weights.float()
    return torch.diagonal(w, offset=1, dim1=1, dim2=2).mean(dim=-1).to(weights.dtype)  # slip


def prev_divides_by_n(weights):
    H, N, _ = weights.shape
    total = torch.zeros(H, dtype=torch.float32)
    for i in range(1, N):
        total += weights[:, i, i - 1].float()
    return (total / N).to(weights.dtype)  # slip: N queries counted, only N - 1 contribute


def prev_default_diagonal_dims(weights):
    diag = weights.float().diagonal(-1)  # slip: default dims are 0 and 1 (head, query)
    return diag.mean(dim=-1).to(weights.dtype)


def prev_argmax_hits(weights):
    n = weights.shape[-1]
    best = weights[:, 1:, :].argmax(dim=-1)  # (H, N-1)
    hits = best == torch.arange(n - 1)[None, :]  # slip: a hard hit rate, not the mean weight
    return hits.float().mean(dim=-1).to(weights.dtype)


def prev_sum_not_mean(weights):
    w = weights.to(torch.float32)
    rows = torch.arange(1, w.shape[1])
    return w[:, rows, rows - 1].sum(dim=-1).to(weights.dtype)  # slip: sum instead of mean


def prev_whole_lower_block(weights):
    w = weights.float()
    return w[:, 1:, :-1].mean(dim=(1, 2)).to(weights.dtype)  # slip: averages the whole block


# ============================================================== previous_token_score: right
def prev_python_loops_f64(weights):
    H, N, _ = weights.shape
    out = []
    for h in range(H):
        s = 0.0
        for i in range(1, N):
            s += float(weights[h, i, i - 1])
        out.append(s / (N - 1))
    return torch.tensor(out, dtype=torch.float64).to(weights.dtype)


def prev_shift_matrix_numpy(weights):
    w = weights.detach().to(torch.float64).numpy()
    n = w.shape[-1]
    shift = np.eye(n, k=-1)  # ones at (i, i-1)
    score = np.einsum("hqk,qk->h", w, shift) / (n - 1)
    return torch.from_numpy(score).to(weights.dtype)


# =================================================================== induction_score: wrong
def ind_copy_itself(weights, period):
    H, N, _ = weights.shape
    q = torch.arange(period, 2 * period)
    return weights[:, q, q - period].float().mean(-1).to(weights.dtype)  # slip: no + 1


def ind_query_range_shifted(weights, period):
    H, N, _ = weights.shape
    q = torch.arange(period - 1, 2 * period - 1)  # slip: starts one query too early
    return weights[:, q, q - period + 1].float().mean(-1).to(weights.dtype)


def ind_upper_diagonal(weights, period):
    d = torch.diagonal(weights.float(), offset=period - 1, dim1=-2, dim2=-1)  # slip: sign
    return d[:, 1:].mean(dim=-1).to(weights.dtype)


def ind_transposed_index(weights, period):
    H = weights.shape[0]
    acc = torch.zeros(H, dtype=torch.float32)
    for i in range(period, 2 * period):
        acc += weights[:, i - period + 1, i].float()  # slip: [key, query] instead of [query, key]
    return (acc / period).to(weights.dtype)


def ind_mean_over_heads(weights, period):
    q = torch.arange(period, 2 * period)
    vals = weights[:, q, q - period + 1].float()  # (H, period)
    return vals.mean(dim=0).to(weights.dtype)  # slip: averages over heads, not queries


def ind_divides_by_n(weights, period):
    n = weights.shape[-1]
    q = torch.arange(period, 2 * period)
    vals = weights[:, q, q - period + 1].float()
    return (vals.sum(dim=-1) / n).to(weights.dtype)  # slip: divides by N = 2 * period


# =================================================================== induction_score: right
def ind_block_diagonal(weights, period):
    block = weights[:, period:, 1:period + 1].to(torch.float64)  # (H, period, period)
    return block.diagonal(dim1=1, dim2=2).mean(dim=1).to(weights.dtype)


def ind_gather(weights, period):
    H, N, _ = weights.shape
    rows = weights[:, period:, :].double()  # (H, period, N)
    idx = (torch.arange(period) + 1).view(1, period, 1).expand(H, period, 1)
    picked = torch.gather(rows, 2, idx).squeeze(-1)  # (H, period)
    return (picked.sum(-1) / period).to(weights.dtype)


P = "previous_token_score"
I = "induction_score"
ENTRIES = [
    Entry(P, "wrong", "offset_plus_one", "torch.diagonal uses offset=+1, the weight on key "
          "i + 1 (the next token), where the previous token is offset -1.", prev_next_token),
    Entry(P, "wrong", "divides_by_n", "The loop sums the N - 1 weights w[i, i-1] for i >= 1 but "
          "divides by N instead of N - 1.", prev_divides_by_n),
    Entry(P, "wrong", "diagonal_default_dims", "weights.diagonal(-1) without dim1/dim2 takes the "
          "diagonal over the head and query axes (dims 0 and 1), not over query and key.",
          prev_default_diagonal_dims),
    Entry(P, "wrong", "argmax_hit_rate", "It scores the fraction of queries whose argmax key "
          "is i - 1 instead of the mean weight those queries put on key i - 1.",
          prev_argmax_hits),
    Entry(P, "wrong", "sum_not_mean", "The weights on the previous token are summed over the "
          "queries instead of averaged.", prev_sum_not_mean),
    Entry(P, "wrong", "whole_lower_block", "It averages the whole block weights[:, 1:, :-1] "
          "instead of only its diagonal, the entries (i, i - 1).", prev_whole_lower_block),
    Entry(P, "right", "python_loops_float64", None, prev_python_loops_f64),
    Entry(P, "right", "shift_matrix_numpy_einsum", None, prev_shift_matrix_numpy),
    Entry(I, "wrong", "key_is_the_copy_itself", "It reads key i - period, the earlier copy of "
          "token i, instead of key i - period + 1, the token that followed that copy.",
          ind_copy_itself),
    Entry(I, "wrong", "query_range_starts_early", "The queries run from period - 1 to "
          "2 * period - 2 instead of period to 2 * period - 1: off by one.",
          ind_query_range_shifted),
    Entry(I, "wrong", "diagonal_offset_sign", "torch.diagonal uses offset=period - 1 (above the "
          "main diagonal) where the induction diagonal is offset 1 - period.",
          ind_upper_diagonal),
    Entry(I, "wrong", "query_key_indices_swapped", "It reads weights[h, i - period + 1, i], the "
          "weight of query i - period + 1 on key i, with the query and key indices swapped.",
          ind_transposed_index),
    Entry(I, "wrong", "mean_over_heads", "The (H, period) weights are averaged over dim=0, the "
          "heads, so it returns one value per query instead of one per head.",
          ind_mean_over_heads),
    Entry(I, "wrong", "divides_by_n", "The period weights are summed and divided by "
          "N = 2 * period instead of by period, halving every score.", ind_divides_by_n),
    Entry(I, "right", "block_diagonal", None, ind_block_diagonal),
    Entry(I, "right", "gather", None, ind_gather),
]
