"""Held-out learners' answers, lesson 07 (flash): merge_attention_states,
online_softmax_attention."""

import math

import torch

from entry import Entry


# ============================================================ merge_attention_states
def merge_naive_logsumexp(out_a, lse_a, out_b, lse_b):
    lse = torch.log(torch.exp(lse_a) + torch.exp(lse_b))
    wa = torch.exp(lse_a - lse)
    wb = torch.exp(lse_b - lse)
    wa = torch.nan_to_num(wa, nan=0.0)
    wb = torch.nan_to_num(wb, nan=0.0)
    out = wa.unsqueeze(-1) * out_a + wb.unsqueeze(-1) * out_b
    return out, lse


def merge_weights_vs_max(out_a, lse_a, out_b, lse_b):
    m = torch.maximum(lse_a, lse_b)
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    wa = torch.exp(lse_a - m)
    wb = torch.exp(lse_b - m)
    lse = m + torch.log(wa + wb)
    # both rescaled to the common max, then added
    out = wa[..., None] * out_a + wb[..., None] * out_b
    return out, lse


def merge_no_unsqueeze(out_a, lse_a, out_b, lse_b):
    top = torch.maximum(lse_a, lse_b)
    top = torch.where(torch.isinf(top), 0.0, top)
    ea, eb = torch.exp(lse_a - top), torch.exp(lse_b - top)
    tot = ea + eb
    lse = top + torch.log(tot)
    tot = torch.where(tot == 0, 1.0, tot)
    out = (ea / tot) * out_a + (eb / tot) * out_b
    return out, lse


def merge_no_empty_guard(out_a, lse_a, out_b, lse_b):
    mx = torch.maximum(lse_a, lse_b)
    a = torch.exp(lse_a - mx)
    b = torch.exp(lse_b - mx)
    s = a + b
    new_lse = mx + torch.log(s)
    new_out = (a / s).unsqueeze(-1) * out_a + (b / s).unsqueeze(-1) * out_b
    return new_out, new_lse


def merge_returns_float32(out_a, lse_a, out_b, lse_b):
    la, lb = lse_a.float(), lse_b.float()
    oa, ob = out_a.float(), out_b.float()
    hi = torch.maximum(la, lb)
    hi = torch.where(torch.isinf(hi), torch.zeros_like(hi), hi)
    pa, pb = torch.exp(la - hi), torch.exp(lb - hi)
    z = pa + pb
    lse = hi + torch.log(z)
    z = torch.where(z == 0, torch.ones_like(z), z)
    out = (pa / z)[..., None] * oa + (pb / z)[..., None] * ob
    return out, lse


def merge_copy_paste_out(out_a, lse_a, out_b, lse_b):
    compute = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(compute), lse_b.to(compute)
    top = torch.maximum(la, lb)
    top = torch.where(torch.isinf(top), 0.0, top)
    wa, wb = torch.exp(la - top), torch.exp(lb - top)
    total = wa + wb
    lse = top + torch.log(total)
    safe = torch.where(total == 0, 1.0, total)
    out = (wa / safe)[..., None] * out_a.to(compute) + (wb / safe)[..., None] * out_a.to(compute)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_logaddexp_f64(out_a, lse_a, out_b, lse_b):
    la, lb = lse_a.double(), lse_b.double()
    lse = torch.logaddexp(la, lb)
    wa = torch.nan_to_num(torch.exp(la - lse), nan=0.0)
    wb = torch.nan_to_num(torch.exp(lb - lse), nan=0.0)
    out = torch.einsum("...q,...qd->...qd", wa, out_a.double()) + \
        torch.einsum("...q,...qd->...qd", wb, out_b.double())
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_stacked_softmax(out_a, lse_a, out_b, lse_b):
    both = torch.stack([lse_a.double(), lse_b.double()], dim=-1)  # (..., N_q, 2)
    lse = torch.logsumexp(both, dim=-1)
    w = torch.softmax(both, dim=-1)
    w = torch.where(torch.isnan(w), torch.zeros_like(w), w)
    outs = torch.stack([out_a.double(), out_b.double()], dim=-2)  # (..., N_q, 2, d_v)
    out = (w.unsqueeze(-1) * outs).sum(dim=-2)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


# ============================================================ online_softmax_attention
def online_no_acc_rescale(q, k, v, block_size=64, causal=False):
    B, H, Nq, d = q.shape
    Nk = k.shape[2]
    qf = q.float() / math.sqrt(d)
    m = torch.full((B, H, Nq, 1), -math.inf)
    l = torch.zeros((B, H, Nq, 1))
    acc = torch.zeros((B, H, Nq, d))
    qpos = torch.arange(Nq)[:, None] + (Nk - Nq)
    for s in range(0, Nk, block_size):
        e = min(s + block_size, Nk)
        sc = qf @ k[:, :, s:e].float().transpose(-1, -2)
        if causal:
            sc = sc.masked_fill(torch.arange(s, e)[None, :] > qpos, -math.inf)
        m_new = torch.maximum(m, sc.amax(-1, keepdim=True))
        sh = torch.where(torch.isinf(m_new), 0.0, m_new)
        p = torch.exp(sc - sh)
        l = l * torch.exp(m - sh) + p.sum(-1, keepdim=True)
        acc = acc + p @ v[:, :, s:e].float()
        m = m_new
    out = acc / torch.where(l == 0, 1.0, l)
    return out.to(q.dtype)


def online_top_left_causal(q, k, v, block_size=64, causal=False):
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    dt = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(dt) / math.sqrt(d)
    run_max = torch.full((b, h, n_q, 1), float("-inf"), dtype=dt)
    run_sum = torch.zeros((b, h, n_q, 1), dtype=dt)
    acc = torch.zeros((b, h, n_q, d), dtype=dt)
    rows = torch.arange(n_q).unsqueeze(1)
    for start in range(0, n_k, block_size):
        kb = k[:, :, start:start + block_size].to(dt)
        vb = v[:, :, start:start + block_size].to(dt)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            cols = torch.arange(start, start + kb.shape[2]).unsqueeze(0)
            s = s.masked_fill(cols > rows, float("-inf"))
        new_max = torch.maximum(run_max, s.amax(dim=-1, keepdim=True))
        safe = torch.where(torch.isinf(new_max), torch.zeros_like(new_max), new_max)
        p = torch.exp(s - safe)
        corr = torch.exp(run_max - safe)
        run_sum = run_sum * corr + p.sum(dim=-1, keepdim=True)
        acc = acc * corr + p @ vb
        run_max = new_max
    out = acc / torch.where(run_sum == 0, torch.ones_like(run_sum), run_sum)
    return out.to(q.dtype)


def online_no_inf_guard(q, k, v, block_size=64, causal=False):
    B, H, N_q, d = q.shape
    N_k = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    q_ = q.to(ct) * d ** -0.5
    mx = torch.full((B, H, N_q, 1), -torch.inf, dtype=ct)
    den = torch.zeros((B, H, N_q, 1), dtype=ct)
    num = torch.zeros((B, H, N_q, d), dtype=ct)
    qi = torch.arange(N_q)[:, None] + N_k - N_q
    for j0 in range(0, N_k, block_size):
        j1 = min(j0 + block_size, N_k)
        sc = q_ @ k[:, :, j0:j1].to(ct).transpose(-2, -1)
        if causal:
            sc = sc.masked_fill(torch.arange(j0, j1)[None, :] > qi, -torch.inf)
        mnew = torch.maximum(mx, sc.amax(-1, keepdim=True))
        w = torch.exp(sc - mnew)
        r = torch.exp(mx - mnew)
        den = den * r + w.sum(-1, keepdim=True)
        num = num * r + w @ v[:, :, j0:j1].to(ct)
        mx = mnew
    return (num / den).to(q.dtype)


def online_drops_ragged_block(q, k, v, block_size=64, causal=False):
    B, H, Nq, d = q.shape
    Nk = k.shape[2]
    cdt = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(cdt) / math.sqrt(d)
    m = torch.full((B, H, Nq, 1), -math.inf, dtype=cdt)
    l = torch.zeros((B, H, Nq, 1), dtype=cdt)
    o = torch.zeros((B, H, Nq, d), dtype=cdt)
    qpos = torch.arange(Nq)[:, None] + (Nk - Nq)
    n_blocks = max(Nk // block_size, 1)
    for blk in range(n_blocks):
        s0, s1 = blk * block_size, min((blk + 1) * block_size, Nk)
        sc = qs @ k[:, :, s0:s1].to(cdt).transpose(-2, -1)
        if causal:
            sc = sc.masked_fill(torch.arange(s0, s1)[None, :] > qpos, -math.inf)
        m2 = torch.maximum(m, sc.amax(-1, keepdim=True))
        sh = torch.where(torch.isinf(m2), 0.0, m2)
        p = torch.exp(sc - sh)
        f = torch.exp(m - sh)
        l = l * f + p.sum(-1, keepdim=True)
        o = o * f + p @ v[:, :, s0:s1].to(cdt)
        m = m2
    return (o / torch.where(l == 0, 1.0, l)).to(q.dtype)


def online_no_scale(q, k, v, block_size=64, causal=False):
    B, H, Nq, d = q.shape
    Nk = k.shape[2]
    cdt = torch.promote_types(q.dtype, torch.float32)
    qq = q.to(cdt)
    m = torch.full((B, H, Nq, 1), -math.inf, dtype=cdt)
    l = torch.zeros((B, H, Nq, 1), dtype=cdt)
    acc = torch.zeros((B, H, Nq, d), dtype=cdt)
    qpos = torch.arange(Nq)[:, None] + (Nk - Nq)
    for s0 in range(0, Nk, block_size):
        s1 = min(s0 + block_size, Nk)
        sc = qq @ k[:, :, s0:s1].to(cdt).transpose(-2, -1)
        if causal:
            sc = sc.masked_fill(torch.arange(s0, s1)[None, :] > qpos, -math.inf)
        m_new = torch.maximum(m, sc.amax(-1, keepdim=True))
        sh = torch.where(torch.isinf(m_new), 0.0, m_new)
        p = torch.exp(sc - sh)
        a = torch.exp(m - sh)
        l = l * a + p.sum(-1, keepdim=True)
        acc = acc * a + p @ v[:, :, s0:s1].to(cdt)
        m = m_new
    return (acc / torch.where(l == 0, 1.0, l)).to(q.dtype)


def online_weights_times_k(q, k, v, block_size=64, causal=False):
    batch, heads, nq, d = q.shape
    nk = k.shape[2]
    cdt = torch.promote_types(q.dtype, torch.float32)
    scale = 1.0 / math.sqrt(d)
    row_max = torch.full((batch, heads, nq, 1), -math.inf, dtype=cdt)
    row_sum = torch.zeros((batch, heads, nq, 1), dtype=cdt)
    acc = torch.zeros((batch, heads, nq, d), dtype=cdt)
    qpos = torch.arange(nq)[:, None] + (nk - nq)
    for start in range(0, nk, block_size):
        stop = min(start + block_size, nk)
        k_blk = k[:, :, start:stop].to(cdt)
        v_blk = v[:, :, start:stop].to(cdt)
        sc = (q.to(cdt) @ k_blk.transpose(-2, -1)) * scale
        if causal:
            sc = sc.masked_fill(torch.arange(start, stop)[None, :] > qpos, -math.inf)
        new_max = torch.maximum(row_max, sc.amax(-1, keepdim=True))
        shift = torch.where(torch.isinf(new_max), 0.0, new_max)
        w = torch.exp(sc - shift)
        resc = torch.exp(row_max - shift)
        row_sum = row_sum * resc + w.sum(-1, keepdim=True)
        acc = acc * resc + w @ k_blk
        row_max = new_max
    return (acc / torch.where(row_sum == 0, 1.0, row_sum)).to(q.dtype)


def online_running_lse_merge(q, k, v, block_size=64, causal=False):
    # keep a normalised (out, lse) pair and merge each key block into it, in float64
    B, H, Nq, d = q.shape
    Nk = k.shape[2]
    qd = q.double() / math.sqrt(d)
    out = torch.zeros((B, H, Nq, d), dtype=torch.float64)
    lse = torch.full((B, H, Nq), -math.inf, dtype=torch.float64)
    last_key = torch.arange(Nq) + (Nk - Nq)  # query i sees keys j <= last_key[i]
    start = 0
    while start < Nk:
        stop = min(Nk, start + block_size)
        s = torch.einsum("bhqd,bhkd->bhqk", qd, k[:, :, start:stop].double())
        if causal:
            allowed = torch.arange(start, stop)[None, :] <= last_key[:, None]
            s = torch.where(allowed, s, torch.tensor(-math.inf, dtype=torch.float64))
        blk_lse = torch.logsumexp(s, dim=-1)
        p = torch.nan_to_num(torch.exp(s - blk_lse[..., None]), nan=0.0)
        blk_out = torch.einsum("bhqk,bhkd->bhqd", p, v[:, :, start:stop].double())
        new_lse = torch.logaddexp(lse, blk_lse)
        wa = torch.nan_to_num(torch.exp(lse - new_lse), nan=0.0)
        wb = torch.nan_to_num(torch.exp(blk_lse - new_lse), nan=0.0)
        out = wa[..., None] * out + wb[..., None] * blk_out
        lse = new_lse
        start = stop
    return out.to(q.dtype)


def online_per_head_loops(q, k, v, block_size=64, causal=False):
    B, H, Nq, d = q.shape
    Nk = k.shape[2]
    result = torch.empty(q.shape, dtype=q.dtype)
    offset = Nk - Nq
    for bi in range(B):
        for hi in range(H):
            qh = q[bi, hi].double() / math.sqrt(d)
            m = torch.full((Nq,), -math.inf, dtype=torch.float64)
            den = torch.zeros(Nq, dtype=torch.float64)
            num = torch.zeros((Nq, d), dtype=torch.float64)
            for j0 in range(0, Nk, block_size):
                kb = k[bi, hi, j0:j0 + block_size].double()
                vb = v[bi, hi, j0:j0 + block_size].double()
                sc = qh @ kb.T
                if causal:
                    jj = torch.arange(j0, j0 + kb.shape[0])
                    ii = torch.arange(Nq) + offset
                    sc[jj[None, :] > ii[:, None]] = -math.inf
                m_new = torch.maximum(m, sc.max(dim=1).values)
                ref = m_new.clone()
                ref[torch.isinf(ref)] = 0.0
                e = torch.exp(sc - ref[:, None])
                c = torch.exp(m - ref)
                den = den * c + e.sum(dim=1)
                num = num * c[:, None] + e @ vb
                m = m_new
            den[den == 0] = 1.0
            result[bi, hi] = (num / den[:, None]).to(q.dtype)
    return result


ENTRIES = [
    Entry("merge_attention_states", "wrong", "naive_logsumexp",
          "computes lse as log(exp(lse_a) + exp(lse_b)) without subtracting the max first, "
          "so exp overflows for lse around 1e4: lse becomes inf and both weights collapse to 0 "
          "(zero output rows)",
          merge_naive_logsumexp),
    Entry("merge_attention_states", "wrong", "weights_relative_to_max",
          "weights the two outputs by exp(lse - max) instead of exp(lse - merged lse): the "
          "outputs are never renormalised by the total, so the merged row is too large",
          merge_weights_vs_max),
    Entry("merge_attention_states", "wrong", "weights_not_unsqueezed",
          "multiplies the (..., N_q) weights with the (..., N_q, d_v) outputs without a trailing "
          "None axis, so the broadcast lines N_q up with d_v and raises a shape error",
          merge_no_unsqueeze),
    Entry("merge_attention_states", "wrong", "both_empty_nan",
          "subtracts the row max without guarding the row where both sets are empty: "
          "-inf - (-inf) gives NaN there instead of a zero row and -inf",
          merge_no_empty_guard),
    Entry("merge_attention_states", "wrong", "returns_float32",
          "upcasts everything with .float() and never casts back, so float64 / float16 / "
          "bfloat16 inputs come back as float32 tensors",
          merge_returns_float32),
    Entry("merge_attention_states", "wrong", "out_a_twice",
          "copy-paste slip: the second term multiplies B's weight with out_a instead of out_b",
          merge_copy_paste_out),
    Entry("merge_attention_states", "right", "logaddexp_float64", None, merge_logaddexp_f64),
    Entry("merge_attention_states", "right", "stacked_softmax", None, merge_stacked_softmax),
    Entry("online_softmax_attention", "wrong", "acc_not_rescaled",
          "rescales the running sum by exp(old_max - new_max) but not the accumulator, so "
          "blocks seen before the max grew keep too much weight",
          online_no_acc_rescale),
    Entry("online_softmax_attention", "wrong", "causal_top_left",
          "causal mask compares key j with query i directly (top-left), forgetting the "
          "N_k - N_q offset of the bottom-right convention, so N_q != N_k differs",
          online_top_left_causal),
    Entry("online_softmax_attention", "wrong", "no_neg_inf_guard",
          "a row that has seen only masked keys has running max -inf and exp(-inf - (-inf)) "
          "gives NaN: no guard replacing an infinite max by 0 (NaN rows where N_q > N_k causal)",
          online_no_inf_guard),
    Entry("online_softmax_attention", "wrong", "drops_ragged_block",
          "counts blocks with N_k // block_size, so the ragged last block of keys is never "
          "visited when block_size does not divide N_k",
          online_drops_ragged_block),
    Entry("online_softmax_attention", "wrong", "no_sqrt_d_scale",
          "scores are q k^T without the 1/sqrt(d) scale",
          online_no_scale),
    Entry("online_softmax_attention", "wrong", "weights_times_k",
          "accumulates the block's weights times k_blk instead of v_blk (wrong tensor reused)",
          online_weights_times_k),
    Entry("online_softmax_attention", "right", "running_lse_merge", None,
          online_running_lse_merge),
    Entry("online_softmax_attention", "right", "per_head_loops", None, online_per_head_loops),
]
