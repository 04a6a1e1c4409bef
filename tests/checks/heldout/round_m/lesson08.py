"""Round m catalogue, lesson 08 (heads): previous_token_score, induction_score."""

import numpy as np
import torch

from entry import Entry


# ================================================================= previous_token_score: wrong
def prev_next_diagonal(weights):
    # the diagonal just above the main one
    on_prev = torch.diagonal(weights, offset=1, dim1=-2, dim2=-1)
    return on_prev.float().mean(dim=-1).to(weights.dtype)


def prev_diagonal_default_dims(weights):
    on_prev = torch.diagonal(weights, -1)
    return on_prev.mean(-1)


def prev_loop_misses_last(weights):
    h, n, _ = weights.shape
    total = torch.zeros(h, dtype=torch.float64)
    count = 0
    for i in range(1, n - 1):
        total += weights[:, i, i - 1].double()
        count += 1
    return (total / max(count, 1)).to(weights.dtype)


def prev_sum_not_mean(weights):
    n = weights.shape[-1]
    rows = torch.arange(1, n)
    return weights[:, rows, rows - 1].float().sum(dim=-1).to(weights.dtype)


def prev_argmax_fraction(weights):
    n = weights.shape[-1]
    top = weights[:, 1:, :].argmax(dim=-1)  # (H, N - 1): key each query attends to most
    hits = top == torch.arange(0, n - 1)[None, :]
    return hits.to(torch.float32).mean(dim=-1)


def prev_mean_over_heads(weights):
    diag = torch.diagonal(weights, offset=-1, dim1=1, dim2=2)  # (H, N - 1)
    return diag.to(torch.float32).mean(dim=0).to(weights.dtype)


# ================================================================= previous_token_score: right
def prev_python_loops(weights):
    w = weights.detach().cpu().double()
    h, n, _ = w.shape
    scores = []
    for head in range(h):
        acc = 0.0
        for i in range(1, n):
            acc += float(w[head, i, i - 1])
        scores.append(acc / (n - 1))
    return torch.tensor(scores, dtype=torch.float64).to(weights.dtype)


def prev_numpy_trace(weights):
    w = weights.detach().cpu().to(torch.float64).numpy()
    n = w.shape[-1]
    tr = np.trace(w, offset=-1, axis1=1, axis2=2)  # sum of w[h, i, i-1]
    return torch.from_numpy(tr / (n - 1)).to(weights.dtype)


# ====================================================================== induction_score: wrong
def ind_copy_itself(weights, period):
    h, n, _ = weights.shape
    q = torch.arange(period, 2 * period)
    return weights[:, q, q - period].float().mean(-1).to(weights.dtype)


def ind_loop_stops_early(weights, period):
    h = weights.shape[0]
    acc = torch.zeros(h, dtype=torch.float32)
    count = 0
    for i in range(period, 2 * period - 1):
        acc = acc + weights[:, i, i - period + 1].float()
        count += 1
    return (acc / count if count else acc).to(weights.dtype)


def ind_positive_offset(weights, period):
    diag = torch.diagonal(weights, offset=period - 1, dim1=-2, dim2=-1)  # (H, period + 1)
    return diag[:, 1:].float().mean(dim=-1).to(weights.dtype)


def ind_mean_over_everything(weights, period):
    diag = torch.diagonal(weights, offset=1 - period, dim1=-2, dim2=-1)
    return diag[:, 1:].float().mean().to(weights.dtype)


def ind_divide_by_seq_len(weights, period):
    n = weights.shape[-1]
    i = torch.arange(period, n)
    picked = weights[:, i, i - period + 1].double()
    return (picked.sum(dim=-1) / n).to(weights.dtype)


def ind_includes_extra_query(weights, period):
    diag = torch.diagonal(weights, offset=1 - period, dim1=-2, dim2=-1)  # (H, period + 1)
    return diag.float().mean(dim=-1).to(weights.dtype)


# ====================================================================== induction_score: right
def ind_gather_index(weights, period):
    h = weights.shape[0]
    queries = torch.arange(period, 2 * period)
    keys = (queries - period + 1).view(1, -1, 1).expand(h, -1, 1)
    rows = weights[:, period:, :].to(torch.float64)  # (H, period, N)
    picked = torch.gather(rows, 2, keys).squeeze(-1)  # (H, period)
    return picked.mean(dim=1).to(weights.dtype)


def ind_numpy_loop(weights, period):
    w = weights.detach().cpu().double().numpy()
    out = np.zeros(w.shape[0])
    for hh in range(w.shape[0]):
        vals = [w[hh, i, i - period + 1] for i in range(period, 2 * period)]
        out[hh] = np.mean(vals)
    return torch.tensor(out).to(weights.dtype)


ENTRIES = [
    # previous_token_score
    Entry("previous_token_score", "wrong", "next_token_diagonal",
          "It takes the diagonal at offset +1, the weight query i puts on key i + 1, instead of "
          "offset -1 (key i - 1); on causal patterns that diagonal is all zeros.",
          prev_next_diagonal),
    Entry("previous_token_score", "wrong", "diagonal_default_dims",
          "torch.diagonal(weights, -1) uses its default dim1=0, dim2=1, so it takes a diagonal "
          "across the head axis and the query axis instead of across queries and keys, and the "
          "result does not have shape (H,).",
          prev_diagonal_default_dims),
    Entry("previous_token_score", "wrong", "loop_misses_last_query",
          "The loop runs over range(1, n - 1), so the last query is left out of the average.",
          prev_loop_misses_last),
    Entry("previous_token_score", "wrong", "sum_not_mean",
          "It sums the weights on key i - 1 over the queries instead of averaging them (no "
          "division by N - 1).",
          prev_sum_not_mean),
    Entry("previous_token_score", "wrong", "argmax_fraction",
          "It returns the fraction of queries whose largest weight falls on key i - 1 instead of "
          "the mean weight placed on key i - 1.",
          prev_argmax_fraction),
    Entry("previous_token_score", "wrong", "mean_over_heads",
          "It averages the (H, N - 1) diagonal over dim 0, the heads, instead of over the queries, "
          "returning one value per query rather than one per head.",
          prev_mean_over_heads),
    Entry("previous_token_score", "right", "python_loops_float64", None, prev_python_loops),
    Entry("previous_token_score", "right", "numpy_trace_offset", None, prev_numpy_trace),
    # induction_score
    Entry("induction_score", "wrong", "copy_itself",
          "It reads key i - period (the earlier copy of the same token) instead of key "
          "i - period + 1 (the token that followed it).",
          ind_copy_itself),
    Entry("induction_score", "wrong", "loop_stops_early",
          "The loop runs over range(period, 2 * period - 1), so the last query 2 * period - 1 is "
          "left out of the average.",
          ind_loop_stops_early),
    Entry("induction_score", "wrong", "positive_diagonal_offset",
          "It uses torch.diagonal with offset period - 1 (above the main diagonal) instead of "
          "1 - period, so it reads w[h, i, i + period - 1] in the upper triangle.",
          ind_positive_offset),
    Entry("induction_score", "wrong", "mean_over_everything",
          "It calls .mean() without a dim, averaging over the heads as well, so it returns one "
          "scalar instead of one score per head.",
          ind_mean_over_everything),
    Entry("induction_score", "wrong", "divide_by_seq_len",
          "It divides the sum over the period second-half queries by N = 2 * period instead of by "
          "period, halving every score.",
          ind_divide_by_seq_len),
    Entry("induction_score", "wrong", "includes_extra_query",
          "It averages the whole diagonal at offset 1 - period, whose first entry is query "
          "period - 1 (weight on key 0), so one first-half query is included in the mean.",
          ind_includes_extra_query),
    Entry("induction_score", "right", "gather_index", None, ind_gather_index),
    Entry("induction_score", "right", "numpy_loop", None, ind_numpy_loop),
]
