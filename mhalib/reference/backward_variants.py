"""Attention's backward pass with one knob turned: the mistake models of lesson 12 (torch).

Each function computes the right gradients with its default arguments and a known wrong answer
when one argument changes (the 1/sqrt(d) left out of grad_q, p not transposed, the softmax's
row term dropped, delta from grad_out alone, an exp2 on a natural-log lse...). The judges
evaluate them on the learner's inputs in float64 and name the mistake whose output the
learner's matches. They never call the answer key (and never torch.autograd).

Because their defaults *are* the answer, they live with the answer key: the grader's sandbox
has no ``mhalib.reference`` at all, and in a learner's kernel a function that reaches one of
them scores 0 like one that calls the answer key (they are in the exercises'
``answer_key_names``). The checkers import them only on the judge's side (``mistakes()``).
"""

from __future__ import annotations

import math


def _guarded_softmax(scores, dim=-1):
    """Softmax over ``dim``; slices that are all -inf give zeros (not NaN)."""
    import torch

    top = scores.amax(dim=dim, keepdim=True)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    weights = torch.exp(scores - top)
    total = weights.sum(dim=dim, keepdim=True)
    return weights / torch.where(total == 0, torch.ones_like(total), total)


def softmax_backward_variant(weights, grad_weights, *, row="weighted", axis=-1, sign=1,
                             diagonal_only=False, swapped=False, keepdim=True,
                             log_softmax=False):
    """grad_scores = p * (g - rowsum(g * p)), with knobs.

    ``row``: "weighted" (right), "none" (the row term dropped), "unweighted" (rowsum(g)
    instead of rowsum(g * p)), "mean" (a mean instead of a sum); ``axis``: the axis the row
    term sums over; ``sign`` -1: p * (rowsum - g); ``diagonal_only``: g * p * (1 - p), the
    Jacobian's diagonal alone; ``swapped``: the two arguments exchanged; ``keepdim`` False:
    the row term broadcast along the last axis (it lines up with the columns);
    ``log_softmax``: g - p * rowsum(g), the backward of log_softmax.
    """
    p, g = (grad_weights, weights) if swapped else (weights, grad_weights)
    if log_softmax:
        return g - p * g.sum(dim=axis, keepdim=True)
    if diagonal_only:
        return g * p * (1 - p)
    if row == "none":
        return sign * p * g
    terms = g if row == "unweighted" else g * p
    total = terms.mean(dim=axis, keepdim=keepdim) if row == "mean" else terms.sum(
        dim=axis, keepdim=keepdim)
    if not keepdim:
        total = total.unsqueeze(-2)  # (..., 1, n): aligned with the columns, not the rows
    return sign * p * (g - total)


def attention_backward_variant(q, k, v, grad_out, causal=False, *, scale_q=True,
                               scale_k=True, scale_scores=True, transpose_p=True,
                               transpose_grad_s=True, row="weighted", causal_mode="right",
                               nan_empty_rows=False, softmax_dim=-1, order="qkv",
                               scale=None, causal_shift=0, mask_fill=-math.inf,
                               mask_in_forward=True, mask_after_softmax=False):
    """(grad_q, grad_k, grad_v) of softmax(q k^T / sqrt(d)) v, with knobs.

    ``scale_q``/``scale_k``: the 1/sqrt(d) in grad_q / grad_k; ``scale_scores``: the scale in
    the forward's scores; ``transpose_p``: grad_v = p^T grad_out (False: p grad_out);
    ``transpose_grad_s``: grad_k = grad_s^T q (False: grad_s q); ``row``: the softmax
    gradient's row term as in :func:`softmax_backward_variant` ("queries": summed over the
    query axis); ``causal_mode``: "right" (bottom-right), "top_left", "none" (the mask
    forgotten); ``nan_empty_rows``: rows with no visible key give NaN; ``softmax_dim`` -2:
    p normalised over the queries; ``order``: the returned order ("kqv" swaps grad_q, grad_k);
    ``scale``: another factor than 1/sqrt(d) everywhere (``"d_v"``: 1/sqrt(d_v), ``"1/d"``,
    a number: that factor); ``causal_shift``: -1 hides the diagonal, +1 shows one future key;
    ``mask_fill``: a finite fill (-1e9) instead of -inf; ``mask_in_forward`` False: p from the
    unmasked scores, only grad_s zeroed where the mask hides a key; ``mask_after_softmax``: p
    from the unmasked scores, then zeroed where the mask hides a key (rows no longer sum to 1).
    """
    import torch

    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    scale = (1.0 / math.sqrt(d) if scale is None else
             1.0 / math.sqrt(v.shape[-1]) if scale == "d_v" else 1.0 / d if scale == "1/d"
             else float(scale))
    scores = q @ k.transpose(-2, -1) * (scale if scale_scores else 1.0)  # (..., N_q, N_k)
    allowed = None
    if causal and causal_mode != "none":
        offset = (0 if causal_mode == "top_left" else n_k - n_q) + causal_shift
        allowed = torch.ones(n_q, n_k, dtype=torch.bool).tril(offset)
        if mask_in_forward and not mask_after_softmax:
            scores = scores.masked_fill(~allowed, mask_fill)
    if nan_empty_rows:
        p = torch.softmax(scores, dim=softmax_dim)
    else:
        p = _guarded_softmax(scores, dim=softmax_dim)
    if allowed is not None and mask_after_softmax:
        p = p * allowed
    grad_v = (p.transpose(-2, -1) if transpose_p else p) @ grad_out
    grad_p = grad_out @ v.transpose(-2, -1)
    if row == "queries":
        grad_s = p * (grad_p - (grad_p * p).sum(dim=-2, keepdim=True))
    else:
        grad_s = softmax_backward_variant(p, grad_p, row=row)
    if allowed is not None and not mask_in_forward:
        grad_s = grad_s.masked_fill(~allowed, 0.0)
    grad_q = grad_s @ k * (scale if scale_q else 1.0)
    grad_k = (grad_s.transpose(-2, -1) if transpose_grad_s else grad_s) @ q * (
        scale if scale_k else 1.0)
    if order == "kqv":
        return grad_k, grad_q, grad_v
    return grad_q, grad_k, grad_v


def flash_backward_variant(q, k, v, out, lse, grad_out, block_size=64, causal=False, *,
                           delta="out", exp_base="e", accumulate_q=True, scale_q=True,
                           scale_k=True, scale_scores=True, causal_mode="right",
                           block_softmax=False, kv_from_last_query_block=False,
                           nan_empty_rows=False):
    """The blocked backward of :func:`mhalib.reference.flash_attention_backward`, with knobs.

    ``delta``: "out" (rowsum(grad_out * out), right), "grad_out" (rowsum(grad_out) alone),
    "block" (rowsum(grad_p * p) over each key block only); ``exp_base`` "2": p = 2^(s - lse)
    with the natural-log lse; ``accumulate_q`` False: each key block overwrites grad_q;
    ``scale_q``/``scale_k``: the 1/sqrt(d) of grad_q / grad_k; ``scale_scores``: the scale of
    the recomputed scores; ``causal_mode``: "right", "local" (block-local key positions) or
    "none" (the mask left out of the recomputation); ``block_softmax``: p normalised inside
    each block instead of with lse (``nan_empty_rows``: and NaN for a row that sees no key of
    the block, as torch.softmax gives); ``kv_from_last_query_block``: grad_k and grad_v keep
    only the last block of queries' share (overwritten in a loop over query blocks).
    """
    import torch

    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    scale = 1.0 / math.sqrt(d)
    q_s = q * (scale if scale_scores else 1.0)
    if delta == "grad_out":
        row_term = grad_out.sum(dim=-1, keepdim=True)
    else:
        row_term = (grad_out * out).sum(dim=-1, keepdim=True)  # (B, H, N_q, 1)
    lse_ = torch.where(torch.isneginf(lse), torch.full_like(lse, math.inf), lse)[..., None]
    query_pos = torch.arange(n_q)[:, None] + (n_k - n_q)
    grad_q = torch.zeros_like(q)
    grad_k, grad_v = torch.zeros_like(k), torch.zeros_like(v)
    kv_rows = slice(None)
    if kv_from_last_query_block:
        kv_rows = slice(((n_q - 1) // block_size) * block_size, n_q)
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        k_blk, v_blk = k[..., start:stop, :], v[..., start:stop, :]
        scores = q_s @ k_blk.transpose(-2, -1)  # (B, H, N_q, b)
        if causal and causal_mode != "none":
            key_pos = torch.arange(start, stop) if causal_mode == "right" else torch.arange(
                stop - start)
            scores = scores.masked_fill(key_pos[None, :] > query_pos, -math.inf)
        if block_softmax:
            p = torch.softmax(scores, dim=-1) if nan_empty_rows else _guarded_softmax(scores)
        elif exp_base == "2":
            p = torch.exp2(scores - lse_)
        else:
            p = torch.exp(scores - lse_)
        grad_p = grad_out @ v_blk.transpose(-2, -1)
        block_delta = (grad_p * p).sum(dim=-1, keepdim=True) if delta == "block" else row_term
        grad_s = p * (grad_p - block_delta)
        part_q = grad_s @ k_blk * (scale if scale_q else 1.0)
        grad_q = grad_q + part_q if accumulate_q else part_q
        grad_k[..., start:stop, :] = grad_s[..., kv_rows, :].transpose(-2, -1) @ q[
            ..., kv_rows, :] * (scale if scale_k else 1.0)
        grad_v[..., start:stop, :] = p[..., kv_rows, :].transpose(-2, -1) @ grad_out[
            ..., kv_rows, :]
    return grad_q, grad_k, grad_v


def backward_flops_variant(seq_len, head_dim, recompute=True, *, per_mac=2, products=4,
                           recompute_products=1, honour_flag=True, invert_flag=False,
                           forward_added=False):
    """attention_backward_flops with knobs: ``per_mac`` 1 counts a multiply-add once;
    ``products`` the backward's N^2 d products; ``recompute_products`` what recomputing costs
    (2: a whole forward); ``honour_flag`` False ignores recompute; ``invert_flag`` reads it
    upside down; ``forward_added`` adds the forward's two products."""
    use = recompute if honour_flag else False
    if invert_flag:
        use = not recompute
    count = products + (recompute_products if use else 0) + (2 if forward_added else 0)
    return count * per_mac * seq_len * seq_len * head_dim
