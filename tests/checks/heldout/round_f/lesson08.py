"""Lesson 08 (torch): previous_token_score, induction_score."""

import torch

from entry import Entry


def _acc(w):
    return torch.promote_types(w.dtype, torch.float32)


# ---------------------------------------------------------------- previous_token_score, wrong
def pts_next_token(weights):
    return torch.diagonal(weights, offset=1, dim1=-2, dim2=-1).to(_acc(weights)).mean(-1) \
        .to(weights.dtype)


def pts_divide_by_n(weights):
    n = weights.shape[-1]
    diag = torch.diagonal(weights, offset=-1, dim1=-2, dim2=-1).to(_acc(weights))
    return (diag.sum(-1) / n).to(weights.dtype)


def pts_mean_over_heads(weights):
    diag = torch.diagonal(weights, offset=-1, dim1=-2, dim2=-1).to(_acc(weights))
    return diag.mean(dim=0).to(weights.dtype)


def pts_self_diagonal(weights):
    return torch.diagonal(weights, offset=0, dim1=-2, dim2=-1).to(_acc(weights)).mean(-1) \
        .to(weights.dtype)


def pts_loop_skips_last(weights):
    h, n, _ = weights.shape
    total = torch.zeros(h, dtype=_acc(weights))
    count = 0
    for i in range(1, n - 1):
        total += weights[:, i, i - 1].to(total.dtype)
        count += 1
    return (total / max(count, 1)).to(weights.dtype)


def pts_sum(weights):
    return torch.diagonal(weights, offset=-1, dim1=-2, dim2=-1).to(_acc(weights)).sum(-1) \
        .to(weights.dtype)


# ---------------------------------------------------------------- previous_token_score, right
def pts_gather(weights):
    h, n, _ = weights.shape
    rows = torch.arange(1, n)
    picked = weights[:, rows, rows - 1].double()  # (H, N-1)
    return (picked.sum(dim=1) / (n - 1)).to(weights.dtype)


def pts_shifted_eye_mask(weights):
    h, n, _ = weights.shape
    sub = torch.eye(n, dtype=torch.float64).roll(-1, dims=1)  # sub[i, i-1] = 1 for i >= 1
    sub[0] = 0.0
    return ((weights.double() * sub).sum(dim=(1, 2)) / (n - 1)).to(weights.dtype)


# ---------------------------------------------------------------- induction_score, wrong
def _diag_mean(weights, offset, first, last=None):
    d = torch.diagonal(weights, offset=offset, dim1=-2, dim2=-1)[:, first:last]
    return d.to(_acc(weights)).mean(-1).to(weights.dtype)


def ind_duplicate_token(weights, period):
    return _diag_mean(weights, -period, 0)  # w[i, i - period] for i >= period


def ind_includes_previous_query(weights, period):
    return _diag_mean(weights, 1 - period, 0)  # queries period-1 .. 2*period-1


def ind_offset_sign(weights, period):
    return _diag_mean(weights, period - 1, 1)


def ind_divides_by_n(weights, period):
    n = weights.shape[-1]
    d = torch.diagonal(weights, offset=1 - period, dim1=-2, dim2=-1)[:, 1:]
    return (d.to(_acc(weights)).sum(-1) / n).to(weights.dtype)


def ind_transposed_index(weights, period):
    h, n, _ = weights.shape
    vals = [weights[:, i - period + 1, i] for i in range(period, 2 * period)]
    return torch.stack(vals, dim=1).to(_acc(weights)).mean(-1).to(weights.dtype)


def ind_last_query_dropped(weights, period):
    vals = [weights[:, i, i - period + 1] for i in range(period, 2 * period - 1)]
    if not vals:
        return torch.zeros(weights.shape[0], dtype=weights.dtype)
    return torch.stack(vals, dim=1).to(_acc(weights)).mean(-1).to(weights.dtype)


# ---------------------------------------------------------------- induction_score, right
def ind_advanced_index(weights, period):
    queries = torch.arange(period, 2 * period)
    keys = queries - period + 1
    return weights[:, queries, keys].double().mean(dim=-1).to(weights.dtype)


def ind_loop(weights, period):
    h = weights.shape[0]
    out = []
    for head in range(h):
        total = 0.0
        for i in range(period, 2 * period):
            total += float(weights[head, i, i - period + 1])
        out.append(total / period)
    return torch.tensor(out, dtype=torch.float64).to(weights.dtype)


E = Entry
ENTRIES = [
    E("previous_token_score", "wrong", "next_token_diagonal",
      "Reads the diagonal at offset +1 (key i+1, the next token) instead of offset -1.",
      pts_next_token),
    E("previous_token_score", "wrong", "divides_by_n",
      "Divides the sum of the N-1 previous-token weights by N instead of N-1.",
      pts_divide_by_n),
    E("previous_token_score", "wrong", "averages_over_heads",
      "Averages over the head axis instead of over the queries, returning (N-1,) instead of "
      "(H,).", pts_mean_over_heads),
    E("previous_token_score", "wrong", "main_diagonal",
      "Takes the main diagonal (the weight on the query's own position) instead of the one "
      "below it.", pts_self_diagonal),
    E("previous_token_score", "wrong", "loop_skips_last_query",
      "Loops over range(1, N - 1), leaving out the last query.", pts_loop_skips_last),
    E("previous_token_score", "wrong", "sum_not_mean",
      "Returns the sum of the previous-token weights instead of their mean.", pts_sum),
    E("previous_token_score", "right", "fancy_index_float64", None, pts_gather),
    E("previous_token_score", "right", "shifted_identity_mask", None, pts_shifted_eye_mask),

    E("induction_score", "wrong", "copy_itself_not_next",
      "Reads key i - period (the earlier copy of the token itself) instead of i - period + 1, "
      "the token that followed it.", ind_duplicate_token),
    E("induction_score", "wrong", "includes_query_period_minus_1",
      "Keeps the whole diagonal at offset 1 - period, which also includes query period - 1 "
      "(key 0), one query too many.", ind_includes_previous_query),
    E("induction_score", "wrong", "diagonal_offset_sign",
      "Uses the diagonal offset period - 1 instead of 1 - period, reading keys after the "
      "query instead of before it.", ind_offset_sign),
    E("induction_score", "wrong", "divides_by_n",
      "Divides the sum over the period queries by N = 2 * period instead of by period.",
      ind_divides_by_n),
    E("induction_score", "wrong", "query_key_indices_swapped",
      "Indexes weights[h, i - period + 1, i], swapping the query and key indices.",
      ind_transposed_index),
    E("induction_score", "wrong", "last_query_dropped",
      "Loops over range(period, 2 * period - 1), leaving out the last query.",
      ind_last_query_dropped),
    E("induction_score", "right", "advanced_indexing", None, ind_advanced_index),
    E("induction_score", "right", "python_loop", None, ind_loop),
]
