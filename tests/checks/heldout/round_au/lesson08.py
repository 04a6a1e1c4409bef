"""Lesson 08 (what heads learn): held-out learners' answers for previous_token_score and
induction_score."""

import torch

from entry import Entry


# ============================================================ previous_token_score: wrong
def prev_upper_diagonal(weights):
    w = weights.float()
    return torch.diagonal(w, offset=1, dim1=1, dim2=2).mean(dim=1).to(weights.dtype)


def prev_divides_by_n(weights):
    n = weights.shape[-1]
    diag = torch.diagonal(weights.float(), -1, -2, -1)
    return (diag.sum(-1) / n).to(weights.dtype)


def prev_default_diagonal_dims(weights):
    on_prev = torch.diagonal(weights.float(), -1)
    return on_prev.mean(-1).to(weights.dtype)


def prev_mean_over_heads(weights):
    on_prev = torch.diagonal(weights.float(), offset=-1, dim1=-2, dim2=-1)  # (H, N-1)
    return on_prev.mean(dim=0).to(weights.dtype)


def prev_whole_subblock(weights):
    below = weights[:, 1:, :-1].float()  # queries 1.., keys ..N-2
    return below.mean(dim=(-2, -1)).to(weights.dtype)


def prev_argmax_hits(weights):
    n = weights.shape[-1]
    best = weights[:, 1:, :].argmax(dim=-1)  # (H, N-1)
    target = torch.arange(n - 1)
    return (best == target).float().mean(dim=-1).to(weights.dtype)


# ============================================================ previous_token_score: right
def prev_loop_float64(weights):
    heads, n, _ = weights.shape
    total = torch.zeros(heads, dtype=torch.float64)
    for i in range(1, n):
        total += weights[:, i, i - 1].double()
    return (total / (n - 1)).to(weights.dtype)


def prev_shifted_eye_einsum(weights):
    n = weights.shape[-1]
    pick = torch.diag(torch.ones(n - 1, dtype=torch.float64), -1)  # 1 at (i, i-1)
    return (torch.einsum("hij,ij->h", weights.double(), pick) / (n - 1)).to(weights.dtype)


# ============================================================ induction_score: wrong
def ind_no_plus_one(weights, period):
    diag = torch.diagonal(weights.float(), offset=-period, dim1=-2, dim2=-1)  # (H, period)
    return diag.mean(-1).to(weights.dtype)


def ind_loop_starts_late(weights, period):
    acc = torch.zeros(weights.shape[0], dtype=torch.float32)
    for i in range(period + 1, 2 * period):
        acc += weights[:, i, i - period + 1].float()
    return (acc / period).to(weights.dtype)


def ind_transposed_index(weights, period):
    vals = [weights[:, i - period + 1, i].float() for i in range(period, 2 * period)]
    return torch.stack(vals, dim=-1).mean(-1).to(weights.dtype)


def ind_divides_by_n(weights, period):
    n = weights.shape[-1]
    diag = torch.diagonal(weights.float(), 1 - period, 1, 2)[:, 1:]
    return (diag.sum(-1) / n).to(weights.dtype)


def ind_mean_over_heads(weights, period):
    q = torch.arange(period, 2 * period)
    picked = weights[:, q, q - period + 1].float()  # (H, period)
    return picked.mean(0).to(weights.dtype)


def ind_chained_fancy_index(weights, period):
    rows = torch.arange(period, 2 * period)
    cols = rows - period + 1
    sel = weights[:, rows][:, :, cols].float()  # meant: w[h, rows[j], cols[j]]
    return sel.mean(dim=(1, 2)).to(weights.dtype)


# ============================================================ induction_score: right
def ind_gather_float64(weights, period):
    qi = torch.arange(period, 2 * period)
    ki = (qi - period + 1).unsqueeze(0).unsqueeze(-1).expand(weights.shape[0], period, 1)
    rows = weights.double()[:, period:, :]  # (H, period, N)
    return torch.gather(rows, 2, ki).squeeze(-1).mean(-1).to(weights.dtype)


def ind_mask_einsum(weights, period):
    n = 2 * period
    mask = torch.zeros(n, n, dtype=torch.float64)
    for i in range(period, n):
        mask[i, i - period + 1] = 1.0
    score = torch.einsum("hqk,qk->h", weights.to(torch.float64), mask) / mask.sum()
    return score.to(weights.dtype)


ENTRIES = [
    Entry("previous_token_score", "wrong", "upper_diagonal",
          "reads diagonal offset +1, the weight on key i+1 (the next token), instead of "
          "offset -1 for key i-1", prev_upper_diagonal),
    Entry("previous_token_score", "wrong", "divides_by_n",
          "sums the N-1 previous-token weights but divides by N, counting query 0 that has "
          "no previous token", prev_divides_by_n),
    Entry("previous_token_score", "wrong", "diagonal_default_dims",
          "torch.diagonal(weights, -1) takes the diagonal of the first two axes (heads x "
          "queries) by default, not of the (N, N) pattern of each head", prev_default_diagonal_dims),
    Entry("previous_token_score", "wrong", "mean_over_heads",
          "averages the previous-token diagonal over the heads axis (dim 0), returning one "
          "value per query instead of one per head", prev_mean_over_heads),
    Entry("previous_token_score", "wrong", "whole_subblock_mean",
          "averages the whole block weights[:, 1:, :-1] instead of just its diagonal "
          "w[h, i, i-1]", prev_whole_subblock),
    Entry("previous_token_score", "wrong", "argmax_hit_rate",
          "counts the fraction of queries whose largest weight is on key i-1 instead of "
          "averaging the weight itself", prev_argmax_hits),
    Entry("previous_token_score", "right", "loop_float64", None, prev_loop_float64),
    Entry("previous_token_score", "right", "shifted_eye_einsum", None, prev_shifted_eye_einsum),

    Entry("induction_score", "wrong", "key_i_minus_period",
          "reads key i - period (the earlier copy of the token itself) instead of "
          "i - period + 1, the token that followed it", ind_no_plus_one),
    Entry("induction_score", "wrong", "loop_starts_late",
          "the loop starts at query period + 1, so query i = period is left out of the sum "
          "(still divided by period)", ind_loop_starts_late),
    Entry("induction_score", "wrong", "query_key_swapped",
          "indexes weights[:, i - period + 1, i], query and key swapped, so it reads the "
          "weight from the earlier position onto the later one", ind_transposed_index),
    Entry("induction_score", "wrong", "divides_by_n",
          "sums the period induction weights but divides by N = 2 * period instead of "
          "period", ind_divides_by_n),
    Entry("induction_score", "wrong", "mean_over_heads",
          "averages over the heads axis (dim 0) instead of over the queries, returning "
          "shape (period,) instead of (H,)", ind_mean_over_heads),
    Entry("induction_score", "wrong", "chained_fancy_index",
          "weights[:, rows][:, :, cols] indexes rows and columns one after the other, which "
          "selects the whole period x period block instead of the pairs (i, i - period + 1)",
          ind_chained_fancy_index),
    Entry("induction_score", "right", "gather_float64", None, ind_gather_float64),
    Entry("induction_score", "right", "mask_einsum", None, ind_mask_einsum),
]
