"""Held-out catalogue, lesson 08 (what heads learn): previous_token_score, induction_score."""

import torch

from entry import Entry


# ============================================================== previous_token_score
def prev_superdiagonal(weights):
    diag = torch.diagonal(weights, offset=1, dim1=-2, dim2=-1)
    return diag.float().mean(dim=-1).to(weights.dtype)


def prev_diagonal_default_dims(weights):
    return torch.diagonal(weights, -1).float().mean(-1)


def prev_mean_over_heads(weights):
    on_prev = weights.diagonal(offset=-1, dim1=1, dim2=2)  # (H, N - 1)
    return on_prev.float().mean(dim=0)


def prev_loop_wraps_around(weights):
    h, n, _ = weights.shape
    total = torch.zeros(h, dtype=torch.float64)
    for i in range(n - 1):
        total += weights[:, i, i - 1].double()
    return (total / (n - 1)).to(weights.dtype)


def prev_divides_by_n(weights):
    n = weights.shape[-1]
    picked = weights.diagonal(offset=-1, dim1=-2, dim2=-1).double()
    return (picked.sum(dim=-1) / n).to(weights.dtype)


def prev_argmax_fraction(weights):
    n = weights.shape[-1]
    best = weights[:, 1:, :].argmax(dim=-1)  # (H, N - 1): the key each query looks at most
    target = torch.arange(n - 1)[None, :]
    return (best == target).double().mean(dim=-1)


def prev_band_mask(weights):
    n = weights.shape[-1]
    band = torch.ones(n, n, dtype=torch.float64).tril(-1).triu(-1)  # 1 on (i, i-1)
    return (weights.double() * band).sum(dim=(1, 2)) / (n - 1)


def prev_fancy_index(weights):
    n = weights.shape[1]
    rows = torch.arange(1, n)
    return weights[:, rows, rows - 1].to(torch.float64).mean(1)


# ============================================================== induction_score
def ind_copy_not_next(weights, period):
    d = torch.diagonal(weights, offset=-period, dim1=-2, dim2=-1)  # w[h, i, i - period]
    return d.float().mean(-1).to(weights.dtype)


def ind_wrong_end_of_diagonal(weights, period):
    d = torch.diagonal(weights, offset=1 - period, dim1=-2, dim2=-1)  # (H, period + 1)
    return d[:, :-1].float().mean(-1).to(weights.dtype)


def ind_block_slice_misses_last(weights, period):
    block = weights[:, period:, :period]  # second-half queries against first-half keys
    return block.diagonal(offset=1, dim1=-2, dim2=-1).float().mean(-1)


def ind_divides_by_n(weights, period):
    n = weights.shape[-1]
    total = torch.zeros(weights.shape[0], dtype=torch.float64)
    for i in range(period, 2 * period):
        total = total + weights[:, i, i - period + 1].double()
    return total / n


def ind_mean_wrong_axis(weights, period):
    rows = [weights[:, i, i - period + 1] for i in range(period, 2 * period)]
    stacked = torch.stack(rows).double()  # (period, H)
    return stacked.mean(dim=1)


def ind_diagonal_dims_swapped(weights, period):
    d = weights.diagonal(offset=1 - period, dim1=-1, dim2=-2)
    return d[:, 1:].double().mean(dim=-1)


def ind_python_loop(weights, period):
    h = weights.shape[0]
    scores = []
    for head in range(h):
        acc = 0.0
        for i in range(period, 2 * period):
            acc += float(weights[head, i, i - period + 1])
        scores.append(acc / period)
    return torch.tensor(scores, dtype=torch.float64)


def ind_target_mask(weights, period):
    n = 2 * period
    i = torch.arange(n).unsqueeze(1)
    j = torch.arange(n).unsqueeze(0)
    target = ((j == i - period + 1) & (i >= period)).to(torch.float64)
    return torch.einsum("hij,ij->h", weights.to(torch.float64), target) / period


ENTRIES = [
    Entry("previous_token_score", "wrong", "superdiagonal",
          "reads the diagonal at offset +1, the weight on the next key i+1, instead of offset "
          "-1 (the previous key i-1)",
          prev_superdiagonal),
    Entry("previous_token_score", "wrong", "diagonal_default_dims",
          "calls torch.diagonal(weights, -1) without dim1/dim2, so it takes the diagonal of "
          "the (head, query) axes instead of the (query, key) ones",
          prev_diagonal_default_dims),
    Entry("previous_token_score", "wrong", "mean_over_heads",
          "averages the (H, N-1) diagonal over dim 0, the heads, instead of over the queries, "
          "so it returns one value per query rather than one per head",
          prev_mean_over_heads),
    Entry("previous_token_score", "wrong", "loop_index_wraps",
          "the loop runs i over 0..N-2 instead of 1..N-1: query 0 reads weights[:, 0, -1], "
          "which wraps round to the last key, and the last query is left out",
          prev_loop_wraps_around),
    Entry("previous_token_score", "wrong", "divides_by_n",
          "sums the N-1 previous-token weights but divides by N, as if query 0 counted",
          prev_divides_by_n),
    Entry("previous_token_score", "wrong", "argmax_fraction",
          "counts how often key i-1 is each query's argmax instead of averaging the weight "
          "put on it",
          prev_argmax_fraction),
    Entry("previous_token_score", "right", "band_mask_float64", None, prev_band_mask),
    Entry("previous_token_score", "right", "advanced_indexing", None, prev_fancy_index),

    Entry("induction_score", "wrong", "copy_instead_of_next",
          "reads key i - period, the earlier copy of the token itself, instead of "
          "i - period + 1, the token that followed it",
          ind_copy_not_next),
    Entry("induction_score", "wrong", "diagonal_sliced_from_wrong_end",
          "the offset 1-period diagonal has period+1 entries and the queries i >= period are "
          "the last period of them; it keeps [:-1] (starting at query period-1) instead of [1:]",
          ind_wrong_end_of_diagonal),
    Entry("induction_score", "wrong", "first_half_key_block",
          "takes the diagonal of the block weights[:, period:, :period], which leaves out the "
          "last query (its key, position period, lies in the second half)",
          ind_block_slice_misses_last),
    Entry("induction_score", "wrong", "divides_by_n",
          "sums the period weights but divides by N = 2*period instead of period",
          ind_divides_by_n),
    Entry("induction_score", "wrong", "mean_over_wrong_axis",
          "stacks the picked weights as (period, H) and averages over dim 1, the heads, so it "
          "returns one value per query instead of one per head",
          ind_mean_wrong_axis),
    Entry("induction_score", "wrong", "diagonal_dims_swapped",
          "passes dim1=-1, dim2=-2 to diagonal, so the offset counts from the key axis and it "
          "reads w[h, i, i + period - 1] (a key after the query) instead of w[h, i, i - period + 1]",
          ind_diagonal_dims_swapped),
    Entry("induction_score", "right", "python_loop", None, ind_python_loop),
    Entry("induction_score", "right", "target_mask_einsum", None, ind_target_mask),
]
