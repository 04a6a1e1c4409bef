"""Held-out catalogue, lesson 08 (what heads learn): previous_token_score, induction_score."""

import torch

from entry import Entry


# ============================================================ previous_token_score: wrong
def prev_offset_plus_one(weights):
    diag = torch.diagonal(weights, offset=1, dim1=-2, dim2=-1)
    return diag.float().mean(dim=-1).to(weights.dtype)


def prev_divides_by_n(weights):
    n = weights.shape[-1]
    below = torch.diagonal(weights, -1, 1, 2)  # (H, N-1)
    return below.float().sum(-1).div(n).to(weights.dtype)


def prev_default_diagonal_dims(weights):
    d = torch.diagonal(weights, -1)
    return d.to(torch.float32).mean(-1).to(weights.dtype)


def prev_keepdim(weights):
    H, N, _ = weights.shape
    i = torch.arange(1, N)
    picked = weights[:, i, i - 1].to(torch.float32)
    return picked.mean(dim=-1, keepdim=True).to(weights.dtype)


def prev_whole_lower_triangle(weights):
    n = weights.shape[-1]
    lower = torch.tril(weights.float(), diagonal=-1)
    return (lower.sum(dim=(-2, -1)) / (n - 1)).to(weights.dtype)


def prev_block_mean_no_diagonal(weights):
    sub = weights[:, 1:, :-1]  # queries 1.., keys ..N-2
    return sub.float().mean(dim=(1, 2)).to(weights.dtype)


# ============================================================ previous_token_score: right
def prev_python_loops(weights):
    heads, n, _ = weights.shape
    scores = []
    for h in range(heads):
        total = 0.0
        for i in range(1, n):
            total += float(weights[h, i, i - 1])
        scores.append(total / (n - 1))
    return torch.tensor(scores, dtype=torch.float64)


def prev_shifted_identity_einsum(weights):
    n = weights.shape[-1]
    shift = torch.zeros(n, n, dtype=torch.float64)
    shift[torch.arange(1, n), torch.arange(0, n - 1)] = 1.0  # ones just below the diagonal
    return torch.einsum("hij,ij->h", weights.double(), shift) / (n - 1)


# ============================================================ induction_score: wrong
def ind_key_is_copy(weights, period):
    diag = torch.diagonal(weights, offset=-period, dim1=1, dim2=2)  # (H, period)
    return diag.float().mean(-1).to(weights.dtype)


def ind_starts_one_early(weights, period):
    d = torch.diagonal(weights, offset=1 - period, dim1=-2, dim2=-1)  # (H, period + 1)
    return d.float().mean(-1).to(weights.dtype)


def ind_transposed_index(weights, period):
    n = 2 * period
    q = torch.arange(period, n)
    picked = weights[:, q - period + 1, q]
    return picked.float().mean(-1).to(weights.dtype)


def ind_mean_over_everything(weights, period):
    q = torch.arange(period, 2 * period)
    vals = weights[:, q, q - period + 1].float()
    return vals.mean().to(weights.dtype)


def ind_divides_by_n(weights, period):
    H = weights.shape[0]
    n = weights.shape[-1]
    out = torch.zeros(H, dtype=torch.float64)
    for i in range(period, 2 * period):
        out += weights[:, i, i - period + 1].double()
    return (out / n).to(weights.dtype)


def ind_double_fancy_index(weights, period):
    rows = torch.arange(period, 2 * period)
    cols = rows - period + 1
    picked = weights[:, rows, :][:, :, cols]  # (H, period, period)
    return picked.float().mean(dim=(1, 2)).to(weights.dtype)


# ============================================================ induction_score: right
def ind_loop_float64(weights, period):
    heads = weights.shape[0]
    result = torch.empty(heads, dtype=torch.float64)
    for h in range(heads):
        acc = 0.0
        for i in range(period, 2 * period):
            acc += weights[h, i, i - period + 1].item()
        result[h] = acc / period
    return result


def ind_gather(weights, period):
    h, n, _ = weights.shape
    second_half = weights[:, period:, :]  # (H, period, N)
    target = torch.arange(1, period + 1).view(1, period, 1).expand(h, period, 1)
    got = torch.gather(second_half, dim=2, index=target).squeeze(-1)  # (H, period)
    return got.to(torch.float32).sum(dim=1) / period


ENTRIES = [
    Entry("previous_token_score", "wrong", "offset_plus_one",
          "takes torch.diagonal with offset=+1, the weight on the NEXT key i+1, not on key i-1",
          prev_offset_plus_one),
    Entry("previous_token_score", "wrong", "divides_by_n",
          "sums the N-1 weights on key i-1 but divides by N, as if query 0 counted",
          prev_divides_by_n),
    Entry("previous_token_score", "wrong", "default_diagonal_dims",
          "calls torch.diagonal(weights, -1) without dim1/dim2, so it takes the diagonal of the "
          "(H, N) axes, not of each head's (N, N) pattern: wrong shape and values",
          prev_default_diagonal_dims),
    Entry("previous_token_score", "wrong", "keepdim",
          "averages with keepdim=True, so the result has shape (H, 1) instead of (H,)",
          prev_keepdim),
    Entry("previous_token_score", "wrong", "whole_lower_triangle",
          "sums everything below the diagonal (tril(-1): all earlier tokens) instead of the single "
          "diagonal just below it", prev_whole_lower_triangle),
    Entry("previous_token_score", "wrong", "block_mean_no_diagonal",
          "slices weights[:, 1:, :-1] and averages the whole block instead of its diagonal "
          "w[h, i, i-1]", prev_block_mean_no_diagonal),
    Entry("previous_token_score", "right", "python_loops_float64", None, prev_python_loops),
    Entry("previous_token_score", "right", "shifted_identity_einsum", None,
          prev_shifted_identity_einsum),
    Entry("induction_score", "wrong", "key_is_copy",
          "reads key i - period (the earlier copy of the token itself) instead of i - period + 1, "
          "the token that followed it", ind_key_is_copy),
    Entry("induction_score", "wrong", "starts_one_early",
          "averages the whole diagonal at offset 1 - period, period + 1 values, so query "
          "period - 1 (still in the first half) is included", ind_starts_one_early),
    Entry("induction_score", "wrong", "transposed_index",
          "swaps the query and key indices: weights[h, i - period + 1, i] instead of "
          "weights[h, i, i - period + 1]", ind_transposed_index),
    Entry("induction_score", "wrong", "mean_over_everything",
          "calls .mean() without dim, averaging over the heads too: a scalar instead of (H,)",
          ind_mean_over_everything),
    Entry("induction_score", "wrong", "divides_by_n",
          "sums the period weights of the second half but divides by N = 2 * period",
          ind_divides_by_n),
    Entry("induction_score", "wrong", "double_fancy_index",
          "indexes rows then columns in two steps (w[:, rows, :][:, :, cols]), which picks the "
          "whole period x period block, and averages it instead of its diagonal",
          ind_double_fancy_index),
    Entry("induction_score", "right", "loop_float64", None, ind_loop_float64),
    Entry("induction_score", "right", "gather", None, ind_gather),
]
