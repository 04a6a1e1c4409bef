"""Lesson 08 (torch): previous_token_score, induction_score; round j entries."""

import torch

from entry import Entry

# ---------------------------------------------------------------------- previous_token_score


def pts_next_token(weights):
    return torch.diagonal(weights, offset=1, dim1=-2, dim2=-1).float().mean(-1)


def pts_divides_by_n(weights):
    n = weights.shape[-1]
    return torch.diagonal(weights, offset=-1, dim1=-2, dim2=-1).float().sum(-1) / n


def pts_default_diagonal_dims(weights):
    return torch.diagonal(weights, offset=-1).float().mean(-1)


def pts_mean_over_everything(weights):
    return torch.diagonal(weights, offset=-1, dim1=-2, dim2=-1).float().mean()


def pts_max_not_mean(weights):
    return torch.diagonal(weights, offset=-1, dim1=-2, dim2=-1).float().amax(-1)


def pts_roll_wraps(weights):
    rolled = torch.roll(weights, shifts=1, dims=-1)  # rolled[h, i, i] = w[h, i, i - 1 mod N]
    return torch.diagonal(rolled, dim1=-2, dim2=-1).float().mean(-1)


def pts_loop(weights):
    h, n, _ = weights.shape
    res = []
    for head in range(h):
        total = 0.0
        for i in range(1, n):
            total += float(weights[head, i, i - 1])
        res.append(total / (n - 1))
    return torch.tensor(res, dtype=torch.float64)


def pts_subdiagonal_mask(weights):
    n = weights.shape[-1]
    sub = torch.ones(n, n, dtype=torch.bool).tril(-1) & ~torch.ones(n, n, dtype=torch.bool).tril(-2)
    picked = torch.where(sub, weights.double(), torch.zeros((), dtype=torch.float64))
    return picked.sum(dim=(-2, -1)) / (n - 1)


# --------------------------------------------------------------------------- induction_score


def ind_copy_token(weights, period):
    d = torch.diagonal(weights, offset=-period, dim1=-2, dim2=-1)
    return d.float().mean(-1)


def ind_starts_one_early(weights, period):
    d = torch.diagonal(weights, offset=1 - period, dim1=-2, dim2=-1)
    return d[:, :-1].float().mean(-1)


def ind_offset_sign(weights, period):
    d = torch.diagonal(weights, offset=period - 1, dim1=-2, dim2=-1)
    return d.float().mean(-1)


def ind_divides_by_n(weights, period):
    n = weights.shape[-1]
    d = torch.diagonal(weights, offset=1 - period, dim1=-2, dim2=-1)[:, 1:]
    return d.float().sum(-1) / n


def ind_indices_transposed(weights, period):
    n = weights.shape[-1]
    i = torch.arange(period, n)
    vals = weights[:, i - period + 1, i]  # [key, query] instead of [query, key]
    return vals.float().mean(-1)


def ind_no_mean(weights, period):
    d = torch.diagonal(weights, offset=1 - period, dim1=-2, dim2=-1)
    return d[:, 1:]


def ind_gather(weights, period):
    h, n, _ = weights.shape
    queries = torch.arange(period, n)
    keys = (queries - period + 1).view(1, -1, 1).expand(h, -1, 1)
    rows = weights[:, period:, :]
    return torch.gather(rows, 2, keys).squeeze(-1).double().mean(-1)


def ind_loop_float64(weights, period):
    h = weights.shape[0]
    w = weights.double()
    out = torch.zeros(h, dtype=torch.float64)
    for i in range(period, 2 * period):
        out += w[:, i, i - period + 1]
    return out / period


ENTRIES = [
    Entry("previous_token_score", "wrong", "next_token_diagonal",
          "Reads the diagonal at offset +1 (weight on key i + 1, the next token) instead of "
          "offset -1.", pts_next_token),
    Entry("previous_token_score", "wrong", "divides_by_n",
          "Sums the N - 1 previous-token weights but divides by N instead of N - 1.",
          pts_divides_by_n),
    Entry("previous_token_score", "wrong", "diagonal_default_dims",
          "Calls torch.diagonal(weights, offset=-1) with the default dim1=0, dim2=1, taking "
          "the diagonal over the head and query axes instead of query and key.",
          pts_default_diagonal_dims),
    Entry("previous_token_score", "wrong", "mean_over_heads_too",
          "Averages over heads as well, returning one scalar instead of one score per head.",
          pts_mean_over_everything),
    Entry("previous_token_score", "wrong", "max_instead_of_mean",
          "Takes the maximum previous-token weight over the queries instead of the mean.",
          pts_max_not_mean),
    Entry("previous_token_score", "wrong", "roll_wraps_first_query",
          "Shifts the keys with torch.roll, which wraps around, so query 0's weight on the "
          "last key is averaged in (over N queries instead of i >= 1).", pts_roll_wraps),
    Entry("previous_token_score", "right", "python_loop", None, pts_loop),
    Entry("previous_token_score", "right", "subdiagonal_mask_sum", None, pts_subdiagonal_mask),

    Entry("induction_score", "wrong", "key_of_the_copy_itself",
          "Reads key i - period (the earlier copy of token i itself) instead of "
          "i - period + 1, the token that followed it.", ind_copy_token),
    Entry("induction_score", "wrong", "starts_at_query_period_minus_one",
          "Slices the diagonal [:-1] instead of [1:], so it averages queries "
          "period - 1 .. 2 period - 2, one too early.", ind_starts_one_early),
    Entry("induction_score", "wrong", "diagonal_offset_sign_flipped",
          "Uses diagonal offset period - 1 (above the main diagonal) instead of 1 - period.",
          ind_offset_sign),
    Entry("induction_score", "wrong", "divides_by_n",
          "Sums the period induction weights but divides by N = 2 period instead of period.",
          ind_divides_by_n),
    Entry("induction_score", "wrong", "query_and_key_indices_swapped",
          "Indexes weights[:, i - period + 1, i], i.e. [key, query], reading the transposed "
          "entry instead of query i's weight on key i - period + 1.", ind_indices_transposed),
    Entry("induction_score", "wrong", "per_query_scores_not_averaged",
          "Returns the (H, period) weights per query without averaging them.", ind_no_mean),
    Entry("induction_score", "right", "gather_rows", None, ind_gather),
    Entry("induction_score", "right", "loop_float64", None, ind_loop_float64),
]
