"""Lesson 07 (split-key merge and online softmax, torch)."""

import math

import torch

from entry import Entry


# ----------------------------------------------------------------------------- merge_attention_states
def _c(t):
    return torch.promote_types(t.dtype, torch.float32)


def mas_naive_exp(out_a, lse_a, out_b, lse_b):
    c = _c(out_a)
    ea, eb = torch.exp(lse_a.to(c)), torch.exp(lse_b.to(c))
    tot = ea + eb
    safe = torch.where(tot == 0, torch.ones_like(tot), tot)
    out = (ea / safe)[..., None] * out_a.to(c) + (eb / safe)[..., None] * out_b.to(c)
    return out.to(out_a.dtype), torch.log(tot).to(lse_a.dtype)


def mas_average(out_a, lse_a, out_b, lse_b):
    c = _c(out_a)
    lse = torch.logaddexp(lse_a.to(c), lse_b.to(c))
    out = 0.5 * (out_a.to(c) + out_b.to(c))
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def mas_lse_is_max(out_a, lse_a, out_b, lse_b):
    c = _c(out_a)
    a, b = lse_a.to(c), lse_b.to(c)
    m = torch.maximum(a, b)
    shift = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    wa, wb = torch.exp(a - shift), torch.exp(b - shift)
    tot = wa + wb
    safe = torch.where(tot == 0, torch.ones_like(tot), tot)
    out = (wa / safe).unsqueeze(-1) * out_a.to(c) + (wb / safe).unsqueeze(-1) * out_b.to(c)
    return out.to(out_a.dtype), m.to(lse_a.dtype)


def mas_logaddexp_nan(out_a, lse_a, out_b, lse_b):
    c = _c(out_a)
    a, b = lse_a.to(c), lse_b.to(c)
    lse = torch.logaddexp(a, b)
    wa = torch.exp(a - lse)[..., None]
    wb = torch.exp(b - lse)[..., None]
    out = wa * out_a.to(c) + wb * out_b.to(c)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def mas_swapped_weights(out_a, lse_a, out_b, lse_b):
    c = _c(out_a)
    a, b = lse_a.to(c), lse_b.to(c)
    top = torch.maximum(a, b)
    top = torch.where(torch.isinf(top), 0.0, top)
    wa, wb = torch.exp(a - top), torch.exp(b - top)
    tot = wa + wb
    lse = top + torch.log(tot)
    tot = torch.where(tot == 0, 1.0, tot)
    out = (wb / tot)[..., None] * out_a.to(c) + (wa / tot)[..., None] * out_b.to(c)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def mas_softmax_wrong_dim(out_a, lse_a, out_b, lse_b):
    c = _c(out_a)
    stacked = torch.stack([lse_a.to(c), lse_b.to(c)])  # (2, ..., N_q)
    w = torch.nan_to_num(torch.softmax(stacked, dim=-1), nan=0.0)
    lse = torch.logsumexp(stacked, dim=0)
    out = w[0][..., None] * out_a.to(c) + w[1][..., None] * out_b.to(c)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def mas_sigmoid(out_a, lse_a, out_b, lse_b):
    a, b = lse_a.double(), lse_b.double()
    both_empty = torch.isneginf(a) & torch.isneginf(b)
    diff = torch.where(both_empty, torch.zeros_like(a), a - b)
    w_a = torch.sigmoid(diff)  # exp(a) / (exp(a) + exp(b))
    w_b = torch.sigmoid(-diff)
    out = w_a[..., None] * out_a.double() + w_b[..., None] * out_b.double()
    out = torch.where(both_empty[..., None], torch.zeros_like(out), out)
    lse = torch.logaddexp(a, b)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def mas_stacked_logsumexp(out_a, lse_a, out_b, lse_b):
    lses = torch.stack([lse_a.double(), lse_b.double()], dim=-1)  # (..., N_q, 2)
    lse = torch.logsumexp(lses, dim=-1)  # -inf when both are -inf
    safe = torch.where(torch.isneginf(lse), torch.zeros_like(lse), lse)
    w = torch.exp(lses - safe[..., None])  # (..., N_q, 2)
    outs = torch.stack([out_a.double(), out_b.double()], dim=-1)  # (..., N_q, d, 2)
    out = torch.einsum("...qds,...qs->...qd", outs, w)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


# ----------------------------------------------------------------------------- online_softmax_attention
def _setup(q, k):
    c = torch.promote_types(q.dtype, torch.float32)
    B, H, Nq, d = q.shape
    Nk = k.shape[2]
    return c, B, H, Nq, Nk, d


def osa_no_acc_rescale(q, k, v, block_size=64, causal=False):
    c, B, H, Nq, Nk, d = _setup(q, k)
    qs = q.to(c) / math.sqrt(d)
    m = torch.full((B, H, Nq, 1), -math.inf, dtype=c)
    l = torch.zeros((B, H, Nq, 1), dtype=c)
    acc = torch.zeros((B, H, Nq, d), dtype=c)
    qpos = torch.arange(Nq)[:, None] + (Nk - Nq)
    for s0 in range(0, Nk, block_size):
        s1 = min(s0 + block_size, Nk)
        sc = qs @ k[:, :, s0:s1].to(c).transpose(-2, -1)
        if causal:
            sc = sc.masked_fill(torch.arange(s0, s1)[None, :] > qpos, -math.inf)
        m_new = torch.maximum(m, sc.amax(-1, keepdim=True))
        sh = torch.where(torch.isinf(m_new), 0.0, m_new)
        p = torch.exp(sc - sh)
        l = l * torch.exp(m - sh) + p.sum(-1, keepdim=True)
        acc = acc + p @ v[:, :, s0:s1].to(c)  # old accumulator not rescaled
        m = m_new
    return (acc / torch.where(l == 0, 1.0, l)).to(q.dtype)


def osa_rescale_sign(q, k, v, block_size=64, causal=False):
    c, B, H, Nq, Nk, d = _setup(q, k)
    qs = q.to(c) * d ** -0.5
    m = torch.full((B, H, Nq, 1), -math.inf, dtype=c)
    l = torch.zeros_like(m)
    acc = torch.zeros((B, H, Nq, d), dtype=c)
    qpos = torch.arange(Nq)[:, None] + (Nk - Nq)
    for s0 in range(0, Nk, block_size):
        s1 = min(s0 + block_size, Nk)
        sc = qs @ k[:, :, s0:s1].to(c).transpose(-2, -1)
        if causal:
            sc = sc.masked_fill(torch.arange(s0, s1)[None, :] > qpos, -math.inf)
        m_new = torch.maximum(m, sc.amax(-1, keepdim=True))
        sh = torch.where(torch.isinf(m_new), 0.0, m_new)
        p = torch.exp(sc - sh)
        old = torch.where(torch.isinf(m), torch.zeros_like(m), m)
        alpha = torch.exp(sh - old)  # exponent the wrong way round
        l = l * alpha + p.sum(-1, keepdim=True)
        acc = acc * alpha + p @ v[:, :, s0:s1].to(c)
        m = m_new
    return (acc / torch.where(l == 0, 1.0, l)).to(q.dtype)


def osa_top_left_causal(q, k, v, block_size=64, causal=False):
    c, B, H, Nq, Nk, d = _setup(q, k)
    qs = q.to(c) / math.sqrt(d)
    m = torch.full((B, H, Nq, 1), -math.inf, dtype=c)
    l = torch.zeros_like(m)
    acc = torch.zeros((B, H, Nq, d), dtype=c)
    rows = torch.arange(Nq)[:, None]
    for s0 in range(0, Nk, block_size):
        s1 = min(s0 + block_size, Nk)
        sc = qs @ k[:, :, s0:s1].to(c).transpose(-2, -1)
        if causal:
            sc = sc.masked_fill(torch.arange(s0, s1)[None, :] > rows, -math.inf)
        m_new = torch.maximum(m, sc.amax(-1, keepdim=True))
        sh = torch.where(torch.isinf(m_new), 0.0, m_new)
        p = torch.exp(sc - sh)
        a = torch.exp(m - sh)
        l = l * a + p.sum(-1, keepdim=True)
        acc = acc * a + p @ v[:, :, s0:s1].to(c)
        m = m_new
    return (acc / torch.where(l == 0, 1.0, l)).to(q.dtype)


def osa_unguarded_max(q, k, v, block_size=64, causal=False):
    c, B, H, Nq, Nk, d = _setup(q, k)
    qs = q.to(c) / math.sqrt(d)
    m = torch.full((B, H, Nq, 1), -math.inf, dtype=c)
    l = torch.zeros_like(m)
    acc = torch.zeros((B, H, Nq, d), dtype=c)
    qpos = torch.arange(Nq)[:, None] + (Nk - Nq)
    for s0 in range(0, Nk, block_size):
        s1 = min(s0 + block_size, Nk)
        sc = qs @ k[:, :, s0:s1].to(c).transpose(-2, -1)
        if causal:
            sc = sc.masked_fill(torch.arange(s0, s1)[None, :] > qpos, -math.inf)
        m_new = torch.maximum(m, sc.amax(-1, keepdim=True))
        p = torch.exp(sc - m_new)
        a = torch.exp(m - m_new)
        a = torch.nan_to_num(a, nan=0.0)  # first block: exp(-inf - finite)
        l = l * a + p.sum(-1, keepdim=True)
        acc = acc * a + p @ v[:, :, s0:s1].to(c)
        m = m_new
    return (acc / torch.where(l == 0, 1.0, l)).to(q.dtype)


def osa_drops_tail(q, k, v, block_size=64, causal=False):
    c, B, H, Nq, Nk, d = _setup(q, k)
    qs = q.to(c) / math.sqrt(d)
    m = torch.full((B, H, Nq, 1), -math.inf, dtype=c)
    l = torch.zeros_like(m)
    acc = torch.zeros((B, H, Nq, d), dtype=c)
    qpos = torch.arange(Nq)[:, None] + (Nk - Nq)
    n_blocks = max(Nk // block_size, 1)
    for b in range(n_blocks):
        s0, s1 = b * block_size, min((b + 1) * block_size, Nk)
        sc = qs @ k[:, :, s0:s1].to(c).transpose(-2, -1)
        if causal:
            sc = sc.masked_fill(torch.arange(s0, s1)[None, :] > qpos, -math.inf)
        m_new = torch.maximum(m, sc.amax(-1, keepdim=True))
        sh = torch.where(torch.isinf(m_new), 0.0, m_new)
        p = torch.exp(sc - sh)
        a = torch.exp(m - sh)
        l = l * a + p.sum(-1, keepdim=True)
        acc = acc * a + p @ v[:, :, s0:s1].to(c)
        m = m_new
    return (acc / torch.where(l == 0, 1.0, l)).to(q.dtype)


def osa_collects_scores(q, k, v, block_size=64, causal=False):
    c, B, H, Nq, Nk, d = _setup(q, k)
    qs = q.to(c) / math.sqrt(d)
    qpos = torch.arange(Nq)[:, None] + (Nk - Nq)
    pieces = []
    for s0 in range(0, Nk, block_size):
        s1 = min(s0 + block_size, Nk)
        sc = qs @ k[:, :, s0:s1].to(c).transpose(-2, -1)
        if causal:
            sc = sc.masked_fill(torch.arange(s0, s1)[None, :] > qpos, -math.inf)
        pieces.append(sc)
    scores = torch.cat(pieces, dim=-1)  # (B, H, N_q, N_k)
    w = torch.nan_to_num(torch.softmax(scores, dim=-1), nan=0.0)
    return (w @ v.to(c)).to(q.dtype)


def osa_lse_merge(q, k, v, block_size=64, causal=False):
    c, B, H, Nq, Nk, d = _setup(q, k)
    c = torch.float64
    qs = q.to(c) / math.sqrt(d)
    out = torch.zeros(B, H, Nq, d, dtype=c)
    lse = torch.full((B, H, Nq), -math.inf, dtype=c)
    qpos = torch.arange(Nq)[:, None] + (Nk - Nq)
    for s0 in range(0, Nk, block_size):
        s1 = min(s0 + block_size, Nk)
        sc = qs @ k[:, :, s0:s1].to(c).transpose(-2, -1)
        if causal:
            sc = sc.masked_fill(torch.arange(s0, s1)[None, :] > qpos, -math.inf)
        blk_lse = torch.logsumexp(sc, dim=-1)  # -inf where the block is fully masked
        safe = torch.where(torch.isneginf(blk_lse), 0.0, blk_lse)
        blk_out = torch.exp(sc - safe[..., None]) @ v[:, :, s0:s1].to(c)
        new = torch.logaddexp(lse, blk_lse)
        new_safe = torch.where(torch.isneginf(new), 0.0, new)
        out = torch.exp(lse - new_safe)[..., None] * out + torch.exp(blk_lse - new_safe)[..., None] * blk_out
        lse = new
    return out.to(q.dtype)


def osa_query_and_key_tiles(q, k, v, block_size=64, causal=False):
    B, H, Nq, d = q.shape
    Nk = k.shape[2]
    out = torch.empty(B, H, Nq, d, dtype=q.dtype)
    scale = 1.0 / math.sqrt(d)
    for i0 in range(0, Nq, block_size):
        i1 = min(i0 + block_size, Nq)
        qi = q[:, :, i0:i1].double() * scale
        m = torch.full((B, H, i1 - i0, 1), float("-inf"), dtype=torch.float64)
        l = torch.zeros_like(m)
        acc = torch.zeros(B, H, i1 - i0, d, dtype=torch.float64)
        for j0 in range(0, Nk, block_size):
            j1 = min(j0 + block_size, Nk)
            s = torch.einsum("bhid,bhjd->bhij", qi, k[:, :, j0:j1].double())
            if causal:
                allowed = (torch.arange(j0, j1)[None, :]
                           <= torch.arange(i0, i1)[:, None] + (Nk - Nq))
                s = s.masked_fill(~allowed, float("-inf"))
            m_blk = s.amax(dim=-1, keepdim=True)
            m_new = torch.maximum(m, m_blk)
            ref = m_new.clone()
            ref[torch.isneginf(ref)] = 0.0
            e = (s - ref).exp()
            corr = (m - ref).exp()
            l = corr * l + e.sum(-1, keepdim=True)
            acc = corr * acc + torch.einsum("bhij,bhjd->bhid", e, v[:, :, j0:j1].double())
            m = m_new
        l[l == 0] = 1.0
        out[:, :, i0:i1] = (acc / l).to(q.dtype)
    return out


ENTRIES = [
    Entry("merge_attention_states", "wrong", "naive-exp", "Exponentiates the log-sum-exps directly (exp(lse_a) + exp(lse_b)) without subtracting their maximum, so lse around 1e4 overflows.", mas_naive_exp),
    Entry("merge_attention_states", "wrong", "plain-average", "Averages out_a and out_b with equal weights instead of weighting each by exp(lse_set - lse).", mas_average),
    Entry("merge_attention_states", "wrong", "lse-is-max", "Returns max(lse_a, lse_b) as the combined log-sum-exp, dropping the log(1 + exp(-|lse_a - lse_b|)) term.", mas_lse_is_max),
    Entry("merge_attention_states", "wrong", "nan-when-both-empty", "Computes the weights as exp(lse_set - lse) without a guard, so rows where both sets are empty give exp(-inf + inf) = NaN.", mas_logaddexp_nan),
    Entry("merge_attention_states", "wrong", "swapped-weights", "Copy-paste slip: multiplies out_a by B's weight and out_b by A's weight.", mas_swapped_weights),
    Entry("merge_attention_states", "wrong", "softmax-wrong-dim", "Takes the softmax of the stacked lse's over the query axis (dim=-1) instead of over the two sets.", mas_softmax_wrong_dim),
    Entry("merge_attention_states", "right", "sigmoid-weights", None, mas_sigmoid),
    Entry("merge_attention_states", "right", "stacked-logsumexp", None, mas_stacked_logsumexp),
    Entry("online_softmax_attention", "wrong", "acc-not-rescaled", "Rescales the running sum when the maximum grows but forgets to rescale the output accumulator.", osa_no_acc_rescale),
    Entry("online_softmax_attention", "wrong", "rescale-sign", "Computes the correction factor as exp(new_max - old_max) instead of exp(old_max - new_max).", osa_rescale_sign),
    Entry("online_softmax_attention", "wrong", "top-left-causal", "Builds the causal mask top-left (key j <= query i) instead of bottom-right (j <= i + N_k - N_q).", osa_top_left_causal),
    Entry("online_softmax_attention", "wrong", "unguarded-max", "Subtracts a running max that is still -inf for rows that have seen only masked keys, so exp(-inf + inf) gives NaN.", osa_unguarded_max),
    Entry("online_softmax_attention", "wrong", "drops-ragged-block", "Loops over N_k // block_size blocks, dropping the last partial block of keys.", osa_drops_tail),
    Entry("online_softmax_attention", "wrong", "collects-all-scores", "Concatenates the block scores into the full N_q x N_k matrix and applies an ordinary softmax, instead of an online softmax.", osa_collects_scores),
    Entry("online_softmax_attention", "right", "lse-merge-per-block", None, osa_lse_merge),
    Entry("online_softmax_attention", "right", "query-and-key-tiles", None, osa_query_and_key_tiles),
]
