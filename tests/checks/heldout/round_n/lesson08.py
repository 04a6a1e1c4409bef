"""Lesson 08 (what heads learn): previous_token_score, induction_score."""

import numpy as np
import torch

from entry import Entry


# ============================================================================ previous_token_score
def prev_transposed_index(weights):
    H, N, _ = weights.shape
    scores = torch.zeros(H, dtype=torch.float32)
    for h in range(H):
        total = 0.0
        for i in range(1, N):
            total += float(weights[h, i - 1, i])
        scores[h] = total / (N - 1)
    return scores.to(weights.dtype)


def prev_diagonal_default_dims(weights):
    diag = torch.diagonal(weights, -1)
    return diag.float().mean(dim=-1).to(weights.dtype)


def prev_keepdim(weights):
    d = torch.diagonal(weights, offset=-1, dim1=1, dim2=2).float()
    return d.mean(dim=-1, keepdim=True).to(weights.dtype)


def prev_all_earlier_keys(weights):
    n = weights.shape[-1]
    below = torch.tril(weights.float(), diagonal=-1)  # every key j < i
    return (below.sum(dim=(-2, -1)) / (n - 1)).to(weights.dtype)


def prev_drops_first_query(weights):
    d = torch.diagonal(weights.float(), offset=-1, dim1=-2, dim2=-1)  # (H, N-1), queries 1..N-1
    return d[:, 1:].mean(dim=-1).to(weights.dtype)


def prev_divides_by_heads(weights):
    w = weights.float()
    on_prev = torch.diagonal(w, offset=-1, dim1=-2, dim2=-1).sum(dim=-1)
    return (on_prev / (w.shape[0])).to(weights.dtype)


def prev_right_python_loops(weights):
    H, N, _ = weights.shape
    w = weights.double()
    out = []
    for h in range(H):
        acc = 0.0
        for i in range(1, N):
            acc += w[h, i, i - 1].item()
        out.append(acc / (N - 1))
    return torch.tensor(out, dtype=torch.float64)


def prev_right_numpy_mask(weights):
    w = weights.detach().double().cpu().numpy()
    n = w.shape[-1]
    sel = np.eye(n, k=-1)  # 1 at (i, i-1)
    score = np.einsum("hij,ij->h", w, sel) / sel.sum()
    return torch.from_numpy(score).to(weights.dtype)


# ============================================================================ induction_score
def ind_previous_copy(weights, period):
    idx = torch.arange(period, 2 * period)
    picked = weights[:, idx, idx - period].float()
    return picked.mean(dim=-1).to(weights.dtype)


def ind_upper_diagonal(weights, period):
    diag = torch.diagonal(weights.float(), offset=period - 1, dim1=-2, dim2=-1)
    return diag[:, -period:].mean(dim=-1).to(weights.dtype)


def ind_loop_start_off_by_one(weights, period):
    H = weights.shape[0]
    res = torch.zeros(H, dtype=torch.float64)
    for h in range(H):
        vals = [float(weights[h, i, i - period + 1]) for i in range(period - 1, 2 * period)]
        res[h] = sum(vals) / len(vals)
    return res.to(weights.dtype)


def ind_mean_over_heads(weights, period):
    diag = torch.diagonal(weights, offset=1 - period, dim1=1, dim2=2)[:, 1:]  # (H, period)
    return diag.float().mean(dim=0).to(weights.dtype)


def ind_divides_by_n(weights, period):
    n = weights.shape[-1]
    rows = torch.arange(period, n)
    total = weights[:, rows, rows - period + 1].float().sum(dim=-1)
    return (total / n).to(weights.dtype)


def ind_returns_list(weights, period):
    scores = []
    for head in weights:
        s = 0.0
        for i in range(period, 2 * period):
            s += head[i, i - period + 1].item()
        scores.append(s / period)
    return scores


def ind_right_gather(weights, period):
    n = weights.shape[-1]
    q = torch.arange(period, n)
    keys = (q - period + 1)[None, :, None].expand(weights.shape[0], -1, 1)
    rows = weights[:, period:, :].double()  # (H, period, N)
    got = torch.gather(rows, 2, keys).squeeze(-1)  # (H, period)
    return got.mean(dim=1)


def ind_right_selector_einsum(weights, period):
    n = 2 * period
    sel = torch.zeros(n, n, dtype=torch.float64)
    for i in range(period, n):
        sel[i, i - period + 1] = 1.0 / period
    return torch.einsum("hqk,qk->h", weights.double(), sel).to(weights.dtype)


ENTRIES = [
    Entry("previous_token_score", "wrong", "query_key_swapped",
          "Reads weights[h, i-1, i], the weight query i-1 puts on the next key i, instead of "
          "weights[h, i, i-1] (rows are queries, columns keys), so causal heads score 0.",
          prev_transposed_index),
    Entry("previous_token_score", "wrong", "diagonal_default_dims",
          "Calls torch.diagonal(weights, -1) with its default dim1=0, dim2=1, so the diagonal "
          "runs over the head and query axes instead of the query and key axes and the result "
          "has the wrong shape.", prev_diagonal_default_dims),
    Entry("previous_token_score", "wrong", "keepdim_shape",
          "Averages the diagonal with keepdim=True, returning shape (H, 1) instead of (H,).",
          prev_keepdim),
    Entry("previous_token_score", "wrong", "all_earlier_keys",
          "Averages the total weight each query puts on all earlier keys j < i (tril with "
          "diagonal=-1) instead of only on key i-1, so attention further back also counts.",
          prev_all_earlier_keys),
    Entry("previous_token_score", "wrong", "drops_query_one",
          "Slices [:, 1:] off the offset -1 diagonal to skip query 0, but that diagonal already "
          "starts at query 1, so query 1 is dropped from the mean as well.",
          prev_drops_first_query),
    Entry("previous_token_score", "wrong", "divides_by_num_heads",
          "Divides the summed previous-token weights by weights.shape[0] (the number of heads) "
          "instead of by the N-1 queries that were summed.", prev_divides_by_heads),
    Entry("previous_token_score", "right", "python_loops_float64", None,
          prev_right_python_loops),
    Entry("previous_token_score", "right", "numpy_subdiagonal_selector", None,
          prev_right_numpy_mask),

    Entry("induction_score", "wrong", "earlier_copy_not_next",
          "Reads key i - period, the earlier copy of the current token (a duplicate-token "
          "head), instead of key i - period + 1, the token that followed it.",
          ind_previous_copy),
    Entry("induction_score", "wrong", "diagonal_offset_sign",
          "Takes torch.diagonal with offset period - 1 instead of 1 - period, i.e. the "
          "diagonal above the main one (keys after the query), which only coincides with the "
          "right one when period is 1.", ind_upper_diagonal),
    Entry("induction_score", "wrong", "loop_starts_at_period_minus_one",
          "Starts the query loop at period - 1 instead of period, so query period - 1 (still in "
          "the first half) and its weight on key 0 are included in the mean.",
          ind_loop_start_off_by_one),
    Entry("induction_score", "wrong", "mean_over_heads_axis",
          "Averages the selected weights over dim 0 (the heads) instead of over the queries, "
          "returning one value per query instead of one per head.", ind_mean_over_heads),
    Entry("induction_score", "wrong", "divides_by_sequence_length",
          "Sums the weights of the period second-half queries but divides by N = 2 * period, "
          "so every score comes out half as large.", ind_divides_by_n),
    Entry("induction_score", "wrong", "returns_python_list",
          "Builds the scores with .item() in a Python list and returns the list, not an (H,) "
          "tensor.", ind_returns_list),
    Entry("induction_score", "right", "gather_float64", None, ind_right_gather),
    Entry("induction_score", "right", "selector_matrix_einsum", None,
          ind_right_selector_einsum),
]
