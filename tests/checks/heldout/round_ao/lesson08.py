"""Held-out learners' answers, lesson 08 (heads): previous_token_score, induction_score."""

import torch

from entry import Entry


# ============================================================ previous_token_score -- wrong
def prev_offset_plus_one(weights):
    diag = torch.diagonal(weights, offset=1, dim1=-2, dim2=-1)
    return diag.float().mean(dim=-1).to(weights.dtype)


def prev_divides_by_n(weights):
    n = weights.shape[-1]
    total = torch.zeros(weights.shape[0], dtype=torch.float64)
    for i in range(1, n):
        total += weights[:, i, i - 1].double()
    return (total / n).to(weights.dtype)


def prev_diagonal_default_dims(weights):
    sub = torch.diagonal(weights, -1)
    return sub.to(torch.float32).mean(-1).to(weights.dtype)


def prev_argmax_fraction(weights):
    n = weights.shape[-1]
    top = weights[:, 1:, :].argmax(dim=-1)  # (H, N-1): key each query i >= 1 favours
    target = torch.arange(n - 1).unsqueeze(0)  # query i's previous token is i - 1
    return (top == target).float().mean(dim=-1).to(weights.dtype)


def prev_n_from_heads(weights):
    n = weights.shape[0]
    vals = torch.stack([weights[:, i, i - 1] for i in range(1, n)], dim=-1)
    return vals.double().mean(-1).to(weights.dtype)


def prev_keepdim(weights):
    rows = torch.arange(1, weights.shape[-1])
    picked = weights[:, rows, rows - 1]
    return picked.to(torch.float32).mean(dim=-1, keepdim=True).to(weights.dtype)


# ============================================================ previous_token_score -- right
def prev_python_loops(weights):
    h, n, _ = weights.shape
    scores = []
    for head in range(h):
        acc = 0.0
        for i in range(1, n):
            acc += float(weights[head, i, i - 1])
        scores.append(acc / (n - 1))
    return torch.tensor(scores, dtype=torch.float64)


def prev_shift_matrix_einsum(weights):
    n = weights.shape[-1]
    shift = torch.diag(torch.ones(n - 1, dtype=torch.float64), -1)  # ones at (i, i-1)
    return torch.einsum("hij,ij->h", weights.double(), shift) / (n - 1)


# ============================================================ induction_score -- wrong
def ind_attends_copy_itself(weights, period):
    q_idx = torch.arange(period, 2 * period)
    k_idx = q_idx - period
    return weights[:, q_idx, k_idx].double().mean(dim=-1).to(weights.dtype)


def ind_slice_includes_extra_query(weights, period):
    d = torch.diagonal(weights, offset=1 - period, dim1=1, dim2=2)
    return d.float().mean(dim=1).to(weights.dtype)


def ind_offset_sign(weights, period):
    d = torch.diagonal(weights, offset=period - 1, dim1=1, dim2=2)
    return d[:, 1:].float().mean(dim=1).to(weights.dtype)


def ind_divides_by_n(weights, period):
    n = weights.shape[-1]
    s = torch.zeros(weights.shape[0], dtype=torch.float32)
    for i in range(period, n):
        s = s + weights[:, i, i - period + 1].float()
    return (s / n).to(weights.dtype)


def ind_indices_swapped(weights, period):
    total = 0
    for i in range(period, 2 * period):
        total = total + weights[:, i - period + 1, i].double()
    return (total / period).to(weights.dtype)


def ind_mean_all_heads(weights, period):
    idx = torch.arange(period, 2 * period)
    return weights[:, idx, idx - period + 1].float().mean().to(weights.dtype)


# ============================================================ induction_score -- right
def ind_gather(weights, period):
    h, n, _ = weights.shape
    rows = torch.arange(period, n)
    cols = (rows - period + 1).view(1, -1, 1).expand(h, -1, 1)
    picked = torch.gather(weights[:, period:, :].double(), 2, cols).squeeze(-1)  # (H, period)
    return picked.sum(dim=1) / period


def ind_mask_sum(weights, period):
    n = 2 * period
    i = torch.arange(n).view(n, 1)
    j = torch.arange(n).view(1, n)
    sel = (j == i - period + 1) & (i >= period)
    w = weights.to(torch.float64) * sel
    return w.sum(dim=(1, 2)) / sel.sum()


ENTRIES = [
    Entry("previous_token_score", "wrong", "diagonal_offset_plus_one",
          "takes torch.diagonal with offset=+1, the weights on key i + 1 (above the main "
          "diagonal), instead of offset=-1 for key i - 1",
          prev_offset_plus_one),
    Entry("previous_token_score", "wrong", "divides_by_n",
          "sums the N - 1 weights w[h, i, i-1] but divides by N, counting query 0 that has no "
          "previous token",
          prev_divides_by_n),
    Entry("previous_token_score", "wrong", "diagonal_default_dims",
          "calls torch.diagonal(weights, -1) without dim1/dim2, so it takes the diagonal of the "
          "head and query axes instead of the query and key axes (wrong values and shape)",
          prev_diagonal_default_dims),
    Entry("previous_token_score", "wrong", "argmax_fraction",
          "scores the fraction of queries whose largest weight is on key i - 1 instead of the "
          "mean weight put on key i - 1",
          prev_argmax_fraction),
    Entry("previous_token_score", "wrong", "n_from_heads_axis",
          "reads N from weights.shape[0], the number of heads, so it averages over the wrong "
          "set of queries whenever H != N",
          prev_n_from_heads),
    Entry("previous_token_score", "wrong", "keepdim_shape",
          "averages with keepdim=True and returns shape (H, 1) instead of (H,)",
          prev_keepdim),
    Entry("previous_token_score", "right", "python_loops_float64", None, prev_python_loops),
    Entry("previous_token_score", "right", "shift_matrix_einsum", None, prev_shift_matrix_einsum),

    Entry("induction_score", "wrong", "attends_to_copy_not_next",
          "reads key i - period (the earlier copy of the same token) instead of key "
          "i - period + 1 (the token that followed it)",
          ind_attends_copy_itself),
    Entry("induction_score", "wrong", "includes_query_period_minus_one",
          "averages the whole diagonal at offset 1 - period, which also holds query "
          "period - 1 from the first half: period + 1 entries instead of the last period",
          ind_slice_includes_extra_query),
    Entry("induction_score", "wrong", "diagonal_offset_sign",
          "uses torch.diagonal with offset=period - 1 (above the main diagonal) where "
          "offset=1 - period belongs, reading future keys",
          ind_offset_sign),
    Entry("induction_score", "wrong", "divides_by_n",
          "sums the period second-half weights but divides by N = 2 * period instead of period",
          ind_divides_by_n),
    Entry("induction_score", "wrong", "query_key_swapped",
          "indexes weights[:, i - period + 1, i] with query and key swapped (row is the query, "
          "column the key)",
          ind_indices_swapped),
    Entry("induction_score", "wrong", "mean_over_heads_too",
          "calls .mean() with no dim, averaging over the heads as well and returning one scalar "
          "instead of one score per head (H,)",
          ind_mean_all_heads),
    Entry("induction_score", "right", "gather_float64", None, ind_gather),
    Entry("induction_score", "right", "boolean_selector_sum", None, ind_mask_sum),
]
