"""Held-out catalogue, lesson 07 (flash): merge_attention_states, online_softmax_attention."""

import math

import torch

from entry import Entry


# ============================================================== merge_attention_states: wrong
def merge_no_shift(out_a, lse_a, out_b, lse_b):
    work = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(work), lse_b.to(work)
    lse = torch.log(torch.exp(la) + torch.exp(lb))
    wa = torch.exp(la - lse)
    wb = torch.exp(lb - lse)
    wa = torch.nan_to_num(wa, nan=0.0)
    wb = torch.nan_to_num(wb, nan=0.0)
    out = wa[..., None] * out_a.to(work) + wb[..., None] * out_b.to(work)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_nan_both_empty(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    a, b = lse_a.to(ct), lse_b.to(ct)
    m = torch.maximum(a, b)
    ea = torch.exp(a - m)
    eb = torch.exp(b - m)
    tot = ea + eb
    lse = m + torch.log(tot)
    out = (ea / tot).unsqueeze(-1) * out_a.to(ct) + (eb / tot).unsqueeze(-1) * out_b.to(ct)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_float32_result(out_a, lse_a, out_b, lse_b):
    oa, ob = out_a.float(), out_b.float()
    la, lb = lse_a.float(), lse_b.float()
    top = torch.maximum(la, lb)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    wa, wb = torch.exp(la - top), torch.exp(lb - top)
    s = wa + wb
    lse = top + torch.log(s)
    denom = torch.where(s == 0, torch.ones_like(s), s)
    out = (wa / denom)[..., None] * oa + (wb / denom)[..., None] * ob
    return out, lse


def merge_reuses_out_a(out_a, lse_a, out_b, lse_b):
    dt = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(dt), lse_b.to(dt)
    big = torch.maximum(la, lb)
    big = torch.where(torch.isinf(big), 0.0, big)
    w1, w2 = torch.exp(la - big), torch.exp(lb - big)
    total = w1 + w2
    lse = big + torch.log(total)
    total = torch.where(total == 0, 1.0, total)
    merged = (w1 / total)[..., None] * out_a.to(dt) + (w2 / total)[..., None] * out_a.to(dt)
    return merged.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_lse_without_shift(out_a, lse_a, out_b, lse_b):
    dt = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(dt), lse_b.to(dt)
    shift = torch.maximum(la, lb)
    shift = torch.where(torch.isinf(shift), 0.0, shift)
    wa = torch.exp(la - shift)
    wb = torch.exp(lb - shift)
    total = wa + wb
    new_lse = torch.log(total)  # log-sum-exp of the two sets
    safe = torch.where(total == 0, 1.0, total)
    out = (wa / safe)[..., None] * out_a.to(dt) + (wb / safe)[..., None] * out_b.to(dt)
    return out.to(out_a.dtype), new_lse.to(lse_a.dtype)


def merge_unnormalised(out_a, lse_a, out_b, lse_b):
    dt = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(dt), lse_b.to(dt)
    ref = torch.maximum(la, lb)
    ref = torch.where(torch.isinf(ref), 0.0, ref)
    wa = torch.exp(la - ref)
    wb = torch.exp(lb - ref)
    lse = ref + torch.log(wa + wb)
    out = wa[..., None] * out_a.to(dt) + wb[..., None] * out_b.to(dt)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


# ============================================================== merge_attention_states: right
def merge_sigmoid_f64(out_a, lse_a, out_b, lse_b):
    a = lse_a.double()
    b = lse_b.double()
    lse = torch.logaddexp(a, b)
    share_a = torch.sigmoid(a - b)  # e^a / (e^a + e^b)
    both_empty = torch.isneginf(a) & torch.isneginf(b)
    share_a = torch.where(both_empty, torch.zeros_like(share_a), share_a)
    share_b = torch.where(both_empty, torch.zeros_like(share_a), 1.0 - share_a)
    out = share_a.unsqueeze(-1) * out_a.double() + share_b.unsqueeze(-1) * out_b.double()
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_stacked_logsumexp(out_a, lse_a, out_b, lse_b):
    both = torch.stack([lse_a.double(), lse_b.double()])  # (2, ..., N_q)
    total = torch.logsumexp(both, dim=0)  # (..., N_q)
    ok = torch.isfinite(total)
    weights = torch.exp(both - torch.where(ok, total, torch.zeros_like(total)))
    weights = torch.where(ok, weights, torch.zeros_like(weights))
    outs = torch.stack([out_a.double(), out_b.double()])  # (2, ..., N_q, d_v)
    out = torch.einsum("s...n,s...nd->...nd", weights, outs)
    return out.to(out_a.dtype), total.to(lse_a.dtype)


# ============================================================ online_softmax_attention: wrong
def online_acc_not_rescaled(q, k, v, block_size=64, causal=False):
    B, H, nq, d = q.shape
    nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    m = torch.full((B, H, nq, 1), -math.inf, dtype=ct)
    l = torch.zeros((B, H, nq, 1), dtype=ct)
    acc = torch.zeros((B, H, nq, d), dtype=ct)
    qpos = torch.arange(nq)[:, None] + (nk - nq)
    for s0 in range(0, nk, block_size):
        s1 = min(s0 + block_size, nk)
        kb, vb = k[:, :, s0:s1].to(ct), v[:, :, s0:s1].to(ct)
        sc = qs @ kb.transpose(-1, -2)
        if causal:
            sc = sc.masked_fill(torch.arange(s0, s1)[None, :] > qpos, -math.inf)
        m_new = torch.maximum(m, sc.amax(-1, keepdim=True))
        sh = torch.where(torch.isinf(m_new), 0.0, m_new)
        p = torch.exp(sc - sh)
        l = l * torch.exp(m - sh) + p.sum(-1, keepdim=True)
        acc = acc + p @ vb
        m = m_new
    return (acc / torch.where(l == 0, 1.0, l)).to(q.dtype)


def online_top_left_causal(q, k, v, block_size=64, causal=False):
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    dt = torch.promote_types(q.dtype, torch.float32)
    qq = q.to(dt) * d ** -0.5
    run_max = torch.full((b, h, n_q, 1), float("-inf"), dtype=dt)
    run_sum = torch.zeros((b, h, n_q, 1), dtype=dt)
    acc = torch.zeros((b, h, n_q, d), dtype=dt)
    rows = torch.arange(n_q).unsqueeze(1)
    for lo in range(0, n_k, block_size):
        hi = min(lo + block_size, n_k)
        s = qq @ k[:, :, lo:hi].to(dt).transpose(-2, -1)
        if causal:
            cols = torch.arange(lo, hi).unsqueeze(0)
            s = s.masked_fill(cols > rows, float("-inf"))
        new_max = torch.maximum(run_max, s.amax(dim=-1, keepdim=True))
        safe = torch.where(torch.isinf(new_max), 0.0, new_max)
        e = torch.exp(s - safe)
        scale_old = torch.exp(run_max - safe)
        run_sum = run_sum * scale_old + e.sum(dim=-1, keepdim=True)
        acc = acc * scale_old + e @ v[:, :, lo:hi].to(dt)
        run_max = new_max
    run_sum = torch.where(run_sum == 0, 1.0, run_sum)
    return (acc / run_sum).to(q.dtype)


def online_drops_ragged_block(q, k, v, block_size=64, causal=False):
    B, H, Nq, D = q.shape
    Nk = k.shape[2]
    cdt = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(cdt) / math.sqrt(D)
    mx = torch.full((B, H, Nq, 1), -math.inf, dtype=cdt)
    den = torch.zeros((B, H, Nq, 1), dtype=cdt)
    num = torch.zeros((B, H, Nq, D), dtype=cdt)
    qpos = torch.arange(Nq)[:, None] + Nk - Nq
    n_blocks = Nk // block_size
    for i in range(n_blocks):
        a, z = i * block_size, (i + 1) * block_size
        sc = qs @ k[:, :, a:z].to(cdt).transpose(-2, -1)
        if causal:
            sc = sc.masked_fill(torch.arange(a, z)[None, :] > qpos, -math.inf)
        mnew = torch.maximum(mx, sc.amax(-1, keepdim=True))
        base = torch.where(torch.isinf(mnew), 0.0, mnew)
        p = torch.exp(sc - base)
        r = torch.exp(mx - base)
        den = den * r + p.sum(-1, keepdim=True)
        num = num * r + p @ v[:, :, a:z].to(cdt)
        mx = mnew
    return (num / torch.where(den == 0, 1.0, den)).to(q.dtype)


def online_no_inf_guard(q, k, v, block_size=64, causal=False):
    batch, heads, n_q, d = q.shape
    n_k = k.shape[2]
    compute = torch.promote_types(q.dtype, torch.float32)
    q_scaled = q.to(compute) / math.sqrt(d)
    row_max = torch.full((batch, heads, n_q, 1), -math.inf, dtype=compute)
    row_sum = torch.zeros((batch, heads, n_q, 1), dtype=compute)
    acc = torch.zeros((batch, heads, n_q, d), dtype=compute)
    query_pos = torch.arange(n_q)[:, None] + (n_k - n_q)
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        scores = q_scaled @ k[:, :, start:stop].to(compute).transpose(-2, -1)
        if causal:
            key_pos = torch.arange(start, stop)[None, :]
            scores = scores.masked_fill(key_pos > query_pos, -math.inf)
        new_max = torch.maximum(row_max, scores.amax(dim=-1, keepdim=True))
        weights = torch.exp(scores - new_max)
        rescale = torch.exp(row_max - new_max)
        row_sum = row_sum * rescale + weights.sum(dim=-1, keepdim=True)
        acc = acc * rescale + weights @ v[:, :, start:stop].to(compute)
        row_max = new_max
    out = acc / torch.where(row_sum == 0, 1.0, row_sum)
    return out.to(q.dtype)


def online_returns_float32(q, k, v, block_size=64, causal=False):
    B, H, Nq, d = q.shape
    Nk = k.shape[-2]
    work = torch.promote_types(q.dtype, torch.float32)
    qf = q.to(work) * (1.0 / math.sqrt(d))
    best = torch.full((B, H, Nq, 1), -math.inf, dtype=work)
    norm = torch.zeros((B, H, Nq, 1), dtype=work)
    o = torch.zeros((B, H, Nq, d), dtype=work)
    last_visible = torch.arange(Nq)[:, None] + (Nk - Nq)
    for j0 in range(0, Nk, block_size):
        j1 = min(j0 + block_size, Nk)
        s = qf @ k[:, :, j0:j1].to(work).transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(j0, j1)[None, :] > last_visible, -math.inf)
        nb = torch.maximum(best, s.amax(-1, keepdim=True))
        nb0 = torch.where(torch.isinf(nb), 0.0, nb)
        p = torch.exp(s - nb0)
        c = torch.exp(best - nb0)
        norm = norm * c + p.sum(-1, keepdim=True)
        o = o * c + p @ v[:, :, j0:j1].to(work)
        best = nb
    return o / torch.where(norm == 0, 1.0, norm)


def online_dim_from_wrong_axis(q, k, v, block_size=64, causal=False):
    B, H, n_q = q.shape[0], q.shape[1], q.shape[2]
    n_k = k.shape[2]
    d = q.size(2)  # head dim
    dt = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(dt) / math.sqrt(d)
    mx = torch.full((B, H, n_q, 1), -math.inf, dtype=dt)
    sm = torch.zeros((B, H, n_q, 1), dtype=dt)
    acc = torch.zeros(q.shape, dtype=dt)
    qp = torch.arange(n_q)[:, None] + (n_k - n_q)
    for st in range(0, n_k, block_size):
        en = min(st + block_size, n_k)
        sc = qs @ k[:, :, st:en].to(dt).transpose(-2, -1)
        if causal:
            sc = sc.masked_fill(torch.arange(st, en)[None, :] > qp, -math.inf)
        m2 = torch.maximum(mx, sc.amax(-1, keepdim=True))
        s2 = torch.where(torch.isinf(m2), 0.0, m2)
        w = torch.exp(sc - s2)
        f = torch.exp(mx - s2)
        sm = sm * f + w.sum(-1, keepdim=True)
        acc = acc * f + w @ v[:, :, st:en].to(dt)
        mx = m2
    return (acc / torch.where(sm == 0, 1.0, sm)).to(q.dtype)


# ============================================================ online_softmax_attention: right
def online_running_lse_f64(q, k, v, block_size=64, causal=False):
    """Keeps a running log-sum-exp and an already-normalised accumulator (float64)."""
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    qd = q.double() / math.sqrt(d)
    lse = torch.full(q.shape[:-1] + (1,), -math.inf, dtype=torch.float64)
    out = torch.zeros(q.shape, dtype=torch.float64)
    limit = torch.arange(n_q).view(-1, 1) + (n_k - n_q)
    start = 0
    while start < n_k:
        stop = min(n_k, start + block_size)
        s = torch.matmul(qd, k[..., start:stop, :].double().transpose(-1, -2))
        if causal:
            hide = torch.arange(start, stop).view(1, -1) > limit
            s = s.masked_fill(hide, -math.inf)
        new_lse = torch.logaddexp(lse, torch.logsumexp(s, dim=-1, keepdim=True))
        ref = torch.where(torch.isneginf(new_lse), torch.zeros_like(new_lse), new_lse)
        out = out * torch.exp(lse - ref) + torch.matmul(torch.exp(s - ref),
                                                        v[..., start:stop, :].double())
        lse = new_lse
        start = stop
    return out.to(q.dtype)


def online_einsum_blocks(q, k, v, block_size=64, causal=False):
    """einsum per block, masks from a bottom-right offset, running max clamped for -inf."""
    dtype = torch.promote_types(q.dtype, torch.float32)
    Q, K, V = q.to(dtype), k.to(dtype), v.to(dtype)
    nq, nk, hd = Q.shape[2], K.shape[2], Q.shape[3]
    offset = nk - nq
    m_i = Q.new_full(Q.shape[:3], -math.inf)
    l_i = Q.new_zeros(Q.shape[:3])
    o_i = Q.new_zeros(Q.shape)
    blocks = [(s, min(s + block_size, nk)) for s in range(0, nk, block_size)]
    for s, e in blocks:
        logits = torch.einsum("bhqd,bhkd->bhqk", Q, K[:, :, s:e]) / math.sqrt(hd)
        if causal:
            i = torch.arange(nq).unsqueeze(-1)
            j = torch.arange(s, e).unsqueeze(0)
            logits = torch.where(j <= i + offset, logits, torch.full_like(logits, -math.inf))
        m_new = torch.maximum(m_i, logits.max(dim=-1).values)
        m_ref = torch.nan_to_num(m_new, neginf=0.0)
        alpha = torch.exp(m_i - m_ref)
        probs = torch.exp(logits - m_ref.unsqueeze(-1))
        l_i = alpha * l_i + probs.sum(dim=-1)
        o_i = alpha.unsqueeze(-1) * o_i + torch.einsum("bhqk,bhkd->bhqd", probs, V[:, :, s:e])
        m_i = m_new
    l_safe = torch.where(l_i > 0, l_i, torch.ones_like(l_i))
    return (o_i / l_safe.unsqueeze(-1)).to(q.dtype)


ENTRIES = [
    Entry("merge_attention_states", "wrong", "no_max_shift",
          "it takes log(exp(lse_a) + exp(lse_b)) without subtracting the larger log-sum-exp "
          "first, so lse of about 1e4 overflows to inf and the merged row is wrong",
          merge_no_shift),
    Entry("merge_attention_states", "wrong", "nan_when_both_empty",
          "the shift is the larger lse with no guard for -inf, so a row where both sets are "
          "empty computes exp(-inf - (-inf)) = NaN instead of a zero row and -inf",
          merge_nan_both_empty),
    Entry("merge_attention_states", "wrong", "float32_result",
          "it computes in float32 via .float() and never casts back, so out and lse come back "
          "float32 instead of the inputs' dtypes (float64, float16, bfloat16)",
          merge_float32_result),
    Entry("merge_attention_states", "wrong", "out_a_twice",
          "the second term multiplies B's weight into out_a instead of out_b, so set B's "
          "values never reach the merged output",
          merge_reuses_out_a),
    Entry("merge_attention_states", "wrong", "lse_missing_shift",
          "the merged lse is log(w_a + w_b) of the shifted weights and the subtracted maximum "
          "is never added back, so lse is off by max(lse_a, lse_b)",
          merge_lse_without_shift),
    Entry("merge_attention_states", "wrong", "weights_not_normalised",
          "the outputs are mixed with exp(lse - max) directly, without dividing by their sum, "
          "so the merged row is not a convex combination of out_a and out_b",
          merge_unnormalised),
    Entry("merge_attention_states", "right", "sigmoid_float64", None, merge_sigmoid_f64),
    Entry("merge_attention_states", "right", "stacked_logsumexp_einsum", None,
          merge_stacked_logsumexp),

    Entry("online_softmax_attention", "wrong", "acc_not_rescaled",
          "when a block raises the running max the running sum is rescaled but the "
          "accumulator acc is not (acc = acc + p @ v), so earlier blocks keep too much weight",
          online_acc_not_rescaled),
    Entry("online_softmax_attention", "wrong", "causal_top_left",
          "the causal mask compares key positions with the query index alone (top-left), "
          "without the N_k - N_q offset, so causal attention with N_q != N_k sees the wrong keys",
          online_top_left_causal),
    Entry("online_softmax_attention", "wrong", "ragged_block_dropped",
          "it loops over N_k // block_size blocks, so the last, shorter block of keys is never "
          "visited (and with block_size > N_k no key at all)",
          online_drops_ragged_block),
    Entry("online_softmax_attention", "wrong", "no_inf_guard",
          "it subtracts the running max without replacing -inf by 0, so a row whose keys so "
          "far are all masked computes exp(-inf + inf) = NaN, which then poisons the row",
          online_no_inf_guard),
    Entry("online_softmax_attention", "wrong", "float32_result",
          "the result stays in the float32 compute dtype: half-precision inputs come back as "
          "float32 instead of q's dtype",
          online_returns_float32),
    Entry("online_softmax_attention", "wrong", "d_from_axis_2",
          "the scale reads the head dimension as q.size(2), which is N_q, so scores are "
          "divided by sqrt(N_q) instead of sqrt(d)",
          online_dim_from_wrong_axis),
    Entry("online_softmax_attention", "right", "running_lse_float64", None,
          online_running_lse_f64),
    Entry("online_softmax_attention", "right", "einsum_blocks", None, online_einsum_blocks),
]
