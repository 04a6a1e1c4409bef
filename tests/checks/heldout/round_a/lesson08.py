"""Lesson 08 (torch): previous_token_score and induction_score, as learners write them."""

import torch

from entry import Entry


# ----------------------------------------------------------------- previous_token_score: wrong
def prev_next_token(weights):
    return torch.diagonal(weights, offset=1, dim1=-2, dim2=-1).float().mean(dim=-1)


def prev_divides_by_n(weights):
    on_previous = torch.diagonal(weights, offset=-1, dim1=-2, dim2=-1).float()
    return on_previous.sum(dim=-1) / weights.shape[-1]


def prev_default_diagonal_dims(weights):
    return torch.diagonal(weights, -1).float().mean(dim=-1)


def prev_mean_over_heads(weights):
    on_previous = torch.diagonal(weights, offset=-1, dim1=-2, dim2=-1).float()
    return on_previous.mean(dim=0)


def prev_whole_submatrix(weights):
    return weights[:, 1:, :-1].float().mean(dim=(-2, -1))


def prev_sum_not_mean(weights):
    return torch.diagonal(weights, offset=-1, dim1=-2, dim2=-1).float().sum(dim=-1)


def prev_wraps_query_zero(weights):
    i = torch.arange(weights.shape[-1])
    return weights[:, i, i - 1].float().mean(dim=-1)  # i - 1 = -1 for query 0


# ----------------------------------------------------------------- previous_token_score: right
def prev_loop_float64(weights):
    heads, n, _ = weights.shape
    scores = []
    for h in range(heads):
        total = 0.0
        for i in range(1, n):
            total += float(weights[h, i, i - 1])
        scores.append(total / (n - 1))
    return torch.tensor(scores, dtype=torch.float64, device=weights.device)


def prev_mask_multiply(weights):
    n = weights.shape[-1]
    below = torch.diag(torch.ones(n - 1, device=weights.device), diagonal=-1)  # 1 at (i, i-1)
    return (weights.float() * below).sum(dim=(-2, -1)) / (n - 1)


# ----------------------------------------------------------------- induction_score: wrong
def ind_duplicate_token(weights, period):
    q = torch.arange(period, 2 * period)
    return weights[:, q, q - period].float().mean(dim=-1)


def ind_includes_first_diagonal_entry(weights, period):
    diagonal = torch.diagonal(weights, offset=1 - period, dim1=-2, dim2=-1)  # (H, period + 1)
    return diagonal.float().mean(dim=-1)


def ind_key_off_by_one_back(weights, period):
    q = torch.arange(period + 1, 2 * period)
    return weights[:, q, q - period - 1].float().mean(dim=-1)


def ind_offset_sign_flipped(weights, period):
    diagonal = torch.diagonal(weights, offset=period - 1, dim1=-2, dim2=-1)
    return diagonal.float().mean(dim=-1)


def ind_divides_by_n(weights, period):
    q = torch.arange(period, 2 * period)
    return weights[:, q, q - period + 1].float().sum(dim=-1) / weights.shape[-1]


def ind_first_half_key_block(weights, period):
    block = weights[:, period:, :period]  # second-half queries against first-half keys
    return torch.diagonal(block, offset=1, dim1=-2, dim2=-1).float().mean(dim=-1)


def ind_mean_over_heads(weights, period):
    q = torch.arange(period, 2 * period)
    return weights[:, q, q - period + 1].float().mean(dim=0)


# ----------------------------------------------------------------- induction_score: right
def ind_gather(weights, period):
    heads = weights.shape[0]
    queries = torch.arange(period, 2 * period, device=weights.device)
    rows = weights[:, period:, :].double()  # (H, period, N): the second copy's queries
    keys = (queries - period + 1).expand(heads, period)[..., None]
    return torch.gather(rows, 2, keys)[..., 0].sum(dim=-1) / period


def ind_loop(weights, period):
    out = torch.zeros(weights.shape[0], dtype=torch.float32, device=weights.device)
    for h in range(weights.shape[0]):
        for i in range(period, 2 * period):
            out[h] += weights[h, i, i - period + 1].float()
    return out / period


ENTRIES = [
    Entry("previous_token_score", "wrong", "next_token",
          "Reads the diagonal above the main one (offset=+1), the weight on key i + 1, instead "
          "of the one below.", prev_next_token),
    Entry("previous_token_score", "wrong", "divides_by_n",
          "Divides the sum by N instead of N - 1, as if query 0 had a previous token.",
          prev_divides_by_n),
    Entry("previous_token_score", "wrong", "default_diagonal_dims",
          "Calls torch.diagonal(weights, -1) without dim1=-2, dim2=-1, so on the (H, N, N) "
          "tensor it takes a diagonal across heads and queries.", prev_default_diagonal_dims),
    Entry("previous_token_score", "wrong", "mean_over_heads",
          "Averages over the heads (dim=0) instead of over the queries.", prev_mean_over_heads),
    Entry("previous_token_score", "wrong", "whole_submatrix",
          "Averages the whole block weights[:, 1:, :-1] instead of only its diagonal.",
          prev_whole_submatrix),
    Entry("previous_token_score", "wrong", "sum_not_mean",
          "Sums the previous-token weights instead of averaging them.", prev_sum_not_mean),
    Entry("previous_token_score", "wrong", "wraps_query_zero",
          "Indexes key i - 1 for every query including i = 0, where -1 wraps to the last key.",
          prev_wraps_query_zero),
    Entry("previous_token_score", "right", "loop_float64", None, prev_loop_float64),
    Entry("previous_token_score", "right", "mask_multiply", None, prev_mask_multiply),

    Entry("induction_score", "wrong", "duplicate_token_key",
          "Reads key i - period, the earlier copy of the current token (a duplicate-token "
          "head), instead of the token after it, i - period + 1.", ind_duplicate_token),
    Entry("induction_score", "wrong", "includes_query_period_minus_1",
          "Averages the whole diagonal at offset 1 - period, which includes query period - 1 "
          "(first half) looking at key 0.", ind_includes_first_diagonal_entry),
    Entry("induction_score", "wrong", "key_off_by_one_back",
          "Uses key i - period - 1 (one before the earlier copy) instead of i - period + 1.",
          ind_key_off_by_one_back),
    Entry("induction_score", "wrong", "offset_sign_flipped",
          "Takes the diagonal at offset period - 1 (above the main diagonal) instead of "
          "1 - period.", ind_offset_sign_flipped),
    Entry("induction_score", "wrong", "divides_by_n",
          "Divides the sum over the second half by N = 2 * period instead of period.",
          ind_divides_by_n),
    Entry("induction_score", "wrong", "first_half_key_block",
          "Cuts the keys to the first half (weights[:, period:, :period]) before taking the "
          "diagonal, so the last query's target, key period, falls outside and is dropped.",
          ind_first_half_key_block),
    Entry("induction_score", "wrong", "mean_over_heads",
          "Averages over the heads instead of over the queries.", ind_mean_over_heads),
    Entry("induction_score", "right", "gather_float64", None, ind_gather),
    Entry("induction_score", "right", "loop", None, ind_loop),
]
