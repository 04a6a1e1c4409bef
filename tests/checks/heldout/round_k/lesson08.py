"""Round k, lesson 08 (torch): previous_token_score, induction_score."""

import torch

from entry import Entry

ENTRIES = []


def add(exercise, kind, label, mistake=None):
    def deco(func):
        ENTRIES.append(Entry(exercise, kind, label, mistake, func))
        return func
    return deco


# ============================================================================ previous_token_score
@add("previous_token_score", "wrong", "superdiagonal",
     "It takes the diagonal at offset +1, the weight on key i + 1 (the next token), instead of "
     "offset -1, the previous token.")
def prev_superdiag(weights):
    return torch.diagonal(weights, offset=1, dim1=-2, dim2=-1).mean(dim=-1)


@add("previous_token_score", "wrong", "divides_by_n",
     "It sums the N - 1 previous-token weights but divides by N instead of N - 1 (query 0 has no "
     "previous token and is not part of the mean).")
def prev_div_n(weights):
    n = weights.shape[-1]
    return torch.diagonal(weights, -1, -2, -1).sum(dim=-1) / n


@add("previous_token_score", "wrong", "diagonal_default_dims",
     "torch.diagonal is called without dim1/dim2, and its defaults (0, 1) walk the (H, N) plane "
     "instead of the (query, key) plane.")
def prev_default_dims(weights):
    return torch.diagonal(weights, offset=-1).mean(dim=-1)


@add("previous_token_score", "wrong", "mean_over_heads",
     "It averages the diagonal over dim 0 (the heads) instead of over the queries, returning "
     "(N - 1,) instead of (H,).")
def prev_mean_dim0(weights):
    diag = weights.diagonal(offset=-1, dim1=1, dim2=2)
    return diag.mean(dim=0)


@add("previous_token_score", "wrong", "loop_from_zero_wraps",
     "The loop over queries starts at i = 0, where weights[:, 0, -1] wraps around to the last "
     "key, so a spurious term is added and the mean is over N instead of N - 1 queries.")
def prev_loop_zero(weights):
    n = weights.shape[-1]
    terms = [weights[:, i, i - 1] for i in range(n)]
    return torch.stack(terms, dim=-1).mean(dim=-1)


@add("previous_token_score", "wrong", "argmax_share",
     "It scores the share of queries whose largest weight falls on i - 1 (an argmax count) "
     "instead of the mean weight put on i - 1.")
def prev_argmax(weights):
    n = weights.shape[-1]
    top = weights[:, 1:].argmax(dim=-1)
    target = torch.arange(n - 1)
    return (top == target).to(weights.dtype).mean(dim=-1)


@add("previous_token_score", "right", "gather_previous")
def prev_gather(weights):
    h, n, _ = weights.shape
    idx = (torch.arange(1, n) - 1).view(1, n - 1, 1).expand(h, n - 1, 1)
    picked = torch.gather(weights[:, 1:, :].double(), 2, idx).squeeze(-1)
    return picked.mean(dim=1).to(weights.dtype)


@add("previous_token_score", "right", "shifted_eye_mask")
def prev_mask(weights):
    n = weights.shape[-1]
    mask = torch.eye(n, dtype=torch.float64).roll(-1, dims=1)
    mask[0] = 0.0
    total = (weights.double() * mask).sum(dim=(1, 2))
    return (total / (n - 1)).to(weights.dtype)


# ============================================================================ induction_score
@add("induction_score", "wrong", "key_is_the_copy",
     "It reads key i - period, the earlier copy of token i itself, instead of i - period + 1, "
     "the token that followed it.")
def ind_copy_key(weights, period):
    diag = torch.diagonal(weights, offset=-period, dim1=-2, dim2=-1)
    return diag.mean(dim=-1)


@add("induction_score", "wrong", "includes_query_period_minus_1",
     "It keeps all period + 1 entries of the diagonal at offset 1 - period, so query period - 1 "
     "from the first half is averaged in too.")
def ind_extra_query(weights, period):
    return torch.diagonal(weights, 1 - period, 1, 2).mean(dim=1)


@add("induction_score", "wrong", "two_step_indexing",
     "It indexes the query rows and then the key columns in two separate steps, which selects "
     "every (query, key) combination instead of the matching pairs, and averages all of them.")
def ind_two_step(weights, period):
    queries = torch.arange(period, 2 * period)
    keys = queries - period + 1
    block = weights[:, queries][:, :, keys]
    return block.mean(dim=(1, 2))


@add("induction_score", "wrong", "divides_by_sequence_length",
     "It sums the period induction weights but divides by the sequence length 2 * period "
     "instead of by period.")
def ind_div_n(weights, period):
    n = weights.shape[-1]
    total = torch.zeros(weights.shape[0], dtype=torch.float64)
    for i in range(period, n):
        total += weights[:, i, i - period + 1].double()
    return (total / n).to(weights.dtype)


@add("induction_score", "wrong", "averages_heads_too",
     "It calls .mean() with no dim, averaging over the heads too, so it returns one number "
     "instead of a score per head.")
def ind_scalar(weights, period):
    diag = weights.diagonal(offset=1 - period, dim1=-2, dim2=-1)[:, 1:]
    return diag.mean()


@add("induction_score", "wrong", "query_key_swapped",
     "It reads weights[:, i - period + 1, i], with the query and key indices swapped, instead "
     "of weights[:, i, i - period + 1].")
def ind_swapped(weights, period):
    vals = [weights[:, i - period + 1, i] for i in range(period, 2 * period)]
    return torch.stack(vals, dim=1).mean(dim=1)


@add("induction_score", "right", "python_loop_float64")
def ind_loop(weights, period):
    h = weights.shape[0]
    out = torch.zeros(h, dtype=torch.float64)
    for head in range(h):
        acc = 0.0
        for i in range(period, 2 * period):
            acc += float(weights[head, i, i - period + 1])
        out[head] = acc / period
    return out.to(weights.dtype)


@add("induction_score", "right", "gather_keys")
def ind_gather(weights, period):
    h = weights.shape[0]
    rows = weights[:, period:2 * period, :].double()
    idx = torch.arange(1, period + 1).view(1, period, 1).expand(h, period, 1)
    return torch.gather(rows, -1, idx).squeeze(-1).mean(-1).to(weights.dtype)
