"""Lesson 08 (what heads learn, torch): previous_token_score, induction_score."""

import torch

from entry import Entry


def _acc(w):
    return w.to(torch.promote_types(w.dtype, torch.float32))


# ============================================================================ previous_token_score
def pt_w_next_token(weights):
    return _acc(torch.diagonal(weights, offset=1, dim1=-2, dim2=-1)).mean(-1).to(weights.dtype)


def pt_w_divides_by_n(weights):
    n = weights.shape[-1]
    d = _acc(torch.diagonal(weights, offset=-1, dim1=-2, dim2=-1))
    return (d.sum(-1) / n).to(weights.dtype)


def pt_w_mean_over_heads(weights):
    return _acc(torch.diagonal(weights, offset=-1, dim1=-2, dim2=-1)).mean(0).to(weights.dtype)


def pt_w_self(weights):
    return _acc(torch.diagonal(weights, dim1=-2, dim2=-1)).mean(-1).to(weights.dtype)


def pt_w_sum(weights):
    return _acc(torch.diagonal(weights, offset=-1, dim1=-2, dim2=-1)).sum(-1).to(weights.dtype)


def pt_w_default_dims(weights):
    return torch.diagonal(weights, offset=-1).mean(-1)  # dims 0 and 1: heads x queries


def pt_w_numpy_axis_names(weights):
    return weights.diagonal(-1, axis1=1, axis2=2).mean(-1)


def pt_w_key_axis_mean(weights):
    # w[h, i-1, i]: the previous query's weight on this token (indices in the wrong order)
    idx = torch.arange(1, weights.shape[-1])
    return _acc(weights[:, idx - 1, idx]).mean(-1).to(weights.dtype)


def pt_r_loop(weights):
    h, n, _ = weights.shape
    out = torch.zeros(h, dtype=torch.float64)
    for i in range(1, n):
        out += weights[:, i, i - 1].double()
    return (out / (n - 1)).to(weights.dtype)


def pt_r_gather(weights):
    n = weights.shape[-1]
    rows = torch.arange(1, n)
    picked = weights[:, rows, rows - 1]  # (H, N-1)
    return picked.float().mean(dim=1).to(weights.dtype)


def pt_r_shifted_eye(weights):
    n = weights.shape[-1]
    sel = torch.eye(n, dtype=torch.float64).roll(-1, dims=1)  # 1 at (i, i-1) ... and (0, n-1)
    sel[0] = 0.0
    return ((weights.double() * sel).sum(dim=(-2, -1)) / (n - 1)).to(weights.dtype)


# ============================================================================ induction_score
def _ind(weights, period, key_offset, queries):
    n = weights.shape[-1]
    rows = torch.arange(*queries(period, n))
    cols = rows + key_offset(period)
    return _acc(weights[:, rows, cols]).mean(-1).to(weights.dtype)


def is_w_copy_not_next(weights, period):
    return _ind(weights, period, lambda p: -p, lambda p, n: (p, n))


def is_w_from_period_minus_one(weights, period):
    return _ind(weights, period, lambda p: 1 - p, lambda p, n: (p - 1, n))


def is_w_key_minus_one(weights, period):
    n = weights.shape[-1]
    rows = torch.arange(period + 1, n)
    return _acc(weights[:, rows, rows - period - 1]).mean(-1).to(weights.dtype)


def is_w_positive_offset(weights, period):
    d = torch.diagonal(weights, offset=period - 1, dim1=-2, dim2=-1)
    return _acc(d).mean(-1).to(weights.dtype)


def is_w_sum(weights, period):
    rows = torch.arange(period, weights.shape[-1])
    return _acc(weights[:, rows, rows - period + 1]).sum(-1).to(weights.dtype)


def is_w_whole_diagonal(weights, period):
    d = torch.diagonal(weights, offset=1 - period, dim1=-2, dim2=-1)  # includes query period-1
    return _acc(d).mean(-1).to(weights.dtype)


def is_w_first_half_queries(weights, period):
    rows = torch.arange(0, period)
    cols = (rows - period + 1) % weights.shape[-1]  # negative indices wrap around
    return _acc(weights[:, rows, cols]).mean(-1).to(weights.dtype)


def is_r_loop(weights, period):
    h, n, _ = weights.shape
    total = torch.zeros(h, dtype=torch.float64)
    for i in range(period, n):
        total += weights[:, i, i - period + 1].double()
    return (total / (n - period)).to(weights.dtype)


def is_r_diagonal_tail(weights, period):
    d = weights.diagonal(offset=-(period - 1), dim1=1, dim2=2)  # (H, period + 1)
    return d[:, -period:].float().mean(-1).to(weights.dtype)


def is_r_mask_sum(weights, period):
    n = weights.shape[-1]
    i = torch.arange(n)[:, None]
    j = torch.arange(n)[None, :]
    sel = (i >= period) & (j == i - period + 1)
    return ((weights.double() * sel).sum((1, 2)) / sel.sum()).to(weights.dtype)


E = Entry
ENTRIES = [
    E("previous_token_score", "wrong", "next_token_diagonal",
      "Uses diagonal offset +1, measuring the weight on the next token instead of the "
      "previous one.", pt_w_next_token),
    E("previous_token_score", "wrong", "divides_by_n",
      "Sums the N-1 previous-token weights but divides by N, as if query 0 counted.",
      pt_w_divides_by_n),
    E("previous_token_score", "wrong", "mean_over_heads",
      "Averages over the head axis instead of over the queries, returning (N-1,).",
      pt_w_mean_over_heads),
    E("previous_token_score", "wrong", "self_weight",
      "Takes the main diagonal (weight on the token itself) instead of offset -1.", pt_w_self),
    E("previous_token_score", "wrong", "sum_not_mean",
      "Sums the previous-token weights instead of averaging them.", pt_w_sum),
    E("previous_token_score", "wrong", "diagonal_default_dims",
      "Calls torch.diagonal(weights, -1) without dim1/dim2, so it takes the diagonal of the "
      "head and query axes.", pt_w_default_dims),
    E("previous_token_score", "wrong", "numpy_axis_keywords",
      "Passes numpy's axis1/axis2 keywords to torch's diagonal, which raises.",
      pt_w_numpy_axis_names),
    E("previous_token_score", "wrong", "transposed_pair",
      "Reads w[h, i-1, i] (the previous query's weight on this key) instead of w[h, i, i-1].",
      pt_w_key_axis_mean),
    E("previous_token_score", "right", "python_loop_float64", None, pt_r_loop),
    E("previous_token_score", "right", "advanced_indexing", None, pt_r_gather),
    E("previous_token_score", "right", "shifted_identity_mask", None, pt_r_shifted_eye),
    E("induction_score", "wrong", "copy_not_next",
      "Looks at key i - period (the earlier copy of the token) instead of i - period + 1 "
      "(the token after it).", is_w_copy_not_next),
    E("induction_score", "wrong", "queries_from_period_minus_one",
      "Starts the queries at period - 1, one too early.", is_w_from_period_minus_one),
    E("induction_score", "wrong", "key_two_back",
      "Uses key i - period - 1, shifting the wrong way from the copy.", is_w_key_minus_one),
    E("induction_score", "wrong", "positive_diagonal_offset",
      "Takes the diagonal at offset +(period-1), above the main diagonal, instead of "
      "-(period-1).", is_w_positive_offset),
    E("induction_score", "wrong", "sum_not_mean",
      "Sums over the second-half queries instead of averaging.", is_w_sum),
    E("induction_score", "wrong", "whole_diagonal",
      "Averages the whole diagonal at offset 1 - period, which includes query period - 1.",
      is_w_whole_diagonal),
    E("induction_score", "wrong", "first_half_queries",
      "Averages over the first half's queries, whose key indices wrap around negative.",
      is_w_first_half_queries),
    E("induction_score", "right", "python_loop", None, is_r_loop),
    E("induction_score", "right", "diagonal_tail", None, is_r_diagonal_tail),
    E("induction_score", "right", "selection_mask", None, is_r_mask_sum),
]
