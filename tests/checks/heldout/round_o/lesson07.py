"""Held-out catalogue, lesson 07 (flash): merge_attention_states, online_softmax_attention."""

import math

import torch

from entry import Entry

EX_M = "merge_attention_states"
EX_O = "online_softmax_attention"


# ============================================================ merge_attention_states: wrong
def merge_no_shift(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    ea = torch.exp(lse_a.to(ct))
    eb = torch.exp(lse_b.to(ct))
    tot = ea + eb
    lse = torch.log(tot)
    den = torch.where(tot == 0, torch.ones_like(tot), tot)
    out = (ea / den)[..., None] * out_a.to(ct) + (eb / den)[..., None] * out_b.to(ct)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_lse_is_max(out_a, lse_a, out_b, lse_b):
    work = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(work), lse_b.to(work)
    m = torch.maximum(la, lb)
    m0 = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    wa, wb = torch.exp(la - m0), torch.exp(lb - m0)
    s = wa + wb
    s_safe = torch.where(s == 0, torch.ones_like(s), s)
    out = (wa / s_safe).unsqueeze(-1) * out_a.to(work) + (wb / s_safe).unsqueeze(-1) * out_b.to(work)
    lse = m  # the merged log-sum-exp
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_no_empty_guard(out_a, lse_a, out_b, lse_b):
    f = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(f), lse_b.to(f)
    top = torch.maximum(la, lb)
    wa = torch.exp(la - top)
    wb = torch.exp(lb - top)
    total = wa + wb
    lse = top + torch.log(total)
    out = (wa / total)[..., None] * out_a.to(f) + (wb / total)[..., None] * out_b.to(f)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_returns_float32(out_a, lse_a, out_b, lse_b):
    compute = torch.promote_types(out_a.dtype, torch.float32)
    oa, ob = out_a.to(compute), out_b.to(compute)
    la, lb = lse_a.to(compute), lse_b.to(compute)
    top = torch.maximum(la, lb)
    shift = torch.where(torch.isinf(top), 0.0, top)
    wa, wb = torch.exp(la - shift), torch.exp(lb - shift)
    total = wa + wb
    lse = shift + torch.log(total)
    safe = torch.where(total == 0, 1.0, total)
    out = (wa / safe)[..., None] * oa + (wb / safe)[..., None] * ob
    return out, lse


def merge_softmax_wrong_dim(out_a, lse_a, out_b, lse_b):
    c = torch.promote_types(out_a.dtype, torch.float32)
    stacked = torch.stack([lse_a.to(c), lse_b.to(c)])  # (2, ..., N_q)
    lse = torch.logsumexp(stacked, dim=0)
    w = torch.softmax(stacked, dim=-1)
    w = torch.nan_to_num(w, nan=0.0)
    out = w[0][..., None] * out_a.to(c) + w[1][..., None] * out_b.to(c)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_swapped_weights(out_a, lse_a, out_b, lse_b):
    dt = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(dt), lse_b.to(dt)
    hi = torch.maximum(la, lb)
    hi = torch.where(torch.isinf(hi), 0.0, hi)
    alpha, beta = torch.exp(la - hi), torch.exp(lb - hi)
    norm = alpha + beta
    lse = hi + torch.log(norm)
    norm = torch.where(norm == 0, 1.0, norm)
    out = (beta / norm)[..., None] * out_a.to(dt) + (alpha / norm)[..., None] * out_b.to(dt)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


# ============================================================ merge_attention_states: right
def merge_logaddexp(out_a, lse_a, out_b, lse_b):
    c = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(c), lse_b.to(c)
    lse = torch.logaddexp(la, lb)
    wa = torch.nan_to_num(torch.exp(la - lse), nan=0.0)
    wb = torch.nan_to_num(torch.exp(lb - lse), nan=0.0)
    out = torch.einsum("...n,...nd->...nd", wa, out_a.to(c)) + torch.einsum(
        "...n,...nd->...nd", wb, out_b.to(c))
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_rowwise_float64(out_a, lse_a, out_b, lse_b):
    d_v = out_a.shape[-1]
    oa = out_a.to(torch.float64).reshape(-1, d_v)
    ob = out_b.to(torch.float64).reshape(-1, d_v)
    la = lse_a.to(torch.float64).reshape(-1).tolist()
    lb = lse_b.to(torch.float64).reshape(-1).tolist()
    rows, lses = [], []
    for r, (x, y) in enumerate(zip(la, lb)):
        if x == -math.inf and y == -math.inf:
            rows.append(torch.zeros(d_v, dtype=torch.float64))
            lses.append(-math.inf)
            continue
        m = max(x, y)
        ex, ey = math.exp(x - m), math.exp(y - m)
        tot = ex + ey
        rows.append(oa[r] * (ex / tot) + ob[r] * (ey / tot))
        lses.append(m + math.log(tot))
    out = torch.stack(rows).reshape(out_a.shape) if rows else torch.zeros(out_a.shape, dtype=torch.float64)
    lse = torch.tensor(lses, dtype=torch.float64).reshape(lse_a.shape)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


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
    for j in range(0, nk, block_size):
        kb = k[:, :, j:j + block_size].to(ct)
        vb = v[:, :, j:j + block_size].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            kpos = torch.arange(j, j + kb.shape[2])[None, :]
            s = s.masked_fill(kpos > qpos, -math.inf)
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        sh = torch.where(torch.isinf(m_new), 0.0, m_new)
        p = torch.exp(s - sh)
        corr = torch.exp(m - sh)
        l = l * corr + p.sum(-1, keepdim=True)
        acc = acc + p @ vb
        m = m_new
    return (acc / torch.where(l == 0, 1.0, l)).to(q.dtype)


def online_causal_top_left(q, k, v, block_size=64, causal=False):
    batch, heads, n_q, d = q.shape
    n_k = k.shape[2]
    work = torch.promote_types(q.dtype, torch.float32)
    q_s = q.to(work) * d ** -0.5
    row_max = torch.full((batch, heads, n_q, 1), float("-inf"), dtype=work)
    row_sum = torch.zeros((batch, heads, n_q, 1), dtype=work)
    acc = torch.zeros((batch, heads, n_q, d), dtype=work)
    rows = torch.arange(n_q)[:, None]
    for lo in range(0, n_k, block_size):
        hi = min(lo + block_size, n_k)
        s = q_s @ k[:, :, lo:hi].to(work).transpose(-2, -1)
        if causal:
            cols = torch.arange(lo, hi)[None, :]
            s = s.masked_fill(cols > rows, float("-inf"))
        new_max = torch.maximum(row_max, s.amax(dim=-1, keepdim=True))
        shift = torch.where(torch.isinf(new_max), 0.0, new_max)
        e = torch.exp(s - shift)
        scale = torch.exp(row_max - shift)
        row_sum = row_sum * scale + e.sum(dim=-1, keepdim=True)
        acc = acc * scale + e @ v[:, :, lo:hi].to(work)
        row_max = new_max
    return (acc / torch.where(row_sum == 0, 1.0, row_sum)).to(q.dtype)


def online_drops_last_block(q, k, v, block_size=64, causal=False):
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    cdt = torch.promote_types(q.dtype, torch.float32)
    qq = q.to(cdt) * (1.0 / math.sqrt(d))
    mx = torch.full((b, h, n_q, 1), -math.inf, dtype=cdt)
    sm = torch.zeros((b, h, n_q, 1), dtype=cdt)
    acc = torch.zeros((b, h, n_q, d), dtype=cdt)
    qp = torch.arange(n_q)[:, None] + n_k - n_q
    for start in range(0, n_k - block_size + 1, block_size):
        stop = start + block_size
        s = qq @ k[:, :, start:stop].to(cdt).transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(start, stop)[None, :] > qp, -math.inf)
        nm = torch.maximum(mx, s.amax(dim=-1, keepdim=True))
        sh = torch.where(torch.isinf(nm), 0.0, nm)
        w = torch.exp(s - sh)
        r = torch.exp(mx - sh)
        sm = sm * r + w.sum(dim=-1, keepdim=True)
        acc = acc * r + w @ v[:, :, start:stop].to(cdt)
        mx = nm
    return (acc / torch.where(sm == 0, 1.0, sm)).to(q.dtype)


def online_no_inf_guard(q, k, v, block_size=64, causal=False):
    B, H, Nq, D = q.shape
    Nk = k.shape[2]
    ftype = torch.promote_types(q.dtype, torch.float32)
    qf = q.to(ftype) / math.sqrt(D)
    run_max = torch.full((B, H, Nq, 1), -math.inf, dtype=ftype)
    run_sum = torch.zeros((B, H, Nq, 1), dtype=ftype)
    acc = torch.zeros((B, H, Nq, D), dtype=ftype)
    qpos = torch.arange(Nq)[:, None] + (Nk - Nq)
    for s0 in range(0, Nk, block_size):
        s1 = min(s0 + block_size, Nk)
        sc = qf @ k[:, :, s0:s1].to(ftype).transpose(-2, -1)
        if causal:
            sc = sc.masked_fill(torch.arange(s0, s1)[None, :] > qpos, -math.inf)
        new_max = torch.maximum(run_max, sc.amax(-1, keepdim=True))
        w = torch.exp(sc - new_max)
        alpha = torch.exp(run_max - new_max)
        run_sum = run_sum * alpha + w.sum(-1, keepdim=True)
        acc = acc * alpha + w @ v[:, :, s0:s1].to(ftype)
        run_max = new_max
    return (acc / torch.where(run_sum == 0, 1.0, run_sum)).to(q.dtype)


def online_float32_out(q, k, v, block_size=64, causal=False):
    batch, heads, n_q, d = q.shape
    n_k = k.shape[2]
    compute = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(compute) * (1.0 / math.sqrt(d))
    row_max = torch.full((batch, heads, n_q, 1), -math.inf, dtype=compute)
    row_sum = torch.zeros((batch, heads, n_q, 1), dtype=compute)
    acc = torch.zeros((batch, heads, n_q, d), dtype=compute)
    query_pos = torch.arange(n_q)[:, None] + (n_k - n_q)
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        scores = qs @ k[:, :, start:stop].to(compute).transpose(-2, -1)
        if causal:
            scores = scores.masked_fill(torch.arange(start, stop)[None, :] > query_pos,
                                        -math.inf)
        new_max = torch.maximum(row_max, scores.amax(dim=-1, keepdim=True))
        shift = torch.where(torch.isinf(new_max), 0.0, new_max)
        weights = torch.exp(scores - shift)
        rescale = torch.exp(row_max - shift)
        row_sum = row_sum * rescale + weights.sum(dim=-1, keepdim=True)
        acc = acc * rescale + weights @ v[:, :, start:stop].to(compute)
        row_max = new_max
    return acc / torch.where(row_sum == 0, 1.0, row_sum)


def online_global_max_first(q, k, v, block_size=64, causal=False):
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    c = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(c) / math.sqrt(d)
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    # the row maximum first, so that no rescaling is needed in the loop
    full = qs @ k.to(c).transpose(-2, -1)
    if causal:
        full = full.masked_fill(torch.arange(n_k)[None, :] > qpos, -math.inf)
    m = full.amax(dim=-1, keepdim=True)
    m = torch.where(torch.isinf(m), 0.0, m)
    den = torch.zeros((B, H, n_q, 1), dtype=c)
    acc = torch.zeros((B, H, n_q, d), dtype=c)
    for a in range(0, n_k, block_size):
        z = min(a + block_size, n_k)
        s = qs @ k[:, :, a:z].to(c).transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(a, z)[None, :] > qpos, -math.inf)
        e = torch.exp(s - m)
        den = den + e.sum(-1, keepdim=True)
        acc = acc + e @ v[:, :, a:z].to(c)
    return (acc / torch.where(den == 0, 1.0, den)).to(q.dtype)


# ============================================================ online_softmax_attention: right
def online_merge_block_states(q, k, v, block_size=64, causal=False):
    """Each block gives a normalised (out, lse); blocks are merged in log space, float64."""
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    q64 = q.double() / math.sqrt(d)
    out = torch.zeros((B, H, n_q, d), dtype=torch.float64)
    lse = torch.full((B, H, n_q), -math.inf, dtype=torch.float64)
    offset = n_k - n_q
    for j0 in range(0, n_k, block_size):
        j1 = min(n_k, j0 + block_size)
        s = torch.einsum("bhqd,bhkd->bhqk", q64, k[:, :, j0:j1].double())
        if causal:
            keep = torch.arange(j0, j1)[None, :] <= torch.arange(n_q)[:, None] + offset
            s = torch.where(keep, s, torch.tensor(-math.inf, dtype=torch.float64))
        blk_lse = torch.logsumexp(s, dim=-1)
        p = torch.nan_to_num(torch.exp(s - blk_lse[..., None]), nan=0.0)
        blk_out = torch.einsum("bhqk,bhkd->bhqd", p, v[:, :, j0:j1].double())
        new_lse = torch.logaddexp(lse, blk_lse)
        w_old = torch.nan_to_num(torch.exp(lse - new_lse), nan=0.0)
        w_blk = torch.nan_to_num(torch.exp(blk_lse - new_lse), nan=0.0)
        out = w_old[..., None] * out + w_blk[..., None] * blk_out
        lse = new_lse
    return out.to(q.dtype)


def online_exp2(q, k, v, block_size=64, causal=False):
    """Base-2 exponentials as FlashAttention kernels use: scores pre-multiplied by log2(e)."""
    nb, nh, n_q, d = q.shape
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) * (math.log2(math.e) / math.sqrt(d))
    mx = torch.full((nb, nh, n_q, 1), -math.inf, dtype=ct)
    den = torch.zeros((nb, nh, n_q, 1), dtype=ct)
    num = torch.zeros((nb, nh, n_q, d), dtype=ct)
    last_visible = torch.arange(n_q)[:, None] + (n_k - n_q)
    starts = list(range(0, n_k, block_size))
    for lo in starts:
        hi = min(lo + block_size, n_k)
        t = torch.einsum("bhid,bhjd->bhij", qs, k[..., lo:hi, :].to(ct))
        if causal:
            t = torch.where(torch.arange(lo, hi)[None, :] <= last_visible, t,
                            torch.full_like(t, -math.inf))
        m2 = torch.maximum(mx, t.amax(-1, keepdim=True))
        base = torch.nan_to_num(m2, neginf=0.0)
        e = torch.exp2(t - base)
        fix = torch.exp2(mx - base)
        den = den * fix + e.sum(-1, keepdim=True)
        num = num * fix + torch.einsum("bhij,bhjd->bhid", e, v[..., lo:hi, :].to(ct))
        mx = m2
    safe = torch.where(den > 0, den, torch.ones_like(den))
    return (num / safe).to(q.dtype)


ENTRIES = [
    Entry(EX_M, "wrong", "exp_without_shift", "The weights are exp(lse_a) and exp(lse_b) "
          "taken directly, with no larger log-sum-exp subtracted first: they overflow to inf "
          "for lse near 1e4 and the output becomes NaN.", merge_no_shift),
    Entry(EX_M, "wrong", "lse_is_max", "The merged log-sum-exp is returned as the larger of "
          "lse_a and lse_b, dropping the log of the summed weights "
          "(log(e^lse_a + e^lse_b) != max); the output itself is right.", merge_lse_is_max),
    Entry(EX_M, "wrong", "no_both_empty_guard", "The shift is max(lse_a, lse_b) with no "
          "guard for rows where both sets are empty: -inf - (-inf) gives NaN there instead of "
          "a zero row and -inf.", merge_no_empty_guard),
    Entry(EX_M, "wrong", "returns_compute_dtype", "The results are returned in the float32 "
          "working dtype: float16/bfloat16 inputs come back as float32 instead of out_a's and "
          "lse_a's dtypes.", merge_returns_float32),
    Entry(EX_M, "wrong", "softmax_over_rows", "After stacking lse_a and lse_b on a new first "
          "axis the weights are a softmax over the last axis (across query rows) instead of "
          "over the new axis of the two sets.", merge_softmax_wrong_dim),
    Entry(EX_M, "wrong", "weights_swapped", "Each set's output is scaled by the other set's "
          "weight: exp(lse_b - lse) multiplies out_a and exp(lse_a - lse) multiplies out_b.",
          merge_swapped_weights),
    Entry(EX_M, "right", "logaddexp_einsum", None, merge_logaddexp),
    Entry(EX_M, "right", "python_rows_float64", None, merge_rowwise_float64),
    Entry(EX_O, "wrong", "acc_not_rescaled", "When a block raises the running max, row_sum "
          "is rescaled by exp(old_max - new_max) but the accumulator acc is not, so earlier "
          "blocks' values keep too much weight.", online_acc_not_rescaled),
    Entry(EX_O, "wrong", "causal_top_left", "The causal mask compares key positions with "
          "query indices 0..N_q-1 (top-left) instead of aligning bottom-right with the "
          "N_k - N_q offset, wrong whenever N_q != N_k.", online_causal_top_left),
    Entry(EX_O, "wrong", "ragged_block_dropped", "The block loop runs range(0, N_k - "
          "block_size + 1, block_size), so a shorter last block (and every key when "
          "block_size > N_k) is never visited.", online_drops_last_block),
    Entry(EX_O, "wrong", "no_inf_shift_guard", "exp(scores - new_max) is taken with no guard "
          "for rows whose max is still -inf (all keys masked so far): -inf - (-inf) gives NaN "
          "instead of zero weights.", online_no_inf_guard),
    Entry(EX_O, "wrong", "returns_float32", "acc / row_sum is returned in the float32 working "
          "dtype: half-precision inputs do not come back in q's dtype.", online_float32_out),
    Entry(EX_O, "wrong", "full_scores_for_max", "The row max is taken up front from the whole "
          "q @ k^T score matrix, so the (B, H, N_q, N_k) tensor the online softmax must avoid "
          "is built anyway (values right, work wrong).", online_global_max_first),
    Entry(EX_O, "right", "merge_block_states_float64", None, online_merge_block_states),
    Entry(EX_O, "right", "exp2_einsum", None, online_exp2),
]
