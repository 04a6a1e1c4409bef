"""Held-out learners' answers, lesson 08 (what heads learn): previous_token_score, induction_score."""

import torch

from entry import Entry


# ============================================================================ previous_token_score

def prev_next_diagonal(weights):
    diag = torch.diagonal(weights, offset=1, dim1=-2, dim2=-1)  # (H, N - 1)
    return diag.float().mean(dim=-1).to(weights.dtype)


def prev_mean_over_heads(weights):
    diag = torch.diagonal(weights, offset=-1, dim1=1, dim2=2)  # (H, N - 1)
    return diag.to(torch.float32).mean(dim=0).to(weights.dtype)


def prev_keepdim(weights):
    on_prev = weights.diagonal(-1, 1, 2)
    return on_prev.to(torch.float32).mean(-1, keepdim=True).to(weights.dtype)


def prev_diagonal_default_dims(weights):
    d = torch.diagonal(weights, -1)
    return d.to(torch.float32).mean(dim=-1).to(weights.dtype)


def prev_block_mean(weights):
    below = weights[:, 1:, :-1]  # queries 1.., keys ..N-2
    return below.to(torch.float32).mean(dim=(1, 2)).to(weights.dtype)


def prev_wraps_query_zero(weights):
    n = weights.shape[-1]
    i = torch.arange(n)
    picked = weights[:, i, i - 1]  # (H, N)
    return picked.to(torch.float32).mean(dim=1).to(weights.dtype)


def prev_python_loops(weights):
    H, N, _ = weights.shape
    scores = []
    for h in range(H):
        total = 0.0
        for i in range(1, N):
            total += float(weights[h, i, i - 1])
        scores.append(total / (N - 1))
    return torch.tensor(scores, dtype=torch.float64).to(weights.dtype)


def prev_shifted_identity(weights):
    n = weights.shape[-1]
    sub = torch.diag(torch.ones(n - 1, dtype=torch.float64), -1)  # 1 at (i, i-1)
    return (weights.double() * sub).sum(dim=(-2, -1)).div(n - 1).to(weights.dtype)


# ============================================================================ induction_score

def induction_earlier_copy(weights, period):
    d = torch.diagonal(weights, offset=-period, dim1=-2, dim2=-1)  # w[h, i, i - period]
    return d.to(torch.float32).mean(dim=-1).to(weights.dtype)


def induction_slice_off_by_one(weights, period):
    diag = torch.diagonal(weights, offset=1 - period, dim1=1, dim2=2)  # (H, period + 1)
    return diag[:, :-1].to(torch.float32).mean(dim=-1).to(weights.dtype)


def induction_positive_offset(weights, period):
    diag = torch.diagonal(weights, offset=period - 1, dim1=1, dim2=2)
    return diag[:, :period].to(torch.float32).mean(dim=-1).to(weights.dtype)


def induction_gather_dim1(weights, period):
    H = weights.shape[0]
    q_idx = torch.arange(period, 2 * period)
    k_idx = q_idx - period + 1
    rows = weights[:, q_idx, :]  # (H, period, N): the second-half queries
    idx = k_idx.view(1, -1, 1).expand(H, period, 1)
    picked = torch.gather(rows, 1, idx)  # (H, period, 1)
    return picked.squeeze(-1).to(torch.float32).mean(dim=1).to(weights.dtype)


def induction_divides_by_n(weights, period):
    H, N, _ = weights.shape
    acc = torch.zeros(H, dtype=torch.float32)
    for i in range(period, 2 * period):
        acc += weights[:, i, i - period + 1].float()
    return (acc / N).to(weights.dtype)


def induction_outer_indexing(weights, period):
    qs = torch.arange(period, 2 * period)
    ks = qs - period + 1
    block = weights[:, qs[:, None], ks[None, :]]  # (H, period, period)
    return block.float().mean(dim=(1, 2)).to(weights.dtype)


def induction_loops_float64(weights, period):
    out = []
    for head in weights:
        vals = [head[i, i - period + 1].item() for i in range(period, 2 * period)]
        out.append(sum(vals) / len(vals))
    return torch.tensor(out, dtype=torch.float64).to(weights.dtype)


def induction_second_half_diagonal(weights, period):
    lower = weights[:, period:, :].double()  # rows i' = i - period, keys 0..N-1
    return lower.diagonal(offset=1, dim1=1, dim2=2).mean(dim=1).to(weights.dtype)


ENTRIES = [
    Entry("previous_token_score", "wrong", "next_token_diagonal",
          "reads the diagonal at offset +1, the weight on key i+1 (the next token), instead of "
          "offset -1, key i-1", prev_next_diagonal),
    Entry("previous_token_score", "wrong", "mean_over_heads_axis",
          "averages the (H, N-1) diagonal over dim 0, the heads, instead of over the queries, so "
          "it returns N-1 numbers instead of one per head", prev_mean_over_heads),
    Entry("previous_token_score", "wrong", "keepdim_shape",
          "averages with keepdim=True and returns shape (H, 1) instead of (H,)", prev_keepdim),
    Entry("previous_token_score", "wrong", "diagonal_default_dims",
          "calls torch.diagonal(weights, -1) without dim1/dim2, so it takes the diagonal over "
          "the head and query axes (dims 0 and 1) rather than over queries and keys",
          prev_diagonal_default_dims),
    Entry("previous_token_score", "wrong", "mean_of_lower_block",
          "averages the whole block weights[:, 1:, :-1] instead of only its diagonal "
          "weights[h, i, i-1], so every earlier key counts", prev_block_mean),
    Entry("previous_token_score", "wrong", "query_zero_wraps_around",
          "indexes weights[:, i, i-1] for every i from 0, so query 0 reads key -1 (the last key) "
          "through Python's negative index and the mean is over N queries instead of N-1",
          prev_wraps_query_zero),
    Entry("previous_token_score", "right", "python_loops_float", None, prev_python_loops),
    Entry("previous_token_score", "right", "shifted_identity_mask", None, prev_shifted_identity),

    Entry("induction_score", "wrong", "attends_to_earlier_copy",
          "reads key i - period (the earlier copy of token i itself) instead of key "
          "i - period + 1, the token that followed it", induction_earlier_copy),
    Entry("induction_score", "wrong", "diagonal_slice_off_by_one",
          "takes the diagonal at offset 1 - period but keeps entries [:-1] instead of [1:], so "
          "it averages queries period-1 .. 2 period-2 instead of period .. 2 period-1",
          induction_slice_off_by_one),
    Entry("induction_score", "wrong", "offset_sign_flipped",
          "uses diagonal offset period - 1 instead of 1 - period, reading keys above the "
          "diagonal (query i, key i + period - 1) instead of below it",
          induction_positive_offset),
    Entry("induction_score", "wrong", "gather_on_wrong_dim",
          "gathers the key numbers along dim 1 (the query axis of the selected rows) instead of "
          "dim 2, the key axis: the index i - period + 1 runs up to period, out of range for "
          "that axis, and torch.gather raises", induction_gather_dim1),
    Entry("induction_score", "wrong", "divides_by_sequence_length",
          "sums the period values and divides by N = 2 * period instead of by period, halving "
          "every score", induction_divides_by_n),
    Entry("induction_score", "wrong", "outer_product_indexing",
          "indexes with qs[:, None] and ks[None, :], which broadcast to a (period, period) block, "
          "and averages that whole block instead of the paired entries (i, i - period + 1)",
          induction_outer_indexing),
    Entry("induction_score", "right", "item_loops_float64", None, induction_loops_float64),
    Entry("induction_score", "right", "second_half_offset_one_diagonal", None,
          induction_second_half_diagonal),
]
