"""Held-out catalogue, lesson 07 (flash): merge_attention_states, online_softmax_attention."""

import math

import torch

from entry import Entry


# ============================================================ merge_attention_states: wrong
def merge_naive_exp(out_a, lse_a, out_b, lse_b):
    dt = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(dt), lse_b.to(dt)
    ea, eb = torch.exp(la), torch.exp(lb)
    total = ea + eb
    lse = torch.log(total)
    safe = torch.where(total == 0, torch.ones_like(total), total)
    out = (ea / safe)[..., None] * out_a.to(dt) + (eb / safe)[..., None] * out_b.to(dt)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_no_trailing_axis(out_a, lse_a, out_b, lse_b):
    work = torch.promote_types(out_a.dtype, torch.float32)
    a, b = lse_a.to(work), lse_b.to(work)
    m = torch.maximum(a, b)
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    wa, wb = torch.exp(a - m), torch.exp(b - m)
    s = wa + wb
    lse = m + torch.log(s)
    s = torch.where(s == 0, torch.ones_like(s), s)
    out = (wa / s) * out_a.to(work) + (wb / s) * out_b.to(work)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_keeps_float32(out_a, lse_a, out_b, lse_b):
    oa, ob = out_a.float() if out_a.dtype != torch.float64 else out_a, \
        out_b.float() if out_b.dtype != torch.float64 else out_b
    la, lb = lse_a.to(oa.dtype), lse_b.to(oa.dtype)
    top = torch.maximum(la, lb)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    wa = torch.exp(la - top)
    wb = torch.exp(lb - top)
    tot = wa + wb
    new_lse = top + torch.log(tot)
    tot = torch.where(tot == 0, torch.ones_like(tot), tot)
    new_out = (wa / tot).unsqueeze(-1) * oa + (wb / tot).unsqueeze(-1) * ob
    return new_out, new_lse


def merge_nan_on_empty(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(ct), lse_b.to(ct)
    mx = torch.maximum(la, lb)
    pa, pb = torch.exp(la - mx), torch.exp(lb - mx)
    z = pa + pb
    lse = mx + torch.log(z)
    out = (pa / z).unsqueeze(-1) * out_a.to(ct) + (pb / z).unsqueeze(-1) * out_b.to(ct)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_lse_is_max(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(ct), lse_b.to(ct)
    hi = torch.maximum(la, lb)
    sh = torch.where(torch.isinf(hi), torch.zeros_like(hi), hi)
    wa, wb = torch.exp(la - sh), torch.exp(lb - sh)
    den = wa + wb
    den_safe = torch.where(den == 0, torch.ones_like(den), den)
    out = (wa / den_safe)[..., None] * out_a.to(ct) + (wb / den_safe)[..., None] * out_b.to(ct)
    return out.to(out_a.dtype), hi.to(lse_a.dtype)


def merge_copy_paste_out(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(ct), lse_b.to(ct)
    top = torch.maximum(la, lb)
    top = torch.where(torch.isinf(top), 0.0, top)
    w1 = torch.exp(la - top)
    w2 = torch.exp(lb - top)
    tot = w1 + w2
    lse = top + torch.log(tot)
    tot = torch.where(tot == 0, 1.0, tot)
    out = (w1 / tot)[..., None] * out_a.to(ct) + (w2 / tot)[..., None] * out_a.to(ct)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


# ============================================================ merge_attention_states: right
def merge_logsumexp_f64(out_a, lse_a, out_b, lse_b):
    la, lb = lse_a.double(), lse_b.double()
    lse = torch.logsumexp(torch.stack([la, lb]), dim=0)
    empty = torch.isneginf(lse)
    ref = torch.where(empty, torch.zeros_like(lse), lse)
    wa = torch.where(empty, torch.zeros_like(lse), torch.exp(la - ref))
    wb = torch.where(empty, torch.zeros_like(lse), torch.exp(lb - ref))
    out = torch.einsum("...n,...nd->...nd", wa, out_a.double()) + \
        torch.einsum("...n,...nd->...nd", wb, out_b.double())
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_sigmoid(out_a, lse_a, out_b, lse_b):
    la, lb = lse_a.double(), lse_b.double()
    both_empty = torch.isneginf(la) & torch.isneginf(lb)
    diff = torch.where(both_empty, torch.zeros_like(la), la - lb)
    share_a = torch.sigmoid(diff)  # e^a / (e^a + e^b)
    share_a = torch.where(both_empty, torch.zeros_like(share_a), share_a)
    share_b = torch.where(both_empty, torch.zeros_like(share_a), 1.0 - share_a)
    big = torch.maximum(la, lb)
    small = torch.minimum(la, lb)
    gap = torch.where(torch.isneginf(small), torch.full_like(big, -math.inf), small - big)
    lse = torch.where(both_empty, big, big + torch.log1p(torch.exp(gap)))
    out = share_a.unsqueeze(-1) * out_a.double() + share_b.unsqueeze(-1) * out_b.double()
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


# ============================================================ online_softmax_attention: wrong
def osa_no_acc_rescale(q, k, v, block_size=64, causal=False):
    B, H, nq, d = q.shape
    nk = k.shape[2]
    f = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(f) / math.sqrt(d)
    m = torch.full((B, H, nq, 1), -math.inf, dtype=f)
    l = torch.zeros((B, H, nq, 1), dtype=f)
    acc = torch.zeros((B, H, nq, d), dtype=f)
    qpos = torch.arange(nq)[:, None] + nk - nq
    for s0 in range(0, nk, block_size):
        s1 = min(s0 + block_size, nk)
        sc = qs @ k[:, :, s0:s1].to(f).transpose(-1, -2)
        if causal:
            sc = sc.masked_fill(torch.arange(s0, s1)[None, :] > qpos, -math.inf)
        m_new = torch.maximum(m, sc.amax(-1, keepdim=True))
        sh = torch.where(torch.isinf(m_new), 0.0, m_new)
        e = torch.exp(sc - sh)
        l = l * torch.exp(m - sh) + e.sum(-1, keepdim=True)
        acc = acc + e @ v[:, :, s0:s1].to(f)
        m = m_new
    return (acc / torch.where(l == 0, 1.0, l)).to(q.dtype)


def osa_top_left_causal(q, k, v, block_size=64, causal=False):
    b, h, n_q, d = q.shape
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qq = q.to(ct) * d ** -0.5
    run_max = torch.full((b, h, n_q, 1), float("-inf"), dtype=ct)
    run_sum = torch.zeros((b, h, n_q, 1), dtype=ct)
    acc = torch.zeros((b, h, n_q, d), dtype=ct)
    rows = torch.arange(n_q).unsqueeze(1)
    for lo in range(0, n_k, block_size):
        hi = min(lo + block_size, n_k)
        s = qq @ k[:, :, lo:hi].to(ct).transpose(2, 3)
        if causal:
            cols = torch.arange(lo, hi).unsqueeze(0)
            s = s.masked_fill(cols > rows, float("-inf"))
        new_max = torch.maximum(run_max, s.amax(dim=-1, keepdim=True))
        safe = torch.where(torch.isinf(new_max), torch.zeros_like(new_max), new_max)
        p = torch.exp(s - safe)
        corr = torch.exp(run_max - safe)
        run_sum = run_sum * corr + p.sum(dim=-1, keepdim=True)
        acc = acc * corr + p @ v[:, :, lo:hi].to(ct)
        run_max = new_max
    out = acc / torch.where(run_sum == 0, torch.ones_like(run_sum), run_sum)
    return out.to(q.dtype)


def osa_drops_ragged_block(q, k, v, block_size=64, causal=False):
    B, H, Nq, D = q.shape
    Nk = k.shape[2]
    ft = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ft) / math.sqrt(D)
    mx = torch.full((B, H, Nq, 1), -math.inf, dtype=ft)
    den = torch.zeros((B, H, Nq, 1), dtype=ft)
    num = torch.zeros((B, H, Nq, D), dtype=ft)
    offs = torch.arange(Nq)[:, None] + (Nk - Nq)
    n_blocks = max(Nk // block_size, 1)
    for j in range(n_blocks):
        a, z = j * block_size, min((j + 1) * block_size, Nk)
        sc = qs @ k[:, :, a:z].to(ft).transpose(-2, -1)
        if causal:
            sc = sc.masked_fill(torch.arange(a, z)[None, :] > offs, -math.inf)
        nm = torch.maximum(mx, sc.amax(-1, keepdim=True))
        sh = torch.where(torch.isinf(nm), 0.0, nm)
        w = torch.exp(sc - sh)
        r = torch.exp(mx - sh)
        den = den * r + w.sum(-1, keepdim=True)
        num = num * r + w @ v[:, :, a:z].to(ft)
        mx = nm
    return (num / torch.where(den == 0, 1.0, den)).to(q.dtype)


def osa_nan_empty_rows(q, k, v, block_size=64, causal=False):
    B, H, nq, d = q.shape
    nk = k.shape[2]
    f = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(f) / math.sqrt(d)
    m = torch.full((B, H, nq, 1), -math.inf, dtype=f)
    l = torch.zeros((B, H, nq, 1), dtype=f)
    o = torch.zeros((B, H, nq, d), dtype=f)
    qpos = torch.arange(nq)[:, None] + nk - nq
    for st in range(0, nk, block_size):
        en = min(st + block_size, nk)
        sc = qs @ k[:, :, st:en].to(f).transpose(-1, -2)
        if causal:
            sc = sc.masked_fill(torch.arange(st, en)[None, :] > qpos, -math.inf)
        m_new = torch.maximum(m, sc.amax(-1, keepdim=True))
        e = torch.exp(sc - m_new)
        alpha = torch.exp(m - m_new)
        l = l * alpha + e.sum(-1, keepdim=True)
        o = o * alpha + e @ v[:, :, st:en].to(f)
        m = m_new
    return (o / l).to(q.dtype)


def osa_returns_float32(q, k, v, block_size=64, causal=False):
    B, H, nq, d = q.shape
    nk = k.shape[2]
    q32 = q.float() if q.dtype != torch.float64 else q
    k32 = k.to(q32.dtype)
    v32 = v.to(q32.dtype)
    scale = 1.0 / math.sqrt(d)
    m = torch.full((B, H, nq, 1), -math.inf, dtype=q32.dtype)
    l = torch.zeros_like(m)
    acc = torch.zeros((B, H, nq, d), dtype=q32.dtype)
    qpos = torch.arange(nq).view(-1, 1) + (nk - nq)
    for st in range(0, nk, block_size):
        en = min(st + block_size, nk)
        sc = (q32 @ k32[:, :, st:en].transpose(-1, -2)) * scale
        if causal:
            sc = sc.masked_fill(torch.arange(st, en).view(1, -1) > qpos, -math.inf)
        m_new = torch.maximum(m, sc.amax(-1, keepdim=True))
        sh = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
        e = torch.exp(sc - sh)
        a = torch.exp(m - sh)
        l = a * l + e.sum(-1, keepdim=True)
        acc = a * acc + e @ v32[:, :, st:en]
        m = m_new
    return acc / torch.where(l == 0, torch.ones_like(l), l)


def osa_scale_by_seq_len(q, k, v, block_size=64, causal=False):
    B, H, nq, _ = q.shape
    d = q.shape[-2]
    nk = k.shape[2]
    f = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(f) / math.sqrt(d)
    m = torch.full((B, H, nq, 1), -math.inf, dtype=f)
    l = torch.zeros((B, H, nq, 1), dtype=f)
    acc = torch.zeros((B, H, nq, q.shape[-1]), dtype=f)
    qpos = torch.arange(nq)[:, None] + nk - nq
    for st in range(0, nk, block_size):
        en = min(st + block_size, nk)
        sc = qs @ k[:, :, st:en].to(f).transpose(-1, -2)
        if causal:
            sc = sc.masked_fill(torch.arange(st, en)[None, :] > qpos, -math.inf)
        m_new = torch.maximum(m, sc.amax(-1, keepdim=True))
        sh = torch.where(torch.isinf(m_new), 0.0, m_new)
        e = torch.exp(sc - sh)
        r = torch.exp(m - sh)
        l = l * r + e.sum(-1, keepdim=True)
        acc = acc * r + e @ v[:, :, st:en].to(f)
        m = m_new
    return (acc / torch.where(l == 0, 1.0, l)).to(q.dtype)


# ============================================================ online_softmax_attention: right
def osa_running_lse_f64(q, k, v, block_size=64, causal=False):
    """Keeps a running log-sum-exp and a normalised output, merged block by block."""
    nq, d = q.shape[-2], q.shape[-1]
    nk = k.shape[-2]
    qd = q.double() / math.sqrt(d)
    run_lse = torch.full(q.shape[:-1], -math.inf, dtype=torch.float64)
    run_out = torch.zeros(q.shape, dtype=torch.float64)
    first_key_hidden_after = torch.arange(nq, dtype=torch.long) + (nk - nq)
    for begin in range(0, nk, block_size):
        end = min(begin + block_size, nk)
        s = torch.einsum("bhqd,bhkd->bhqk", qd, k[:, :, begin:end].double())
        if causal:
            hide = torch.arange(begin, end)[None, :] > first_key_hidden_after[:, None]
            s = s.masked_fill(hide, -math.inf)
        blk_lse = torch.logsumexp(s, dim=-1)
        p = torch.exp(s - blk_lse.unsqueeze(-1))
        p = torch.nan_to_num(p, nan=0.0)
        blk_out = torch.einsum("bhqk,bhkd->bhqd", p, v[:, :, begin:end].double())
        new_lse = torch.logaddexp(run_lse, blk_lse)
        ok = torch.isfinite(new_lse)
        base = torch.where(ok, new_lse, torch.zeros_like(new_lse))
        wa = torch.where(ok, torch.exp(run_lse - base), torch.zeros_like(base))
        wb = torch.where(ok, torch.exp(blk_lse - base), torch.zeros_like(base))
        run_out = wa[..., None] * run_out + wb[..., None] * blk_out
        run_lse = new_lse
    return run_out.to(q.dtype)


def osa_key_by_key(q, k, v, block_size=64, causal=False):
    """Blocks of keys, and inside each block one key at a time (the textbook recurrence)."""
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    qs = q.double() * (1.0 / math.sqrt(d))
    kk, vv = k.double(), v.double()
    best = torch.full((B, H, n_q), -math.inf, dtype=torch.float64)
    tot = torch.zeros((B, H, n_q), dtype=torch.float64)
    num = torch.zeros((B, H, n_q, d), dtype=torch.float64)
    limit = torch.arange(n_q) + (n_k - n_q)  # last visible key of each query
    start = 0
    while start < n_k:
        for j in range(start, min(start + block_size, n_k)):
            s = (qs * kk[:, :, j, None, :]).sum(-1)  # (B, H, n_q)
            if causal:
                s = torch.where(j <= limit, s, torch.full_like(s, -math.inf))
            new = torch.maximum(best, s)
            ref = torch.where(torch.isinf(new), torch.zeros_like(new), new)
            keep = torch.exp(best - ref)
            e = torch.exp(s - ref)
            tot = tot * keep + e
            num = num * keep[..., None] + e[..., None] * vv[:, :, j, None, :]
            best = new
        start += block_size
    tot = torch.where(tot > 0, tot, torch.ones_like(tot))
    return (num / tot[..., None]).to(q.dtype)


ENTRIES = [
    Entry("merge_attention_states", "wrong", "naive_exp_overflow",
          "combines the two log-sum-exps as log(exp(lse_a) + exp(lse_b)) without subtracting "
          "the larger one first, so lse of size 1e4 overflows to inf and the weights become NaN",
          merge_naive_exp),
    Entry("merge_attention_states", "wrong", "weights_without_trailing_axis",
          "multiplies the (..., N_q) weights straight into the (..., N_q, d_v) outputs without "
          "adding a trailing axis, so broadcasting lines N_q up with d_v and the call raises",
          merge_no_trailing_axis),
    Entry("merge_attention_states", "wrong", "keeps_float32_result",
          "computes in float32 for half-precision inputs but never casts back, so out and lse "
          "come back float32 instead of the inputs' float16/bfloat16",
          merge_keeps_float32),
    Entry("merge_attention_states", "wrong", "nan_when_both_empty",
          "subtracts the maximum lse without a guard: on a row where both sets are empty "
          "exp(-inf - (-inf)) is NaN instead of a zero row with lse -inf",
          merge_nan_on_empty),
    Entry("merge_attention_states", "wrong", "lse_is_the_max",
          "returns max(lse_a, lse_b) as the merged log-sum-exp: the outputs are merged right "
          "but the lse forgets the log of the summed weights",
          merge_lse_is_max),
    Entry("merge_attention_states", "wrong", "out_a_twice",
          "copy-paste slip: the second term weights out_a again instead of out_b",
          merge_copy_paste_out),
    Entry("merge_attention_states", "right", "logsumexp_float64",
          None, merge_logsumexp_f64),
    Entry("merge_attention_states", "right", "sigmoid_of_lse_gap",
          None, merge_sigmoid),
    Entry("online_softmax_attention", "wrong", "acc_not_rescaled",
          "when a block raises the running max it rescales the running sum but not the "
          "accumulator, so earlier blocks' contributions keep their old, too-large exponent",
          osa_no_acc_rescale),
    Entry("online_softmax_attention", "wrong", "causal_top_left",
          "the causal mask compares key j with the query index i instead of i + N_k - N_q, so "
          "it is aligned top-left and is wrong whenever N_q != N_k",
          osa_top_left_causal),
    Entry("online_softmax_attention", "wrong", "drops_ragged_last_block",
          "counts the key blocks as N_k // block_size, so the keys of a last, shorter block "
          "are never visited",
          osa_drops_ragged_block),
    Entry("online_softmax_attention", "wrong", "nan_on_rows_without_keys",
          "no guard for a running max of -inf: a causal row that sees no key computes "
          "exp(-inf - (-inf)) and 0/0, giving NaN instead of a zero row",
          osa_nan_empty_rows),
    Entry("online_softmax_attention", "wrong", "no_cast_back",
          "accumulates in float32 and returns the float32 accumulator, not q's float16/bfloat16 "
          "dtype",
          osa_returns_float32),
    Entry("online_softmax_attention", "wrong", "scale_from_seq_axis",
          "reads d from q.shape[-2] (the sequence axis) instead of q.shape[-1], so the scores "
          "are scaled by 1/sqrt(N_q)",
          osa_scale_by_seq_len),
    Entry("online_softmax_attention", "right", "running_lse_merge_float64",
          None, osa_running_lse_f64),
    Entry("online_softmax_attention", "right", "key_by_key_recurrence",
          None, osa_key_by_key),
]
