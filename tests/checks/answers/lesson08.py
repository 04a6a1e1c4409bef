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
        "sum_not_mean": prev_sum,
    },
    "induction_score": {
        "duplicate_token": ind_duplicate, "key_after_next": ind_two_ahead,
        "includes_query_period_minus_1": ind_whole_diagonal, "all_queries": ind_all_queries,
        "divides_by_n": ind_divides_by_n, "mean_over_heads": ind_mean_over_heads,
    },
}

RIGHT = {
    "previous_token_score": [prev_diagonal, prev_index, prev_loop, prev_shifted_eye],
    "induction_score": [ind_index, ind_diagonal_slice, ind_loop, ind_numpy_inside],
}

ANSWER_KEY = {"previous_token_score": [prev_from_reference],
              "induction_score": [ind_from_reference]}
