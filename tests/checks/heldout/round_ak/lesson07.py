"""Held-out catalogue, lesson 07 (flash): merge_attention_states, online_softmax_attention."""

import math

import torch

from entry import Entry


# ============================================================ merge_attention_states: wrong
def merge_exp_overflow(out_a, lse_a, out_b, lse_b):
    lse = torch.logaddexp(lse_a.float(), lse_b.float())
    ea = torch.exp(lse_a.float())
    eb = torch.exp(lse_b.float())
    wa = ea / (ea + eb)
    wb = eb / (ea + eb)
    out = wa[..., None] * out_a.float() + wb[..., None] * out_b.float()
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_lse_keeps_axis(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    la = lse_a.to(ct)[..., None]
    lb = lse_b.to(ct)[..., None]
    m = torch.maximum(la, lb)
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    wa = torch.exp(la - m)
    wb = torch.exp(lb - m)
    tot = wa + wb
    lse = m + torch.log(tot)
    den = torch.where(tot == 0, torch.ones_like(tot), tot)
    out = (wa * out_a.to(ct) + wb * out_b.to(ct)) / den
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_both_empty_nan(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    a, b = lse_a.to(ct), lse_b.to(ct)
    top = torch.maximum(a, b)
    wa = torch.exp(a - top)
    wb = torch.exp(b - top)
    total = wa + wb
    lse = top + torch.log(total)
    out = (wa / total)[..., None] * out_a.to(ct) + (wb / total)[..., None] * out_b.to(ct)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_lse_is_max(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    a, b = lse_a.to(ct), lse_b.to(ct)
    new_lse = torch.maximum(a, b)
    shift = torch.where(torch.isinf(new_lse), 0.0, new_lse)
    wa, wb = torch.exp(a - shift), torch.exp(b - shift)
    s = wa + wb
    s_safe = torch.where(s == 0, 1.0, s)
    out = (wa / s_safe).unsqueeze(-1) * out_a.to(ct) + (wb / s_safe).unsqueeze(-1) * out_b.to(ct)
    return out.to(out_a.dtype), new_lse.to(lse_a.dtype)


def merge_weights_swapped(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    a, b = lse_a.to(ct), lse_b.to(ct)
    big = torch.maximum(a, b)
    big = torch.where(torch.isinf(big), 0.0, big)
    alpha = torch.exp(a - big)
    beta = torch.exp(b - big)
    norm = alpha + beta
    lse = big + torch.log(norm)
    norm = torch.where(norm == 0, 1.0, norm)
    out = (beta / norm)[..., None] * out_a.to(ct) + (alpha / norm)[..., None] * out_b.to(ct)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_out_left_float32(out_a, lse_a, out_b, lse_b):
    a32, b32 = lse_a.float(), lse_b.float()
    mx = torch.maximum(a32, b32)
    mx = torch.where(torch.isinf(mx), 0.0, mx)
    wa, wb = torch.exp(a32 - mx), torch.exp(b32 - mx)
    tot = wa + wb
    lse = mx + torch.log(tot)
    tot = torch.where(tot == 0, 1.0, tot)
    out = (wa / tot)[..., None] * out_a.float() + (wb / tot)[..., None] * out_b.float()
    return out, lse.to(lse_a.dtype)


# ============================================================ merge_attention_states: right
def merge_logaddexp_f64(out_a, lse_a, out_b, lse_b):
    la, lb = lse_a.double(), lse_b.double()
    lse = torch.logaddexp(la, lb)
    dead = torch.isneginf(lse)
    ref = torch.where(dead, torch.zeros_like(lse), lse)
    wa = torch.where(dead, torch.zeros_like(lse), torch.exp(la - ref))
    wb = torch.where(dead, torch.zeros_like(lse), torch.exp(lb - ref))
    out = wa.unsqueeze(-1) * out_a.double() + wb.unsqueeze(-1) * out_b.double()
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_stacked_softmax(out_a, lse_a, out_b, lse_b):
    work = torch.promote_types(out_a.dtype, torch.float32)
    both = torch.stack([lse_a.to(work), lse_b.to(work)], dim=-1)  # (..., N_q, 2)
    total_lse = torch.logsumexp(both, dim=-1)
    weights = torch.nan_to_num(torch.softmax(both, dim=-1), nan=0.0)  # (..., N_q, 2)
    outs = torch.stack([out_a.to(work), out_b.to(work)], dim=-2)  # (..., N_q, 2, d_v)
    merged = torch.einsum("...s,...sd->...d", weights, outs)
    return merged.to(out_a.dtype), total_lse.to(lse_a.dtype)


# ============================================================ online_softmax_attention: wrong
def online_no_acc_rescale(q, k, v, block_size=64, causal=False):
    B, H, nq, d = q.shape
    nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    m = torch.full((B, H, nq, 1), -math.inf, dtype=ct)
    l = torch.zeros((B, H, nq, 1), dtype=ct)
    acc = torch.zeros((B, H, nq, d), dtype=ct)
    qpos = torch.arange(nq)[:, None] + (nk - nq)
    for s in range(0, nk, block_size):
        e = min(s + block_size, nk)
        sc = qs @ k[:, :, s:e].to(ct).transpose(-2, -1)
        if causal:
            sc = sc.masked_fill(torch.arange(s, e)[None, :] > qpos, -math.inf)
        m_new = torch.maximum(m, sc.amax(-1, keepdim=True))
        sh = torch.where(torch.isinf(m_new), 0.0, m_new)
        p = torch.exp(sc - sh)
        l = l * torch.exp(m - sh) + p.sum(-1, keepdim=True)
        acc = acc + p @ v[:, :, s:e].to(ct)
        m = m_new
    return (acc / torch.where(l == 0, 1.0, l)).to(q.dtype)


def online_causal_top_left(q, k, v, block_size=64, causal=False):
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
        scores = qq @ k[:, :, lo:hi].to(dt).transpose(-1, -2)
        if causal:
            cols = torch.arange(lo, hi).unsqueeze(0)
            scores = scores.masked_fill(cols > rows, float("-inf"))
        new_max = torch.maximum(run_max, scores.amax(dim=-1, keepdim=True))
        safe = torch.where(torch.isinf(new_max), torch.zeros_like(new_max), new_max)
        w = torch.exp(scores - safe)
        corr = torch.exp(run_max - safe)
        run_sum = run_sum * corr + w.sum(dim=-1, keepdim=True)
        acc = acc * corr + w @ v[:, :, lo:hi].to(dt)
        run_max = new_max
    run_sum = torch.where(run_sum == 0, torch.ones_like(run_sum), run_sum)
    return (acc / run_sum).to(q.dtype)


def online_drops_ragged_block(q, k, v, block_size=64, causal=False):
    B, H, Nq, D = q.shape
    Nk = k.shape[2]
    cd = torch.promote_types(q.dtype, torch.float32)
    qsc = q.to(cd) / math.sqrt(D)
    mx = torch.full((B, H, Nq, 1), -math.inf, dtype=cd)
    sm = torch.zeros((B, H, Nq, 1), dtype=cd)
    o = torch.zeros((B, H, Nq, D), dtype=cd)
    qp = torch.arange(Nq)[:, None] + Nk - Nq
    n_blocks = Nk // block_size
    for j in range(n_blocks):
        s0, s1 = j * block_size, (j + 1) * block_size
        sc = qsc @ k[:, :, s0:s1].to(cd).transpose(-2, -1)
        if causal:
            sc = sc.masked_fill(torch.arange(s0, s1)[None, :] > qp, -math.inf)
        nm = torch.maximum(mx, sc.amax(-1, keepdim=True))
        sh = torch.where(torch.isinf(nm), 0.0, nm)
        ex = torch.exp(sc - sh)
        r = torch.exp(mx - sh)
        sm = sm * r + ex.sum(-1, keepdim=True)
        o = o * r + ex @ v[:, :, s0:s1].to(cd)
        mx = nm
    return (o / torch.where(sm == 0, 1.0, sm)).to(q.dtype)


def online_empty_rows_nan(q, k, v, block_size=64, causal=False):
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    q_s = q.to(ct) / math.sqrt(d)
    row_max = torch.full((B, H, n_q, 1), -math.inf, dtype=ct)
    row_sum = torch.zeros((B, H, n_q, 1), dtype=ct)
    acc = torch.zeros((B, H, n_q, d), dtype=ct)
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        s = q_s @ k[:, :, start:stop].to(ct).transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(start, stop)[None, :] > qpos, -math.inf)
        new_max = torch.maximum(row_max, s.amax(-1, keepdim=True))
        p = torch.exp(s - new_max)
        alpha = torch.exp(row_max - new_max)
        row_sum = row_sum * alpha + p.sum(-1, keepdim=True)
        acc = acc * alpha + p @ v[:, :, start:stop].to(ct)
        row_max = new_max
    return (acc / row_sum).to(q.dtype)


def online_returns_float32(q, k, v, block_size=64, causal=False):
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    qf = q.float() / math.sqrt(d)
    kf, vf = k.float(), v.float()
    m = torch.full((B, H, n_q, 1), -math.inf)
    l = torch.zeros((B, H, n_q, 1))
    acc = torch.zeros((B, H, n_q, d))
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    for st in range(0, n_k, block_size):
        en = min(st + block_size, n_k)
        sc = qf @ kf[:, :, st:en].transpose(-2, -1)
        if causal:
            sc = sc.masked_fill(torch.arange(st, en)[None, :] > qpos, -math.inf)
        mn = torch.maximum(m, sc.amax(-1, keepdim=True))
        sh = torch.where(torch.isinf(mn), 0.0, mn)
        p = torch.exp(sc - sh)
        fac = torch.exp(m - sh)
        l = l * fac + p.sum(-1, keepdim=True)
        acc = acc * fac + p @ vf[:, :, st:en]
        m = mn
    return acc / torch.where(l == 0, 1.0, l)


def online_blockwise_softmax_average(q, k, v, block_size=64, causal=False):
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    total = torch.zeros((B, H, n_q, d), dtype=ct)
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    count = 0
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        sc = qs @ k[:, :, start:stop].to(ct).transpose(-2, -1)
        if causal:
            sc = sc.masked_fill(torch.arange(start, stop)[None, :] > qpos, -math.inf)
        w = torch.nan_to_num(torch.softmax(sc, dim=-1), nan=0.0)
        total = total + w @ v[:, :, start:stop].to(ct)
        count += 1
    return (total / count).to(q.dtype)


# ============================================================ online_softmax_attention: right
def online_running_lse_merge(q, k, v, block_size=64, causal=False):
    """Keeps a normalised output and its log-sum-exp; merges each block like two key sets."""
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    f = torch.float64
    qs = q.to(f) / math.sqrt(d)
    out = torch.zeros((B, H, n_q, d), dtype=f)
    lse = torch.full((B, H, n_q), -math.inf, dtype=f)
    offset = n_k - n_q
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        s = torch.einsum("bhqd,bhkd->bhqk", qs, k[:, :, start:stop].to(f))
        if causal:
            qi = torch.arange(n_q).view(-1, 1)
            kj = torch.arange(start, stop).view(1, -1)
            s = torch.where(kj <= qi + offset, s, torch.tensor(-math.inf, dtype=f))
        blk_lse = torch.logsumexp(s, dim=-1)  # -inf where the block is all masked
        safe_blk = torch.where(torch.isneginf(blk_lse), torch.zeros_like(blk_lse), blk_lse)
        blk_out = torch.exp(s - safe_blk[..., None]) @ v[:, :, start:stop].to(f)
        new_lse = torch.logaddexp(lse, blk_lse)
        dead = torch.isneginf(new_lse)
        ref = torch.where(dead, torch.zeros_like(new_lse), new_lse)
        w_old = torch.where(dead, torch.zeros_like(ref), torch.exp(lse - ref))
        w_blk = torch.where(dead, torch.zeros_like(ref), torch.exp(safe_blk - ref))
        w_blk = torch.where(torch.isneginf(blk_lse), torch.zeros_like(w_blk), w_blk)
        out = w_old[..., None] * out + w_blk[..., None] * blk_out
        lse = new_lse
    return out.to(q.dtype)


def online_flat_state_loop(q, k, v, block_size=64, causal=False):
    """Running max/sum kept without a trailing axis; heads and batch flattened together."""
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    Q = q.reshape(B * H, n_q, d).to(ct)
    K = k.reshape(B * H, n_k, d).to(ct)
    V = v.reshape(B * H, n_k, d).to(ct)
    scale = 1.0 / math.sqrt(d)
    m = torch.full((B * H, n_q), -math.inf, dtype=ct)
    l = torch.zeros((B * H, n_q), dtype=ct)
    acc = torch.zeros((B * H, n_q, d), dtype=ct)
    blocks = [(i, min(i + block_size, n_k)) for i in range(0, n_k, block_size)]
    for lo, hi in blocks:
        S = torch.bmm(Q, K[:, lo:hi].transpose(1, 2)) * scale
        if causal:
            limit = torch.arange(n_q) + (n_k - n_q)
            visible = torch.arange(lo, hi)[None, :] <= limit[:, None]
            S = S.masked_fill(~visible, -math.inf)
        m_blk = S.max(dim=-1).values
        m_new = torch.maximum(m, m_blk)
        finite = torch.isfinite(m_new)
        base = torch.where(finite, m_new, torch.zeros_like(m_new))
        P = torch.exp(S - base[..., None])
        c = torch.exp(m - base)
        l = c * l + P.sum(dim=-1)
        acc = c[..., None] * acc + torch.bmm(P, V[:, lo:hi])
        m = m_new
    l = torch.where(l > 0, l, torch.ones_like(l))
    return (acc / l[..., None]).reshape(B, H, n_q, d).to(q.dtype)


ENTRIES = [
    Entry("merge_attention_states", "wrong", "exp_without_shift", (
        "the weights are exp(lse_a) / (exp(lse_a) + exp(lse_b)) without subtracting the larger "
        "log-sum-exp first, so log-sum-exps near 1e4 overflow to inf/inf = NaN"),
        merge_exp_overflow),
    Entry("merge_attention_states", "wrong", "lse_keeps_trailing_axis", (
        "the log-sum-exps are given a trailing axis ([..., None]) up front and the returned lse "
        "keeps it: shape (..., N_q, 1) instead of (..., N_q)"),
        merge_lse_keeps_axis),
    Entry("merge_attention_states", "wrong", "both_empty_gives_nan", (
        "the larger log-sum-exp is subtracted with no guard for -inf, so a row where both sets "
        "are empty computes exp(-inf - (-inf)) and 0/0 and returns NaN instead of zeros and -inf"),
        merge_both_empty_nan),
    Entry("merge_attention_states", "wrong", "lse_is_the_max", (
        "the merged lse returned is just max(lse_a, lse_b): the log of the summed weights "
        "(log(w_a + w_b)) is never added, although the output itself is weighted correctly"),
        merge_lse_is_max),
    Entry("merge_attention_states", "wrong", "weights_swapped", (
        "the two weights are crossed over: set B's weight multiplies out_a and set A's weight "
        "multiplies out_b"),
        merge_weights_swapped),
    Entry("merge_attention_states", "wrong", "out_left_in_float32", (
        "computes in float32 and returns out without casting back, so out is float32 for "
        "float16, bfloat16 and float64 inputs instead of out_a's dtype"),
        merge_out_left_float32),
    Entry("merge_attention_states", "right", "logaddexp_float64", None, merge_logaddexp_f64),
    Entry("merge_attention_states", "right", "stacked_softmax_einsum", None,
          merge_stacked_softmax),

    Entry("online_softmax_attention", "wrong", "acc_not_rescaled", (
        "when a block raises the running max, the running sum is rescaled by "
        "exp(old_max - new_max) but the accumulator acc is not, so earlier blocks keep "
        "their old, too-large weights"),
        online_no_acc_rescale),
    Entry("online_softmax_attention", "wrong", "causal_mask_top_left", (
        "the causal mask compares key positions with the bare query index (key j > i), "
        "aligned top-left instead of bottom-right (j > i + N_k - N_q), wrong whenever "
        "N_q != N_k"),
        online_causal_top_left),
    Entry("online_softmax_attention", "wrong", "drops_ragged_last_block", (
        "loops over N_k // block_size blocks, so the shorter last block of keys is never "
        "visited (and with block_size > N_k no block at all, so the output is all zeros)"),
        online_drops_ragged_block),
    Entry("online_softmax_attention", "wrong", "no_guard_for_unseen_rows", (
        "subtracts the running max with no guard for -inf, so a query row that has seen no "
        "visible key yet (causal with N_q > N_k) computes exp(-inf - (-inf)) = NaN"),
        online_empty_rows_nan),
    Entry("online_softmax_attention", "wrong", "returns_float32", (
        "does the whole computation in float32 and returns it without casting back to q's "
        "dtype (float32 for float16, bfloat16 and float64 inputs)"),
        online_returns_float32),
    Entry("online_softmax_attention", "wrong", "averages_per_block_softmaxes", (
        "takes a separate softmax inside each key block and averages the blocks' outputs, "
        "instead of carrying a running max and sum so that all keys share one normalisation"),
        online_blockwise_softmax_average),
    Entry("online_softmax_attention", "right", "running_lse_merge_float64", None,
          online_running_lse_merge),
    Entry("online_softmax_attention", "right", "flattened_bmm_no_keepdim", None,
          online_flat_state_loop),
]
