"""Learner-style answers to lesson 07 (see answers/lesson01.py for the layout).

``merge_attention_states`` answers come first, then ``online_softmax_attention``.

Written independently of the checker's mistake models (mhalib/checks/attention_variants.py).
"""

import math

import numpy as np
import torch
import torch.nn.functional as F

NEG_INF = float("-inf")


# -- merge_attention_states: wrong ---------------------------------------------------------------
def merge_plain_exp(out_a, lse_a, out_b, lse_b):
    ea, eb = torch.exp(lse_a), torch.exp(lse_b)
    total = ea + eb
    out = (ea.unsqueeze(-1) * out_a + eb.unsqueeze(-1) * out_b) / total.unsqueeze(-1)
    return out, torch.log(total)


def merge_forgot_to_normalise(out_a, lse_a, out_b, lse_b):
    m = torch.maximum(lse_a, lse_b)
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    wa, wb = torch.exp(lse_a - m), torch.exp(lse_b - m)
    return wa[..., None] * out_a + wb[..., None] * out_b, m + torch.log(wa + wb)


def merge_average(out_a, lse_a, out_b, lse_b):
    return 0.5 * (out_a + out_b), torch.logaddexp(lse_a, lse_b)


def _weighted(out_a, lse_a, out_b, lse_b):
    lse = torch.logaddexp(lse_a, lse_b)
    safe = torch.where(lse == NEG_INF, torch.zeros_like(lse), lse)
    return torch.exp(lse_a - safe), torch.exp(lse_b - safe), lse


def merge_lse_max(out_a, lse_a, out_b, lse_b):
    wa, wb, _ = _weighted(out_a, lse_a, out_b, lse_b)
    return wa[..., None] * out_a + wb[..., None] * out_b, torch.max(lse_a, lse_b)


def merge_lse_sum(out_a, lse_a, out_b, lse_b):
    wa, wb, _ = _weighted(out_a, lse_a, out_b, lse_b)
    return wa[..., None] * out_a + wb[..., None] * out_b, lse_a + lse_b


def merge_divides_sum_of_outputs(out_a, lse_a, out_b, lse_b):
    lse = torch.logaddexp(lse_a, lse_b)
    return (out_a + out_b) / torch.exp(lse)[..., None], lse


def merge_swapped(out_a, lse_a, out_b, lse_b):
    wa, wb, lse = _weighted(out_a, lse_a, out_b, lse_b)
    return wb[..., None] * out_a + wa[..., None] * out_b, lse


def merge_no_unsqueeze(out_a, lse_a, out_b, lse_b):
    wa, wb, lse = _weighted(out_a, lse_a, out_b, lse_b)
    return wa * out_a + wb * out_b, lse


def merge_lse_first(out_a, lse_a, out_b, lse_b):
    wa, wb, lse = _weighted(out_a, lse_a, out_b, lse_b)
    return lse, wa[..., None] * out_a + wb[..., None] * out_b


def merge_unguarded(out_a, lse_a, out_b, lse_b):
    lse = torch.logaddexp(lse_a, lse_b)
    out = torch.exp(lse_a - lse)[..., None] * out_a + torch.exp(lse_b - lse)[..., None] * out_b
    return out, lse


def merge_unguarded_max(out_a, lse_a, out_b, lse_b):
    m = torch.maximum(lse_a, lse_b)
    wa, wb = torch.exp(lse_a - m), torch.exp(lse_b - m)
    total = wa + wb
    return (wa[..., None] * out_a + wb[..., None] * out_b) / total[..., None], m + total.log()


# -- merge_attention_states: right ---------------------------------------------------------------
def merge_logaddexp(out_a, lse_a, out_b, lse_b):
    wa, wb, lse = _weighted(out_a, lse_a, out_b, lse_b)
    return wa[..., None] * out_a + wb[..., None] * out_b, lse


def merge_stacked_logsumexp(out_a, lse_a, out_b, lse_b):
    lses = torch.stack([lse_a, lse_b])  # (2, ..., N_q)
    lse = torch.logsumexp(lses, dim=0)
    shares = torch.softmax(lses, dim=0).nan_to_num(0.0)  # both -inf: 0 / 0 -> 0
    return (shares[..., None] * torch.stack([out_a, out_b])).sum(0), lse


def merge_max_shift_float32(out_a, lse_a, out_b, lse_b):
    la, lb = lse_a.float(), lse_b.float()
    m = torch.max(la, lb)
    m = m.masked_fill(m == NEG_INF, 0.0)
    wa, wb = (la - m).exp(), (lb - m).exp()
    total = wa + wb
    denom = torch.where(total > 0, total, torch.ones_like(total))
    out = (wa / denom).unsqueeze(-1) * out_a.float() + (wb / denom).unsqueeze(-1) * out_b.float()
    return out.to(out_a.dtype), (m + total.log()).to(lse_a.dtype)


def merge_sigmoid(out_a, lse_a, out_b, lse_b):
    """w_a = sigmoid(lse_a - lse_b); a side that is empty gets weight 0."""
    diff = torch.where(lse_b == NEG_INF, torch.full_like(lse_a, math.inf), lse_a - lse_b)
    diff = torch.where(lse_a == NEG_INF, torch.full_like(lse_a, -math.inf), diff)
    wa = torch.sigmoid(diff)
    wa = torch.where((lse_a == NEG_INF) & (lse_b == NEG_INF), torch.zeros_like(wa), wa)
    wb = torch.where(lse_b == NEG_INF, torch.zeros_like(wa), 1 - wa)
    return wa[..., None] * out_a + wb[..., None] * out_b, torch.logaddexp(lse_a, lse_b)


def merge_from_reference(out_a, lse_a, out_b, lse_b):
    from mhalib.reference import merge_attention_states

    return merge_attention_states(out_a, lse_a, out_b, lse_b)


# -- online_softmax_attention --------------------------------------------------------------------


def _online(q, k, v, block_size=64, causal=False, *, rescale_sum=True, rescale_acc=True,
            flip=False, divide=True, use_max=True, scale=None, skip_partial=False,
            offset_mode="bottom_right", zero_empty=True, hidden=float("-inf")):
    """A learner's loop, with switches for the slips below."""
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    dtype = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(dtype) * (1 / math.sqrt(d) if scale is None else scale)
    m = torch.full((*q.shape[:-1], 1), float("-inf"), dtype=dtype)
    ell = torch.zeros((*q.shape[:-1], 1), dtype=dtype)
    acc = torch.zeros(q.shape, dtype=dtype)
    rows = torch.arange(n_q)[:, None] + (0 if offset_mode == "top_left" else n_k - n_q)
    stop = n_k - n_k % block_size if skip_partial else n_k
    for s in range(0, stop, block_size):
        kb, vb = k[..., s:s + block_size, :].to(dtype), v[..., s:s + block_size, :].to(dtype)
        sc = qs @ kb.transpose(-1, -2)
        if causal:
            cols = torch.arange(kb.shape[-2]) + (0 if offset_mode == "local" else s)
            sc = sc.masked_fill(cols[None, :] > rows, hidden)
        if use_max:
            m_new = torch.maximum(m, sc.max(dim=-1, keepdim=True).values)
            safe = torch.where(m_new == float("-inf"), torch.zeros_like(m_new), m_new)
            alpha = torch.exp(safe - m) if flip else torch.exp(m - safe)
        else:
            m_new, safe, alpha = m, torch.zeros_like(m), torch.ones_like(m)
        p = torch.exp(sc - safe)
        ell = (ell * alpha if rescale_sum else ell) + p.sum(-1, keepdim=True)
        acc = (acc * alpha if rescale_acc else acc) + p @ vb
        m = m_new
    if not divide:
        return acc.to(q.dtype)
    if zero_empty:
        ell = torch.where(ell == 0, torch.ones_like(ell), ell)
    return (acc / ell).to(q.dtype)


# -- wrong ---------------------------------------------------------------------------------------
def numpy_full_scores(q, k, v, block_size=64, causal=False):
    """The whole score matrix, built in numpy where torch's memory watch cannot see it."""
    qn, kn, vn = (t.detach().double().numpy() for t in (q, k, v))
    n_q, n_k = qn.shape[-2], kn.shape[-2]
    scores = qn @ np.swapaxes(kn, -1, -2) / math.sqrt(qn.shape[-1])
    if causal:
        scores = np.where(np.tril(np.ones((n_q, n_k), bool), n_k - n_q), scores, -np.inf)
    top = scores.max(-1, keepdims=True)
    weights = np.exp(scores - np.where(np.isinf(top), 0.0, top))
    total = weights.sum(-1, keepdims=True)
    return torch.from_numpy(weights / np.where(total == 0, 1.0, total) @ vn).to(q.dtype)


def blocks_averaged_by_key_count(q, k, v, block_size=64, causal=False):
    """Normalises each block on its own, then mixes the blocks by how many keys they had."""
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    qs = q.float() / math.sqrt(d)
    out = torch.zeros(q.shape)
    seen = 0
    rows = torch.arange(n_q)[:, None] + n_k - n_q
    for s in range(0, n_k, block_size):
        kb, vb = k[..., s:s + block_size, :].float(), v[..., s:s + block_size, :].float()
        sc = qs @ kb.transpose(-1, -2)
        if causal:
            sc = sc.masked_fill(torch.arange(s, s + kb.shape[-2])[None, :] > rows, NEG_INF)
        block_out = torch.softmax(sc, -1).nan_to_num(0.0) @ vb
        count = kb.shape[-2]
        out = (out * seen + block_out * count) / (seen + count)
        seen += count
    return out.to(q.dtype)


def naive_full_scores(q, k, v, block_size=64, causal=False):
    n_q, n_k = q.shape[-2], k.shape[-2]
    scores = (q.double() @ k.double().transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if causal:
        allowed = torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q)
        scores = scores.masked_fill(~allowed, float("-inf"))
    return torch.softmax(scores, -1).nan_to_num(0.0).matmul(v.double()).to(q.dtype)


def blocks_glued_together(q, k, v, block_size=64, causal=False):
    n_q, n_k = q.shape[-2], k.shape[-2]
    qs = q.float() / math.sqrt(q.shape[-1])
    blocks = [qs @ k[..., s:s + block_size, :].float().transpose(-1, -2)
              for s in range(0, n_k, block_size)]
    scores = torch.cat(blocks, dim=-1)
    if causal:
        allowed = torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q)
        scores = scores.masked_fill(~allowed, float("-inf"))
    return (torch.softmax(scores, -1).nan_to_num(0.0) @ v.float()).to(q.dtype)


def no_rescale(q, k, v, block_size=64, causal=False):
    return _online(q, k, v, block_size, causal, rescale_sum=False, rescale_acc=False)


def rescale_sum_only(q, k, v, block_size=64, causal=False):
    return _online(q, k, v, block_size, causal, rescale_acc=False)


def rescale_output_only(q, k, v, block_size=64, causal=False):
    return _online(q, k, v, block_size, causal, rescale_sum=False)


def rescale_inverted(q, k, v, block_size=64, causal=False):
    return _online(q, k, v, block_size, causal, flip=True)


def forgot_division(q, k, v, block_size=64, causal=False):
    return _online(q, k, v, block_size, causal, divide=False)


def no_max(q, k, v, block_size=64, causal=False):
    return _online(q, k, v, block_size, causal, use_max=False)


def unscaled(q, k, v, block_size=64, causal=False):
    return _online(q, k, v, block_size, causal, scale=1.0)


def drops_partial_block(q, k, v, block_size=64, causal=False):
    return _online(q, k, v, block_size, causal, skip_partial=True)


def top_left_mask(q, k, v, block_size=64, causal=False):
    return _online(q, k, v, block_size, causal, offset_mode="top_left")


def block_local_mask(q, k, v, block_size=64, causal=False):
    return _online(q, k, v, block_size, causal, offset_mode="local")


def ignores_causal(q, k, v, block_size=64, causal=False):
    return _online(q, k, v, block_size, False)


def nan_rows(q, k, v, block_size=64, causal=False):
    return _online(q, k, v, block_size, causal, zero_empty=False)


def finite_fill(q, k, v, block_size=64, causal=False):
    """Hidden keys scored -1e4: a query that sees no key averages every value."""
    return _online(q, k, v, block_size, causal, hidden=-1e4)


def returns_compute_dtype(q, k, v, block_size=64, causal=False):
    """Right values, in float32 whatever q's dtype (the cast back left out)."""
    return _online(q.float(), k.float(), v.float(), block_size, causal).float()


# -- right ---------------------------------------------------------------------------------------
def online_loop(q, k, v, block_size=64, causal=False):
    return _online(q, k, v, block_size, causal)


def online_float64(q, k, v, block_size=64, causal=False):
    return _online(q.double(), k.double(), v.double(), block_size, causal).to(q.dtype)


def online_query_and_key_tiles(q, k, v, block_size=64, causal=False):
    """Tiles the queries too (as the Triton kernel does), 16 at a time."""
    n_q = q.shape[-2]
    n_k = k.shape[-2]
    outs = []
    for start in range(0, n_q, 16):
        qb = q[..., start:start + 16, :]
        if causal:  # the tile's queries sit at start.. in the full query list
            pad = n_q - start - qb.shape[-2]  # queries after this tile
            keys_needed = n_k - pad
            if keys_needed <= 0:
                outs.append(torch.zeros_like(qb))
                continue
            outs.append(_online(qb, k[..., :keys_needed, :], v[..., :keys_needed, :],
                                block_size, True))
        else:
            outs.append(_online(qb, k, v, block_size, False))
    return torch.cat(outs, dim=-2)


def online_logsumexp_merge(q, k, v, block_size=64, causal=False):
    """Each block's softmax with its own logsumexp, merged with running logsumexp."""
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    qs = q.float() / math.sqrt(d)
    lse = torch.full((*q.shape[:-1], 1), float("-inf"))
    out = torch.zeros(q.shape)
    rows = torch.arange(n_q)[:, None] + n_k - n_q
    for s in range(0, n_k, block_size):
        sc = qs @ k[..., s:s + block_size, :].float().transpose(-1, -2)
        if causal:
            sc = sc.masked_fill(torch.arange(s, s + sc.shape[-1])[None, :] > rows, float("-inf"))
        block_lse = torch.logsumexp(sc, dim=-1, keepdim=True)
        new_lse = torch.logaddexp(lse, block_lse)
        safe = torch.where(torch.isinf(new_lse), torch.zeros_like(new_lse), new_lse)
        p = torch.exp(sc - safe)
        out = out * torch.exp(lse - safe) + p @ v[..., s:s + block_size, :].float()
        lse = new_lse
    return out.to(q.dtype)


def sdpa_whole(q, k, v, block_size=64, causal=False):
    n_q, n_k = q.shape[-2], k.shape[-2]
    if not causal:
        return F.scaled_dot_product_attention(q, k, v)
    allowed = torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
    return out.masked_fill(~allowed.any(-1)[:, None], 0.0)


# -- calling the answer key ----------------------------------------------------------------------
def from_reference(q, k, v, block_size=64, causal=False):
    from mhalib.reference import online_softmax_attention

    return online_softmax_attention(q, k, v, block_size, causal)


def from_tiled_kernel(q, k, v, block_size=64, causal=False):
    from mhalib.kernels import tiled_attention

    return tiled_attention(q, k, v, causal=causal)


def from_flash_dispatch(q, k, v, block_size=64, causal=False):
    from mhalib.kernels import flash_attention

    return flash_attention(q, k, v, causal=causal)


WRONG = {
    "merge_attention_states": {
        "no_max_shift": merge_plain_exp,
        "weights_not_normalised": merge_forgot_to_normalise,
        "averaged_outputs": merge_average,
        "lse_is_max": merge_lse_max,
        "lse_added": merge_lse_sum,
        "outputs_taken_as_unnormalised": merge_divides_sum_of_outputs,
        "swapped_weights": merge_swapped,
        "weights_on_feature_axis": merge_no_unsqueeze,
        "returns_lse_first": merge_lse_first,
        "nan_for_empty_rows": merge_unguarded,
    },
    "online_softmax_attention": {
        "leaves_torch": numpy_full_scores,
        "blocks_combined_wrongly": blocks_averaged_by_key_count,
        "builds_full_scores": naive_full_scores,
        "no_rescale": no_rescale,
        "rescale_sum_only": rescale_sum_only,
        "rescale_output_only": rescale_output_only,
        "rescale_inverted": rescale_inverted,
        "no_final_division": forgot_division,
        "no_max_subtraction": no_max,
        "no_scale": unscaled,
        "drops_last_block": drops_partial_block,
        "causal_top_left": top_left_mask,
        "causal_block_local_keys": block_local_mask,
        "causal_ignored": ignores_causal,
        "nan_for_empty_rows": nan_rows,
        "finite_fill_for_hidden_keys": finite_fill,
    },
}

# more wrong answers, each named after the mistake it must be diagnosed as
ALSO_WRONG = {"merge_attention_states": {"nan_for_empty_rows": merge_unguarded_max}}

RIGHT = {"merge_attention_states": [merge_logaddexp, merge_stacked_logsumexp,
                                    merge_max_shift_float32, merge_sigmoid],
         "online_softmax_attention": [online_loop, online_float64, online_query_and_key_tiles,
                                      online_logsumexp_merge, sdpa_whole]}

ANSWER_KEY = {"merge_attention_states": [merge_from_reference],
              "online_softmax_attention": [from_reference, from_tiled_kernel,
                                           from_flash_dispatch]}
