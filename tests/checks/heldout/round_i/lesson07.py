"""Lesson 07 (flash): merge_attention_states, online_softmax_attention, torch."""

import math

import torch

from entry import Entry


def _work(dtype):
    return torch.float64 if dtype == torch.float64 else torch.float32


# ---------------------------------------------------------------- merge_attention_states
def _back(out, lse, out_a, lse_a):
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def mas_no_shift(out_a, lse_a, out_b, lse_b):
    w = _work(out_a.dtype)
    ea, eb = torch.exp(lse_a.to(w)), torch.exp(lse_b.to(w))
    tot = ea + eb
    out = (ea / tot)[..., None] * out_a.to(w) + (eb / tot)[..., None] * out_b.to(w)
    return _back(out, torch.log(tot), out_a, lse_a)


def mas_lse_is_max(out_a, lse_a, out_b, lse_b):
    w = _work(out_a.dtype)
    la, lb = lse_a.to(w), lse_b.to(w)
    lse = torch.maximum(la, lb)
    safe = torch.where(torch.isinf(lse), 0.0, lse)
    wa, wb = torch.exp(la - safe), torch.exp(lb - safe)
    tot = torch.where(wa + wb == 0, 1.0, wa + wb)
    out = (wa / tot)[..., None] * out_a.to(w) + (wb / tot)[..., None] * out_b.to(w)
    return _back(out, lse, out_a, lse_a)


def mas_lse_added(out_a, lse_a, out_b, lse_b):
    w = _work(out_a.dtype)
    la, lb = lse_a.to(w), lse_b.to(w)
    top = torch.maximum(la, lb)
    safe = torch.where(torch.isinf(top), 0.0, top)
    wa, wb = torch.exp(la - safe), torch.exp(lb - safe)
    tot = torch.where(wa + wb == 0, 1.0, wa + wb)
    out = (wa / tot)[..., None] * out_a.to(w) + (wb / tot)[..., None] * out_b.to(w)
    return _back(out, la + lb, out_a, lse_a)


def mas_no_empty_guard(out_a, lse_a, out_b, lse_b):
    w = _work(out_a.dtype)
    la, lb = lse_a.to(w), lse_b.to(w)
    lse = torch.logaddexp(la, lb)
    wa, wb = torch.exp(la - lse), torch.exp(lb - lse)
    out = wa[..., None] * out_a.to(w) + wb[..., None] * out_b.to(w)
    return _back(out, lse, out_a, lse_a)


def mas_no_unsqueeze(out_a, lse_a, out_b, lse_b):
    w = _work(out_a.dtype)
    la, lb = lse_a.to(w), lse_b.to(w)
    lse = torch.logaddexp(la, lb)
    safe = torch.where(torch.isinf(lse), 0.0, lse)
    wa, wb = torch.exp(la - safe), torch.exp(lb - safe)
    out = wa * out_a.to(w) + wb * out_b.to(w)
    return _back(out, lse, out_a, lse_a)


def mas_weights_swapped(out_a, lse_a, out_b, lse_b):
    w = _work(out_a.dtype)
    la, lb = lse_a.to(w), lse_b.to(w)
    lse = torch.logaddexp(la, lb)
    safe = torch.where(torch.isinf(lse), 0.0, lse)
    wa, wb = torch.exp(la - safe), torch.exp(lb - safe)
    out = wa[..., None] * out_b.to(w) + wb[..., None] * out_a.to(w)
    return _back(out, lse, out_a, lse_a)


def mas_logaddexp_float64(out_a, lse_a, out_b, lse_b):
    la, lb = lse_a.double(), lse_b.double()
    lse = torch.logaddexp(la, lb)
    empty = torch.isneginf(lse)
    wa = torch.where(empty, 0.0, torch.exp(la - lse.masked_fill(empty, 0.0)))
    wb = torch.where(empty, 0.0, torch.exp(lb - lse.masked_fill(empty, 0.0)))
    out = wa.unsqueeze(-1) * out_a.double() + wb.unsqueeze(-1) * out_b.double()
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def mas_sigmoid(out_a, lse_a, out_b, lse_b):
    w = _work(out_a.dtype)
    la, lb = lse_a.to(w), lse_b.to(w)
    both_empty = torch.isneginf(la) & torch.isneginf(lb)
    diff = torch.where(both_empty, 0.0, la - lb)  # +-inf when one side is empty: sigmoid 1 / 0
    share_a = torch.sigmoid(diff)
    out = share_a[..., None] * out_a.to(w) + (1 - share_a)[..., None] * out_b.to(w)
    out = out.masked_fill(both_empty[..., None], 0.0)
    top = torch.maximum(la, lb)
    lse = top + torch.log1p(torch.exp(-(la - lb).abs().nan_to_num(nan=math.inf)))
    lse = torch.where(both_empty, -math.inf, lse)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


# ---------------------------------------------------------------- online_softmax_attention
def _online(q, k, v, block_size, causal, *, rescale_acc=True, flip=False, drop_tail=False,
            local_keys=False, normalise_blocks=False, early_max=False):
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    w = _work(q.dtype)
    qs = q.to(w) / math.sqrt(d)
    m = torch.full((b, h, n_q, 1), -math.inf, dtype=w)
    l = torch.zeros((b, h, n_q, 1), dtype=w)
    acc = torch.zeros((b, h, n_q, d), dtype=w)
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    stop_all = (n_k // block_size) * block_size if drop_tail else n_k
    for s0 in range(0, stop_all, block_size):
        s1 = min(s0 + block_size, n_k)
        s = qs @ k[:, :, s0:s1].to(w).transpose(-2, -1)
        if causal:
            kpos = torch.arange(0, s1 - s0) if local_keys else torch.arange(s0, s1)
            s = s.masked_fill(kpos[None, :] > qpos, -math.inf)
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        if early_max:
            m = m_new
        shift = torch.where(torch.isinf(m_new), 0.0, m_new)
        p = torch.exp(s - shift)
        if normalise_blocks:
            bs = p.sum(-1, keepdim=True)
            p = p / torch.where(bs == 0, 1.0, bs)
        corr = torch.exp(shift - m) if flip else torch.exp(m - shift)
        corr = torch.nan_to_num(corr, nan=0.0, posinf=0.0)
        l = l * corr + p.sum(-1, keepdim=True)
        acc = (acc * corr if rescale_acc else acc) + p @ v[:, :, s0:s1].to(w)
        m = m_new
    return (acc / torch.where(l == 0, 1.0, l)).to(q.dtype)


def osa_no_acc_rescale(q, k, v, block_size=64, causal=False):
    return _online(q, k, v, block_size, causal, rescale_acc=False)


def osa_rescale_inverted(q, k, v, block_size=64, causal=False):
    return _online(q, k, v, block_size, causal, flip=True)


def osa_drops_tail(q, k, v, block_size=64, causal=False):
    return _online(q, k, v, block_size, causal, drop_tail=True)


def osa_block_local_keys(q, k, v, block_size=64, causal=False):
    return _online(q, k, v, block_size, causal, local_keys=True)


def osa_normalises_each_block(q, k, v, block_size=64, causal=False):
    return _online(q, k, v, block_size, causal, normalise_blocks=True)


def osa_max_updated_too_early(q, k, v, block_size=64, causal=False):
    return _online(q, k, v, block_size, causal, early_max=True)


def osa_merge_block_states(q, k, v, block_size=64, causal=False):
    """Each key block gives its own (out, lse); they are folded together with logaddexp."""
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    q64 = q.double() * d ** -0.5
    out = torch.zeros(b, h, n_q, d, dtype=torch.float64)
    lse = torch.full((b, h, n_q), -math.inf, dtype=torch.float64)
    rows = torch.arange(n_q).unsqueeze(1) + n_k - n_q
    for s0 in range(0, n_k, block_size):
        kb = k[:, :, s0:s0 + block_size].double()
        vb = v[:, :, s0:s0 + block_size].double()
        s = torch.einsum("bhqd,bhkd->bhqk", q64, kb)
        if causal:
            cols = torch.arange(s0, s0 + kb.shape[2]).unsqueeze(0)
            s = s.masked_fill(cols > rows, -math.inf)
        blk_lse = torch.logsumexp(s, dim=-1)
        blk_p = torch.exp(s - blk_lse.unsqueeze(-1)).nan_to_num(nan=0.0)
        blk_out = torch.einsum("bhqk,bhkd->bhqd", blk_p, vb)
        new = torch.logaddexp(lse, blk_lse)
        ok = ~torch.isneginf(new)
        safe = new.masked_fill(~ok, 0.0)
        wa = torch.where(ok, torch.exp(lse - safe), 0.0).unsqueeze(-1)
        wb = torch.where(ok, torch.exp(blk_lse - safe), 0.0).unsqueeze(-1)
        out = wa * out + wb * blk_out
        lse = new
    return out.to(q.dtype)


def osa_query_and_key_tiles(q, k, v, block_size=64, causal=False):
    """Tiles over queries too (FlashAttention-2 order), running max kept per query tile."""
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    w = _work(q.dtype)
    out = torch.empty(b, h, n_q, d, dtype=q.dtype)
    scale = 1.0 / math.sqrt(d)
    for q0 in range(0, n_q, block_size):
        qt = q[:, :, q0:q0 + block_size].to(w)
        nt = qt.shape[2]
        m = torch.full((b, h, nt, 1), -math.inf, dtype=w)
        l = torch.zeros((b, h, nt, 1), dtype=w)
        acc = torch.zeros((b, h, nt, d), dtype=w)
        qpos = torch.arange(q0, q0 + nt)[:, None] + (n_k - n_q)
        for k0 in range(0, n_k, block_size):
            kt = k[:, :, k0:k0 + block_size].to(w)
            s = torch.matmul(qt, kt.transpose(-1, -2)) * scale
            if causal:
                kpos = torch.arange(k0, k0 + kt.shape[2])[None, :]
                s = torch.where(kpos <= qpos, s, torch.tensor(-math.inf, dtype=w))
            m_new = torch.maximum(m, s.max(dim=-1, keepdim=True).values)
            base = m_new.masked_fill(torch.isneginf(m_new), 0.0)
            p = (s - base).exp()
            alpha = (m - base).exp()
            l = alpha * l + p.sum(-1, keepdim=True)
            acc = alpha * acc + torch.matmul(p, v[:, :, k0:k0 + block_size].to(w))
            m = m_new
        out[:, :, q0:q0 + nt] = (acc / l.clamp_min(torch.finfo(w).tiny)).to(q.dtype)
    return out


E = "merge_attention_states"
ENTRIES = [
    Entry(E, "wrong", "exp_without_shift", "It exponentiates the log-sum-exps directly without "
          "subtracting their maximum, so lse near 1e4 overflows to inf/inf = NaN.", mas_no_shift),
    Entry(E, "wrong", "lse_is_max", "The merged lse is the larger of the two instead of "
          "log(e^lse_a + e^lse_b).", mas_lse_is_max),
    Entry(E, "wrong", "lse_added", "The merged lse is lse_a + lse_b (multiplying the two sums) "
          "instead of their log-add-exp.", mas_lse_added),
    Entry(E, "wrong", "no_both_empty_guard", "Where both sets are empty, exp(-inf - (-inf)) "
          "gives NaN weights; the both-empty rows are not guarded.", mas_no_empty_guard),
    Entry(E, "wrong", "weights_not_unsqueezed", "The per-row weights (..., N_q) are multiplied "
          "into out (..., N_q, d_v) without [..., None], so they broadcast along d_v (or fail).",
          mas_no_unsqueeze),
    Entry(E, "wrong", "weights_swapped", "A's weight multiplies out_b and B's weight multiplies "
          "out_a.", mas_weights_swapped),
    Entry(E, "right", "logaddexp_float64", None, mas_logaddexp_float64),
    Entry(E, "right", "sigmoid_share", None, mas_sigmoid),
]

E = "online_softmax_attention"
ENTRIES += [
    Entry(E, "wrong", "accumulator_not_rescaled", "When the running max grows, the running sum "
          "is rescaled but the output accumulator is not.", osa_no_acc_rescale),
    Entry(E, "wrong", "rescale_inverted", "The correction factor is exp(new_max - old_max) "
          "instead of exp(old_max - new_max).", osa_rescale_inverted),
    Entry(E, "wrong", "drops_ragged_last_block", "The loop stops at n_k // block_size * "
          "block_size, so the keys of a ragged last block are never visited.", osa_drops_tail),
    Entry(E, "wrong", "block_local_key_positions", "The causal mask compares query positions "
          "with block-local key indices (0..b-1) instead of absolute ones (start..stop-1).",
          osa_block_local_keys),
    Entry(E, "wrong", "normalises_each_block", "Each block's exponentials are divided by that "
          "block's own sum before being accumulated, so blocks are weighted equally instead of "
          "by their share of the total.", osa_normalises_each_block),
    Entry(E, "wrong", "max_updated_before_rescale", "The running max is overwritten with the "
          "new max before the rescale factor is computed, so the factor is always 1 and the "
          "old sum and accumulator are never shrunk.", osa_max_updated_too_early),
    Entry(E, "right", "merge_block_states_float64", None, osa_merge_block_states),
    Entry(E, "right", "query_and_key_tiles", None, osa_query_and_key_tiles),
]
