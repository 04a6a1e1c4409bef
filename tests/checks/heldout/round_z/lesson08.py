"""Held-out catalogue, lesson 08 (what heads learn): previous_token_score, induction_score."""

import torch

from entry import Entry


# ============================================================ previous_token_score: wrong
def prev_mean_of_everything(weights):
    return torch.diagonal(weights, offset=-1, dim1=1, dim2=2).float().mean()


def prev_divides_by_n(weights):
    n = weights.shape[-1]
    diag = torch.diagonal(weights, -1, -2, -1).to(torch.float64)
    return (diag.sum(dim=-1) / n).to(weights.dtype)


def prev_diagonal_default_dims(weights):
    on_prev = torch.diagonal(weights, offset=-1)
    return on_prev.float().mean(dim=-1)


def prev_keepdim(weights):
    d = weights.diagonal(offset=-1, dim1=-2, dim2=-1)
    return d.float().mean(dim=-1, keepdim=True).to(weights.dtype)


def prev_argmax_hit_rate(weights):
    n = weights.shape[-1]
    top = weights[:, 1:, :].argmax(dim=-1)  # (H, N-1)
    target = torch.arange(n - 1).unsqueeze(0)  # key i-1 for query i
    return (top == target).float().mean(dim=-1)


def prev_slice_self_weight(weights):
    sub = weights[:, 1:, 1:]  # queries 1.., keys shifted
    return torch.diagonal(sub, dim1=1, dim2=2).double().mean(dim=1).to(weights.dtype)


# ============================================================ previous_token_score: right
def prev_python_loop(weights):
    heads, n, _ = weights.shape
    scores = []
    for h in range(heads):
        total = 0.0
        for i in range(1, n):
            total += float(weights[h, i, i - 1])
        scores.append(total / (n - 1))
    return torch.tensor(scores, dtype=torch.float64)


def prev_subdiagonal_mask(weights):
    n = weights.shape[-1]
    picker = torch.diag(torch.ones(n - 1, dtype=torch.float64), -1)  # 1 at [i, i-1]
    hits = torch.einsum("hqk,qk->h", weights.double(), picker)
    return (hits / picker.sum()).to(weights.dtype)


# ============================================================ induction_score: wrong
def ind_earlier_copy_itself(weights, period):
    h, n, _ = weights.shape
    qs = torch.arange(period, 2 * period)
    ks = qs - period
    return weights[:, qs, ks].float().mean(dim=-1)


def ind_wrong_end_dropped(weights, period):
    diag = torch.diagonal(weights, offset=1 - period, dim1=-2, dim2=-1)
    return diag[:, :-1].to(torch.float32).mean(dim=-1).to(weights.dtype)


def ind_divides_by_n(weights, period):
    n = weights.shape[-1]
    tot = torch.zeros(weights.shape[0], dtype=torch.float64)
    for i in range(period, n):
        tot += weights[:, i, i - period + 1].double()
    return tot / n


def ind_returns_list(weights, period):
    heads = weights.shape[0]
    out = []
    for h in range(heads):
        vals = [float(weights[h, i, i - period + 1]) for i in range(period, 2 * period)]
        out.append(sum(vals) / len(vals))
    return out


def ind_key_query_swapped(weights, period):
    queries = torch.arange(period, 2 * period)
    keys = queries - period + 1
    return weights[:, keys, queries].double().mean(-1)


def ind_mean_over_heads(weights, period):
    q = torch.arange(period, 2 * period)
    picked = weights[:, q, q - period + 1].float()  # (H, period)
    return picked.mean(dim=0)


# ============================================================ induction_score: right
def ind_gather(weights, period):
    n = weights.shape[-1]
    rows = weights[:, period:, :].double()  # (H, period, N)
    cols = (torch.arange(period, n) - period + 1).view(1, -1, 1).expand(rows.shape[0], -1, 1)
    hit = torch.gather(rows, 2, cols).squeeze(-1)  # (H, period)
    return hit.sum(-1) / period


def ind_shifted_identity(weights, period):
    n = 2 * period
    sel = torch.zeros(n, n, dtype=torch.float64)
    for i in range(period, n):
        sel[i, i - period + 1] = 1.0
    per_head = (weights.to(torch.float64) * sel).sum(dim=(1, 2))
    return (per_head / period).to(torch.float32)


ENTRIES = [
    Entry("previous_token_score", "wrong", "mean_over_all_axes",
          "calls .mean() with no dim, averaging over the heads as well, so it returns one "
          "number instead of one score per head",
          prev_mean_of_everything),
    Entry("previous_token_score", "wrong", "divides_by_n",
          "sums the N-1 previous-token weights but divides by N, as if query 0 had one too",
          prev_divides_by_n),
    Entry("previous_token_score", "wrong", "diagonal_default_dims",
          "torch.diagonal without dim1/dim2 takes the diagonal of the first two axes (heads "
          "and queries), not of each head's (N, N) pattern",
          prev_diagonal_default_dims),
    Entry("previous_token_score", "wrong", "keepdim_shape",
          "averages with keepdim=True and returns shape (H, 1) instead of (H,)",
          prev_keepdim),
    Entry("previous_token_score", "wrong", "argmax_hit_rate",
          "scores a head by how often key i-1 is the argmax of row i, a hit rate, instead of "
          "the mean weight it puts on key i-1",
          prev_argmax_hit_rate),
    Entry("previous_token_score", "wrong", "slice_reads_self_weight",
          "slices weights[:, 1:, 1:] and takes its diagonal, which is each query's weight on "
          "itself, not on the key one position before",
          prev_slice_self_weight),
    Entry("previous_token_score", "right", "python_double_loop", None, prev_python_loop),
    Entry("previous_token_score", "right", "subdiagonal_selector_einsum", None,
          prev_subdiagonal_mask),
    Entry("induction_score", "wrong", "earlier_copy_not_its_successor",
          "reads key i - period, the earlier copy of the current token, instead of "
          "i - period + 1, the token that followed it",
          ind_earlier_copy_itself),
    Entry("induction_score", "wrong", "drops_wrong_end_of_diagonal",
          "takes the offset 1-period diagonal but drops its last entry ([:-1]) instead of its "
          "first, so it scores query period-1 and misses query 2*period-1",
          ind_wrong_end_dropped),
    Entry("induction_score", "wrong", "divides_by_n",
          "sums the period second-half weights but divides by N = 2*period, halving the score",
          ind_divides_by_n),
    Entry("induction_score", "wrong", "returns_python_list",
          "returns a Python list of floats instead of an (H,) tensor",
          ind_returns_list),
    Entry("induction_score", "wrong", "key_query_swapped",
          "indexes weights[h, key, query] instead of weights[h, query, key], reading the "
          "weight from position i-period+1 onto position i",
          ind_key_query_swapped),
    Entry("induction_score", "wrong", "mean_over_heads",
          "averages over dim 0 (the heads) instead of over the queries, returning one value "
          "per query position",
          ind_mean_over_heads),
    Entry("induction_score", "right", "gather_float64", None, ind_gather),
    Entry("induction_score", "right", "selector_matrix", None, ind_shifted_identity),
]
