"""Lesson 08 (what heads learn): previous_token_score, induction_score, torch."""

import torch

from entry import Entry


def _f(w):
    return w.to(torch.float64)


# ---------------------------------------------------------------- previous_token_score
def pts_superdiagonal(weights):
    return torch.diagonal(_f(weights), offset=1, dim1=-2, dim2=-1).mean(-1).to(weights.dtype)


def pts_divides_by_n(weights):
    n = weights.shape[-1]
    diag = torch.diagonal(_f(weights), offset=-1, dim1=-2, dim2=-1)
    return (diag.sum(-1) / n).to(weights.dtype)


def pts_loop_stops_early(weights):
    h, n, _ = weights.shape
    w = _f(weights)
    total = torch.zeros(h, dtype=torch.float64)
    for i in range(1, n - 1):
        total += w[:, i, i - 1]
    return (total / (n - 1)).to(weights.dtype)


def pts_mean_over_heads(weights):
    return torch.diagonal(_f(weights), offset=-1, dim1=-2, dim2=-1).mean(0).to(weights.dtype)


def pts_default_diagonal_dims(weights):
    return torch.diagonal(_f(weights), offset=-1).mean(-1).to(weights.dtype)


def pts_roll_wraps(weights):
    rolled = torch.roll(_f(weights), shifts=1, dims=-1)  # rolled[h, i, j] = w[h, i, j - 1]
    return torch.diagonal(rolled, dim1=-2, dim2=-1).mean(-1).to(weights.dtype)


def pts_loop(weights):
    h, n, _ = weights.shape
    out = []
    for head in range(h):
        vals = [float(weights[head, i, i - 1]) for i in range(1, n)]
        out.append(sum(vals) / len(vals))
    return torch.tensor(out, dtype=torch.float64).to(weights.dtype)


def pts_shifted_eye_mask(weights):
    n = weights.shape[-1]
    sel = torch.ones(n - 1, dtype=torch.float64).diag(-1)  # (N, N), ones at (i, i - 1)
    return ((_f(weights) * sel).sum((-2, -1)) / (n - 1)).to(weights.dtype)


# ---------------------------------------------------------------- induction_score
def _idx_mean(weights, rows, cols):
    return _f(weights)[:, rows, cols].mean(-1).to(weights.dtype)


def ind_forgets_plus_one(weights, period):
    i = torch.arange(period, 2 * period)
    return _idx_mean(weights, i, i - period)


def ind_starts_one_late(weights, period):
    i = torch.arange(period + 1, 2 * period)
    if len(i) == 0:
        return torch.zeros(weights.shape[0], dtype=weights.dtype)
    return _idx_mean(weights, i, i - period + 1)


def ind_minus_one(weights, period):
    i = torch.arange(period, 2 * period)
    return _idx_mean(weights, i, i - period - 1)


def ind_offset_sign(weights, period):
    diag = torch.diagonal(_f(weights), offset=period - 1, dim1=-2, dim2=-1)
    return diag[:, 1:].mean(-1).to(weights.dtype)


def ind_drops_last(weights, period):
    diag = torch.diagonal(_f(weights), offset=1 - period, dim1=-2, dim2=-1)
    return diag[:, :-1].mean(-1).to(weights.dtype)


def ind_divides_by_n(weights, period):
    i = torch.arange(period, 2 * period)
    return (_f(weights)[:, i, i - period + 1].sum(-1) / (2 * period)).to(weights.dtype)


def ind_advanced_index(weights, period):
    q_idx = torch.arange(period, 2 * period)
    k_idx = q_idx - (period - 1)
    return _f(weights)[:, q_idx, k_idx].mean(dim=1).to(weights.dtype)


def ind_loop(weights, period):
    scores = []
    for head in weights.double():
        s = 0.0
        for i in range(period, 2 * period):
            s += head[i, i - period + 1].item()
        scores.append(s / period)
    return torch.tensor(scores, dtype=weights.dtype)


E = "previous_token_score"
ENTRIES = [
    Entry(E, "wrong", "superdiagonal", "It reads the diagonal at offset +1 (the next token) "
          "instead of -1 (the previous token).", pts_superdiagonal),
    Entry(E, "wrong", "divides_by_n", "It sums the N - 1 previous-token weights but divides "
          "by N.", pts_divides_by_n),
    Entry(E, "wrong", "loop_stops_early", "The loop runs range(1, n - 1), leaving out the last "
          "query, while still dividing by N - 1.", pts_loop_stops_early),
    Entry(E, "wrong", "mean_over_heads", "The mean is taken over dim 0 (heads) instead of over "
          "the queries.", pts_mean_over_heads),
    Entry(E, "wrong", "default_diagonal_dims", "torch.diagonal's default dims are 0 and 1, so "
          "without dim1=-2, dim2=-1 it takes a diagonal across heads and queries.",
          pts_default_diagonal_dims),
    Entry(E, "wrong", "roll_wraps_query_zero", "torch.roll wraps around, so query 0 is counted "
          "with its weight on the last key and the mean runs over N queries, not i >= 1.",
          pts_roll_wraps),
    Entry(E, "right", "python_loop", None, pts_loop),
    Entry(E, "right", "shifted_identity_mask", None, pts_shifted_eye_mask),
]

E = "induction_score"
ENTRIES += [
    Entry(E, "wrong", "forgets_plus_one", "It reads key i - period (the earlier copy of the "
          "token itself) instead of i - period + 1 (the token after it).", ind_forgets_plus_one),
    Entry(E, "wrong", "starts_at_period_plus_one", "The queries start at period + 1 instead of "
          "period, leaving out the first query of the second half.", ind_starts_one_late),
    Entry(E, "wrong", "minus_one", "It reads key i - period - 1 instead of i - period + 1, a "
          "sign slip on the +1.", ind_minus_one),
    Entry(E, "wrong", "offset_sign", "It takes the diagonal at offset period - 1 (above the "
          "main diagonal) instead of 1 - period.", ind_offset_sign),
    Entry(E, "wrong", "drops_last_entry", "From the offset diagonal it drops the last entry "
          "instead of the first, so it averages queries period - 1 .. 2 period - 2.",
          ind_drops_last),
    Entry(E, "wrong", "divides_by_n", "It sums over the period queries but divides by N = "
          "2 * period.", ind_divides_by_n),
    Entry(E, "right", "advanced_indexing", None, ind_advanced_index),
    Entry(E, "right", "python_loop", None, ind_loop),
]
