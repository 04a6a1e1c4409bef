"""Round l, lesson 08 (heads): previous_token_score, induction_score."""

import numpy as np
import torch

from entry import Entry

P = "previous_token_score"
I = "induction_score"


# ============================================================ previous_token_score: wrong
def prev_swapped_axes(weights):
    n = weights.shape[-1]
    idx = torch.arange(1, n)
    return weights[:, idx - 1, idx].float().mean(dim=-1).to(weights.dtype)


def prev_divides_by_n(weights):
    n = weights.shape[-1]
    total = torch.diagonal(weights, offset=-1, dim1=1, dim2=2).float().sum(dim=-1)
    return (total / n).to(weights.dtype)


def prev_wraps_query_zero(weights):
    heads, n, _ = weights.shape
    w = weights.detach().cpu().double().numpy()
    scores = []
    for h in range(heads):
        picked = [w[h, i, i - 1] for i in range(n)]
        scores.append(sum(picked) / len(picked))
    return torch.tensor(scores, dtype=weights.dtype)


def prev_default_diagonal_dims(weights):
    diag = torch.diagonal(weights.float(), -1)
    return diag.mean(dim=-1).to(weights.dtype)


def prev_argmax_hits(weights):
    n = weights.shape[-1]
    best = weights[:, 1:, :].argmax(dim=-1)  # (H, N - 1)
    target = torch.arange(n - 1)  # query i's previous key i - 1
    return (best == target).float().mean(dim=-1).to(weights.dtype)


def prev_all_earlier_keys(weights):
    earlier = torch.tril(weights.float(), diagonal=-1).sum(dim=-1)  # (H, N)
    return earlier[:, 1:].mean(dim=-1).to(weights.dtype)


# ============================================================ previous_token_score: right
def prev_python_loops(weights):
    heads, n, _ = weights.shape
    rows = weights.double().tolist()
    out = []
    for h in range(heads):
        total = 0.0
        for i in range(1, n):
            total += rows[h][i][i - 1]
        out.append(total / (n - 1))
    return torch.tensor(out, dtype=torch.float64)


def prev_einsum_shift_matrix(weights):
    n = weights.shape[-1]
    shift = torch.diag(torch.ones(n - 1, dtype=torch.float64), -1)  # ones at (i, i-1)
    return torch.einsum("hij,ij->h", weights.double(), shift) / (n - 1)


# ============================================================ induction_score: wrong
def ind_copy_not_next(weights, period):
    diag = torch.diagonal(weights, offset=-period, dim1=-2, dim2=-1)  # w[h, i, i - period]
    return diag.float().mean(-1).to(weights.dtype)


def ind_loop_stops_early(weights, period):
    heads = weights.shape[0]
    w = weights.double()
    res = torch.zeros(heads, dtype=torch.float64)
    for i in range(period, 2 * period - 1):
        res += w[:, i, i - period + 1]
    return (res / period).to(weights.dtype)


def ind_diagonal_wrong_entries(weights, period):
    diag = torch.diagonal(weights, offset=1 - period, dim1=1, dim2=2)  # (H, period + 1)
    return diag[:, :period].float().mean(-1).to(weights.dtype)


def ind_offset_sign(weights, period):
    diag = torch.diagonal(weights, offset=period - 1, dim1=1, dim2=2)
    return diag[:, -period:].float().mean(-1).to(weights.dtype)


def ind_mean_over_heads(weights, period):
    q = torch.arange(period, 2 * period)
    picked = weights[:, q, q - period + 1].float()  # (H, period)
    return picked.mean(dim=0).to(weights.dtype)


def ind_divides_by_n(weights, period):
    n = weights.shape[-1]
    q = torch.arange(period, n)
    picked = weights[:, q, q - period + 1].double()
    return (picked.sum(-1) / n).to(weights.dtype)


# ============================================================ induction_score: right
def ind_numpy_fancy_index(weights, period):
    w = weights.detach().cpu().to(torch.float64).numpy()
    rows = np.arange(period, 2 * period)
    cols = rows - period + 1
    return torch.from_numpy(w[:, rows, cols].mean(axis=1))


def ind_gather(weights, period):
    h, n, _ = weights.shape
    w = weights.double()[:, period:, :]  # (H, period, N): queries of the second half
    cols = (torch.arange(period, n) - period + 1).view(1, -1, 1).expand(h, -1, 1)
    return torch.gather(w, 2, cols).squeeze(-1).sum(-1) / period


ENTRIES = [
    Entry(P, "wrong", "query_key_axes_swapped",
          "Reads weights[h, i-1, i], the weight query i-1 puts on key i, instead of "
          "weights[h, i, i-1]: the query (row) and key (column) axes are swapped.",
          prev_swapped_axes),
    Entry(P, "wrong", "divides_by_n",
          "Sums the N-1 previous-token weights but divides by N instead of N-1, the number "
          "of queries i >= 1.",
          prev_divides_by_n),
    Entry(P, "wrong", "query_zero_wraps_around",
          "Includes query 0, whose index i-1 = -1 wraps around to the last key, instead of "
          "averaging over queries i >= 1 only.",
          prev_wraps_query_zero),
    Entry(P, "wrong", "diagonal_default_dims",
          "Calls torch.diagonal(weights, -1) with its default dim1=0, dim2=1, which takes a "
          "diagonal across the head and query axes instead of the query and key axes.",
          prev_default_diagonal_dims),
    Entry(P, "wrong", "argmax_hit_rate",
          "Scores the fraction of queries whose argmax key is i-1 instead of the mean weight "
          "put on key i-1.",
          prev_argmax_hits),
    Entry(P, "wrong", "all_earlier_keys",
          "Uses tril(weights, -1).sum(-1), the total weight on every earlier key, instead of "
          "the weight on key i-1 alone.",
          prev_all_earlier_keys),
    Entry(P, "right", "python_loops_float64", None, prev_python_loops),
    Entry(P, "right", "einsum_shift_matrix", None, prev_einsum_shift_matrix),

    Entry(I, "wrong", "earlier_copy_not_next_token",
          "Averages the weight on key i - period (the earlier copy of the current token) "
          "instead of key i - period + 1, the token that followed it.",
          ind_copy_not_next),
    Entry(I, "wrong", "loop_misses_last_query",
          "Loops over range(period, 2*period - 1), which leaves out the last query 2*period-1, "
          "while still dividing by period.",
          ind_loop_stops_early),
    Entry(I, "wrong", "diagonal_entries_off_by_one",
          "Takes the first period entries of the offset 1-period diagonal, which belong to "
          "queries period-1 .. 2*period-2, instead of entries 1 .. period.",
          ind_diagonal_wrong_entries),
    Entry(I, "wrong", "diagonal_offset_sign",
          "Passes offset=period-1 to torch.diagonal, which selects keys above the main "
          "diagonal (key i + period - 1), instead of the negative offset 1-period.",
          ind_offset_sign),
    Entry(I, "wrong", "mean_over_heads_axis",
          "Averages the (H, period) picked weights over dim 0, the heads, so it returns one "
          "value per query instead of one per head.",
          ind_mean_over_heads),
    Entry(I, "wrong", "divides_by_n",
          "Sums the period picked weights but divides by N = 2*period instead of by period, "
          "the number of queries in the second half.",
          ind_divides_by_n),
    Entry(I, "right", "numpy_fancy_indexing", None, ind_numpy_fancy_index),
    Entry(I, "right", "torch_gather", None, ind_gather),
]
