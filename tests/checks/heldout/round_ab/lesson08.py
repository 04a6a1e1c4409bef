"""Held-out catalogue, lesson 08 (what heads learn): previous_token_score, induction_score."""

import torch

from entry import Entry


# ============================================================================ previous_token_score
def pts_indices_swapped(weights):
    n = weights.shape[-1]
    i = torch.arange(1, n)
    picked = weights[:, i - 1, i]  # (H, N - 1)
    return picked.float().mean(dim=-1)


def pts_divides_by_n(weights):
    n = weights.shape[1]
    diag = torch.diagonal(weights, offset=-1, dim1=1, dim2=2)  # (H, N - 1)
    return diag.float().sum(dim=1) / n


def pts_mean_over_heads(weights):
    prev = weights.diagonal(offset=-1, dim1=-2, dim2=-1)  # (H, N - 1)
    return prev.to(torch.float32).mean(dim=0)


def pts_self_weight(weights):
    sub = weights[:, 1:, 1:]  # queries 1.., keys 1..
    return torch.diagonal(sub, dim1=-2, dim2=-1).float().mean(-1)


def pts_loop_misses_last(weights):
    H, N, _ = weights.shape
    scores = []
    for h in range(H):
        total = 0.0
        for i in range(1, N - 1):
            total += float(weights[h, i, i - 1])
        scores.append(total / (N - 1))
    return torch.tensor(scores, dtype=torch.float64)


def pts_diagonal_default_dims(weights):
    d = torch.diagonal(weights, -1)
    return d.to(torch.float32).mean(dim=-1)


def pts_python_loops(weights):
    H, N, _ = weights.shape
    out = []
    for h in range(H):
        vals = [weights[h, i, i - 1].double() for i in range(1, N)]
        out.append(torch.stack(vals).sum() / len(vals))
    return torch.stack(out)


def pts_shift_matrix(weights):
    n = weights.shape[-1]
    sel = torch.diag(torch.ones(n - 1, dtype=torch.float64), -1)  # 1 at (i, i-1)
    return (weights.double() * sel).sum(dim=(1, 2)) / (n - 1)


# ============================================================================ induction_score
def ind_same_token(weights, period):
    diag = torch.diagonal(weights, offset=-period, dim1=-2, dim2=-1)  # w[i, i - period]
    return diag.float().mean(dim=-1)


def ind_includes_query_before(weights, period):
    diag = torch.diagonal(weights, offset=1 - period, dim1=-2, dim2=-1)  # (H, period + 1)
    return diag.float().mean(dim=-1)


def ind_offset_sign(weights, period):
    diag = torch.diagonal(weights, offset=period - 1, dim1=-2, dim2=-1)
    return diag[:, 1:].float().mean(dim=-1)


def ind_rows_cols_swapped(weights, period):
    q = torch.arange(period, 2 * period)
    kk = q - period + 1
    return weights[:, kk, q].float().mean(-1)


def ind_period_from_shape0(weights, period):
    half = weights.shape[0] // 2
    diag = torch.diagonal(weights, offset=1 - half, dim1=1, dim2=2)
    return diag[:, 1:].float().mean(dim=1)


def ind_divides_by_n(weights, period):
    n = weights.shape[-1]
    total = torch.zeros(weights.shape[0], dtype=torch.float32)
    for i in range(period, 2 * period):
        total += weights[:, i, i - period + 1].float()
    return total / n


def ind_fancy_index(weights, period):
    rows = torch.arange(period, 2 * period)
    cols = rows - (period - 1)
    return weights[:, rows, cols].to(torch.float64).mean(dim=-1)


def ind_nested_loops(weights, period):
    result = []
    for head in weights:
        acc = 0.0
        for i in range(period, 2 * period):
            acc += head[i, i - period + 1].item()
        result.append(acc / period)
    return torch.tensor(result, dtype=torch.float64)


P = "previous_token_score"
I = "induction_score"
ENTRIES = [
    Entry(P, "wrong", "query_key_swapped",
          "indexes weights[h, i - 1, i]: query and key are swapped, so it reads the weight "
          "query i - 1 puts on the next token", pts_indices_swapped),
    Entry(P, "wrong", "divides_by_n",
          "sums the N - 1 previous-token weights but divides by N, as if query 0 were "
          "counted", pts_divides_by_n),
    Entry(P, "wrong", "mean_over_heads",
          "averages the diagonal over dim 0 (the heads) instead of the last axis (the "
          "queries), returning (N - 1,) instead of (H,)", pts_mean_over_heads),
    Entry(P, "wrong", "self_weight_slice",
          "slices weights[:, 1:, 1:] before taking the main diagonal, so it averages "
          "w[i, i] (the weight on the token itself) instead of w[i, i - 1]",
          pts_self_weight),
    Entry(P, "wrong", "loop_misses_last_query",
          "the loop over queries runs range(1, N - 1) and leaves out the last query, while "
          "still dividing by N - 1", pts_loop_misses_last),
    Entry(P, "wrong", "diagonal_default_dims",
          "calls torch.diagonal(weights, -1) without dim1/dim2: torch takes the diagonal of "
          "the first two axes (heads x queries), not of each head's (N, N) matrix",
          pts_diagonal_default_dims),
    Entry(P, "right", "python_loops", None, pts_python_loops),
    Entry(P, "right", "shift_matrix_mask", None, pts_shift_matrix),
    Entry(I, "wrong", "attends_to_copy_itself",
          "reads key i - period (the earlier copy of the token itself) instead of "
          "i - period + 1, the token that followed it", ind_same_token),
    Entry(I, "wrong", "includes_query_period_minus_1",
          "keeps all period + 1 entries of the offset 1 - period diagonal, so query "
          "period - 1 (still in the first half) is averaged in", ind_includes_query_before),
    Entry(I, "wrong", "diagonal_offset_sign",
          "uses torch.diagonal with offset=period - 1: a positive offset is above the main "
          "diagonal, so it reads w[i, i + period - 1] instead of w[i, i - period + 1]",
          ind_offset_sign),
    Entry(I, "wrong", "rows_and_columns_swapped",
          "indexes weights[:, key, query] instead of weights[:, query, key]",
          ind_rows_cols_swapped),
    Entry(I, "wrong", "period_from_head_axis",
          "recomputes the period as weights.shape[0] // 2 (the number of heads) instead of "
          "using the period argument (or shape[-1] // 2)", ind_period_from_shape0),
    Entry(I, "wrong", "divides_by_n",
          "sums the weights of the period queries of the second half but divides by N = "
          "2 * period instead of period", ind_divides_by_n),
    Entry(I, "right", "fancy_index_float64", None, ind_fancy_index),
    Entry(I, "right", "nested_python_loops", None, ind_nested_loops),
]
