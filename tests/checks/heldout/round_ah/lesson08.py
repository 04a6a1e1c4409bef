"""Held-out learners' answers, lesson 08 (heads): previous_token_score, induction_score."""

import torch

from entry import Entry


# ============================================================================ previous_token_score
def prev_next_token(weights):
    return torch.diagonal(weights, offset=1, dim1=-2, dim2=-1).float().mean(dim=-1)


def prev_divides_by_n(weights):
    n = weights.shape[-1]
    diag = torch.diagonal(weights, offset=-1, dim1=1, dim2=2).float()
    return diag.sum(dim=-1) / n


def prev_mean_over_heads(weights):
    sub = torch.diagonal(weights, -1, 1, 2).to(torch.float32)  # (H, N - 1)
    return sub.mean(dim=0)


def prev_default_diagonal_dims(weights):
    return torch.diagonal(weights, offset=-1).float().mean(dim=-1)


def prev_sum_not_mean(weights):
    H, N, _ = weights.shape
    scores = torch.zeros(H, dtype=torch.float32)
    for i in range(1, N):
        scores += weights[:, i, i - 1].float()
    return scores


def prev_whole_block(weights):
    shifted = weights[:, 1:, :-1].float()  # (H, N-1, N-1): queries 1.., keys ..N-2
    return shifted.mean(dim=(1, 2))


def prev_right_fancy_index(weights):
    n = weights.shape[-1]
    rows = torch.arange(1, n)
    picked = weights[:, rows, rows - 1].to(torch.float64)  # (H, N - 1)
    return picked.mean(-1).to(weights.dtype)


def prev_right_einsum_mask(weights):
    n = weights.shape[1]
    sub_diag = torch.diag(torch.ones(n - 1, dtype=torch.float64), -1)  # ones at (i, i-1)
    total = torch.einsum("hij,ij->h", weights.to(torch.float64), sub_diag)
    return total / (n - 1)


# ============================================================================ induction_score
def ind_earlier_copy(weights, period):
    H = weights.shape[0]
    vals = torch.zeros(H, dtype=torch.float32)
    for i in range(period, 2 * period):
        vals += weights[:, i, i - period].float()
    return vals / period


def ind_offset_sign(weights, period):
    d = torch.diagonal(weights, offset=period - 1, dim1=-2, dim2=-1)
    return d[:, 1:].float().mean(-1)


def ind_slice_off_by_one(weights, period):
    d = torch.diagonal(weights, offset=1 - period, dim1=1, dim2=2)  # (H, period + 1)
    return d[:, :-1].float().mean(dim=1)


def ind_divides_by_n(weights, period):
    n = weights.shape[-1]
    q = torch.arange(period, 2 * period)
    return weights[:, q, q - period + 1].float().sum(dim=-1) / n


def ind_mean_everything(weights, period):
    diag = torch.diagonal(weights, offset=1 - period, dim1=-2, dim2=-1)[:, 1:]
    return diag.float().mean()


def ind_cross_product_index(weights, period):
    queries = torch.arange(period, 2 * period)
    keys = queries - period + 1
    block = weights[:, queries][:, :, keys]  # meant: weights[h, i, i - period + 1]
    return block.float().mean(dim=(-2, -1))


def ind_right_python_loop(weights, period):
    H = weights.shape[0]
    out = []
    for h in range(H):
        acc = 0.0
        for i in range(period, 2 * period):
            acc += float(weights[h, i, i - period + 1])
        out.append(acc / period)
    return torch.tensor(out, dtype=torch.float64)


def ind_right_roll(weights, period):
    # rolled[h, i, j] = weights[h, i, j - (period - 1)], so its main diagonal holds
    # weights[h, i, i - period + 1]; for i >= period nothing wraps around.
    rolled = torch.roll(weights.to(torch.float32), shifts=period - 1, dims=-1)
    main = torch.diagonal(rolled, dim1=-2, dim2=-1)  # (H, 2 * period)
    return main[:, period:].mean(dim=-1)


ENTRIES = [
    Entry("previous_token_score", "wrong", "next_token_diagonal",
          "reads the diagonal at offset +1 (query i on key i + 1, the next token) instead of "
          "offset -1 (key i - 1)",
          prev_next_token),
    Entry("previous_token_score", "wrong", "divides_by_n",
          "sums the N - 1 previous-token weights but divides by N, as if query 0 took part",
          prev_divides_by_n),
    Entry("previous_token_score", "wrong", "mean_over_heads_axis",
          "averages the (H, N - 1) diagonal over dim 0, the heads, instead of over the queries: "
          "returns N - 1 values instead of one per head",
          prev_mean_over_heads),
    Entry("previous_token_score", "wrong", "diagonal_default_dims",
          "calls torch.diagonal(weights, offset=-1) with its default dims 0 and 1, so it runs "
          "down the head and query axes instead of the (query, key) matrix of each head",
          prev_default_diagonal_dims),
    Entry("previous_token_score", "wrong", "sum_not_mean",
          "adds up the previous-token weights of queries 1..N-1 and never divides by N - 1: a "
          "total, not the mean weight",
          prev_sum_not_mean),
    Entry("previous_token_score", "wrong", "averages_whole_shifted_block",
          "slices weights[:, 1:, :-1] and averages the whole (N-1) x (N-1) block instead of "
          "only its diagonal, so every earlier key counts, not just key i - 1",
          prev_whole_block),
    Entry("previous_token_score", "right", "advanced_indexing_float64", None,
          prev_right_fancy_index),
    Entry("previous_token_score", "right", "einsum_with_subdiagonal", None,
          prev_right_einsum_mask),

    Entry("induction_score", "wrong", "earlier_copy_not_next_token",
          "reads key i - period, the earlier copy of token i itself (a duplicate-token head), "
          "instead of key i - period + 1, the token that followed it",
          ind_earlier_copy),
    Entry("induction_score", "wrong", "diagonal_offset_sign",
          "uses torch.diagonal with offset=period - 1: a positive offset is above the diagonal "
          "(key i + period - 1), not below it",
          ind_offset_sign),
    Entry("induction_score", "wrong", "diagonal_slice_off_by_one",
          "keeps diagonal[:, :-1] instead of diagonal[:, 1:], so it averages queries "
          "period-1 .. 2*period-2: one query before the second half and the last one lost",
          ind_slice_off_by_one),
    Entry("induction_score", "wrong", "divides_by_n",
          "sums the period weights of the second half but divides by N = 2 * period instead of "
          "by period",
          ind_divides_by_n),
    Entry("induction_score", "wrong", "mean_over_heads_too",
          "calls .mean() with no dim, averaging over the heads as well: one number instead of "
          "one score per head",
          ind_mean_everything),
    Entry("induction_score", "wrong", "chained_index_cross_product",
          "indexes weights[:, queries][:, :, keys], which takes every query-key combination "
          "(a period x period block) instead of the pairs (i, i - period + 1), and averages "
          "the block",
          ind_cross_product_index),
    Entry("induction_score", "right", "python_loops_float", None, ind_right_python_loop),
    Entry("induction_score", "right", "roll_keys_then_main_diagonal", None, ind_right_roll),
]
