"""Round c, lesson 08: previous_token_score, induction_score (torch)."""

import torch

from entry import Entry


def _acc(w):
    return torch.promote_types(w.dtype, torch.float32)


# ------------------------------------------------------------------ previous_token_score
def prev_next_token(weights):
    d = torch.diagonal(weights, offset=1, dim1=-2, dim2=-1)
    return d.to(_acc(weights)).mean(-1).to(weights.dtype)


def prev_divides_by_n(weights):
    d = torch.diagonal(weights, offset=-1, dim1=-2, dim2=-1)
    return (d.to(_acc(weights)).sum(-1) / weights.shape[-1]).to(weights.dtype)


def prev_mean_over_heads(weights):
    d = torch.diagonal(weights, offset=-1, dim1=-2, dim2=-1)
    return d.to(_acc(weights)).mean(0).to(weights.dtype)


def prev_default_dims(weights):
    d = torch.diagonal(weights, -1)
    return d.to(_acc(weights)).mean(-1).to(weights.dtype)


def prev_main_diagonal(weights):
    d = torch.diagonal(weights, offset=0, dim1=-2, dim2=-1)
    return d.to(_acc(weights)).mean(-1).to(weights.dtype)


def prev_sum(weights):
    d = torch.diagonal(weights, offset=-1, dim1=-2, dim2=-1)
    return d.to(_acc(weights)).sum(-1).to(weights.dtype)


def prev_loop(weights):
    h, n, _ = weights.shape
    out = torch.zeros(h, dtype=torch.float64)
    for i in range(1, n):
        out += weights[:, i, i - 1].double()
    return (out / (n - 1)).to(weights.dtype)


def prev_gather(weights):
    h, n, _ = weights.shape
    rows = torch.arange(1, n)
    picked = weights[:, rows, rows - 1]  # (H, N - 1)
    return picked.float().mean(dim=1).to(weights.dtype)


# ------------------------------------------------------------------ induction_score
def _diag_mean(weights, offset, lo, hi):
    d = torch.diagonal(weights, offset=offset, dim1=-2, dim2=-1)
    return d[:, lo:hi].to(_acc(weights)).mean(-1).to(weights.dtype)


def ind_earlier_copy(weights, period):
    # w[h, i, i - period] for i >= period: entries 0 .. period - 1 of the offset -period diagonal
    return _diag_mean(weights, -period, 0, period)


def ind_first_half_shift(weights, period):
    # entries 0 .. period - 1 of the offset 1 - period diagonal: queries period - 1 .. 2p - 2
    return _diag_mean(weights, 1 - period, 0, period)


def ind_two_back(weights, period):
    # key i - period - 1 (for i >= period + 1)
    d = torch.diagonal(weights, offset=-period - 1, dim1=-2, dim2=-1)
    return d.to(_acc(weights)).mean(-1).to(weights.dtype)


def ind_divides_by_n(weights, period):
    d = torch.diagonal(weights, offset=1 - period, dim1=-2, dim2=-1)[:, 1:]
    return (d.to(_acc(weights)).sum(-1) / weights.shape[-1]).to(weights.dtype)


def ind_strictly_after_period(weights, period):
    return _diag_mean(weights, 1 - period, 2, period + 1)


def ind_sum(weights, period):
    d = torch.diagonal(weights, offset=1 - period, dim1=-2, dim2=-1)[:, 1:]
    return d.to(_acc(weights)).sum(-1).to(weights.dtype)


def ind_loop(weights, period):
    h = weights.shape[0]
    total = torch.zeros(h, dtype=torch.float64)
    for i in range(period, 2 * period):
        total += weights[:, i, i - period + 1].double()
    return (total / period).to(weights.dtype)


def ind_gather(weights, period):
    queries = torch.arange(period, 2 * period)
    keys = queries - period + 1
    idx = keys.view(1, -1, 1).expand(weights.shape[0], -1, 1)
    picked = weights[:, period:].gather(2, idx).squeeze(-1)  # (H, period)
    return picked.double().mean(-1).to(weights.dtype)


ENTRIES = [
    Entry("previous_token_score", "wrong", "next_token", "Reads the diagonal at offset +1 (key i+1, the next token) instead of -1 (key i-1).", prev_next_token),
    Entry("previous_token_score", "wrong", "divides_by_n", "Divides the sum by N instead of by the N-1 queries that have a previous token.", prev_divides_by_n),
    Entry("previous_token_score", "wrong", "mean_over_heads", "Averages over the head axis instead of over the queries, returning one value per position instead of per head.", prev_mean_over_heads),
    Entry("previous_token_score", "wrong", "diagonal_default_dims", "Calls torch.diagonal(weights, -1) with the default dims 0 and 1, taking a diagonal across heads and queries instead of queries and keys.", prev_default_dims),
    Entry("previous_token_score", "wrong", "main_diagonal", "Reads the main diagonal (each token attending to itself) instead of the previous token.", prev_main_diagonal),
    Entry("previous_token_score", "wrong", "sum_not_mean", "Sums the weights on the previous token instead of averaging them.", prev_sum),
    Entry("previous_token_score", "right", "loop", None, prev_loop),
    Entry("previous_token_score", "right", "fancy_indexing", None, prev_gather),
    Entry("induction_score", "wrong", "earlier_copy", "Reads the weight on key i - period (the earlier copy of the token itself) instead of i - period + 1 (the token that followed it).", ind_earlier_copy),
    Entry("induction_score", "wrong", "query_range_shifted", "Averages over queries period-1 .. 2*period-2 instead of period .. 2*period-1 (off by one in the query range).", ind_first_half_shift),
    Entry("induction_score", "wrong", "key_two_back", "Reads key i - period - 1 instead of i - period + 1 (sign slip on the +1).", ind_two_back),
    Entry("induction_score", "wrong", "divides_by_n", "Divides by N = 2*period instead of by the period queries of the second half.", ind_divides_by_n),
    Entry("induction_score", "wrong", "skips_first_query", "Starts the average at query period+1, dropping query period (and giving NaN for period 1).", ind_strictly_after_period),
    Entry("induction_score", "wrong", "sum_not_mean", "Sums the weights instead of averaging them.", ind_sum),
    Entry("induction_score", "right", "loop", None, ind_loop),
    Entry("induction_score", "right", "gather", None, ind_gather),
]
