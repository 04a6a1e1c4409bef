"""Held-out catalogue, lesson 08 (heads): previous_token_score, induction_score."""

import torch

from entry import Entry


# ----------------------------------------------------------------------------- previous_token_score
def prev_next_token(weights):
    diag = torch.diagonal(weights, offset=1, dim1=-2, dim2=-1)
    return diag.float().mean(dim=-1).to(weights.dtype)


def prev_divides_by_n(weights):
    H, N, _ = weights.shape
    total = torch.zeros(H, dtype=torch.float32)
    for i in range(1, N):
        total += weights[:, i, i - 1].float()
    return total / N


def prev_mean_over_heads(weights):
    sub = torch.diagonal(weights, -1, 1, 2).to(torch.float32)  # (H, N - 1)
    return sub.mean(dim=0)


def prev_default_diagonal_dims(weights):
    # torch.diagonal defaults to dim1=0, dim2=1: the (H, N) plane, not the (N, N) one
    on_prev = torch.diagonal(weights.float(), offset=-1)
    return on_prev.mean(dim=-1)


def prev_block_mean(weights):
    block = weights[:, 1:, :-1].float()  # queries 1.., keys ..N-2
    return block.mean(dim=(-2, -1))


def prev_argmax_hits(weights):
    n = weights.shape[-1]
    top = weights[:, 1:, :].argmax(dim=-1)  # (H, N - 1)
    target = torch.arange(n - 1)
    return (top == target).float().mean(dim=-1)


def prev_loop_float64(weights):
    h_count, n, _ = weights.shape
    scores = []
    for h in range(h_count):
        acc = 0.0
        for i in range(1, n):
            acc += float(weights[h, i, i - 1])
        scores.append(acc / (n - 1))
    return torch.tensor(scores, dtype=torch.float64)


def prev_subdiagonal_mask(weights):
    n = weights.shape[-1]
    sel = torch.ones(n - 1, dtype=torch.float64).diag(-1)  # 1 at [i, i-1]
    return (weights.double() * sel).sum(dim=(1, 2)) / sel.sum()


# ----------------------------------------------------------------------------- induction_score
def ind_copy_token(weights, period):
    d = torch.diagonal(weights, offset=-period, dim1=1, dim2=2)  # key i - period
    return d.float().mean(dim=-1)


def ind_extra_query(weights, period):
    d = torch.diagonal(weights, offset=1 - period, dim1=1, dim2=2)  # queries period-1 .. 2p-1
    return d.float().mean(dim=-1)


def ind_minus_one(weights, period):
    d = torch.diagonal(weights, offset=-period - 1, dim1=-2, dim2=-1)
    return d.to(torch.float32).mean(-1)


def ind_swapped_indices(weights, period):
    q_idx = torch.arange(period, 2 * period)
    k_idx = q_idx - period + 1
    picked = weights[:, k_idx, q_idx].float()
    return picked.mean(dim=1)


def ind_sum_not_mean(weights, period):
    H = weights.shape[0]
    out = torch.zeros(H)
    for i in range(period, 2 * period):
        out += weights[:, i, i - period + 1].float()
    return out


def ind_mean_without_dim(weights, period):
    rows = torch.arange(period, 2 * period)
    vals = weights[:, rows, rows - period + 1].float()  # (H, period)
    return vals.mean()


def ind_gather_float64(weights, period):
    h = weights.shape[0]
    queries = torch.arange(period, 2 * period)
    keys = (queries - period + 1).view(1, -1, 1).expand(h, -1, 1)
    rows = weights[:, period:, :].double()  # (H, period, N)
    picked = torch.gather(rows, 2, keys).squeeze(-1)  # (H, period)
    return picked.sum(-1) / period


def ind_python_loops(weights, period):
    heads = weights.shape[0]
    res = torch.empty(heads, dtype=torch.float64)
    for h in range(heads):
        s = 0.0
        for j in range(period):
            i = period + j
            s += weights[h, i, j + 1].item()
        res[h] = s / period
    return res


ENTRIES = [
    Entry("previous_token_score", "wrong", "next_token_diagonal",
          "reads the diagonal at offset +1, the weight on key i + 1 (the next token), "
          "instead of offset -1 (key i - 1)", prev_next_token),
    Entry("previous_token_score", "wrong", "divides_by_n",
          "sums the N - 1 weights on key i - 1 but divides by N, as if query 0 counted, so "
          "every score is too small by a factor (N - 1) / N", prev_divides_by_n),
    Entry("previous_token_score", "wrong", "mean_over_heads",
          "averages the sub-diagonal over dim 0 (the heads) instead of the last axis, giving "
          "one value per query position, shape (N - 1,), not one per head", prev_mean_over_heads),
    Entry("previous_token_score", "wrong", "diagonal_default_dims",
          "calls torch.diagonal(weights, -1) with its default dims 0 and 1, so it walks the "
          "(head, query) plane instead of the (query, key) plane of each head",
          prev_default_diagonal_dims),
    Entry("previous_token_score", "wrong", "mean_of_whole_block",
          "averages the whole block weights[:, 1:, :-1] instead of its diagonal, mixing in the "
          "weight on every earlier key, not only key i - 1", prev_block_mean),
    Entry("previous_token_score", "wrong", "argmax_hit_rate",
          "scores a head by how often key i - 1 is its argmax (a hit rate) instead of by the "
          "mean weight it puts there", prev_argmax_hits),
    Entry("previous_token_score", "right", "python_loop_float64", None, prev_loop_float64),
    Entry("previous_token_score", "right", "subdiagonal_mask", None, prev_subdiagonal_mask),

    Entry("induction_score", "wrong", "copy_not_successor",
          "reads key i - period, the earlier copy of token i itself, instead of key "
          "i - period + 1, the token that followed it", ind_copy_token),
    Entry("induction_score", "wrong", "one_query_too_many",
          "keeps the whole diagonal at offset 1 - period, which starts at query period - 1, "
          "so one first-half query is averaged in (period + 1 terms)", ind_extra_query),
    Entry("induction_score", "wrong", "minus_one_not_plus_one",
          "subtracts 1 where it should add it: reads key i - period - 1 (offset -period - 1), "
          "the token before the earlier copy; with period 1 that diagonal is empty and the "
          "mean is NaN", ind_minus_one),
    Entry("induction_score", "wrong", "query_key_swapped",
          "indexes weights[:, key, query] instead of weights[:, query, key], reading the "
          "weight that the earlier token puts on the later one", ind_swapped_indices),
    Entry("induction_score", "wrong", "sum_not_mean",
          "adds up the period weights per head and never divides by period, so the score is "
          "a sum, not a mean (only period 1 comes out right)", ind_sum_not_mean),
    Entry("induction_score", "wrong", "mean_without_dim",
          "calls .mean() without a dim, which averages over the heads too and returns one "
          "scalar instead of a (H,) tensor", ind_mean_without_dim),
    Entry("induction_score", "right", "gather_float64", None, ind_gather_float64),
    Entry("induction_score", "right", "python_loops", None, ind_python_loops),
]
