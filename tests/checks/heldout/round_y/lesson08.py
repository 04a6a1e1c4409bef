"""Held-out catalogue, lesson 08 (what heads learn): previous_token_score, induction_score."""

import torch

from entry import Entry


# ================================================================ previous_token_score: wrong
def prev_next_token(weights):
    diag = torch.diagonal(weights, offset=1, dim1=-2, dim2=-1)
    return diag.float().mean(dim=-1).to(weights.dtype)


def prev_divides_by_n(weights):
    n = weights.shape[-1]
    on_prev = torch.diagonal(weights, offset=-1, dim1=1, dim2=2)
    return on_prev.to(torch.float32).sum(dim=-1).to(weights.dtype) / n


def prev_mean_over_heads(weights):
    d = weights.diagonal(-1, 1, 2)  # (H, N-1)
    return d.to(torch.float32).mean(0).to(weights.dtype)


def prev_len_is_heads(weights):
    n = len(weights)
    total = torch.zeros(weights.shape[0], dtype=torch.float64)
    for i in range(1, weights.shape[1]):
        total += weights[:, i, i - 1].double()
    return (total / (n - 1)).to(weights.dtype)


def prev_loop_stops_early(weights):
    heads, n, _ = weights.shape
    acc = torch.zeros(heads, dtype=torch.float32)
    for i in range(1, n - 1):
        acc = acc + weights[:, i, i - 1].float()
    return (acc / (n - 1)).to(weights.dtype)


def prev_returns_list(weights):
    heads, n, _ = weights.shape
    scores = []
    for h in range(heads):
        vals = [float(weights[h, i, i - 1]) for i in range(1, n)]
        scores.append(sum(vals) / len(vals))
    return scores


# ================================================================ previous_token_score: right
def prev_shifted_mask_sum(weights):
    n = weights.shape[-1]
    sub = torch.diag(torch.ones(n - 1, dtype=torch.float64), -1)  # ones at (i, i-1)
    return ((weights.double() * sub).sum(dim=(1, 2)) / (n - 1)).to(weights.dtype)


def prev_index_gather(weights):
    n = weights.shape[1]
    qi = torch.arange(1, n)
    picked = weights[:, qi, qi - 1].to(torch.float64)  # (H, N-1)
    return torch.mean(picked, dim=1).to(weights.dtype)


# ===================================================================== induction_score: wrong
def ind_no_plus_one(weights, period):
    i = torch.arange(period, 2 * period)
    return weights[:, i, i - period].float().mean(-1).to(weights.dtype)


def ind_offset_sign(weights, period):
    diag = torch.diagonal(weights, offset=period - 1, dim1=-2, dim2=-1)
    return diag[:, 1:].to(torch.float32).mean(dim=-1).to(weights.dtype)


def ind_slice_wrong_end(weights, period):
    diag = torch.diagonal(weights, offset=1 - period, dim1=1, dim2=2)  # (H, period + 1)
    return diag[:, :-1].to(torch.float32).mean(dim=1).to(weights.dtype)


def ind_divides_by_n(weights, period):
    n = weights.shape[-1]
    h = weights.shape[0]
    s = torch.zeros(h, dtype=torch.float64)
    for i in range(period, n):
        s += weights[:, i, i - period + 1].double()
    return (s / n).to(weights.dtype)


def ind_loop_starts_late(weights, period):
    heads = weights.shape[0]
    out = torch.zeros(heads, dtype=torch.float32)
    count = 0
    for i in range(period + 1, 2 * period):
        out += weights[:, i, i - period + 1].float()
        count += 1
    return (out / count).to(weights.dtype)


def ind_query_key_swapped(weights, period):
    q = torch.arange(period, 2 * period)
    kk = q - period + 1
    vals = weights[:, kk, q]
    return vals.double().mean(dim=-1).to(weights.dtype)


# ===================================================================== induction_score: right
def ind_block_diagonal(weights, period):
    block = weights[:, period:, 1:period + 1]  # rows period.., cols 1..period
    return torch.diagonal(block, dim1=1, dim2=2).double().mean(dim=1).to(weights.dtype)


def ind_python_loops(weights, period):
    H = weights.shape[0]
    res = torch.empty(H, dtype=torch.float64)
    for h in range(H):
        tot = 0.0
        for i in range(period, 2 * period):
            tot += weights[h, i, i - period + 1].item()
        res[h] = tot / period
    return res.to(weights.dtype)


ENTRIES = [
    Entry("previous_token_score", "wrong", "next_token_diagonal",
          "reads the diagonal at offset +1, the weight on key i + 1 (the next token), instead "
          "of offset -1, the previous token",
          prev_next_token),
    Entry("previous_token_score", "wrong", "divides_by_n",
          "sums the N - 1 previous-token weights but divides by N, as if query 0 counted too",
          prev_divides_by_n),
    Entry("previous_token_score", "wrong", "mean_over_heads",
          "averages the sub-diagonal over dim 0, the heads, instead of over the queries, so "
          "it returns one value per query (N - 1,) instead of one per head (H,)",
          prev_mean_over_heads),
    Entry("previous_token_score", "wrong", "len_is_heads",
          "takes N from len(weights), which is the number of heads H, so the sum is divided "
          "by H - 1 instead of N - 1",
          prev_len_is_heads),
    Entry("previous_token_score", "wrong", "loop_stops_early",
          "loops over range(1, n - 1), leaving out the last query, while still dividing by "
          "N - 1",
          prev_loop_stops_early),
    Entry("previous_token_score", "wrong", "returns_list",
          "computes the right numbers but returns a Python list of floats instead of an "
          "(H,) tensor",
          prev_returns_list),
    Entry("previous_token_score", "right", "shifted_identity_mask", None, prev_shifted_mask_sum),
    Entry("previous_token_score", "right", "fancy_index_gather", None, prev_index_gather),

    Entry("induction_score", "wrong", "no_plus_one",
          "reads key i - period, the earlier copy of the same token, instead of key "
          "i - period + 1, the token that followed it",
          ind_no_plus_one),
    Entry("induction_score", "wrong", "offset_sign",
          "takes the diagonal at offset period - 1 (above the main diagonal) instead of "
          "1 - period (below it)",
          ind_offset_sign),
    Entry("induction_score", "wrong", "slice_wrong_end",
          "keeps diagonal[:, :-1] instead of diagonal[:, 1:], so it averages queries "
          "period - 1 .. 2 period - 2 instead of period .. 2 period - 1",
          ind_slice_wrong_end),
    Entry("induction_score", "wrong", "divides_by_n",
          "sums the period weights of the second half but divides by N = 2 * period instead "
          "of period",
          ind_divides_by_n),
    Entry("induction_score", "wrong", "loop_starts_late",
          "starts the query loop at period + 1 instead of period, leaving the first query of "
          "the second copy out (and dividing by zero when period is 1)",
          ind_loop_starts_late),
    Entry("induction_score", "wrong", "query_key_swapped",
          "indexes weights[h, key, query] instead of weights[h, query, key], reading the "
          "transposed pattern",
          ind_query_key_swapped),
    Entry("induction_score", "right", "block_diagonal", None, ind_block_diagonal),
    Entry("induction_score", "right", "python_loops", None, ind_python_loops),
]
