"""Lesson 08 (torch): previous_token_score, induction_score."""

import torch

from entry import Entry


def _acc(w):
    return torch.promote_types(w.dtype, torch.float32)


# ------------------------------------------------------------------ previous_token_score, wrong
def prev_next_token(weights):
    d = torch.diagonal(weights, offset=1, dim1=-2, dim2=-1)
    return d.to(_acc(weights)).mean(-1).to(weights.dtype)


def prev_divides_by_n(weights):
    d = torch.diagonal(weights, offset=-1, dim1=-2, dim2=-1)
    return (d.to(_acc(weights)).sum(-1) / weights.shape[-1]).to(weights.dtype)


def prev_mean_over_heads(weights):
    d = torch.diagonal(weights, offset=-1, dim1=-2, dim2=-1)
    return d.to(_acc(weights)).mean(0).to(weights.dtype)


def prev_block_mean(weights):
    return weights[:, 1:, :-1].to(_acc(weights)).mean(dim=(-2, -1)).to(weights.dtype)


def prev_loop_short(weights):
    h, n, _ = weights.shape
    vals = [weights[:, i, i - 1] for i in range(1, n - 1)]
    if not vals:
        return torch.full((h,), float("nan"), dtype=weights.dtype)
    return torch.stack(vals, -1).to(_acc(weights)).mean(-1).to(weights.dtype)


def prev_sum(weights):
    d = torch.diagonal(weights, offset=-1, dim1=-2, dim2=-1)
    return d.to(_acc(weights)).sum(-1).to(weights.dtype)


# ------------------------------------------------------------------ previous_token_score, right
def prev_gather(weights):
    h, n, _ = weights.shape
    rows = torch.arange(1, n)
    return weights[:, rows, rows - 1].double().mean(-1).to(weights.dtype)


def prev_loop(weights):
    h, n, _ = weights.shape
    out = torch.zeros(h, dtype=torch.float64)
    for head in range(h):
        out[head] = sum(float(weights[head, i, i - 1]) for i in range(1, n)) / (n - 1)
    return out.to(weights.dtype)


# ------------------------------------------------------------------ induction_score, wrong
def ind_copy_itself(weights, period):
    d = torch.diagonal(weights, offset=-period, dim1=-2, dim2=-1)
    return d.to(_acc(weights)).mean(-1).to(weights.dtype)


def ind_slice_wrong_end(weights, period):
    d = torch.diagonal(weights, offset=1 - period, dim1=-2, dim2=-1)
    return d[:, :-1].to(_acc(weights)).mean(-1).to(weights.dtype)


def ind_whole_diagonal(weights, period):
    d = torch.diagonal(weights, offset=1 - period, dim1=-2, dim2=-1)
    return d.to(_acc(weights)).mean(-1).to(weights.dtype)


def ind_positive_offset(weights, period):
    d = torch.diagonal(weights, offset=period - 1, dim1=-2, dim2=-1)
    return d[:, : period].to(_acc(weights)).mean(-1).to(weights.dtype)


def ind_divides_by_n(weights, period):
    d = torch.diagonal(weights, offset=1 - period, dim1=-2, dim2=-1)
    return (d[:, 1:].to(_acc(weights)).sum(-1) / weights.shape[-1]).to(weights.dtype)


def ind_key_query_swapped(weights, period):
    vals = [weights[:, i - period + 1, i] for i in range(period, 2 * period)]
    return torch.stack(vals, -1).to(_acc(weights)).mean(-1).to(weights.dtype)


# ------------------------------------------------------------------ induction_score, right
def ind_loop(weights, period):
    h = weights.shape[0]
    out = torch.zeros(h, dtype=torch.float64)
    for i in range(period, 2 * period):
        out += weights[:, i, i - period + 1].double()
    return (out / period).to(weights.dtype)


def ind_gather(weights, period):
    q = torch.arange(period, 2 * period)
    idx = (q - period + 1)[None, :, None].expand(weights.shape[0], period, 1)
    picked = torch.gather(weights[:, period:, :].float(), 2, idx)
    return picked.squeeze(-1).mean(-1).to(weights.dtype) if weights.dtype != torch.float64 \
        else torch.gather(weights[:, period:, :], 2, idx).squeeze(-1).mean(-1)


ENTRIES = [
    Entry("previous_token_score", "wrong", "next_token_diagonal", "Reads the diagonal at offset "
          "+1 (key i+1) instead of -1 (key i-1).", prev_next_token),
    Entry("previous_token_score", "wrong", "divides_by_n", "Sums the N-1 previous-token weights "
          "but divides by N instead of N-1 (as if query 0 counted).", prev_divides_by_n),
    Entry("previous_token_score", "wrong", "mean_over_heads_axis", "Averages the diagonal over "
          "the head axis instead of over the queries, returning (N-1,) instead of (H,).",
          prev_mean_over_heads),
    Entry("previous_token_score", "wrong", "mean_of_whole_block", "Averages the whole "
          "sub-matrix weights[:, 1:, :-1] instead of only its diagonal.", prev_block_mean),
    Entry("previous_token_score", "wrong", "loop_misses_last_query", "Loops i over "
          "range(1, N - 1), leaving out the last query.", prev_loop_short),
    Entry("previous_token_score", "wrong", "sum_not_mean", "Sums the previous-token weights "
          "instead of averaging them.", prev_sum),
    Entry("previous_token_score", "right", "advanced_indexing_float64", None, prev_gather),
    Entry("previous_token_score", "right", "python_loop", None, prev_loop),

    Entry("induction_score", "wrong", "attends_to_copy_itself", "Reads key i - period (the "
          "earlier copy of the token) instead of key i - period + 1 (the token after it).",
          ind_copy_itself),
    Entry("induction_score", "wrong", "diagonal_sliced_wrong_end", "Drops the last entry of the "
          "offset diagonal instead of the first, averaging queries period-1 .. 2*period-2.",
          ind_slice_wrong_end),
    Entry("induction_score", "wrong", "keeps_query_period_minus_one", "Averages the whole "
          "offset diagonal, including query period - 1 from the first half.",
          ind_whole_diagonal),
    Entry("induction_score", "wrong", "positive_offset", "Takes the diagonal at offset "
          "period - 1 (keys after the query) instead of 1 - period.", ind_positive_offset),
    Entry("induction_score", "wrong", "divides_by_n", "Sums over the period queries of the "
          "second half but divides by N = 2 * period.", ind_divides_by_n),
    Entry("induction_score", "wrong", "indexes_key_then_query", "Indexes weights as "
          "[head, key, query] instead of [head, query, key].", ind_key_query_swapped),
    Entry("induction_score", "right", "loop_float64", None, ind_loop),
    Entry("induction_score", "right", "gather", None, ind_gather),
]
