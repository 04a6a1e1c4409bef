"""Lesson 08 (what heads learn, torch): previous_token_score, induction_score."""

import torch

from entry import Entry


# ----------------------------------------------------------------------------- previous_token_score
def ptk_next_token(weights):
    return torch.diagonal(weights, offset=1, dim1=-2, dim2=-1).float().mean(-1)


def ptk_divides_by_n(weights):
    H, N, _ = weights.shape
    diag = torch.diagonal(weights, offset=-1, dim1=1, dim2=2).double()
    return diag.sum(dim=-1) / N


def ptk_mean_wrong_dim(weights):
    return torch.diagonal(weights, -1, 1, 2).double().mean(dim=0)


def ptk_main_diagonal(weights):
    return torch.diagonal(weights, dim1=-2, dim2=-1).double().mean(-1)


def ptk_loop_short(weights):
    H, N, _ = weights.shape
    total = torch.zeros(H, dtype=torch.float64)
    for i in range(1, N - 1):
        total += weights[:, i, i - 1].double()
    return total / (N - 1)


def ptk_submatrix(weights):
    return weights[:, 1:, :-1].double().mean(dim=(1, 2))


def ptk_gather(weights):
    H, N, _ = weights.shape
    rows = torch.arange(1, N)
    return weights[:, rows, rows - 1].double().mean(dim=1)


def ptk_loop(weights):
    H, N, _ = weights.shape
    scores = []
    for h in range(H):
        s = 0.0
        for i in range(1, N):
            s += float(weights[h, i, i - 1])
        scores.append(s / (N - 1))
    return torch.tensor(scores, dtype=torch.float64)


# ----------------------------------------------------------------------------- induction_score
def ind_duplicate_token(weights, period):
    i = torch.arange(period, 2 * period)
    return weights[:, i, i - period].double().mean(-1)


def ind_query_off_by_one(weights, period):
    diag = torch.diagonal(weights, offset=1 - period, dim1=-2, dim2=-1)  # (H, period + 1)
    return diag[:, :-1].double().mean(-1)


def ind_upper_diagonal(weights, period):
    diag = torch.diagonal(weights, offset=period - 1, dim1=-2, dim2=-1)
    return diag[:, 1:].double().mean(-1)


def ind_whole_diagonal(weights, period):
    return torch.diagonal(weights, offset=1 - period, dim1=1, dim2=2).double().mean(dim=1)


def ind_loop_short(weights, period):
    H = weights.shape[0]
    out = torch.zeros(H, dtype=torch.float64)
    for i in range(period, 2 * period - 1):
        out += weights[:, i, i - period + 1].double()
    return out / period


def ind_sum_not_mean(weights, period):
    i = torch.arange(period, 2 * period)
    return weights[:, i, i - period + 1].double().sum(-1)


def ind_advanced_index(weights, period):
    q = torch.arange(period, 2 * period)
    return weights[:, q, q - period + 1].to(torch.float64).mean(dim=-1)


def ind_loop(weights, period):
    H = weights.shape[0]
    res = torch.empty(H, dtype=torch.float64)
    for h in range(H):
        vals = [float(weights[h, i, i - period + 1]) for i in range(period, 2 * period)]
        res[h] = sum(vals) / len(vals)
    return res


ENTRIES = [
    Entry("previous_token_score", "wrong", "next-token", "Reads the diagonal at offset +1 (the next token) instead of -1 (the previous token).", ptk_next_token),
    Entry("previous_token_score", "wrong", "divides-by-n", "Sums the N - 1 previous-token weights but divides by N instead of N - 1.", ptk_divides_by_n),
    Entry("previous_token_score", "wrong", "mean-over-heads", "Averages over dim 0 (the heads) instead of over the queries, returning (N - 1,) values.", ptk_mean_wrong_dim),
    Entry("previous_token_score", "wrong", "main-diagonal", "Averages the main diagonal (weight on the token itself) instead of the one below it.", ptk_main_diagonal),
    Entry("previous_token_score", "wrong", "loop-misses-last", "The loop runs range(1, N - 1), skipping the last query, while still dividing by N - 1.", ptk_loop_short),
    Entry("previous_token_score", "wrong", "submatrix-mean", "Averages the whole submatrix weights[:, 1:, :-1] instead of just its diagonal.", ptk_submatrix),
    Entry("previous_token_score", "right", "advanced-index", None, ptk_gather),
    Entry("previous_token_score", "right", "python-loop", None, ptk_loop),
    Entry("induction_score", "wrong", "duplicate-token", "Reads key i - period (the earlier copy of the token itself) instead of i - period + 1 (the token after it).", ind_duplicate_token),
    Entry("induction_score", "wrong", "query-range-shifted", "Drops the wrong end of the diagonal, averaging queries period - 1 .. 2 period - 2 instead of period .. 2 period - 1.", ind_query_off_by_one),
    Entry("induction_score", "wrong", "upper-diagonal", "Uses offset period - 1 (above the diagonal) instead of 1 - period, looking forward instead of back.", ind_upper_diagonal),
    Entry("induction_score", "wrong", "whole-diagonal", "Averages the whole offset diagonal, including query period - 1 from the first half.", ind_whole_diagonal),
    Entry("induction_score", "wrong", "loop-misses-last", "The loop stops at 2 period - 2, skipping the last query, but still divides by period.", ind_loop_short),
    Entry("induction_score", "wrong", "sum-not-mean", "Sums the weights over the queries instead of averaging them.", ind_sum_not_mean),
    Entry("induction_score", "right", "advanced-index", None, ind_advanced_index),
    Entry("induction_score", "right", "python-loop", None, ind_loop),
]
