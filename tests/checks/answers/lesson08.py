"""Learner-style answers to lesson 08 (see answers/lesson01.py for the layout)."""

import numpy as np
import torch


# -- previous_token_score ------------------------------------------------------------------------
def prev_diagonal(weights):
    return torch.diagonal(weights, offset=-1, dim1=1, dim2=2).mean(dim=1)


def prev_index(weights):
    n = weights.shape[-1]
    rows = torch.arange(1, n)
    return weights[:, rows, rows - 1].double().mean(-1)


def prev_loop(weights):
    heads, n, _ = weights.shape
    return torch.tensor([sum(float(weights[h, i, i - 1]) for i in range(1, n)) / (n - 1)
                         for h in range(heads)])


def prev_shifted_eye(weights):
    n = weights.shape[-1]
    below = torch.diag(torch.ones(n - 1, dtype=torch.bool), -1)  # row i, column i - 1
    return (weights.float() * below).sum((1, 2)) / (n - 1)


def prev_next_token(weights):
    return torch.diagonal(weights, offset=1, dim1=1, dim2=2).mean(dim=1)


def prev_transposed(weights):
    n = weights.shape[-1]
    rows = torch.arange(1, n)
    return weights[:, rows - 1, rows].mean(-1)


def prev_self(weights):
    return torch.diagonal(weights, dim1=1, dim2=2).mean(dim=1)


def prev_wraps(weights):
    n = weights.shape[-1]
    rows = torch.arange(n)
    return weights[:, rows, rows - 1].mean(-1)


def prev_divides_by_n(weights):
    return torch.diagonal(weights, offset=-1, dim1=1, dim2=2).sum(dim=1) / weights.shape[-1]


def prev_mean_over_heads(weights):
    return torch.diagonal(weights, offset=-1, dim1=1, dim2=2).mean(dim=0)


def prev_sum(weights):
    return torch.diagonal(weights, offset=-1, dim1=1, dim2=2).sum(dim=1)


def prev_entries(weights):
    n = weights.shape[-1]
    rows = torch.arange(1, n)
    return weights[:, rows, rows - 1]


def prev_mean_keepdim(weights):
    n = weights.shape[-1]
    rows = torch.arange(1, n)
    return weights[:, rows, rows - 1].mean(dim=1, keepdim=True)


def prev_offset_two(weights):
    return torch.diagonal(weights, offset=-2, dim1=-2, dim2=-1).mean(-1)


def prev_grand_mean(weights):
    n = weights.shape[-1]
    rows = torch.arange(1, n)
    return weights[:, rows, rows - 1].mean()


def prev_diagonal_default_dims(weights):
    return weights.diagonal(-1).mean(dim=-1)


# -- induction_score -----------------------------------------------------------------------------
def ind_index(weights, period):
    queries = torch.arange(period, 2 * period)
    return weights[:, queries, queries - period + 1].mean(-1)


def ind_diagonal_slice(weights, period):
    return torch.diagonal(weights, offset=1 - period, dim1=-2, dim2=-1)[:, 1:].mean(-1)


def ind_loop(weights, period):
    out = []
    for head in weights:
        total = 0.0
        for i in range(period, 2 * period):
            total += float(head[i, i - period + 1])
        out.append(total / period)
    return torch.tensor(out)


def ind_numpy_inside(weights, period):
    w = weights.float().numpy()
    i = np.arange(period, 2 * period)
    return torch.from_numpy(w[:, i, i - period + 1].mean(-1))


def ind_duplicate(weights, period):
    queries = torch.arange(period, 2 * period)
    return weights[:, queries, queries - period].mean(-1)


def ind_two_ahead(weights, period):
    queries = torch.arange(period, 2 * period - 1)
    return weights[:, queries, queries - period + 2].sum(-1) / period


def ind_whole_diagonal(weights, period):
    return torch.diagonal(weights, offset=1 - period, dim1=-2, dim2=-1).mean(-1)


def ind_all_queries(weights, period):
    n = weights.shape[-1]
    queries = torch.arange(n)
    return weights[:, queries, queries - period + 1].mean(-1)


def ind_divides_by_n(weights, period):
    queries = torch.arange(period, 2 * period)
    return weights[:, queries, queries - period + 1].sum(-1) / (2 * period)


def ind_mean_over_heads(weights, period):
    queries = torch.arange(period, 2 * period)
    return weights[:, queries, queries - period + 1].mean(0)


def ind_one_before_copy(weights, period):
    out = []
    for head in weights:
        out.append(sum(float(head[i, i - period - 1]) for i in range(period, 2 * period)) / period)
    return torch.tensor(out)


def ind_range_from_period_plus_1(weights, period):
    queries = torch.arange(period + 1, 2 * period)
    return weights[:, queries, queries - period + 1].mean(-1)


def ind_rows_and_columns_swapped(weights, period):
    queries = torch.arange(period, 2 * period)
    return weights[:, queries - period + 1, queries].mean(-1)


def ind_entries(weights, period):
    return torch.diagonal(weights, offset=1 - period, dim1=1, dim2=2)[:, 1:]


def ind_keepdim(weights, period):
    return torch.diagonal(weights, offset=1 - period, dim1=1, dim2=2)[:, 1:].mean(-1, keepdim=True)


def ind_total(weights, period):
    return torch.diagonal(weights, offset=1 - period, dim1=1, dim2=2)[:, 1:].sum(-1)


def ind_grand_mean(weights, period):
    return torch.diagonal(weights, offset=1 - period, dim1=1, dim2=2)[:, 1:].mean()


def ind_range_one_early(weights, period):
    out = []
    for head in weights:
        out.append(sum(float(head[i, i - period + 1]) for i in range(period - 1, 2 * period - 1))
                   / period)
    return torch.tensor(out)


def ind_diagonal_default_dims(weights, period):
    return weights.diagonal(1 - period).mean(-1)


# -- calling the answer key ----------------------------------------------------------------------
def prev_from_reference(weights):
    from mhalib.reference import previous_token_score

    return previous_token_score(weights)


def ind_from_reference(weights, period):
    from mhalib.reference.heads import induction_score

    return induction_score(weights, period)


WRONG = {
    "previous_token_score": {
        "next_token": prev_next_token, "self_token": prev_self, "wraps_query_0": prev_wraps,
        "includes_query_0": prev_divides_by_n, "mean_over_heads": prev_mean_over_heads,
        "sum_not_mean": prev_sum, "not_averaged": prev_entries, "keepdim": prev_mean_keepdim,
        "two_back": prev_offset_two, "single_number": prev_grand_mean,
        "diagonal_over_wrong_axes": prev_diagonal_default_dims,
    },
    "induction_score": {
        "duplicate_token": ind_duplicate, "key_after_next": ind_two_ahead,
        "includes_query_period_minus_1": ind_whole_diagonal, "all_queries": ind_all_queries,
        "divides_by_n": ind_divides_by_n, "mean_over_heads": ind_mean_over_heads,
        "key_before_duplicate": ind_one_before_copy,
        "skips_first_query": ind_range_from_period_plus_1,
        "transposed": ind_rows_and_columns_swapped, "not_averaged": ind_entries,
        "keepdim": ind_keepdim, "sum_not_mean": ind_total, "single_number": ind_grand_mean,
        "shifted_query_range": ind_range_one_early,
        "diagonal_over_wrong_axes": ind_diagonal_default_dims,
    },
}

RIGHT = {
    "previous_token_score": [prev_diagonal, prev_index, prev_loop, prev_shifted_eye],
    "induction_score": [ind_index, ind_diagonal_slice, ind_loop, ind_numpy_inside],
}

ANSWER_KEY = {"previous_token_score": [prev_from_reference],
              "induction_score": [ind_from_reference]}
