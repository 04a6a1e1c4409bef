"""Held-out catalogue, lesson 08 (heads): previous_token_score, induction_score."""

import torch

from entry import Entry


# ================================================================ previous_token_score -- wrong
def prev_next_token(weights):
    diag = torch.diagonal(weights, offset=1, dim1=-2, dim2=-1)  # (H, N - 1)
    return diag.float().mean(dim=-1).to(weights.dtype)


def prev_divides_by_n(weights):
    h, n, _ = weights.shape
    total = torch.zeros(h, dtype=torch.float64)
    for i in range(1, n):
        total += weights[:, i, i - 1].double()
    return (total / n).to(weights.dtype)


def prev_diagonal_default_dims(weights):
    on_prev = torch.diagonal(weights, -1)
    return on_prev.to(torch.float32).mean(-1).to(weights.dtype)


def prev_double_shift(weights):
    trimmed = weights[:, 1:, :-1]  # queries 1.., keys ..N-2
    picked = trimmed.diagonal(offset=-1, dim1=1, dim2=2)
    return picked.to(torch.float32).mean(dim=1).to(weights.dtype)


def prev_mean_over_everything(weights):
    vals = torch.diagonal(weights.to(torch.float32), offset=-1, dim1=1, dim2=2)
    return vals.mean().to(weights.dtype)


def prev_argmax_fraction(weights):
    n = weights.shape[-1]
    top = weights[:, 1:, :].argmax(dim=-1)  # (H, N - 1)
    target = torch.arange(n - 1)  # query i's previous key is i - 1
    return (top == target).to(torch.float32).mean(dim=-1).to(weights.dtype)


# ================================================================ previous_token_score -- right
def prev_fancy_index_f64(weights):
    n = weights.shape[1]
    rows = torch.arange(1, n)
    return weights[:, rows, rows - 1].double().mean(dim=1).to(weights.dtype)


def prev_shifted_eye_mask(weights):
    n = weights.shape[-1]
    sub = torch.diag(torch.ones(n - 1, dtype=torch.float64), -1)  # ones at (i, i - 1)
    picked = (weights.double() * sub).sum(dim=(-2, -1))
    return (picked / (n - 1)).to(weights.dtype)


# ===================================================================== induction_score -- wrong
def ind_same_token(weights, period):
    diag = torch.diagonal(weights, offset=-period, dim1=1, dim2=2)  # w[h, i, i - period]
    return diag.float().mean(-1).to(weights.dtype)


def ind_first_entries(weights, period):
    diag = torch.diagonal(weights, offset=1 - period, dim1=-2, dim2=-1)  # (H, period + 1)
    return diag[:, :-1].to(torch.float32).mean(dim=-1).to(weights.dtype)


def ind_diagonal_default_dims(weights, period):
    diag = torch.diagonal(weights, 1 - period)
    return diag[..., 1:].to(torch.float32).mean(dim=-1).to(weights.dtype)


def ind_mean_over_heads(weights, period):
    vals = torch.stack([weights[:, i, i - period + 1] for i in range(period, 2 * period)])
    return vals.double().mean(dim=-1).to(weights.dtype)


def ind_transposed_index(weights, period):
    heads = weights.shape[0]
    acc = torch.zeros(heads, dtype=torch.float64)
    for i in range(period, 2 * period):
        acc += weights[:, i - period + 1, i].double()
    return (acc / period).to(weights.dtype)


def ind_sum_not_mean(weights, period):
    d = torch.diagonal(weights, offset=1 - period, dim1=1, dim2=2)[:, 1:]
    return d.to(torch.float32).sum(dim=-1).to(weights.dtype)


# ===================================================================== induction_score -- right
def ind_python_loops(weights, period):
    w = weights.double()
    scores = []
    for h in range(w.shape[0]):
        s = 0.0
        for i in range(period, 2 * period):
            s = s + w[h, i, i - period + 1]
        scores.append(s / period)
    return torch.stack(scores).to(weights.dtype)


def ind_gather(weights, period):
    q_idx = torch.arange(period, 2 * period)
    rows = weights[:, period:, :].double()  # (H, period, N)
    cols = (q_idx - period + 1).view(1, -1, 1).expand(weights.shape[0], -1, 1)
    return rows.gather(-1, cols).squeeze(-1).mean(-1).to(weights.dtype)


ENTRIES = [
    Entry("previous_token_score", "wrong", "next-token-diagonal",
          "takes the diagonal at offset +1, the weight on key i + 1 (the next token), instead "
          "of offset -1, key i - 1",
          prev_next_token),
    Entry("previous_token_score", "wrong", "divides-by-n",
          "sums the N - 1 weights w[h, i, i - 1] correctly but divides by N, as if query 0 "
          "counted too",
          prev_divides_by_n),
    Entry("previous_token_score", "wrong", "diagonal-default-dims",
          "calls torch.diagonal(weights, -1) without dim1/dim2, so it takes the diagonal of "
          "the (H, N) axes, not of the (N, N) query-key plane",
          prev_diagonal_default_dims),
    Entry("previous_token_score", "wrong", "double-shift",
          "slices weights[:, 1:, :-1] (already aligning query i with key i - 1) and then also "
          "takes offset -1, so it reads key i - 2",
          prev_double_shift),
    Entry("previous_token_score", "wrong", "mean-without-dim",
          "calls .mean() without dim, averaging over heads too and returning one number "
          "instead of one score per head",
          prev_mean_over_everything),
    Entry("previous_token_score", "wrong", "argmax-fraction",
          "scores the fraction of queries whose largest weight is on key i - 1 instead of the "
          "mean weight on key i - 1",
          prev_argmax_fraction),
    Entry("previous_token_score", "right", "fancy-index-float64", None, prev_fancy_index_f64),
    Entry("previous_token_score", "right", "shifted-eye-mask", None, prev_shifted_eye_mask),

    Entry("induction_score", "wrong", "same-token-not-successor",
          "reads key i - period (the earlier copy of the token itself) instead of "
          "i - period + 1, the token that followed it",
          ind_same_token),
    Entry("induction_score", "wrong", "first-period-entries",
          "keeps the first period entries of the offset 1 - period diagonal, which belong to "
          "queries period - 1 .. 2 period - 2, instead of the last period entries",
          ind_first_entries),
    Entry("induction_score", "wrong", "diagonal-default-dims",
          "calls torch.diagonal(weights, 1 - period) without dim1/dim2, so the diagonal runs "
          "over the head and query axes instead of the query-key plane",
          ind_diagonal_default_dims),
    Entry("induction_score", "wrong", "stack-then-mean-last-axis",
          "stacks the per-query columns into (period, H) and then averages over the last "
          "axis, the heads, instead of over the queries",
          ind_mean_over_heads),
    Entry("induction_score", "wrong", "query-key-swapped",
          "indexes weights[:, i - period + 1, i], query and key swapped, so it reads the "
          "weight of an earlier query on a later key",
          ind_transposed_index),
    Entry("induction_score", "wrong", "sum-not-mean",
          "sums the period weights instead of averaging them (never divides by period)",
          ind_sum_not_mean),
    Entry("induction_score", "right", "python-loops-float64", None, ind_python_loops),
    Entry("induction_score", "right", "gather", None, ind_gather),
]
