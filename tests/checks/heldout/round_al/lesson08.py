"""Held-out catalogue, lesson 08 (heads): previous_token_score, induction_score."""

import torch

from entry import Entry


# ----------------------------------------------------------------------------- previous_token_score
def prev_next_token(weights):
    diag = torch.diagonal(weights, offset=1, dim1=-2, dim2=-1)
    return diag.float().mean(dim=-1).to(weights.dtype)


def prev_divides_by_n(weights):
    n = weights.shape[-1]
    diag = torch.diagonal(weights, offset=-1, dim1=1, dim2=2)
    return (diag.to(torch.float32).sum(dim=1) / n).to(weights.dtype)


def prev_mean_over_heads(weights):
    on_prev = torch.diagonal(weights, -1, 1, 2)
    return on_prev.mean(dim=0)


def prev_default_diagonal_dims(weights):
    d = torch.diagonal(weights, -1)
    return d.mean(dim=-1)


def prev_sum_not_mean(weights):
    h, n, _ = weights.shape
    total = torch.zeros(h, dtype=torch.float64)
    for i in range(1, n):
        total += weights[:, i, i - 1].double()
    return total.to(weights.dtype)


def prev_argmax_fraction(weights):
    n = weights.shape[-1]
    top = weights[:, 1:, :].argmax(dim=-1)
    target = torch.arange(n - 1)
    return (top == target).to(weights.dtype).mean(dim=-1)


def prev_loop_f64(weights):
    h, n, _ = weights.shape
    scores = []
    for head in range(h):
        acc = 0.0
        for i in range(1, n):
            acc += float(weights[head, i, i - 1])
        scores.append(acc / (n - 1))
    return torch.tensor(scores, dtype=torch.float64)


def prev_shifted_identity_mask(weights):
    n = weights.shape[-1]
    picker = torch.diag(torch.ones(n - 1, dtype=torch.float64), -1)
    w = weights.to(torch.float64)
    return (w * picker).sum(dim=(1, 2)) / (n - 1)


# ----------------------------------------------------------------------------- induction_score
def ind_copy_itself(weights, period):
    d = torch.diagonal(weights, offset=-period, dim1=1, dim2=2)
    return d.float().mean(-1).to(weights.dtype)


def ind_first_half_queries(weights, period):
    d = torch.diagonal(weights, offset=1 - period, dim1=-2, dim2=-1)
    return d[:, :-1].float().mean(-1).to(weights.dtype)


def ind_offset_sign(weights, period):
    d = torch.diagonal(weights, offset=period - 1, dim1=-2, dim2=-1)
    return d[:, 1:].float().mean(-1).to(weights.dtype)


def ind_divides_by_n(weights, period):
    n = weights.shape[-1]
    total = torch.zeros(weights.shape[0], dtype=torch.float32)
    for i in range(period, 2 * period):
        total = total + weights[:, i, i - period + 1].float()
    return (total / n).to(weights.dtype)


def ind_axes_swapped(weights, period):
    d = torch.diagonal(weights, offset=1 - period, dim1=-1, dim2=-2)
    return d[:, 1:].float().mean(-1).to(weights.dtype)


def ind_mean_over_everything(weights, period):
    idx = torch.arange(period, 2 * period)
    picked = weights[:, idx, idx - period + 1]
    return picked.float().mean().to(weights.dtype)


def ind_fancy_index(weights, period):
    queries = torch.arange(period, 2 * period)
    keys = queries - (period - 1)
    picked = weights.double()[:, queries, keys]
    return picked.sum(dim=1) / period


def ind_explicit_loops(weights, period):
    out = []
    for head in weights.to(torch.float64):
        vals = [head[i, i - period + 1] for i in range(period, 2 * period)]
        out.append(torch.stack(vals).mean())
    return torch.stack(out)


ENTRIES = [
    Entry("previous_token_score", "wrong", "next_token_diagonal",
          "reads the diagonal at offset +1, the weight on key i + 1 (the next token), instead of "
          "offset -1, key i - 1", prev_next_token),
    Entry("previous_token_score", "wrong", "divides_by_n",
          "sums the N - 1 previous-token weights but divides by N, as if query 0 counted with "
          "weight 0", prev_divides_by_n),
    Entry("previous_token_score", "wrong", "mean_over_heads",
          "takes the mean over dim 0, the heads, instead of over the queries, and returns one "
          "value per query (N - 1,) instead of one per head", prev_mean_over_heads),
    Entry("previous_token_score", "wrong", "diagonal_default_dims",
          "calls torch.diagonal(weights, -1) without dim1/dim2, so it takes the diagonal of the "
          "head and query axes (dims 0 and 1) instead of the query and key axes",
          prev_default_diagonal_dims),
    Entry("previous_token_score", "wrong", "sum_not_mean",
          "adds up the weights on key i - 1 over the queries but never divides by the number of "
          "queries, N - 1", prev_sum_not_mean),
    Entry("previous_token_score", "wrong", "argmax_fraction",
          "counts how often key i - 1 is the head's largest weight (an argmax hit rate) instead of "
          "averaging the weight itself", prev_argmax_fraction),
    Entry("previous_token_score", "right", "python_loop_float64", None, prev_loop_f64),
    Entry("previous_token_score", "right", "shifted_identity_mask", None,
          prev_shifted_identity_mask),

    Entry("induction_score", "wrong", "key_is_the_copy",
          "uses key i - period, the earlier copy of the token itself, instead of i - period + 1, "
          "the token that followed it", ind_copy_itself),
    Entry("induction_score", "wrong", "diagonal_slice_off_by_one",
          "takes the right diagonal but drops its last entry instead of its first ([:-1] for "
          "[1:]), so it averages queries period - 1 .. 2 period - 2", ind_first_half_queries),
    Entry("induction_score", "wrong", "offset_sign",
          "uses diagonal offset period - 1 (above the main diagonal, key i + period - 1) instead "
          "of 1 - period", ind_offset_sign),
    Entry("induction_score", "wrong", "divides_by_n",
          "sums the period weights of the second half but divides by N = 2 period instead of "
          "period", ind_divides_by_n),
    Entry("induction_score", "wrong", "query_key_axes_swapped",
          "passes dim1=-1, dim2=-2 to torch.diagonal, so it reads weights[h, i - period + 1, i] "
          "(query and key swapped)", ind_axes_swapped),
    Entry("induction_score", "wrong", "mean_over_all_heads",
          "calls .mean() with no dim, averaging over heads as well and returning one scalar "
          "instead of (H,)", ind_mean_over_everything),
    Entry("induction_score", "right", "fancy_index_float64", None, ind_fancy_index),
    Entry("induction_score", "right", "explicit_loops", None, ind_explicit_loops),
]
