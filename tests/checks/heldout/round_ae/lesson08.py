"""Held-out catalogue, lesson 08 (what heads learn): previous_token_score, induction_score."""

import torch

from entry import Entry


# ============================================================================ previous_token_score
# ---------------------------------------------------------------------------- wrong
def prev_next_token(weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    diag = torch.diagonal(weights.to(ct), offset=1, dim1=-2, dim2=-1)  # (H, N-1)
    return diag.mean(dim=-1).to(weights.dtype)


def prev_divides_by_n(weights):
    n = weights.shape[-1]
    w = weights.float() if weights.dtype in (torch.float16, torch.bfloat16) else weights
    on_prev = torch.diagonal(w, -1, -2, -1)
    return (on_prev.sum(-1) / n).to(weights.dtype)


def prev_diagonal_default_dims(weights):
    acc = torch.promote_types(weights.dtype, torch.float32)
    sub = torch.diagonal(weights.to(acc), offset=-1)
    return sub.mean(-1).to(weights.dtype)


def prev_argmax_hits(weights):
    H, N, _ = weights.shape
    best = weights.argmax(dim=-1)  # (H, N): the key each query looks at most
    target = torch.arange(N) - 1
    hits = (best[:, 1:] == target[1:]).to(torch.float32)
    return hits.mean(dim=-1).to(weights.dtype)


def prev_keepdim(weights):
    c = torch.promote_types(weights.dtype, torch.float32)
    prev = weights.to(c).diagonal(offset=-1, dim1=1, dim2=2)
    return prev.mean(dim=-1, keepdim=True).to(weights.dtype)


def prev_n_from_heads_axis(weights):
    n = weights.shape[0]
    scores = []
    for h in range(weights.shape[0]):
        total = 0.0
        for i in range(1, weights.shape[1]):
            total += float(weights[h, i, i - 1])
        scores.append(total / (n - 1))
    return torch.tensor(scores, dtype=weights.dtype)


# ---------------------------------------------------------------------------- right
def prev_loops_f64(weights):
    heads, n, _ = weights.shape
    out = torch.empty(heads, dtype=torch.float64)
    for h in range(heads):
        s = 0.0
        for i in range(1, n):
            s += float(weights[h, i, i - 1])
        out[h] = s / (n - 1)
    return out.to(weights.dtype)


def prev_mask_einsum(weights):
    n = weights.shape[-1]
    ct = torch.promote_types(weights.dtype, torch.float32)
    sub = torch.diag(torch.ones(n - 1, dtype=ct), -1)  # 1 at (i, i - 1)
    return (torch.einsum("hij,ij->h", weights.to(ct), sub) / (n - 1)).to(weights.dtype)


# ============================================================================ induction_score
# ---------------------------------------------------------------------------- wrong
def ind_earlier_copy(weights, period):
    ct = torch.promote_types(weights.dtype, torch.float32)
    q = torch.arange(period, 2 * period)
    picked = weights.to(ct)[:, q, q - period]  # (H, period): the earlier copy itself
    return picked.mean(dim=-1).to(weights.dtype)


def ind_includes_query_before(weights, period):
    acc = torch.promote_types(weights.dtype, torch.float32)
    d = torch.diagonal(weights.to(acc), offset=1 - period, dim1=1, dim2=2)  # (H, period + 1)
    return d.mean(dim=1).to(weights.dtype)


def ind_offset_sign(weights, period):
    f = torch.promote_types(weights.dtype, torch.float32)
    d = torch.diagonal(weights.to(f), offset=period - 1, dim1=-2, dim2=-1)
    return d[:, 1:].mean(-1).to(weights.dtype)


def ind_divides_by_n(weights, period):
    n = weights.shape[1]
    H = weights.shape[0]
    out = torch.zeros(H, dtype=torch.float64)
    for i in range(period, 2 * period):
        out += weights[:, i, i - period + 1].double()
    return (out / n).to(weights.dtype)


def ind_broadcast_index(weights, period):
    ct = torch.promote_types(weights.dtype, torch.float32)
    rows = torch.arange(period, 2 * period)[:, None]
    cols = rows - period + 1
    vals = weights.to(ct)[:, rows, cols]  # (H, period, 1)
    return vals.mean(dim=-1).to(weights.dtype)


def ind_diagonal_default_dims(weights, period):
    ct = torch.promote_types(weights.dtype, torch.float32)
    d = torch.diagonal(weights.to(ct), 1 - period)
    return d[..., 1:].mean(dim=-1).to(weights.dtype)


# ---------------------------------------------------------------------------- right
def ind_gather_f64(weights, period):
    idx = torch.arange(period, 2 * period)
    vals = weights.double()[:, idx, idx - period + 1]
    return vals.mean(-1).to(weights.dtype)


def ind_mask_sum(weights, period):
    n = 2 * period
    i = torch.arange(n)[:, None]
    j = torch.arange(n)[None, :]
    mask = (i >= period) & (j == i - period + 1)
    ct = torch.promote_types(weights.dtype, torch.float32)
    total = torch.where(mask, weights.to(ct), torch.zeros((), dtype=ct)).sum(dim=(1, 2))
    return (total / period).to(weights.dtype)


ENTRIES = [
    Entry("previous_token_score", "wrong", "next_token_diagonal",
          "reads the diagonal at offset +1, the weight on key i + 1 (the next token), instead "
          "of offset -1 for key i - 1",
          prev_next_token),
    Entry("previous_token_score", "wrong", "divides_by_n",
          "sums the N - 1 weights on key i - 1 but divides by N, as if query 0 counted with "
          "weight 0, so every score is too small by a factor (N - 1) / N",
          prev_divides_by_n),
    Entry("previous_token_score", "wrong", "diagonal_default_dims",
          "calls torch.diagonal(weights, offset=-1) with its default dims 0 and 1, so it walks "
          "the head and query axes instead of queries and keys: the result has the wrong shape",
          prev_diagonal_default_dims),
    Entry("previous_token_score", "wrong", "counts_argmax_hits",
          "scores the fraction of queries whose largest weight is on key i - 1 instead of the "
          "mean weight put on it",
          prev_argmax_hits),
    Entry("previous_token_score", "wrong", "keepdim_shape",
          "takes the mean with keepdim=True, so the result has shape (H, 1) instead of (H,)",
          prev_keepdim),
    Entry("previous_token_score", "wrong", "n_from_head_axis",
          "divides the sum by weights.shape[0] - 1, the number of heads minus one, instead of "
          "N - 1 queries (and raises ZeroDivisionError for a single head)",
          prev_n_from_heads_axis),
    Entry("previous_token_score", "right", "python_loops_float64", None, prev_loops_f64),
    Entry("previous_token_score", "right", "subdiagonal_mask_einsum", None, prev_mask_einsum),

    Entry("induction_score", "wrong", "earlier_copy_not_next",
          "reads key i - period, the earlier copy of the current token (a duplicate-token "
          "head), instead of key i - period + 1, the token that followed it",
          ind_earlier_copy),
    Entry("induction_score", "wrong", "includes_query_period_minus_1",
          "averages all period + 1 entries of the diagonal at offset 1 - period, so query "
          "period - 1 (in the first half) is counted too: one query too many",
          ind_includes_query_before),
    Entry("induction_score", "wrong", "offset_sign_flipped",
          "uses the diagonal at offset period - 1 (above the main diagonal, key i + period - 1) "
          "instead of 1 - period (below it)",
          ind_offset_sign),
    Entry("induction_score", "wrong", "divides_by_n",
          "sums the period weights on key i - period + 1 but divides by N = 2 * period instead "
          "of period, halving every score",
          ind_divides_by_n),
    Entry("induction_score", "wrong", "index_broadcast_shape",
          "indexes with rows of shape (period, 1) so the gathered weights are (H, period, 1), "
          "and the mean over the last axis returns (H, period) instead of (H,)",
          ind_broadcast_index),
    Entry("induction_score", "wrong", "diagonal_default_dims",
          "calls torch.diagonal(weights, 1 - period) with its default dims 0 and 1, so it "
          "walks the head and query axes instead of queries and keys",
          ind_diagonal_default_dims),
    Entry("induction_score", "right", "gather_float64", None, ind_gather_f64),
    Entry("induction_score", "right", "boolean_mask_sum", None, ind_mask_sum),
]
