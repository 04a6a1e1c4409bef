"""Held-out learners' answers, lesson 08 (what heads learn): previous_token_score, induction_score."""

import torch

from entry import Entry


# ============================================================ previous_token_score — wrong
def pts_offset_plus_one(weights):
    diag = torch.diagonal(weights, offset=1, dim1=-2, dim2=-1)  # w[h, i, i-1]
    return diag.float().mean(dim=-1).to(weights.dtype)


def pts_divides_by_n(weights):
    H, N, _ = weights.shape
    total = torch.zeros(H, dtype=torch.float32)
    for i in range(1, N):
        total += weights[:, i, i - 1].float()
    return (total / N).to(weights.dtype)


def pts_mean_over_heads(weights):
    prev = torch.diagonal(weights, -1, 1, 2)  # (H, N-1)
    return prev.to(torch.float32).mean(0)


def pts_diagonal_default_dims(weights):
    # one step below the main diagonal
    below = torch.diagonal(weights, offset=-1)
    return below.to(torch.float32).mean(-1).to(weights.dtype)


def pts_argmax_fraction(weights):
    n = weights.shape[-1]
    top = weights[:, 1:, :].argmax(dim=-1)  # (H, N-1) key each query looks at most
    expected = torch.arange(0, n - 1)
    return (top == expected).to(torch.float32).mean(dim=-1)


def pts_negative_index_wraps(weights):
    heads, n, _ = weights.shape
    idx = torch.arange(n)
    picked = weights[:, idx, idx - 1]  # (H, N)
    return picked.double().mean(dim=1).to(weights.dtype)


# ============================================================ previous_token_score — right
def pts_python_loops(weights):
    H, N = weights.shape[0], weights.shape[1]
    scores = []
    for h in range(H):
        acc = 0.0
        for i in range(1, N):
            acc += float(weights[h, i, i - 1])
        scores.append(acc / (N - 1))
    return torch.tensor(scores, dtype=torch.float64)


def pts_subdiagonal_mask(weights):
    n = weights.shape[-1]
    sub = torch.diag(torch.ones(n - 1, dtype=torch.float64), -1)  # ones at (i, i-1)
    picked = weights.to(torch.float64) * sub
    return picked.sum(dim=(1, 2)) / (n - 1)


# ============================================================ induction_score — wrong
def ind_copy_not_next(weights, period):
    d = torch.diagonal(weights, offset=-period, dim1=1, dim2=2)  # (H, period)
    return d.float().mean(-1).to(weights.dtype)


def ind_skips_first_query(weights, period):
    H = weights.shape[0]
    vals = []
    for i in range(period + 1, 2 * period):
        vals.append(weights[:, i, i - period + 1].float())
    stacked = torch.stack(vals, dim=-1) if vals else torch.empty(H, 0)
    return stacked.mean(-1).to(weights.dtype)


def ind_offset_sign(weights, period):
    diag = torch.diagonal(weights, offset=period - 1, dim1=-2, dim2=-1)
    return diag[:, 1:].to(torch.float32).mean(dim=-1).to(weights.dtype)


def ind_slice_wrong_end(weights, period):
    diag = torch.diagonal(weights, offset=1 - period, dim1=-2, dim2=-1)  # (H, period + 1)
    return diag[:, :-1].to(torch.float32).mean(dim=-1).to(weights.dtype)


def ind_sum_not_mean(weights, period):
    q = torch.arange(period, 2 * period)
    k = q - period + 1
    return weights[:, q, k].float().sum(dim=-1).to(weights.dtype)


def ind_floor_division(weights, period):
    rows = torch.arange(period, 2 * period)
    total = weights[:, rows, rows - (period - 1)].to(torch.float32).sum(dim=1)
    return (total // period).to(weights.dtype)


# ============================================================ induction_score — right
def ind_fancy_index_f64(weights, period):
    rows = torch.arange(period, 2 * period, device=weights.device)
    cols = rows - period + 1
    return weights[:, rows, cols].to(torch.float64).mean(dim=-1)


def ind_gather_loop(weights, period):
    H = weights.shape[0]
    out = torch.zeros(H, dtype=torch.float32)
    for h in range(H):
        s = 0.0
        for i in range(period, 2 * period):
            s = s + weights[h, i].to(torch.float32).gather(0, torch.tensor([i + 1 - period]))[0]
        out[h] = s / period
    return out


ENTRIES = [
    Entry("previous_token_score", "wrong", "diagonal_above",
          "takes torch.diagonal with offset=+1, the weight query i puts on key i+1 (the next "
          "token), instead of offset=-1 for key i-1",
          pts_offset_plus_one),
    Entry("previous_token_score", "wrong", "divides_by_n",
          "sums the N-1 weights w[h, i, i-1] for i >= 1 but divides by N instead of N-1",
          pts_divides_by_n),
    Entry("previous_token_score", "wrong", "mean_over_heads",
          "averages the sub-diagonal over dim 0, the heads, giving one value per query (N-1,) "
          "instead of one per head (H,)",
          pts_mean_over_heads),
    Entry("previous_token_score", "wrong", "diagonal_default_dims",
          "calls torch.diagonal(weights, offset=-1) without dim1/dim2, so it takes the diagonal "
          "of the first two axes (heads x queries) instead of each head's (N, N) matrix",
          pts_diagonal_default_dims),
    Entry("previous_token_score", "wrong", "argmax_fraction",
          "scores the fraction of queries whose most-attended key is i-1 (an argmax count) "
          "instead of the mean weight on key i-1",
          pts_argmax_fraction),
    Entry("previous_token_score", "wrong", "query0_wraps_around",
          "indexes w[h, i, i-1] for every i including i = 0, where i-1 = -1 wraps to the last key, "
          "and averages over N queries instead of leaving query 0 out",
          pts_negative_index_wraps),
    Entry("previous_token_score", "right", "python_loops", None, pts_python_loops),
    Entry("previous_token_score", "right", "subdiagonal_mask_sum", None, pts_subdiagonal_mask),

    Entry("induction_score", "wrong", "copy_not_next_token",
          "reads key i - period (the earlier copy of token i itself, a duplicate-token head) "
          "instead of key i - period + 1, the token that followed it",
          ind_copy_not_next),
    Entry("induction_score", "wrong", "skips_first_query",
          "loops over queries period+1 .. 2*period-1, leaving out query i = period (and "
          "averaging nothing, NaN, when period = 1)",
          ind_skips_first_query),
    Entry("induction_score", "wrong", "diagonal_offset_sign",
          "uses torch.diagonal offset period-1 instead of 1-period, i.e. the diagonal above the "
          "main one (key i + period - 1) rather than below it",
          ind_offset_sign),
    Entry("induction_score", "wrong", "diagonal_slice_off_by_one",
          "keeps diagonal[:, :-1] instead of diagonal[:, 1:]: the entries of queries period-1 .. "
          "2*period-2, one query too early",
          ind_slice_wrong_end),
    Entry("induction_score", "wrong", "sum_not_mean",
          "returns the sum of the period weights per head instead of their mean",
          ind_sum_not_mean),
    Entry("induction_score", "wrong", "floor_division",
          "divides the sum by period with // (floor division), which floors the mean of weights "
          "in [0, 1] to 0 (or 1) instead of a true division",
          ind_floor_division),
    Entry("induction_score", "right", "fancy_index_float64", None, ind_fancy_index_f64),
    Entry("induction_score", "right", "gather_loop", None, ind_gather_loop),
]
