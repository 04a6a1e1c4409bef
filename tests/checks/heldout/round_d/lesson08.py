"""Round d, lesson 08 (torch): previous_token_score, induction_score."""

import torch

from entry import Entry


# ----------------------------------------------------------------------------- previous_token_score
def pts_next_token(weights):
    return torch.diagonal(weights, offset=1, dim1=-2, dim2=-1).mean(-1)


def pts_divides_by_n(weights):
    n = weights.shape[-1]
    return torch.diagonal(weights, offset=-1, dim1=-2, dim2=-1).sum(-1) / n


def pts_mean_over_heads(weights):
    return torch.diagonal(weights, offset=-1, dim1=-2, dim2=-1).mean(0)


def pts_sum(weights):
    return torch.diagonal(weights, offset=-1, dim1=-2, dim2=-1).sum(-1)


def pts_submatrix_mean(weights):
    return weights[:, 1:, :-1].mean(dim=(-2, -1))


def pts_loop(weights):
    h, n, _ = weights.shape
    out = torch.zeros(h, dtype=torch.float64, device=weights.device)
    for i in range(1, n):
        out += weights[:, i, i - 1].double()
    return (out / (n - 1)).to(weights.dtype)


def pts_gather(weights):
    h, n, _ = weights.shape
    rows = torch.arange(1, n, device=weights.device)
    picked = weights[:, rows, rows - 1].float()
    return picked.mean(-1).to(weights.dtype)


# ----------------------------------------------------------------------------- induction_score
def ind_same_token(weights, period):
    h, n, _ = weights.shape
    i = torch.arange(period, 2 * period)
    return weights[:, i, i - period].mean(-1)


def ind_includes_period_minus_one(weights, period):
    return torch.diagonal(weights, offset=1 - period, dim1=-2, dim2=-1).mean(-1)


def ind_negative_index_wraps(weights, period):
    vals = [weights[:, i, i - period - 1] for i in range(period, 2 * period)]
    return torch.stack(vals, -1).mean(-1)


def ind_mean_over_heads(weights, period):
    i = torch.arange(period, 2 * period)
    return weights[:, i, i - period + 1].mean(0)


def ind_drops_last_query(weights, period):
    vals = [weights[:, i, i - period + 1] for i in range(period, 2 * period - 1)]
    if not vals:
        return torch.zeros(weights.shape[0], dtype=weights.dtype)
    return torch.stack(vals, -1).mean(-1)


def ind_loop(weights, period):
    h, n, _ = weights.shape
    if n != 2 * period:
        raise ValueError(f"weights.shape={tuple(weights.shape)} needs N = 2 * period={2 * period}")
    total = torch.zeros(h, dtype=torch.float64, device=weights.device)
    for i in range(period, 2 * period):
        total += weights[:, i, i - period + 1].double()
    return (total / period).to(weights.dtype)


def ind_gather(weights, period):
    h, n, _ = weights.shape
    q = torch.arange(period, n, device=weights.device)
    idx = (q - period + 1)[None, :, None].expand(h, period, 1)
    picked = torch.gather(weights[:, period:, :].float(), 2, idx)  # (H, period, 1)
    return picked.squeeze(-1).mean(-1).to(weights.dtype)


ENTRIES = [
    Entry("previous_token_score", "wrong", "next_token_diagonal",
          "Reads the diagonal above the main one (key i + 1) instead of below it (key i - 1).",
          pts_next_token),
    Entry("previous_token_score", "wrong", "divides_by_n",
          "Divides the sum by N instead of N - 1, counting query 0, which has no previous token.",
          pts_divides_by_n),
    Entry("previous_token_score", "wrong", "averages_over_heads",
          "Averages over the head axis instead of the query axis, returning (N - 1,) instead of (H,).",
          pts_mean_over_heads),
    Entry("previous_token_score", "wrong", "sum_not_mean",
          "Sums the previous-token weights instead of averaging them.",
          pts_sum),
    Entry("previous_token_score", "wrong", "submatrix_mean",
          "Averages the whole block weights[:, 1:, :-1] instead of only its diagonal.",
          pts_submatrix_mean),
    Entry("previous_token_score", "right", "python_loop_float64", None, pts_loop),
    Entry("previous_token_score", "right", "advanced_indexing", None, pts_gather),

    Entry("induction_score", "wrong", "same_token_not_next",
          "Reads key i - period (the earlier copy of the token itself) instead of key i - period + 1 (the token after it).",
          ind_same_token),
    Entry("induction_score", "wrong", "includes_query_period_minus_one",
          "Averages the whole diagonal at offset 1 - period, including query period - 1, which lies in the first half.",
          ind_includes_period_minus_one),
    Entry("induction_score", "wrong", "off_by_one_negative_index",
          "Uses key i - period - 1, which for i = period is index -1 and silently wraps to the last key.",
          ind_negative_index_wraps),
    Entry("induction_score", "wrong", "averages_over_heads",
          "Averages over the head axis instead of over the queries, returning (period,) instead of (H,).",
          ind_mean_over_heads),
    Entry("induction_score", "wrong", "drops_last_query",
          "Loops over queries range(period, 2 * period - 1), leaving out the last query.",
          ind_drops_last_query),
    Entry("induction_score", "right", "python_loop_float64", None, ind_loop),
    Entry("induction_score", "right", "gather", None, ind_gather),
]
