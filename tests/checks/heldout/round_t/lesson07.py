"""Held-out catalogue, lesson 07 (flash): merge_attention_states, online_softmax_attention."""

import math

import torch

from entry import Entry

EX_MERGE = "merge_attention_states"
EX_ONLINE = "online_softmax_attention"


# ============================================================================ merge_attention_states
# -- right answers -----------------------------------------------------------------------------
def merge_right_logaddexp(out_a, lse_a, out_b, lse_b):
    # float64 all the way, torch.logaddexp for the merged lse, weights guarded where it is -inf
    la, lb = lse_a.double(), lse_b.double()
    lse = torch.logaddexp(la, lb)
    dead = torch.isneginf(lse)
    ref = torch.where(dead, torch.zeros_like(lse), lse)
    wa = torch.where(dead, torch.zeros_like(la), torch.exp(la - ref))
    wb = torch.where(dead, torch.zeros_like(lb), torch.exp(lb - ref))
    merged = wa.unsqueeze(-1) * out_a.double() + wb.unsqueeze(-1) * out_b.double()
    return merged.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_right_stack_softmax(out_a, lse_a, out_b, lse_b):
    # stack the two states on a new axis: softmax over it gives the two weights, logsumexp the lse
    ct = torch.promote_types(out_a.dtype, torch.float32)
    both_lse = torch.stack((lse_a.to(ct), lse_b.to(ct)), dim=-1)  # (..., N_q, 2)
    both_out = torch.stack((out_a.to(ct), out_b.to(ct)), dim=-2)  # (..., N_q, 2, d_v)
    weights = torch.nan_to_num(torch.softmax(both_lse, dim=-1), nan=0.0)
    total_lse = torch.logsumexp(both_lse, dim=-1)
    out = torch.einsum("...s,...sd->...d", weights, both_out)
    return out.to(out_a.dtype), total_lse.to(lse_a.dtype)


# -- wrong answers -----------------------------------------------------------------------------
def merge_wrong_no_shift(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    ea = torch.exp(lse_a.to(ct))
    eb = torch.exp(lse_b.to(ct))
    tot = ea + eb
    lse = torch.log(tot)
    safe = torch.where(tot == 0, torch.ones_like(tot), tot)
    out = (ea / safe)[..., None] * out_a.to(ct) + (eb / safe)[..., None] * out_b.to(ct)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_wrong_nan_both_empty(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(ct), lse_b.to(ct)
    m = torch.maximum(la, lb)
    wa = torch.exp(la - m)
    wb = torch.exp(lb - m)
    tot = wa + wb
    lse = m + torch.log(tot)
    out = (wa / tot)[..., None] * out_a.to(ct) + (wb / tot)[..., None] * out_b.to(ct)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_wrong_lse_is_max(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(ct), lse_b.to(ct)
    top = torch.maximum(la, lb)
    shift = torch.where(torch.isinf(top), 0.0, top)
    wa, wb = torch.exp(la - shift), torch.exp(lb - shift)
    tot = wa + wb
    safe = torch.where(tot == 0, 1.0, tot)
    out = (wa / safe)[..., None] * out_a.to(ct) + (wb / safe)[..., None] * out_b.to(ct)
    return out.to(out_a.dtype), top.to(lse_a.dtype)


def merge_wrong_no_trailing_axis(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(ct), lse_b.to(ct)
    top = torch.maximum(la, lb)
    shift = torch.where(torch.isinf(top), 0.0, top)
    wa, wb = torch.exp(la - shift), torch.exp(lb - shift)
    tot = wa + wb
    lse = shift + torch.log(tot)
    safe = torch.where(tot == 0, 1.0, tot)
    out = (wa / safe) * out_a.to(ct) + (wb / safe) * out_b.to(ct)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_wrong_keeps_float32(out_a, lse_a, out_b, lse_b):
    work = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(work), lse_b.to(work)
    top = torch.maximum(la, lb)
    shift = torch.where(torch.isinf(top), 0.0, top)
    wa, wb = torch.exp(la - shift), torch.exp(lb - shift)
    tot = wa + wb
    lse = shift + torch.log(tot)
    safe = torch.where(tot == 0, 1.0, tot)
    out = (wa / safe)[..., None] * out_a.to(work) + (wb / safe)[..., None] * out_b.to(work)
    return out, lse


def merge_wrong_out_a_twice(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(ct), lse_b.to(ct)
    top = torch.maximum(la, lb)
    shift = torch.where(torch.isinf(top), 0.0, top)
    wa, wb = torch.exp(la - shift), torch.exp(lb - shift)
    tot = wa + wb
    lse = shift + torch.log(tot)
    safe = torch.where(tot == 0, 1.0, tot)
    oa = out_a.to(ct)
    out = (wa / safe)[..., None] * oa + (wb / safe)[..., None] * oa
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


# ============================================================================ online_softmax_attention
def _visible(n_q, n_k, start, stop, device):
    """(N_q, b) bool: query i may see key j when j <= i + n_k - n_q (bottom-right)."""
    qi = torch.arange(n_q, device=device).unsqueeze(1) + (n_k - n_q)
    kj = torch.arange(start, stop, device=device).unsqueeze(0)
    return kj <= qi


# -- right answers -----------------------------------------------------------------------------
def online_right_merge_blocks(q, k, v, block_size=64, causal=False):
    # each block gives its own normalised (out, lse); the running state is merged like two
    # split-key states (flash-decoding's reduction), all in float64
    B, H, nq, d = q.shape
    nk = k.shape[2]
    qs = q.double() / math.sqrt(d)
    run_out = torch.zeros(B, H, nq, d, dtype=torch.float64, device=q.device)
    run_lse = torch.full((B, H, nq), -math.inf, dtype=torch.float64, device=q.device)
    for lo in range(0, nk, block_size):
        hi = min(nk, lo + block_size)
        s = torch.einsum("bhqd,bhkd->bhqk", qs, k[:, :, lo:hi].double())
        if causal:
            s = s.masked_fill(~_visible(nq, nk, lo, hi, q.device), -math.inf)
        blk_lse = torch.logsumexp(s, dim=-1)  # (B, H, N_q), -inf for rows with no key here
        ok = torch.isfinite(blk_lse)
        p = torch.exp(s - torch.where(ok, blk_lse, torch.zeros_like(blk_lse))[..., None])
        blk_out = torch.einsum("bhqk,bhkd->bhqd", p, v[:, :, lo:hi].double())
        new_lse = torch.logaddexp(run_lse, blk_lse)
        alive = torch.isfinite(new_lse)
        ref = torch.where(alive, new_lse, torch.zeros_like(new_lse))
        w_run = torch.where(alive, torch.exp(run_lse - ref), torch.zeros_like(ref))
        w_blk = torch.where(alive, torch.exp(blk_lse - ref), torch.zeros_like(ref))
        run_out = w_run[..., None] * run_out + w_blk[..., None] * blk_out
        run_lse = new_lse
    return run_out.to(q.dtype)


def online_right_deferred_einsum(q, k, v, block_size=64, causal=False):
    # running max / sum / accumulator in float64 with einsum, normalised once at the end
    n_q, n_k, d = q.shape[2], k.shape[2], q.shape[3]
    f64 = torch.float64
    qq = q.to(f64)
    m = torch.full(q.shape[:3], -math.inf, dtype=f64, device=q.device)
    l = torch.zeros(q.shape[:3], dtype=f64, device=q.device)
    o = torch.zeros(q.shape, dtype=f64, device=q.device)
    scale = d ** -0.5
    n_blocks = -(-n_k // block_size)
    for j in range(n_blocks):
        a, b = j * block_size, min((j + 1) * block_size, n_k)
        sc = torch.einsum("...id,...jd->...ij", qq, k[:, :, a:b].to(f64)) * scale
        if causal:
            sc = torch.where(_visible(n_q, n_k, a, b, q.device), sc,
                             torch.tensor(-math.inf, dtype=f64))
        m_new = torch.maximum(m, sc.max(dim=-1).values)
        m_ref = torch.nan_to_num(m_new, neginf=0.0)
        e = torch.exp(sc - m_ref[..., None])
        corr = torch.exp(m - m_ref)
        l = l * corr + e.sum(-1)
        o = o * corr[..., None] + torch.einsum("...ij,...jd->...id", e, v[:, :, a:b].to(f64))
        m = m_new
    l = torch.where(l > 0, l, torch.ones_like(l))
    return (o / l[..., None]).to(q.dtype)


# -- wrong answers -----------------------------------------------------------------------------
def _online_template(q, k, v, block_size, causal, *, top_left=False, rescale_acc=True,
                     guard_sum=True, floor_blocks=False, keep_compute=False, scaled=True):
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) * (1.0 / math.sqrt(d)) if scaled else q.to(ct)
    row_max = torch.full((B, H, n_q, 1), -math.inf, dtype=ct, device=q.device)
    row_sum = torch.zeros((B, H, n_q, 1), dtype=ct, device=q.device)
    acc = torch.zeros((B, H, n_q, d), dtype=ct, device=q.device)
    offset = 0 if top_left else n_k - n_q
    qpos = torch.arange(n_q, device=q.device)[:, None] + offset
    if floor_blocks:
        starts = [i * block_size for i in range(n_k // block_size)]
    else:
        starts = list(range(0, n_k, block_size))
    for start in starts:
        stop = min(start + block_size, n_k)
        kb = k[:, :, start:stop].to(ct)
        vb = v[:, :, start:stop].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            kpos = torch.arange(start, stop, device=q.device)[None, :]
            s = s.masked_fill(kpos > qpos, -math.inf)
        new_max = torch.maximum(row_max, s.amax(dim=-1, keepdim=True))
        shift = torch.where(torch.isinf(new_max), 0.0, new_max)
        w = torch.exp(s - shift)
        r = torch.exp(row_max - shift)
        row_sum = row_sum * r + w.sum(dim=-1, keepdim=True)
        acc = (acc * r if rescale_acc else acc) + w @ vb
        row_max = new_max
    if guard_sum:
        out = acc / torch.where(row_sum == 0, 1.0, row_sum)
    else:
        out = acc / row_sum
    return out if keep_compute else out.to(q.dtype)


def online_wrong_top_left(q, k, v, block_size=64, causal=False):
    return _online_template(q, k, v, block_size, causal, top_left=True)


def online_wrong_acc_not_rescaled(q, k, v, block_size=64, causal=False):
    return _online_template(q, k, v, block_size, causal, rescale_acc=False)


def online_wrong_empty_rows_nan(q, k, v, block_size=64, causal=False):
    return _online_template(q, k, v, block_size, causal, guard_sum=False)


def online_wrong_floor_blocks(q, k, v, block_size=64, causal=False):
    return _online_template(q, k, v, block_size, causal, floor_blocks=True)


def online_wrong_float32_out(q, k, v, block_size=64, causal=False):
    return _online_template(q, k, v, block_size, causal, keep_compute=True)


def online_wrong_no_scale(q, k, v, block_size=64, causal=False):
    return _online_template(q, k, v, block_size, causal, scaled=False)


ENTRIES = [
    Entry(EX_MERGE, "right", "logaddexp_float64", None, merge_right_logaddexp),
    Entry(EX_MERGE, "right", "stack_softmax_einsum", None, merge_right_stack_softmax),
    Entry(EX_MERGE, "wrong", "exp_without_shift",
          "Exponentiates the log-sum-exps directly, without subtracting the larger one first: "
          "exp(1e4) overflows to inf and the merged row becomes NaN (inf / inf).",
          merge_wrong_no_shift),
    Entry(EX_MERGE, "wrong", "shift_unguarded_both_empty",
          "Subtracts the row maximum even when both lse are -inf, so exp(-inf - (-inf)) is NaN: "
          "a row with no key in either set comes out NaN instead of zeros and -inf.",
          merge_wrong_nan_both_empty),
    Entry(EX_MERGE, "wrong", "lse_is_the_max",
          "Returns the larger of the two log-sum-exps as the merged lse, forgetting to add "
          "log(w_a + w_b): the merged lse is log(e^lse_a + e^lse_b), not their maximum.",
          merge_wrong_lse_is_max),
    Entry(EX_MERGE, "wrong", "weights_without_trailing_axis",
          "Multiplies the per-row weights of shape (..., N_q) into out (..., N_q, d_v) without "
          "a trailing axis, so they broadcast against d_v instead of the rows (a shape error, "
          "or rows mixed up when N_q happens to equal d_v).",
          merge_wrong_no_trailing_axis),
    Entry(EX_MERGE, "wrong", "returns_compute_dtype",
          "Does the arithmetic in float32 but returns the float32 results without casting back: "
          "float16 / bfloat16 states come back as float32 instead of the inputs' dtypes.",
          merge_wrong_keeps_float32),
    Entry(EX_MERGE, "wrong", "out_a_used_twice",
          "Reuses out_a in the second term (w_b * out_a instead of w_b * out_b): set B's output "
          "never enters the merge.",
          merge_wrong_out_a_twice),
    Entry(EX_ONLINE, "right", "merge_block_states_float64", None, online_right_merge_blocks),
    Entry(EX_ONLINE, "right", "deferred_normalise_einsum", None, online_right_deferred_einsum),
    Entry(EX_ONLINE, "wrong", "causal_top_left",
          "Aligns the causal mask top-left (key j visible when j <= i) instead of bottom-right "
          "(j <= i + N_k - N_q): wrong whenever N_q != N_k.",
          online_wrong_top_left),
    Entry(EX_ONLINE, "wrong", "accumulator_not_rescaled",
          "Rescales the running sum by exp(old_max - new_max) but not the accumulator acc, so "
          "blocks seen before the maximum rose keep too much weight.",
          online_wrong_acc_not_rescaled),
    Entry(EX_ONLINE, "wrong", "empty_rows_divide_by_zero",
          "Divides acc by row_sum with no guard: a query row that sees no key (causal, N_q > N_k) "
          "gives 0 / 0 = NaN instead of a row of zeros.",
          online_wrong_empty_rows_nan),
    Entry(EX_ONLINE, "wrong", "floor_number_of_blocks",
          "Counts the blocks as N_k // block_size (floor instead of ceiling), so the ragged last "
          "block of keys is never visited (and with block_size > N_k no key at all).",
          online_wrong_floor_blocks),
    Entry(EX_ONLINE, "wrong", "returns_float32",
          "Accumulates in float32 and returns acc / row_sum as it is, without casting back to "
          "q's dtype: float16 / bfloat16 inputs come back as float32.",
          online_wrong_float32_out),
    Entry(EX_ONLINE, "wrong", "no_sqrt_d_scale",
          "Never divides the scores by sqrt(d): the softmax is taken over q k^T instead of "
          "q k^T / sqrt(d).",
          online_wrong_no_scale),
]
