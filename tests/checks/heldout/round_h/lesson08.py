"""Lesson 08 (what heads learn, torch): previous_token_score, induction_score."""

import torch

from entry import Entry


# ------------------------------------------------------------------ previous_token_score: wrong
def prev_upper_diagonal(weights):
    return torch.diagonal(weights, offset=1, dim1=-2, dim2=-1).float().mean(-1).to(weights.dtype)


def prev_divide_by_n(weights):
    h, n, _ = weights.shape
    diag = torch.diagonal(weights, offset=-1, dim1=1, dim2=2).float()
    return (diag.sum(dim=-1) / n).to(weights.dtype)


def prev_mean_over_heads(weights):
    diag = torch.diagonal(weights, offset=-1, dim1=1, dim2=2).float()
    return diag.mean(dim=0).to(weights.dtype)


def prev_default_dims(weights):
    diag = torch.diagonal(weights, -1)
    return diag.float().mean(dim=-1).to(weights.dtype)


def prev_loop_from_zero(weights):
    h, n, _ = weights.shape
    total = torch.zeros(h, dtype=torch.float32)
    for i in range(n):
        total += weights[:, i, i - 1].float()
    return (total / (n - 1)).to(weights.dtype)


def prev_sum_not_mean(weights):
    return torch.diagonal(weights, -1, 1, 2).float().sum(-1).to(weights.dtype)


# ------------------------------------------------------------------ previous_token_score: right
def prev_loop(weights):
    h, n, _ = weights.shape
    scores = []
    for head in range(h):
        vals = [float(weights[head, i, i - 1]) for i in range(1, n)]
        scores.append(sum(vals) / len(vals))
    return torch.tensor(scores, dtype=weights.dtype)


def prev_gather(weights):
    n = weights.shape[-1]
    rows = torch.arange(1, n)
    return weights.double()[:, rows, rows - 1].mean(dim=1).to(weights.dtype)


# ------------------------------------------------------------------ induction_score: wrong
def ind_copy_itself(weights, period):
    diag = torch.diagonal(weights, offset=-period, dim1=-2, dim2=-1)
    return diag.float().mean(-1).to(weights.dtype)


def ind_queries_shifted(weights, period):
    h = weights.shape[0]
    acc = torch.zeros(h, dtype=torch.float64)
    for i in range(period - 1, 2 * period - 1):
        acc += weights[:, i, i - period + 1].double()
    return (acc / period).to(weights.dtype)


def ind_upper_offset(weights, period):
    diag = torch.diagonal(weights, offset=period - 1, dim1=1, dim2=2)
    return diag[:, -period:].float().mean(-1).to(weights.dtype)


def ind_whole_diagonal(weights, period):
    diag = torch.diagonal(weights, offset=1 - period, dim1=1, dim2=2)
    return diag.float().mean(-1).to(weights.dtype)


def ind_divide_by_n(weights, period):
    h, n, _ = weights.shape
    q = torch.arange(period, 2 * period)
    vals = weights[:, q, q - period + 1].float()
    return (vals.sum(-1) / n).to(weights.dtype)


def ind_first_half_wrap(weights, period):
    h = weights.shape[0]
    out = torch.zeros(h, dtype=torch.float64)
    for i in range(period):
        out += weights[:, i, i + 1 - period].double()
    return (out / period).to(weights.dtype)


# ------------------------------------------------------------------ induction_score: right
def ind_gather(weights, period):
    queries = torch.arange(period, 2 * period)
    keys = queries - period + 1
    return weights.double()[:, queries, keys].mean(-1).to(weights.dtype)


def ind_loop(weights, period):
    h = weights.shape[0]
    res = torch.empty(h, dtype=torch.float64)
    for head in range(h):
        s = 0.0
        for i in range(period, 2 * period):
            s += float(weights[head, i, i - period + 1])
        res[head] = s / period
    return res.to(weights.dtype)


ENTRIES = [
    Entry("previous_token_score", "wrong", "upper-diagonal",
          "Reads the diagonal above the main one (key i + 1) instead of below it (key i - 1).",
          prev_upper_diagonal),
    Entry("previous_token_score", "wrong", "divide-by-N",
          "Divides the sum by N instead of by the N - 1 queries that have a previous token.",
          prev_divide_by_n),
    Entry("previous_token_score", "wrong", "mean-over-heads",
          "Averages over the head axis instead of over the queries, returning (N - 1,) "
          "values.", prev_mean_over_heads),
    Entry("previous_token_score", "wrong", "diagonal-default-dims",
          "Calls torch.diagonal(weights, -1) with its default dims 0 and 1, taking a diagonal "
          "across heads and queries.", prev_default_dims),
    Entry("previous_token_score", "wrong", "loop-from-query-zero",
          "Loops from query 0, where weights[:, 0, -1] wraps around to the last key.",
          prev_loop_from_zero),
    Entry("previous_token_score", "wrong", "sum-not-mean",
          "Sums the weights on the previous token instead of averaging them.",
          prev_sum_not_mean),
    Entry("previous_token_score", "right", "python-loop", None, prev_loop),
    Entry("previous_token_score", "right", "advanced-indexing", None, prev_gather),

    Entry("induction_score", "wrong", "earlier-copy-itself",
          "Reads key i - period (the earlier copy of the token) instead of i - period + 1, "
          "the token after it.", ind_copy_itself),
    Entry("induction_score", "wrong", "query-range-shifted",
          "Runs the queries over period - 1 .. 2 period - 2, one step early, starting in the "
          "first half.", ind_queries_shifted),
    Entry("induction_score", "wrong", "positive-offset",
          "Takes the diagonal at offset period - 1 (above the main diagonal) instead of "
          "1 - period.", ind_upper_offset),
    Entry("induction_score", "wrong", "whole-diagonal",
          "Averages the whole diagonal at offset 1 - period, including query period - 1 from "
          "the first half.", ind_whole_diagonal),
    Entry("induction_score", "wrong", "divide-by-N",
          "Divides the sum by N = 2 period instead of by the period queries averaged.",
          ind_divide_by_n),
    Entry("induction_score", "wrong", "first-half-queries",
          "Loops over the first-half queries 0 .. period - 1, where key i + 1 - period is "
          "negative and wraps around.", ind_first_half_wrap),
    Entry("induction_score", "right", "index-gather", None, ind_gather),
    Entry("induction_score", "right", "nested-loops", None, ind_loop),
]
