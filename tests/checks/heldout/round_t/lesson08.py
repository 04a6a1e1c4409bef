"""Held-out catalogue, lesson 08 (heads): previous_token_score, induction_score."""

import numpy as np
import torch

from entry import Entry

EX_PREV = "previous_token_score"
EX_IND = "induction_score"


# ============================================================================ previous_token_score
def prev_right_loop(weights):
    # plain loop over the queries, summed in float64
    H, N, _ = weights.shape
    total = torch.zeros(H, dtype=torch.float64, device=weights.device)
    for i in range(1, N):
        total += weights[:, i, i - 1].to(torch.float64)
    return (total / (N - 1)).to(weights.dtype)


def prev_right_shifted_eye(weights):
    # mask with the sub-diagonal of ones, sum it out, divide by how many ones there are
    n = weights.shape[-1]
    sub = torch.diag(torch.ones(n - 1, dtype=torch.float64, device=weights.device), diagonal=-1)  # (N, N)
    picked = (weights.to(torch.float64) * sub).sum(dim=(-2, -1))
    return (picked / sub.sum()).to(weights.dtype)


def prev_wrong_next_token(weights):
    diag = torch.diagonal(weights, offset=1, dim1=-2, dim2=-1)
    return diag.float().mean(dim=-1).to(weights.dtype)


def prev_wrong_divide_by_n(weights):
    n = weights.shape[1]
    diag = torch.diagonal(weights, offset=-1, dim1=1, dim2=2).float()
    return (diag.sum(dim=-1) / n).to(weights.dtype)


def prev_wrong_default_diagonal_dims(weights):
    diag = torch.diagonal(weights, -1)
    return diag.float().mean(-1).to(weights.dtype)


def prev_wrong_negative_index_wraps(weights):
    idx = torch.arange(weights.shape[1])
    return weights[:, idx, idx - 1].float().mean(dim=-1).to(weights.dtype)


def prev_wrong_sum_not_mean(weights):
    on_prev = weights.diagonal(offset=-1, dim1=-2, dim2=-1)
    return on_prev.float().sum(dim=-1).to(weights.dtype)


def prev_wrong_keepdim(weights):
    on_prev = weights.diagonal(offset=-1, dim1=-2, dim2=-1)
    return on_prev.float().mean(dim=-1, keepdim=True).to(weights.dtype)


# ============================================================================ induction_score
def ind_right_loop(weights, period):
    # one query at a time over the second copy, accumulated in float64
    heads = weights.shape[0]
    acc = [0.0] * heads
    for i in range(period, 2 * period):
        j = i - period + 1
        for h in range(heads):
            acc[h] += float(weights[h, i, j])
    return torch.tensor([a / period for a in acc], dtype=torch.float64).to(weights.dtype)


def ind_right_numpy_mask(weights, period):
    # a 0/1 mask over (query, key) pairs in numpy, then a masked mean
    w = weights.detach().to(torch.float64).cpu().numpy()
    n = w.shape[-1]
    mask = np.zeros((n, n))
    rows = np.arange(period, 2 * period)
    mask[rows, rows - period + 1] = 1.0
    score = (w * mask).sum(axis=(1, 2)) / mask.sum()
    return torch.from_numpy(score).to(weights.dtype)


def ind_wrong_same_token(weights, period):
    diag = torch.diagonal(weights, offset=-period, dim1=-2, dim2=-1)  # (H, period)
    return diag.float().mean(-1).to(weights.dtype)


def ind_wrong_offset_sign(weights, period):
    diag = torch.diagonal(weights, offset=period - 1, dim1=-2, dim2=-1)  # (H, period + 1)
    return diag[:, 1:].float().mean(-1).to(weights.dtype)


def ind_wrong_drops_last_query(weights, period):
    diag = torch.diagonal(weights, offset=1 - period, dim1=-2, dim2=-1)  # (H, period + 1)
    return diag[:, :-1].float().mean(-1).to(weights.dtype)


def ind_wrong_mean_over_heads(weights, period):
    rows = torch.arange(period, 2 * period)
    picked = weights[:, rows, rows - period + 1]  # (H, period)
    return picked.float().mean(dim=0).to(weights.dtype)


def ind_wrong_floor_division(weights, period):
    rows = torch.arange(period, 2 * period)
    picked = weights[:, rows, rows - period + 1].float()
    return (picked.sum(dim=1) // period).to(weights.dtype)


def ind_wrong_block_mean(weights, period):
    block = weights[:, period:, 1:period + 1]  # (H, period, period)
    return block.float().mean(dim=(-2, -1)).to(weights.dtype)


ENTRIES = [
    Entry(EX_PREV, "right", "loop_float64", None, prev_right_loop),
    Entry(EX_PREV, "right", "subdiagonal_mask", None, prev_right_shifted_eye),
    Entry(EX_PREV, "wrong", "next_token_diagonal",
          "Takes the diagonal at offset +1 (key i + 1, the next token) instead of -1 (key i - 1).",
          prev_wrong_next_token),
    Entry(EX_PREV, "wrong", "divides_by_n",
          "Sums the N - 1 previous-token weights but divides by N, as if query 0 counted too.",
          prev_wrong_divide_by_n),
    Entry(EX_PREV, "wrong", "diagonal_default_dims",
          "Calls torch.diagonal(weights, -1) with its default dims (0, 1), so the diagonal runs "
          "over the head and query axes instead of query and key: wrong shape and values.",
          prev_wrong_default_diagonal_dims),
    Entry(EX_PREV, "wrong", "negative_index_wraps",
          "Indexes weights[:, i, i - 1] for every i from 0: for query 0 the index -1 wraps round "
          "to the last key, so a spurious term enters and the mean runs over N queries.",
          prev_wrong_negative_index_wraps),
    Entry(EX_PREV, "wrong", "sum_not_mean",
          "Sums the weights on key i - 1 over the queries instead of averaging them.",
          prev_wrong_sum_not_mean),
    Entry(EX_PREV, "wrong", "keepdim_shape",
          "Averages with keepdim=True, returning shape (H, 1) instead of (H,).",
          prev_wrong_keepdim),
    Entry(EX_IND, "right", "loop_python_floats", None, ind_right_loop),
    Entry(EX_IND, "right", "numpy_pair_mask", None, ind_right_numpy_mask),
    Entry(EX_IND, "wrong", "earlier_copy_not_successor",
          "Reads key i - period (the earlier copy of the same token) instead of key "
          "i - period + 1, the token that followed it.",
          ind_wrong_same_token),
    Entry(EX_IND, "wrong", "offset_sign_flipped",
          "Takes the diagonal at offset period - 1 (keys after the query) instead of 1 - period: "
          "the sign of the offset is flipped.",
          ind_wrong_offset_sign),
    Entry(EX_IND, "wrong", "diagonal_slice_shifted",
          "Keeps diagonal[:, :-1] instead of diagonal[:, 1:]: averages queries period - 1 .. "
          "2 period - 2, one too early, including a query of the first half.",
          ind_wrong_drops_last_query),
    Entry(EX_IND, "wrong", "mean_over_heads",
          "Averages over axis 0 (the heads) instead of the queries, returning one value per "
          "query (shape (period,)) instead of one per head.",
          ind_wrong_mean_over_heads),
    Entry(EX_IND, "wrong", "floor_division_mean",
          "Divides the sum by period with //, which floors the mean (to 0 for any imperfect head).",
          ind_wrong_floor_division),
    Entry(EX_IND, "wrong", "whole_block_mean",
          "Averages the whole (period x period) block weights[:, period:, 1:period + 1] instead "
          "of only its diagonal entries weights[h, i, i - period + 1].",
          ind_wrong_block_mean),
]
