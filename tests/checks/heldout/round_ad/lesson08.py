"""Held-out catalogue, lesson 08 (what heads learn): previous_token_score, induction_score."""

import torch

from entry import Entry


# =============================================================================================
# previous_token_score
# =============================================================================================

def prev_next_token_diagonal(weights):
    diag = torch.diagonal(weights, offset=1, dim1=-2, dim2=-1)  # (H, N - 1)
    return diag.float().mean(dim=-1).to(weights.dtype)


def prev_sum_not_mean(weights):
    w = weights.to(torch.promote_types(weights.dtype, torch.float32))
    return torch.diagonal(w, -1, 1, 2).sum(dim=1).to(weights.dtype)


def prev_diagonal_default_dims(weights):
    return torch.diagonal(weights, offset=-1).mean(dim=-1)


def prev_mean_over_heads(weights):
    on_prev = weights.diagonal(offset=-1, dim1=1, dim2=2)  # (H, N - 1)
    return on_prev.mean(dim=0)


def prev_divides_by_n(weights):
    H, N, _ = weights.shape
    total = torch.zeros(H, dtype=torch.float64)
    for i in range(1, N):
        total += weights[:, i, i - 1].double()
    return (total / N).to(weights.dtype)


def prev_all_earlier_keys(weights):
    n = weights.shape[-1]
    earlier = torch.tril(torch.ones(n, n, dtype=torch.bool), diagonal=-1)  # keys j < i
    picked = (weights * earlier).sum(dim=-1)  # (H, N)
    return picked[:, 1:].mean(dim=-1)


def prev_python_loops(weights):
    heads, n, _ = weights.shape
    scores = []
    for h in range(heads):
        acc = 0.0
        for i in range(1, n):
            acc += float(weights[h, i, i - 1])
        scores.append(acc / (n - 1))
    return torch.tensor(scores, dtype=torch.float64)


def prev_shifted_identity_mask(weights):
    n = weights.shape[-1]
    sub = torch.diag_embed(torch.ones(n - 1, dtype=torch.float64), offset=-1)  # 1 at (i, i-1)
    return torch.einsum("hij,ij->h", weights.double(), sub) / (n - 1)


# =============================================================================================
# induction_score
# =============================================================================================

def ind_copy_not_successor(weights, period):
    d = torch.diagonal(weights, offset=-period, dim1=-2, dim2=-1)  # w[h, i, i - period]
    return d.float().mean(-1).to(weights.dtype)


def ind_slice_off_by_one(weights, period):
    d = torch.diagonal(weights, offset=1 - period, dim1=-2, dim2=-1)  # (H, period + 1)
    return d[:, :-1].float().mean(-1).to(weights.dtype)


def ind_above_diagonal(weights, period):
    d = torch.diagonal(weights, offset=period - 1, dim1=1, dim2=2)
    return d[:, 1:].mean(dim=1)


def ind_divides_by_n(weights, period):
    H, N, _ = weights.shape
    idx = torch.arange(period, N)
    picked = weights[:, idx, idx - period + 1]  # (H, period)
    return picked.double().sum(dim=-1).div(N).to(weights.dtype)


def ind_block_not_diagonal(weights, period):
    queries = torch.arange(period, 2 * period)
    keys = queries - period + 1
    block = weights[:, queries][:, :, keys]  # rows, then columns
    return block.mean(dim=(1, 2))


def ind_returns_list(weights, period):
    out = []
    for h in range(weights.shape[0]):
        vals = [weights[h, i, i - period + 1] for i in range(period, 2 * period)]
        out.append(float(sum(vals) / period))
    return out


def ind_nested_loops(weights, period):
    H = weights.shape[0]
    res = torch.zeros(H, dtype=torch.float64)
    for h in range(H):
        s = 0.0
        for i in range(period, 2 * period):
            s += weights[h, i, i - period + 1].item()
        res[h] = s / period
    return res


def ind_gather(weights, period):
    second = weights[:, period:, :].double()  # (H, period, N): queries of the second copy
    target = torch.arange(1, period + 1).view(1, period, 1).expand(weights.shape[0], period, 1)
    return second.gather(-1, target).squeeze(-1).mean(-1)


ENTRIES = [
    # ---- previous_token_score
    Entry("previous_token_score", "wrong", "next-token-diagonal",
          "The diagonal offset has the wrong sign: offset=+1 reads weights[h, i, i+1], the next "
          "token, instead of weights[h, i, i-1].",
          prev_next_token_diagonal),
    Entry("previous_token_score", "wrong", "sum-not-mean",
          "It sums the previous-token weights over the queries instead of averaging them, so a "
          "perfect head scores N - 1 instead of 1.",
          prev_sum_not_mean),
    Entry("previous_token_score", "wrong", "diagonal-default-dims",
          "torch.diagonal without dim1/dim2 takes the diagonal of the first two axes (head and "
          "query), not of the (query, key) matrix, so the result has the wrong shape.",
          prev_diagonal_default_dims),
    Entry("previous_token_score", "wrong", "mean-over-heads",
          "The mean runs over dim 0, the heads, instead of over the queries: it returns one "
          "value per query, shape (N - 1,), instead of one per head.",
          prev_mean_over_heads),
    Entry("previous_token_score", "wrong", "divides-by-n",
          "It sums the N - 1 previous-token weights but divides by N, counting query 0 which "
          "has no previous token.",
          prev_divides_by_n),
    Entry("previous_token_score", "wrong", "all-earlier-keys",
          "It masks with tril(diagonal=-1), which keeps every earlier key, so it measures the "
          "weight on all of the past rather than on key i - 1 only.",
          prev_all_earlier_keys),
    Entry("previous_token_score", "right", "python-loops", None, prev_python_loops),
    Entry("previous_token_score", "right", "shifted-identity-einsum", None,
          prev_shifted_identity_mask),
    # ---- induction_score
    Entry("induction_score", "wrong", "copy-not-successor",
          "It reads key i - period (the earlier copy of the same token) instead of "
          "i - period + 1, the token that followed it.",
          ind_copy_not_successor),
    Entry("induction_score", "wrong", "slice-off-by-one",
          "From the diagonal at offset 1 - period it keeps entries [:-1] instead of [1:], i.e. "
          "queries period - 1 .. 2 period - 2: one query from the first half in, the last one out.",
          ind_slice_off_by_one),
    Entry("induction_score", "wrong", "above-diagonal",
          "The diagonal offset has the wrong sign: period - 1 reads keys i + period - 1 above "
          "the diagonal instead of i - period + 1 below it.",
          ind_above_diagonal),
    Entry("induction_score", "wrong", "divides-by-n",
          "It sums the period selected weights but divides by N = 2 * period instead of by "
          "period, halving every score.",
          ind_divides_by_n),
    Entry("induction_score", "wrong", "block-not-diagonal",
          "Indexing rows and then columns separately (weights[:, rows][:, :, cols]) selects the "
          "whole period x period block, so it averages every pair, not the period pairs "
          "(i, i - period + 1).",
          ind_block_not_diagonal),
    Entry("induction_score", "wrong", "returns-list",
          "It returns a Python list of floats, one per head, instead of an (H,) tensor.",
          ind_returns_list),
    Entry("induction_score", "right", "nested-loops", None, ind_nested_loops),
    Entry("induction_score", "right", "gather-second-half", None, ind_gather),
]
