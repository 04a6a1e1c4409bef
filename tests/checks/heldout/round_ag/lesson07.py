"""Held-out learners' answers, lesson 07 (flash): merge_attention_states, online_softmax_attention."""

import math

import torch

from entry import Entry


# ============================================================ merge_attention_states — wrong
def merge_naive_exp(out_a, lse_a, out_b, lse_b):
    dt = torch.promote_types(out_a.dtype, torch.float32)
    ea = torch.exp(lse_a.to(dt))
    eb = torch.exp(lse_b.to(dt))
    total = ea + eb
    lse = torch.log(total)
    safe = torch.where(total == 0, torch.ones_like(total), total)
    out = (ea / safe)[..., None] * out_a.to(dt) + (eb / safe)[..., None] * out_b.to(dt)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_lse_is_max(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(ct), lse_b.to(ct)
    m = torch.maximum(la, lb)
    m0 = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    wa, wb = torch.exp(la - m0), torch.exp(lb - m0)
    tot = wa + wb
    tot1 = torch.where(tot == 0, torch.ones_like(tot), tot)
    merged = (wa / tot1).unsqueeze(-1) * out_a.to(ct) + (wb / tot1).unsqueeze(-1) * out_b.to(ct)
    # the new log-sum-exp is the larger of the two
    return merged.to(out_a.dtype), m.to(lse_a.dtype)


def merge_no_trailing_axis(out_a, lse_a, out_b, lse_b):
    compute = torch.promote_types(out_a.dtype, torch.float32)
    a = lse_a.to(compute)
    b = lse_b.to(compute)
    top = torch.maximum(a, b)
    shift = torch.where(torch.isinf(top), 0.0, top)
    w_a = torch.exp(a - shift)
    w_b = torch.exp(b - shift)
    total = w_a + w_b
    lse = shift + torch.log(total)
    safe = torch.where(total == 0, 1.0, total)
    out = (w_a / safe) * out_a.to(compute) + (w_b / safe) * out_b.to(compute)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_both_empty_nan(out_a, lse_a, out_b, lse_b):
    work = torch.promote_types(out_a.dtype, torch.float32)
    la = lse_a.to(work)
    lb = lse_b.to(work)
    mx = torch.maximum(la, lb)
    pa = torch.exp(la - mx)
    pb = torch.exp(lb - mx)
    s = pa + pb
    new_lse = mx + torch.log(s)
    out = (pa / s)[..., None] * out_a.to(work) + (pb / s)[..., None] * out_b.to(work)
    return out.to(out_a.dtype), new_lse.to(lse_a.dtype)


def merge_float32_result(out_a, lse_a, out_b, lse_b):
    la = lse_a.float()
    lb = lse_b.float()
    hi = torch.maximum(la, lb)
    hi = torch.where(torch.isinf(hi), torch.zeros_like(hi), hi)
    wa = torch.exp(la - hi)
    wb = torch.exp(lb - hi)
    z = wa + wb
    lse = hi + torch.log(z)
    z = torch.where(z == 0, torch.ones_like(z), z)
    out = (wa / z)[..., None] * out_a.float() + (wb / z)[..., None] * out_b.float()
    return out, lse


def merge_unnormalised(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(ct), lse_b.to(ct)
    big = torch.maximum(la, lb)
    big = torch.where(torch.isinf(big), torch.zeros_like(big), big)
    ea = torch.exp(la - big)
    eb = torch.exp(lb - big)
    lse = big + torch.log(ea + eb)
    out = ea[..., None] * out_a.to(ct) + eb[..., None] * out_b.to(ct)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


# ============================================================ merge_attention_states — right
def merge_logaddexp_f64(out_a, lse_a, out_b, lse_b):
    a64, b64 = lse_a.double(), lse_b.double()
    lse = torch.logaddexp(a64, b64)
    finite = ~torch.isneginf(lse)
    ref = torch.where(finite, lse, torch.zeros_like(lse))
    wa = torch.where(finite, torch.exp(a64 - ref), torch.zeros_like(lse))
    wb = torch.where(finite, torch.exp(b64 - ref), torch.zeros_like(lse))
    out = torch.einsum("...n,...nd->...nd", wa, out_a.double()) \
        + torch.einsum("...n,...nd->...nd", wb, out_b.double())
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_sigmoid(out_a, lse_a, out_b, lse_b):
    ct = torch.float32 if out_a.dtype in (torch.float16, torch.bfloat16) else out_a.dtype
    a = lse_a.to(ct)
    b = lse_b.to(ct)
    both_empty = torch.isneginf(a) & torch.isneginf(b)
    diff = torch.where(both_empty, torch.zeros_like(a), a - b)
    share_a = torch.sigmoid(diff)  # e^a / (e^a + e^b)
    share_b = torch.sigmoid(-diff)
    lse = torch.maximum(a, b) + torch.log1p(torch.exp(-diff.abs()))
    out = share_a.unsqueeze(-1) * out_a.to(ct) + share_b.unsqueeze(-1) * out_b.to(ct)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


# ============================================================ online_softmax_attention — wrong
def osa_no_acc_rescale(q, k, v, block_size=64, causal=False):
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    m = torch.full((B, H, n_q, 1), -math.inf, dtype=ct, device=q.device)
    l = torch.zeros((B, H, n_q, 1), dtype=ct, device=q.device)
    acc = torch.zeros((B, H, n_q, d), dtype=ct, device=q.device)
    qpos = torch.arange(n_q, device=q.device)[:, None] + n_k - n_q
    for s0 in range(0, n_k, block_size):
        kb = k[:, :, s0:s0 + block_size].to(ct)
        vb = v[:, :, s0:s0 + block_size].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            kpos = torch.arange(s0, s0 + kb.shape[2], device=q.device)[None, :]
            s = s.masked_fill(kpos > qpos, -math.inf)
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        m_safe = torch.where(torch.isinf(m_new), 0.0, m_new)
        p = torch.exp(s - m_safe)
        corr = torch.exp(m - m_safe)
        l = l * corr + p.sum(-1, keepdim=True)
        acc = acc + p @ vb
        m = m_new
    return (acc / torch.where(l == 0, 1.0, l)).to(q.dtype)


def osa_mask_excludes_diagonal(q, k, v, block_size=64, causal=False):
    batch, heads, nq, d = q.shape
    nk = k.shape[2]
    dt = torch.promote_types(q.dtype, torch.float32)
    q_ = q.to(dt) * d ** -0.5
    run_max = torch.full((batch, heads, nq, 1), float("-inf"), dtype=dt, device=q.device)
    run_sum = torch.zeros((batch, heads, nq, 1), dtype=dt, device=q.device)
    acc = torch.zeros((batch, heads, nq, d), dtype=dt, device=q.device)
    rows = torch.arange(nq, device=q.device).view(-1, 1) + (nk - nq)
    for lo in range(0, nk, block_size):
        hi = min(lo + block_size, nk)
        scores = torch.matmul(q_, k[:, :, lo:hi].to(dt).transpose(-1, -2))
        if causal:
            cols = torch.arange(lo, hi, device=q.device).view(1, -1)
            scores = scores.masked_fill(cols >= rows, float("-inf"))
        new_max = torch.maximum(run_max, scores.max(dim=-1, keepdim=True).values)
        shift = torch.where(torch.isinf(new_max), torch.zeros_like(new_max), new_max)
        w = torch.exp(scores - shift)
        r = torch.exp(run_max - shift)
        run_sum = run_sum * r + w.sum(dim=-1, keepdim=True)
        acc = acc * r + torch.matmul(w, v[:, :, lo:hi].to(dt))
        run_max = new_max
    run_sum = torch.where(run_sum == 0, torch.ones_like(run_sum), run_sum)
    return (acc / run_sum).to(q.dtype)


def osa_drops_ragged_block(q, k, v, block_size=64, causal=False):
    B, H, Nq, D = q.shape
    Nk = k.shape[-2]
    f = torch.promote_types(q.dtype, torch.float32)
    qq = q.to(f) / math.sqrt(D)
    mx = torch.full((B, H, Nq, 1), -math.inf, dtype=f, device=q.device)
    den = torch.zeros((B, H, Nq, 1), dtype=f, device=q.device)
    num = torch.zeros((B, H, Nq, D), dtype=f, device=q.device)
    qi = torch.arange(Nq, device=q.device)[:, None] + (Nk - Nq)
    n_blocks = Nk // block_size
    for b in range(n_blocks):
        a, z = b * block_size, (b + 1) * block_size
        sc = qq @ k[:, :, a:z].to(f).transpose(-2, -1)
        if causal:
            kj = torch.arange(a, z, device=q.device)[None, :]
            sc = sc.masked_fill(kj > qi, -math.inf)
        m2 = torch.maximum(mx, sc.amax(-1, keepdim=True))
        m2s = torch.where(torch.isinf(m2), 0.0, m2)
        e = torch.exp(sc - m2s)
        fac = torch.exp(mx - m2s)
        den = den * fac + e.sum(-1, keepdim=True)
        num = num * fac + e @ v[:, :, a:z].to(f)
        mx = m2
    return (num / torch.where(den == 0, 1.0, den)).to(q.dtype)


def osa_scale_uses_nq(q, k, v, block_size=64, causal=False):
    b, h, d, n = q.shape[0], q.shape[1], q.shape[-2], q.shape[-1]
    n_k = k.shape[2]
    n_q = q.shape[2]
    work = torch.promote_types(q.dtype, torch.float32)
    scaled = q.to(work) / math.sqrt(d)
    best = torch.full((b, h, n_q, 1), -math.inf, dtype=work, device=q.device)
    total = torch.zeros((b, h, n_q, 1), dtype=work, device=q.device)
    acc = torch.zeros((b, h, n_q, n), dtype=work, device=q.device)
    qp = torch.arange(n_q, device=q.device)[:, None] + (n_k - n_q)
    for start in range(0, n_k, block_size):
        kb = k[:, :, start:start + block_size].to(work)
        vb = v[:, :, start:start + block_size].to(work)
        s = scaled @ kb.transpose(-2, -1)
        if causal:
            kp = torch.arange(start, start + kb.shape[2], device=q.device)[None, :]
            s = s.masked_fill(kp > qp, -math.inf)
        nb = torch.maximum(best, s.amax(-1, keepdim=True))
        sh = torch.where(torch.isinf(nb), 0.0, nb)
        p = torch.exp(s - sh)
        c = torch.exp(best - sh)
        total = total * c + p.sum(-1, keepdim=True)
        acc = acc * c + p @ vb
        best = nb
    return (acc / torch.where(total == 0, 1.0, total)).to(q.dtype)


def osa_returns_compute_dtype(q, k, v, block_size=64, causal=False):
    B, H, Nq, d = q.shape
    Nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) * (1.0 / math.sqrt(d))
    row_max = torch.full((B, H, Nq, 1), -math.inf, dtype=ct, device=q.device)
    row_sum = torch.zeros((B, H, Nq, 1), dtype=ct, device=q.device)
    acc = torch.zeros((B, H, Nq, d), dtype=ct, device=q.device)
    qpos = torch.arange(Nq, device=q.device)[:, None] + (Nk - Nq)
    for start in range(0, Nk, block_size):
        stop = min(start + block_size, Nk)
        s = qs @ k[:, :, start:stop].to(ct).transpose(-2, -1)
        if causal:
            kpos = torch.arange(start, stop, device=q.device)[None, :]
            s = s.masked_fill(kpos > qpos, -math.inf)
        new_max = torch.maximum(row_max, s.amax(dim=-1, keepdim=True))
        safe = torch.where(torch.isinf(new_max), 0.0, new_max)
        p = torch.exp(s - safe)
        scale = torch.exp(row_max - safe)
        row_sum = row_sum * scale + p.sum(dim=-1, keepdim=True)
        acc = acc * scale + p @ v[:, :, start:stop].to(ct)
        row_max = new_max
    return acc / torch.where(row_sum == 0, 1.0, row_sum)


def osa_max_not_carried(q, k, v, block_size=64, causal=False):
    B, H, Nq, d = q.shape
    Nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    m_i = torch.full((B, H, Nq, 1), -math.inf, dtype=ct, device=q.device)
    l_i = torch.zeros((B, H, Nq, 1), dtype=ct, device=q.device)
    o_i = torch.zeros((B, H, Nq, d), dtype=ct, device=q.device)
    qpos = torch.arange(Nq, device=q.device)[:, None] + (Nk - Nq)
    for j in range(0, Nk, block_size):
        kj = k[:, :, j:j + block_size].to(ct)
        vj = v[:, :, j:j + block_size].to(ct)
        s_ij = qs @ kj.transpose(-2, -1)
        if causal:
            kpos = torch.arange(j, j + kj.shape[2], device=q.device)[None, :]
            s_ij = s_ij.masked_fill(kpos > qpos, -math.inf)
        m_new = torch.maximum(m_i, s_ij.amax(-1, keepdim=True))
        m_use = torch.where(torch.isinf(m_new), 0.0, m_new)
        p_ij = torch.exp(s_ij - m_use)
        alpha = torch.exp(m_i - m_use)
        l_i = alpha * l_i + p_ij.sum(-1, keepdim=True)
        o_i = alpha * o_i + p_ij @ vj
    return (o_i / torch.where(l_i == 0, 1.0, l_i)).to(q.dtype)


# ============================================================ online_softmax_attention — right
def osa_merge_running_states(q, k, v, block_size=64, causal=False):
    """Keeps a normalised output and its log-sum-exp, merging each block's (out, lse) in."""
    B, H, Nq, d = q.shape
    Nk = k.shape[2]
    f64 = torch.float64
    qs = q.to(f64) / math.sqrt(d)
    out = torch.zeros((B, H, Nq, d), dtype=f64, device=q.device)
    lse = torch.full((B, H, Nq), -math.inf, dtype=f64, device=q.device)
    qpos = torch.arange(Nq, device=q.device).unsqueeze(1) + (Nk - Nq)
    j = 0
    while j < Nk:
        kb = k[:, :, j:j + block_size].to(f64)
        vb = v[:, :, j:j + block_size].to(f64)
        s = qs @ kb.transpose(-1, -2)
        if causal:
            kpos = torch.arange(j, j + kb.shape[2], device=q.device).unsqueeze(0)
            s = s.masked_fill(kpos > qpos, -math.inf)
        blk_lse = torch.logsumexp(s, dim=-1)
        blk_ref = torch.where(torch.isneginf(blk_lse), torch.zeros_like(blk_lse), blk_lse)
        blk_out = torch.exp(s - blk_ref.unsqueeze(-1)) @ vb
        new = torch.logaddexp(lse, blk_lse)
        ref = torch.where(torch.isneginf(new), torch.zeros_like(new), new)
        keep_old = torch.where(torch.isneginf(new), torch.zeros_like(new), torch.exp(lse - ref))
        take_new = torch.where(torch.isneginf(new), torch.zeros_like(new), torch.exp(blk_lse - ref))
        out = keep_old.unsqueeze(-1) * out + take_new.unsqueeze(-1) * blk_out
        lse = new
        j += block_size
    return out.to(q.dtype)


def osa_einsum_float64(q, k, v, block_size=64, causal=False):
    nb_, nh_, n_q, dim = q.shape
    n_k = k.shape[-2]
    Q = q.double()
    mrun = torch.full((nb_, nh_, n_q), float("-inf"), dtype=torch.float64, device=q.device)
    lrun = torch.zeros((nb_, nh_, n_q), dtype=torch.float64, device=q.device)
    orun = torch.zeros((nb_, nh_, n_q, dim), dtype=torch.float64, device=q.device)
    offset = n_k - n_q
    edges = list(range(0, n_k, block_size)) + [n_k]
    for lo, hi in zip(edges[:-1], edges[1:]):
        K = k[..., lo:hi, :].double()
        V = v[..., lo:hi, :].double()
        S = torch.einsum("bhid,bhjd->bhij", Q, K) / math.sqrt(dim)
        if causal:
            i = torch.arange(n_q, device=q.device).view(n_q, 1)
            j = torch.arange(lo, hi, device=q.device).view(1, hi - lo)
            S = torch.where(j <= i + offset, S, torch.tensor(float("-inf"), dtype=S.dtype))
        m_blk = S.max(dim=-1).values
        m_new = torch.maximum(mrun, m_blk)
        alive = torch.isfinite(m_new)
        base = torch.where(alive, m_new, torch.zeros_like(m_new))
        P = torch.exp(S - base.unsqueeze(-1))
        shrink = torch.exp(mrun - base)
        lrun = lrun * shrink + P.sum(-1)
        orun = orun * shrink.unsqueeze(-1) + torch.einsum("bhij,bhjd->bhid", P, V)
        mrun = m_new
    denom = torch.where(lrun > 0, lrun, torch.ones_like(lrun))
    return (orun / denom.unsqueeze(-1)).to(q.dtype)


ENTRIES = [
    Entry("merge_attention_states", "wrong", "naive_exp_overflow",
          "exponentiates the log-sum-exps directly, exp(lse_a) + exp(lse_b), without subtracting "
          "the larger one first, so lse of about 1e4 overflows to inf and the merge gives NaN/inf",
          merge_naive_exp),
    Entry("merge_attention_states", "wrong", "lse_is_max",
          "returns max(lse_a, lse_b) as the merged log-sum-exp instead of "
          "log(e^lse_a + e^lse_b): the running maximum is not the log-sum-exp",
          merge_lse_is_max),
    Entry("merge_attention_states", "wrong", "weights_without_trailing_axis",
          "multiplies the per-row weights (..., N_q) into out (..., N_q, d_v) without a trailing "
          "axis, so they broadcast against d_v: it raises a shape error (and would mix rows "
          "silently when N_q == d_v)",
          merge_no_trailing_axis),
    Entry("merge_attention_states", "wrong", "both_empty_gives_nan",
          "subtracts the larger lse without replacing -inf by 0, so a row where both sets are "
          "empty computes exp(-inf - (-inf)) = NaN instead of a zero row and -inf",
          merge_both_empty_nan),
    Entry("merge_attention_states", "wrong", "returns_float32",
          "computes in float32 and returns the float32 tensors without casting back to the "
          "inputs' dtypes (float64, float16 and bfloat16 inputs come back as float32)",
          merge_float32_result),
    Entry("merge_attention_states", "wrong", "not_renormalised",
          "weights the two outputs by exp(lse_set - max) but never divides by their sum "
          "(exp(lse_set - lse)), so the merged row is not a normalised average of out_a and out_b",
          merge_unnormalised),
    Entry("merge_attention_states", "right", "logaddexp_float64", None, merge_logaddexp_f64),
    Entry("merge_attention_states", "right", "sigmoid_shares", None, merge_sigmoid),

    Entry("online_softmax_attention", "wrong", "acc_not_rescaled",
          "when a block raises the running max it rescales row_sum by exp(old_max - new_max) but "
          "not the accumulator acc, so earlier blocks keep too large a weight",
          osa_no_acc_rescale),
    Entry("online_softmax_attention", "wrong", "causal_mask_excludes_diagonal",
          "masks keys with key_pos >= query_pos (>= where > belongs), so each query is kept "
          "from attending to itself and the first query sees no key at all (a zero row)",
          osa_mask_excludes_diagonal),
    Entry("online_softmax_attention", "wrong", "drops_ragged_block",
          "loops over N_k // block_size blocks, so when block_size does not divide N_k the last, "
          "shorter block of keys is never visited",
          osa_drops_ragged_block),
    Entry("online_softmax_attention", "wrong", "scale_uses_sequence_length",
          "unpacks d from the wrong axis (q.shape[-2], the number of queries) and scales the "
          "scores by 1/sqrt(N_q) instead of 1/sqrt(d)",
          osa_scale_uses_nq),
    Entry("online_softmax_attention", "wrong", "returns_compute_dtype",
          "accumulates in float32 (or float64) and returns acc / row_sum without casting back to "
          "q's dtype: float16 / bfloat16 inputs come back as float32",
          osa_returns_compute_dtype),
    Entry("online_softmax_attention", "wrong", "max_not_carried",
          "never stores the new running max (row_max = new_max is missing), so every block "
          "rescales by exp(-inf) = 0 and only the last block of keys survives",
          osa_max_not_carried),
    Entry("online_softmax_attention", "right", "merge_running_states_float64", None,
          osa_merge_running_states),
    Entry("online_softmax_attention", "right", "einsum_where_float64", None, osa_einsum_float64),
]
