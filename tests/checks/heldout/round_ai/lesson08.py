"""Held-out catalogue, lesson 08 (heads): previous_token_score, induction_score."""

import torch

from entry import Entry


# ----------------------------------------------------------------- previous_token_score
def prev_offset_plus_one(weights):
    diag = torch.diagonal(weights, offset=1, dim1=-2, dim2=-1)
    return diag.float().mean(dim=-1).to(weights.dtype)


def prev_wraps_query_zero(weights):
    H, N, _ = weights.shape
    scores = []
    for h in range(H):
        total = 0.0
        for i in range(N):
            total += float(weights[h, i, i - 1])
        scores.append(total / N)
    return torch.tensor(scores, dtype=weights.dtype)


def prev_argmax_hit_rate(weights):
    n = weights.shape[-1]
    top = weights[:, 1:, :].argmax(dim=-1)  # (H, N-1)
    target = torch.arange(n - 1).unsqueeze(0)  # key i-1 for query i
    return (top == target).float().mean(dim=-1).to(weights.dtype)


def prev_default_diagonal_dims(weights):
    sub = torch.diagonal(weights, -1)
    return sub.float().mean(-1).to(weights.dtype)


def prev_slice_gives_self(weights):
    block = weights[:, 1:, 1:]
    return block.diagonal(dim1=1, dim2=2).to(torch.float32).mean(dim=1).to(weights.dtype)


def prev_sum_not_mean(weights):
    n = weights.shape[1]
    rows = torch.arange(1, n)
    picked = weights[:, rows, rows - 1]
    return picked.float().sum(dim=-1).to(weights.dtype)


def prev_right_index_gather(weights):
    n = weights.shape[-1]
    q_idx = torch.arange(1, n)
    return weights[:, q_idx, q_idx - 1].to(torch.float64).mean(dim=1).to(weights.dtype)


def prev_right_band_mask(weights):
    n = weights.shape[-1]
    band = torch.ones(n, n, dtype=torch.float64).tril(-1).triu(-1)  # 1 on (i, i-1)
    total = (weights.to(torch.float64) * band).sum(dim=(1, 2))
    return (total / (n - 1)).to(weights.dtype)


# ----------------------------------------------------------------- induction_score
def ind_copy_not_next(weights, period):
    n = weights.shape[-1]
    i = torch.arange(period, n)
    return weights[:, i, i - period].float().mean(-1).to(weights.dtype)


def ind_query_key_swapped(weights, period):
    n = weights.shape[-1]
    i = torch.arange(period, n)
    return weights[:, i - period + 1, i].float().mean(-1).to(weights.dtype)


def ind_diagonal_slice_off_by_one(weights, period):
    d = torch.diagonal(weights, offset=1 - period, dim1=1, dim2=2)  # (H, period + 1)
    return d[:, :-1].to(torch.float32).mean(dim=1).to(weights.dtype)


def ind_divides_by_n(weights, period):
    n = weights.shape[-1]
    picks = [weights[:, i, i - period + 1].float() for i in range(period, 2 * period)]
    return (torch.stack(picks, dim=-1).sum(-1) / n).to(weights.dtype)


def ind_mean_over_heads(weights, period):
    n = weights.shape[-1]
    q = torch.arange(period, n)
    vals = weights[:, q, q - period + 1].float()  # (H, period)
    return vals.mean(dim=0).to(weights.dtype)


def ind_all_queries(weights, period):
    heads, n, _ = weights.shape
    out = torch.zeros(heads)
    for h in range(heads):
        acc = 0.0
        for i in range(n):
            acc += float(weights[h, i, i - period + 1])
        out[h] = acc / n
    return out.to(weights.dtype)


def ind_right_python_loops(weights, period):
    heads = weights.shape[0]
    scores = []
    for h in range(heads):
        vals = [float(weights[h, i, i - period + 1]) for i in range(period, 2 * period)]
        scores.append(sum(vals) / len(vals))
    return torch.tensor(scores, dtype=torch.float64).to(weights.dtype)


def ind_right_shifted_mask(weights, period):
    n = weights.shape[-1]
    q = torch.arange(n)[:, None]
    k = torch.arange(n)[None, :]
    sel = ((k == q - period + 1) & (q >= period)).to(torch.float64)
    return ((weights.double() * sel).sum(dim=(-2, -1)) / period).to(weights.dtype)


ENTRIES = [
    Entry("previous_token_score", "wrong", "diagonal_offset_sign",
          "takes torch.diagonal with offset=+1, which is the superdiagonal w[i, i+1] (the next "
          "token), not offset=-1 for key i-1", prev_offset_plus_one),
    Entry("previous_token_score", "wrong", "query_zero_wraps",
          "loops over every query including i = 0, where w[h, 0, -1] wraps to the last key, "
          "and divides by N instead of N-1", prev_wraps_query_zero),
    Entry("previous_token_score", "wrong", "argmax_hit_rate",
          "counts how often the argmax of a row is key i-1 instead of averaging the weight put "
          "on key i-1", prev_argmax_hit_rate),
    Entry("previous_token_score", "wrong", "diagonal_default_dims",
          "calls torch.diagonal(weights, -1) with its default dims 0 and 1, so it walks the "
          "head and query axes instead of queries and keys (wrong shape)",
          prev_default_diagonal_dims),
    Entry("previous_token_score", "wrong", "slice_gives_self",
          "slices weights[:, 1:, 1:] instead of weights[:, 1:, :-1], so its diagonal is the "
          "weight on the query's own position, not on i-1", prev_slice_gives_self),
    Entry("previous_token_score", "wrong", "sum_not_mean",
          "sums the N-1 weights on key i-1 instead of averaging them", prev_sum_not_mean),
    Entry("previous_token_score", "right", "index_gather", None, prev_right_index_gather),
    Entry("previous_token_score", "right", "band_mask_float64", None, prev_right_band_mask),

    Entry("induction_score", "wrong", "copy_not_next",
          "reads key i - period (the earlier copy of the token itself, a duplicate-token head) "
          "instead of key i - period + 1, the token that followed it", ind_copy_not_next),
    Entry("induction_score", "wrong", "query_key_swapped",
          "indexes weights[:, i - period + 1, i], swapping the query and key indices, so it "
          "reads the row of an earlier query instead of query i's row",
          ind_query_key_swapped),
    Entry("induction_score", "wrong", "diagonal_slice_off_by_one",
          "keeps entries [:-1] of the offset 1-period diagonal instead of [1:], so it averages "
          "queries period-1 .. 2*period-2, one too early", ind_diagonal_slice_off_by_one),
    Entry("induction_score", "wrong", "divides_by_n",
          "sums the period weights but divides by N = 2*period instead of by period",
          ind_divides_by_n),
    Entry("induction_score", "wrong", "mean_over_heads",
          "averages over the head axis (dim 0) instead of over the queries, returning one value "
          "per query instead of one per head", ind_mean_over_heads),
    Entry("induction_score", "wrong", "averages_all_queries",
          "averages over every query i of the sequence, first copy included (where "
          "i - period + 1 is negative and wraps to the end), not just i >= period",
          ind_all_queries),
    Entry("induction_score", "right", "python_loops", None, ind_right_python_loops),
    Entry("induction_score", "right", "shifted_selection_mask", None, ind_right_shifted_mask),
]
