"""Held-out catalogue, lesson 08 (what heads learn): previous_token_score, induction_score."""

import torch

from entry import Entry


# =============================================================================================
# previous_token_score
# =============================================================================================

def prev_swapped_diagonal_dims(weights):
    w = weights.float()
    band = torch.diagonal(w, offset=-1, dim1=2, dim2=1)  # (H, N - 1)
    return band.mean(dim=-1).to(weights.dtype)


def prev_divides_by_n(weights):
    H, N, _ = weights.shape
    total = torch.zeros(H, dtype=torch.float64)
    for i in range(1, N):
        total += weights[:, i, i - 1].double()
    return total / N


def prev_diagonal_default_dims(weights):
    sub = torch.diagonal(weights.float(), -1)
    return sub.mean(-1).to(weights.dtype)


def prev_argmax_fraction(weights):
    n = weights.shape[-1]
    top = weights[:, 1:, :].argmax(dim=-1)  # (H, N - 1): the key each query looks at most
    expected = torch.arange(n - 1)[None, :]
    return (top == expected).double().mean(dim=-1)


def prev_keepdim(weights):
    h, n, _ = weights.shape
    rows = torch.arange(1, n)
    picked = weights[:, rows, rows - 1].to(torch.float32)  # (H, N - 1)
    return picked.mean(dim=-1, keepdim=True)


def prev_mean_over_heads(weights):
    n = weights.shape[1]
    per_query = torch.stack([weights[:, i, i - 1] for i in range(1, n)])  # (N - 1, H)
    return per_query.double().mean(dim=-1)


def prev_right_python_loops(weights):
    H, N, _ = weights.shape
    scores = []
    for h in range(H):
        acc = 0.0
        for i in range(1, N):
            acc += float(weights[h, i, i - 1])
        scores.append(acc / (N - 1))
    return torch.tensor(scores, dtype=torch.float64)


def prev_right_einsum_selector(weights):
    n = weights.shape[-1]
    sel = torch.ones(n, n, dtype=torch.float64).tril(-1).triu(-1)  # 1 exactly at (i, i - 1)
    return torch.einsum("hqk,qk->h", weights.double(), sel) / (n - 1)


# =============================================================================================
# induction_score
# =============================================================================================

def ind_key_is_copy(weights, period):
    H = weights.shape[0]
    q = torch.arange(period, 2 * period)
    vals = weights[:, q, q - period].double()
    return vals.mean(dim=1)


def ind_whole_diagonal(weights, period):
    diag = torch.diagonal(weights.float(), offset=1 - period, dim1=-2, dim2=-1)
    return diag.mean(dim=-1).to(weights.dtype)


def ind_positive_offset(weights, period):
    diag = torch.diagonal(weights.float(), offset=period - 1, dim1=1, dim2=2)
    return diag[:, -period:].mean(dim=-1).to(weights.dtype)


def ind_divides_by_n(weights, period):
    n = weights.shape[-1]
    acc = torch.zeros(weights.shape[0], dtype=torch.float64)
    for i in range(period, n):
        acc = acc + weights[:, i, i - period + 1].double()
    return acc / n


def ind_mean_over_everything(weights, period):
    q = torch.arange(period, 2 * period)
    return weights[:, q, q - period + 1].double().mean()


def ind_index_broadcast_block(weights, period):
    q_idx = torch.arange(period, 2 * period)
    k_idx = q_idx - period + 1
    block = weights[:, q_idx[:, None], k_idx]  # meant to pick the pairs (q, k)
    return block.double().mean(dim=(-2, -1))


def ind_right_loops(weights, period):
    out = []
    for head in weights.double():
        s = 0.0
        for i in range(period, 2 * period):
            s += head[i, i - period + 1].item()
        out.append(s / period)
    return torch.tensor(out, dtype=torch.float64)


def ind_right_roll(weights, period):
    # rolled[h, i, j] = weights[h, i, j - (period - 1)], so the main diagonal holds
    # weights[h, i, i - period + 1]; for i >= period nothing wraps around.
    rolled = torch.roll(weights.double(), shifts=period - 1, dims=-1)
    diag = torch.diagonal(rolled, dim1=1, dim2=2)  # (H, 2 * period)
    return diag[:, period:].sum(dim=1) / period


ENTRIES = [
    Entry("previous_token_score", "wrong", "diagonal_dims_swapped",
          "passes dim1=2, dim2=1 to torch.diagonal, so offset=-1 reads weights[h, i-1, i], the "
          "weight query i-1 puts on the NEXT token, instead of weights[h, i, i-1]",
          prev_swapped_diagonal_dims),
    Entry("previous_token_score", "wrong", "divides_by_n",
          "sums the N-1 weights on the previous token but divides by N, as if query 0 were "
          "counted: the mean is too small by a factor (N-1)/N",
          prev_divides_by_n),
    Entry("previous_token_score", "wrong", "diagonal_default_dims",
          "calls torch.diagonal(weights, -1) without dim1/dim2: the default dims are 0 and 1, "
          "so it takes a diagonal across the head and query axes and returns N values (one per "
          "key) instead of one score per head",
          prev_diagonal_default_dims),
    Entry("previous_token_score", "wrong", "argmax_fraction",
          "scores each head by the fraction of queries whose largest weight is on i-1 (a hard "
          "argmax count) instead of the mean weight on key i-1",
          prev_argmax_fraction),
    Entry("previous_token_score", "wrong", "keepdim_shape",
          "averages with keepdim=True, so the result has shape (H, 1) instead of (H,)",
          prev_keepdim),
    Entry("previous_token_score", "wrong", "mean_over_heads_axis",
          "stacks the per-query weights as (N-1, H) and then averages over dim=-1, i.e. over "
          "the heads: one value per query instead of one per head",
          prev_mean_over_heads),
    Entry("previous_token_score", "right", "python_loops", None, prev_right_python_loops),
    Entry("previous_token_score", "right", "einsum_with_selector", None,
          prev_right_einsum_selector),

    Entry("induction_score", "wrong", "key_is_the_copy",
          "reads key i - period, the earlier copy of token i itself (a duplicate-token head), "
          "instead of key i - period + 1, the token that followed it",
          ind_key_is_copy),
    Entry("induction_score", "wrong", "keeps_first_diagonal_entry",
          "averages the whole diagonal at offset 1 - period, which has period + 1 entries: "
          "query period - 1 (in the first half) is wrongly included",
          ind_whole_diagonal),
    Entry("induction_score", "wrong", "diagonal_offset_sign",
          "uses offset=period - 1 in torch.diagonal: a positive offset lies above the main "
          "diagonal (key i + period - 1), not below it",
          ind_positive_offset),
    Entry("induction_score", "wrong", "divides_by_n",
          "sums the period weights of the second half but divides by N = 2 * period instead "
          "of by period, halving every score",
          ind_divides_by_n),
    Entry("induction_score", "wrong", "averages_heads_too",
          "calls .mean() with no dim, so it also averages over the heads and returns one "
          "scalar instead of an (H,) tensor",
          ind_mean_over_everything),
    Entry("induction_score", "wrong", "index_broadcast_block",
          "indexes with q_idx[:, None] and k_idx, which broadcast to a (period, period) block "
          "of every query against every key, and averages that block instead of the period "
          "(query, key) pairs",
          ind_index_broadcast_block),
    Entry("induction_score", "right", "loops_over_heads", None, ind_right_loops),
    Entry("induction_score", "right", "roll_onto_main_diagonal", None, ind_right_roll),
]
