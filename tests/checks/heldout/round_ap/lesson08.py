"""Held-out catalogue, lesson 08 (heads): previous_token_score, induction_score."""

import torch

from entry import Entry


# ================================================================ previous_token_score: wrong
def prev_superdiagonal(weights):
    return torch.diagonal(weights, offset=1, dim1=-2, dim2=-1).float().mean(dim=-1)


def prev_diagonal_default_dims(weights):
    below = torch.diagonal(weights, -1)
    return below.to(torch.float32).mean(-1)


def prev_divides_by_n(weights):
    n = weights.shape[-1]
    total = torch.zeros(weights.shape[0], dtype=torch.float64)
    for i in range(1, n):
        total += weights[:, i, i - 1].double()
    return total / n


def prev_argmax_fraction(weights):
    heads, n, _ = weights.shape
    top = weights[:, 1:, :].argmax(dim=-1)  # (H, N-1): the key each query looks at most
    target = torch.arange(n - 1).expand(heads, n - 1)
    return (top == target).double().mean(dim=-1)


def prev_block_mean(weights):
    block = weights[:, 1:, :-1].to(torch.float32)  # queries 1.., keys ..N-2
    return block.mean(dim=(-2, -1))


def prev_mean_over_heads(weights):
    diag = torch.diagonal(weights, offset=-1, dim1=1, dim2=2).float()  # (H, N-1)
    return diag.mean(dim=0)


# ================================================================ previous_token_score: right
def prev_fancy_index_f64(weights):
    n = weights.shape[-1]
    i = torch.arange(1, n)
    return weights.double()[:, i, i - 1].sum(dim=1) / (n - 1)


def prev_shifted_identity_mask(weights):
    n = weights.shape[-1]
    mask = torch.diag(torch.ones(n - 1, dtype=torch.float64), -1)  # 1 at (i, i-1)
    return torch.einsum("hqk,qk->h", weights.double(), mask) / (n - 1)


# ===================================================================== induction_score: wrong
def ind_copy_itself(weights, period):
    d = torch.diagonal(weights, offset=-period, dim1=-2, dim2=-1)  # w[h, i, i - period]
    return d.float().mean(dim=-1)


def ind_keeps_extra_query(weights, period):
    d = torch.diagonal(weights, offset=1 - period, dim1=-2, dim2=-1)
    return d.to(torch.float32).mean(dim=-1)


def ind_upper_offset(weights, period):
    d = torch.diagonal(weights, offset=period - 1, dim1=1, dim2=2)  # (H, period + 1)
    return d[:, 1:].float().mean(dim=1)


def ind_swapped_indices(weights, period):
    scores = []
    for h in range(weights.shape[0]):
        acc = 0.0
        for i in range(period, 2 * period):
            acc += float(weights[h, i - period + 1, i])
        scores.append(acc / period)
    return torch.tensor(scores)


def ind_divides_by_n(weights, period):
    n = weights.shape[-1]
    q = torch.arange(period, 2 * period)
    return weights.double()[:, q, q - period + 1].sum(-1) / n


def ind_mean_no_dim(weights, period):
    d = torch.diagonal(weights, offset=1 - period, dim1=-2, dim2=-1)[:, 1:]
    return d.float().mean()


# ===================================================================== induction_score: right
def ind_gather_rows(weights, period):
    heads, n, _ = weights.shape
    second = weights[:, period:, :].double()  # (H, period, N): the second copy's queries
    cols = torch.arange(1, period + 1).view(1, period, 1).expand(heads, period, 1)
    picked = torch.gather(second, 2, cols)[..., 0]  # w[h, period + j, j + 1]
    return picked.mean(dim=1)


def ind_boolean_mask(weights, period):
    n = 2 * period
    mask = torch.zeros(n, n, dtype=torch.bool)
    for i in range(period, n):
        mask[i, i - period + 1] = True
    picked = weights.double() * mask
    return picked.sum(dim=(1, 2)) / period


ENTRIES = [
    Entry("previous_token_score", "wrong", "superdiagonal",
          "takes the diagonal at offset +1, the weight query i puts on key i + 1 (the next "
          "token), instead of offset -1 for key i - 1",
          prev_superdiagonal),
    Entry("previous_token_score", "wrong", "diagonal-default-dims",
          "calls torch.diagonal(weights, -1) without dim1/dim2, so on an (H, N, N) stack it "
          "runs along the head axis and the first query axis, not along each head's matrix",
          prev_diagonal_default_dims),
    Entry("previous_token_score", "wrong", "divides-by-n",
          "sums the N - 1 weights on key i - 1 but divides by N, counting query 0 that has no "
          "previous token",
          prev_divides_by_n),
    Entry("previous_token_score", "wrong", "argmax-fraction",
          "scores the fraction of queries whose largest weight is on key i - 1 (argmax) instead "
          "of the mean weight on key i - 1",
          prev_argmax_fraction),
    Entry("previous_token_score", "wrong", "block-mean-not-diagonal",
          "slices weights[:, 1:, :-1] and averages the whole block instead of only its "
          "diagonal w[h, i, i - 1]",
          prev_block_mean),
    Entry("previous_token_score", "wrong", "mean-over-heads",
          "averages the diagonal over dim 0, the heads, instead of over the queries (dim -1), "
          "so it returns one value per query instead of one per head",
          prev_mean_over_heads),
    Entry("previous_token_score", "right", "fancy-index-float64", None, prev_fancy_index_f64),
    Entry("previous_token_score", "right", "shifted-identity-einsum", None,
          prev_shifted_identity_mask),

    Entry("induction_score", "wrong", "copy-itself",
          "reads key i - period, the earlier copy of token i itself, instead of key "
          "i - period + 1, the token that followed it",
          ind_copy_itself),
    Entry("induction_score", "wrong", "keeps-extra-query",
          "averages the whole diagonal at offset 1 - period, whose first entry is query "
          "period - 1 in the first half: period + 1 terms instead of the period queries "
          "i >= period",
          ind_keeps_extra_query),
    Entry("induction_score", "wrong", "upper-offset",
          "takes the diagonal at offset period - 1 (above the main diagonal, keys after the "
          "query) instead of 1 - period",
          ind_upper_offset),
    Entry("induction_score", "wrong", "row-column-swapped",
          "indexes weights[h, i - period + 1, i]: query and key swapped, so it reads how the "
          "first half attends to the second",
          ind_swapped_indices),
    Entry("induction_score", "wrong", "divides-by-n",
          "sums the period weights of the second half but divides by N = 2 * period",
          ind_divides_by_n),
    Entry("induction_score", "wrong", "mean-without-dim",
          "calls .mean() with no dim, averaging over the heads too, so it returns one scalar "
          "instead of an (H,) score per head",
          ind_mean_no_dim),
    Entry("induction_score", "right", "gather-second-half", None, ind_gather_rows),
    Entry("induction_score", "right", "boolean-mask-sum", None, ind_boolean_mask),
]
