"""Round l, lesson 07 (flash): merge_attention_states, online_softmax_attention."""

import math

import numpy as np
import torch

from entry import Entry

E = "merge_attention_states"
O = "online_softmax_attention"


# ============================================================ merge_attention_states: wrong
def merge_no_shift(out_a, lse_a, out_b, lse_b):
    ea = torch.exp(lse_a)
    eb = torch.exp(lse_b)
    total = ea + eb
    lse = torch.log(total)
    safe = torch.where(total == 0, torch.ones_like(total), total)
    out = (ea / safe)[..., None] * out_a + (eb / safe)[..., None] * out_b
    return out, lse


def merge_unnormalised(out_a, lse_a, out_b, lse_b):
    top = torch.maximum(lse_a, lse_b)
    shift = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    wa = torch.exp(lse_a - shift)
    wb = torch.exp(lse_b - shift)
    lse = shift + torch.log(wa + wb)
    out = wa.unsqueeze(-1) * out_a + wb.unsqueeze(-1) * out_b
    return out, lse


def merge_swapped(out_a, lse_a, out_b, lse_b):
    lse = torch.logaddexp(lse_a, lse_b)
    finite = torch.isfinite(lse)
    safe_lse = torch.where(finite, lse, torch.zeros_like(lse))
    wa = torch.where(finite, torch.exp(lse_a - safe_lse), torch.zeros_like(lse))
    wb = torch.where(finite, torch.exp(lse_b - safe_lse), torch.zeros_like(lse))
    out = wb[..., None] * out_a + wa[..., None] * out_b
    return out, lse


def merge_nan_to_num(out_a, lse_a, out_b, lse_b):
    lse = torch.logaddexp(lse_a, lse_b)
    wa = torch.exp(lse_a - lse)[..., None]
    wb = torch.exp(lse_b - lse)[..., None]
    out = wa * out_a + wb * out_b
    return torch.nan_to_num(out), torch.nan_to_num(lse)


def merge_no_guard(out_a, lse_a, out_b, lse_b):
    m = torch.max(lse_a, lse_b)
    wa = torch.exp(lse_a - m)
    wb = torch.exp(lse_b - m)
    s = wa + wb
    out = (wa / s)[..., None] * out_a + (wb / s)[..., None] * out_b
    return out, m + torch.log(s)


def merge_no_trailing_axis(out_a, lse_a, out_b, lse_b):
    lse = torch.logaddexp(lse_a, lse_b)
    ok = torch.isfinite(lse)
    ref = torch.where(ok, lse, torch.zeros_like(lse))
    wa = torch.where(ok, torch.exp(lse_a - ref), torch.zeros_like(lse))
    wb = torch.where(ok, torch.exp(lse_b - ref), torch.zeros_like(lse))
    out = wa * out_a + wb * out_b
    return out, lse


# ============================================================ merge_attention_states: right
def merge_softmax_stack(out_a, lse_a, out_b, lse_b):
    lses = torch.stack([lse_a, lse_b], dim=-1).to(torch.float64)  # (..., N_q, 2)
    lse = torch.logsumexp(lses, dim=-1)
    w = torch.nan_to_num(torch.softmax(lses, dim=-1), nan=0.0)
    outs = torch.stack([out_a, out_b], dim=-2).to(torch.float64)  # (..., N_q, 2, d_v)
    out = torch.einsum("...s,...sd->...d", w, outs)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_sigmoid(out_a, lse_a, out_b, lse_b):
    a = lse_a.to(torch.float64)
    b = lse_b.to(torch.float64)
    both_empty = torch.isneginf(a) & torch.isneginf(b)
    diff = torch.where(both_empty, torch.zeros_like(a), a - b)
    w_a = torch.sigmoid(diff)
    w_b = 1.0 - w_a
    w_a = torch.where(both_empty, torch.zeros_like(w_a), w_a)
    w_b = torch.where(both_empty, torch.zeros_like(w_b), w_b)
    top = torch.maximum(a, b)
    lse = top + torch.log1p(torch.exp(-diff.abs()))
    lse = torch.where(both_empty, torch.full_like(a, -math.inf), lse)
    out = w_a[..., None] * out_a.to(torch.float64) + w_b[..., None] * out_b.to(torch.float64)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


# ============================================================ online_softmax_attention: wrong
def online_no_acc_rescale(q, k, v, block_size=64, causal=False):
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    work = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(work) / math.sqrt(d)
    m = torch.full((B, H, n_q, 1), -math.inf, dtype=work)
    l = torch.zeros((B, H, n_q, 1), dtype=work)
    acc = torch.zeros((B, H, n_q, v.shape[-1]), dtype=work)
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    for j in range(0, n_k, block_size):
        kb = k[:, :, j:j + block_size].to(work)
        vb = v[:, :, j:j + block_size].to(work)
        s = qs @ kb.transpose(-1, -2)
        if causal:
            kpos = torch.arange(j, j + kb.shape[2])[None, :]
            s = s.masked_fill(kpos > qpos, -math.inf)
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        m_safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
        p = torch.exp(s - m_safe)
        l = l * torch.exp(m - m_safe) + p.sum(-1, keepdim=True)
        acc = acc + p @ vb
        m = m_new
    out = acc / torch.where(l == 0, torch.ones_like(l), l)
    return out.to(q.dtype)


def online_drops_ragged_block(q, k, v, block_size=64, causal=False):
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    work = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(work) * d ** -0.5
    m = torch.full((B, H, n_q, 1), -math.inf, dtype=work)
    l = torch.zeros((B, H, n_q, 1), dtype=work)
    acc = torch.zeros((B, H, n_q, d), dtype=work)
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    for blk in range(n_k // block_size):
        lo, hi = blk * block_size, (blk + 1) * block_size
        s = qs @ k[:, :, lo:hi].to(work).transpose(-1, -2)
        if causal:
            s = s.masked_fill(torch.arange(lo, hi)[None, :] > qpos, -math.inf)
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        shift = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
        p = torch.exp(s - shift)
        corr = torch.exp(m - shift)
        l = corr * l + p.sum(-1, keepdim=True)
        acc = corr * acc + p @ v[:, :, lo:hi].to(work)
        m = m_new
    return (acc / torch.where(l == 0, torch.ones_like(l), l)).to(q.dtype)


def online_no_inf_guard(q, k, v, block_size=64, causal=False):
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    work = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(work) / math.sqrt(d)
    m = torch.full((B, H, n_q, 1), -math.inf, dtype=work)
    l = torch.zeros((B, H, n_q, 1), dtype=work)
    acc = torch.zeros((B, H, n_q, d), dtype=work)
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    for start in range(0, n_k, block_size):
        stop = min(n_k, start + block_size)
        s = qs @ k[:, :, start:stop].to(work).transpose(-1, -2)
        if causal:
            s = s.masked_fill(torch.arange(start, stop)[None, :] > qpos, -math.inf)
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        p = torch.exp(s - m_new)
        alpha = torch.exp(m - m_new)
        l = alpha * l + p.sum(-1, keepdim=True)
        acc = alpha * acc + p @ v[:, :, start:stop].to(work)
        m = m_new
    out = acc / torch.where(l == 0, torch.ones_like(l), l)
    return out.to(q.dtype)


def online_full_scores(q, k, v, block_size=64, causal=False):
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    work = torch.promote_types(q.dtype, torch.float32)
    scores = (q.to(work) @ k.to(work).transpose(-1, -2)) / math.sqrt(d)  # (B, H, N_q, N_k)
    if causal:
        allowed = torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q)
        scores = scores.masked_fill(~allowed, -math.inf)
    m = torch.full((B, H, n_q, 1), -math.inf, dtype=work)
    l = torch.zeros((B, H, n_q, 1), dtype=work)
    acc = torch.zeros((B, H, n_q, d), dtype=work)
    for start in range(0, n_k, block_size):
        s = scores[..., start:start + block_size]
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        shift = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
        p = torch.exp(s - shift)
        r = torch.exp(m - shift)
        l = l * r + p.sum(-1, keepdim=True)
        acc = acc * r + p @ v[:, :, start:start + block_size].to(work)
        m = m_new
    return (acc / torch.where(l == 0, torch.ones_like(l), l)).to(q.dtype)


def online_block_local_positions(q, k, v, block_size=64, causal=False):
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    work = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(work) / math.sqrt(d)
    m = torch.full((B, H, n_q, 1), -math.inf, dtype=work)
    l = torch.zeros((B, H, n_q, 1), dtype=work)
    acc = torch.zeros((B, H, n_q, d), dtype=work)
    offset = n_k - n_q
    for start in range(0, n_k, block_size):
        kb = k[:, :, start:start + block_size].to(work)
        vb = v[:, :, start:start + block_size].to(work)
        s = qs @ kb.transpose(-1, -2)
        if causal:
            nb = kb.shape[2]
            keep = torch.ones(n_q, nb, dtype=torch.bool).tril(offset)
            s = s.masked_fill(~keep, -math.inf)
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        shift = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
        p = torch.exp(s - shift)
        r = torch.exp(m - shift)
        l = l * r + p.sum(-1, keepdim=True)
        acc = acc * r + p @ vb
        m = m_new
    return (acc / torch.where(l == 0, torch.ones_like(l), l)).to(q.dtype)


def online_d_from_wrong_axis(q, k, v, block_size=64, causal=False):
    B, H, n_q = q.shape[:3]
    d = q.size(2)
    n_k = k.shape[2]
    work = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(work) / math.sqrt(d)
    m = torch.full((B, H, n_q, 1), -math.inf, dtype=work)
    l = torch.zeros((B, H, n_q, 1), dtype=work)
    acc = torch.zeros(q.shape, dtype=work)
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    for start in range(0, n_k, block_size):
        stop = min(n_k, start + block_size)
        s = qs @ k[:, :, start:stop].to(work).transpose(-1, -2)
        if causal:
            s = s.masked_fill(torch.arange(start, stop)[None, :] > qpos, -math.inf)
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        shift = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
        p = torch.exp(s - shift)
        r = torch.exp(m - shift)
        l = l * r + p.sum(-1, keepdim=True)
        acc = acc * r + p @ v[:, :, start:stop].to(work)
        m = m_new
    return (acc / torch.where(l == 0, torch.ones_like(l), l)).to(q.dtype)


# ============================================================ online_softmax_attention: right
def _block_state(q64, k_blk, v_blk, allowed):
    """(out, lse) of one key block in float64; rows with no allowed key give zeros / -inf."""
    s = torch.einsum("bhqd,bhkd->bhqk", q64, k_blk)
    if allowed is not None:
        s = torch.where(allowed, s, torch.full_like(s, -math.inf))
    lse = torch.logsumexp(s, dim=-1)  # (B, H, N_q)
    safe = torch.where(torch.isneginf(lse), torch.zeros_like(lse), lse)
    p = torch.exp(s - safe[..., None])
    return torch.einsum("bhqk,bhkd->bhqd", p, v_blk), lse


def online_merge_blocks(q, k, v, block_size=64, causal=False):
    n_q, d = q.shape[2], q.shape[3]
    n_k = k.shape[2]
    q64 = q.to(torch.float64) / math.sqrt(d)
    out = torch.zeros(q.shape[:3] + (v.shape[-1],), dtype=torch.float64)
    lse = torch.full(q.shape[:3], -math.inf, dtype=torch.float64)
    rows = torch.arange(n_q).unsqueeze(1) + (n_k - n_q)
    for lo in range(0, n_k, block_size):
        hi = min(lo + block_size, n_k)
        allowed = (torch.arange(lo, hi).unsqueeze(0) <= rows) if causal else None
        o_b, l_b = _block_state(q64, k[:, :, lo:hi].to(torch.float64),
                                v[:, :, lo:hi].to(torch.float64), allowed)
        new = torch.logaddexp(lse, l_b)
        ok = torch.isfinite(new)
        ref = torch.where(ok, new, torch.zeros_like(new))
        wa = torch.where(ok, torch.exp(lse - ref), torch.zeros_like(new))
        wb = torch.where(ok, torch.exp(l_b - ref), torch.zeros_like(new))
        out = wa[..., None] * out + wb[..., None] * o_b
        lse = new
    return out.to(q.dtype)


def online_key_by_key(q, k, v, block_size=64, causal=False):
    n_q, d = q.shape[2], q.shape[3]
    n_k = k.shape[2]
    qd = q.double() * (1.0 / math.sqrt(d))
    kd, vd = k.double(), v.double()
    best = torch.full(q.shape[:3], -math.inf, dtype=torch.float64)
    denom = torch.zeros(q.shape[:3], dtype=torch.float64)
    numer = torch.zeros(q.shape[:3] + (vd.shape[-1],), dtype=torch.float64)
    first_visible = torch.arange(n_q) + (n_k - n_q)  # query i sees keys j <= this
    for j in range(n_k):
        s = (qd * kd[:, :, j:j + 1, :]).sum(-1)  # (B, H, N_q)
        if causal:
            s = torch.where(j <= first_visible, s, torch.full_like(s, -math.inf))
        top = torch.maximum(best, s)
        base = torch.where(torch.isneginf(top), torch.zeros_like(top), top)
        old = torch.exp(best - base)
        new = torch.exp(s - base)
        denom = denom * old + new
        numer = numer * old[..., None] + new[..., None] * vd[:, :, j:j + 1, :]
        best = top
    out = numer / torch.where(denom > 0, denom, torch.ones_like(denom))[..., None]
    return out.to(q.dtype)


ENTRIES = [
    Entry(E, "wrong", "no_max_shift",
          "Exponentiates the raw log-sum-exps without subtracting their maximum first, so "
          "lse values around 1e4 overflow to inf and the result becomes NaN.",
          merge_no_shift),
    Entry(E, "wrong", "forgets_to_normalise",
          "Rescales each output by exp(lse - max) but never divides by the combined sum of "
          "those weights, treating the normalised outputs as if they were unnormalised "
          "accumulators.",
          merge_unnormalised),
    Entry(E, "wrong", "swapped_weights",
          "Multiplies out_a by B's weight and out_b by A's weight: the two merge weights are "
          "attached to the wrong outputs.",
          merge_swapped),
    Entry(E, "wrong", "nan_to_num_on_lse",
          "Cleans up with torch.nan_to_num, which also turns the lse of a row where both sets "
          "are empty from -inf into the most negative finite float.",
          merge_nan_to_num),
    Entry(E, "wrong", "no_empty_row_guard",
          "Shifts by the maximum lse without guarding rows where both sets are empty, so "
          "exp(-inf - (-inf)) gives NaN instead of a zero row and -inf.",
          merge_no_guard),
    Entry(E, "wrong", "weights_missing_trailing_axis",
          "Multiplies the (..., N_q) merge weights by the (..., N_q, d_v) outputs without a "
          "trailing axis, so the broadcast lines N_q up with d_v and raises a shape error.",
          merge_no_trailing_axis),
    Entry(E, "right", "softmax_over_stacked_lse", None, merge_softmax_stack),
    Entry(E, "right", "sigmoid_log1p_float64", None, merge_sigmoid),

    Entry(O, "wrong", "accumulator_not_rescaled",
          "Rescales the running sum when the running maximum grows but not the output "
          "accumulator, so earlier blocks keep weights relative to a stale maximum.",
          online_no_acc_rescale),
    Entry(O, "wrong", "drops_ragged_last_block",
          "Loops over n_k // block_size full blocks only, so the keys of a shorter last block "
          "(or all keys when block_size > N) are never visited.",
          online_drops_ragged_block),
    Entry(O, "wrong", "no_guard_for_masked_rows",
          "Subtracts the running maximum without guarding rows that have seen only masked "
          "keys, so exp(-inf - (-inf)) turns query rows with no visible key into NaN.",
          online_no_inf_guard),
    Entry(O, "wrong", "materialises_full_scores",
          "Computes the whole N_q x N_k score matrix up front and only then walks over it in "
          "blocks, which breaks the rule never to build an N x N tensor.",
          online_full_scores),
    Entry(O, "wrong", "causal_mask_block_local",
          "Builds each block's causal mask from key positions counted within the block "
          "instead of the block's absolute key positions (start + j).",
          online_block_local_positions),
    Entry(O, "wrong", "head_dim_from_sequence_axis",
          "Reads d from q.size(2), which is the query length, so the scores are scaled by "
          "1/sqrt(N_q) instead of 1/sqrt(d).",
          online_d_from_wrong_axis),
    Entry(O, "right", "merge_block_states_float64", None, online_merge_blocks),
    Entry(O, "right", "one_key_at_a_time", None, online_key_by_key),
]
