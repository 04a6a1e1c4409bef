"""Round d, lesson 07 (torch): merge_attention_states, online_softmax_attention."""

import math

import torch

from entry import Entry


def _cdt(t):
    return torch.promote_types(t.dtype, torch.float32)


# ----------------------------------------------------------------------------- merge: wrong
def mas_no_shift(out_a, lse_a, out_b, lse_b):
    c = _cdt(out_a)
    ea, eb = torch.exp(lse_a.to(c)), torch.exp(lse_b.to(c))
    tot = ea + eb
    out = (ea / tot)[..., None] * out_a.to(c) + (eb / tot)[..., None] * out_b.to(c)
    return out.to(out_a.dtype), torch.log(tot).to(lse_a.dtype)


def mas_average(out_a, lse_a, out_b, lse_b):
    lse = torch.logaddexp(lse_a, lse_b)
    return (out_a + out_b) / 2, lse


def mas_nan_when_both_empty(out_a, lse_a, out_b, lse_b):
    c = _cdt(out_a)
    la, lb = lse_a.to(c), lse_b.to(c)
    lse = torch.logaddexp(la, lb)
    wa, wb = torch.exp(la - lse), torch.exp(lb - lse)
    out = wa[..., None] * out_a.to(c) + wb[..., None] * out_b.to(c)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def _weights(la, lb):
    top = torch.maximum(la, lb)
    shift = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    wa, wb = torch.exp(la - shift), torch.exp(lb - shift)
    tot = wa + wb
    safe = torch.where(tot == 0, torch.ones_like(tot), tot)
    return wa / safe, wb / safe, shift + torch.log(tot)


def mas_lse_is_max(out_a, lse_a, out_b, lse_b):
    c = _cdt(out_a)
    la, lb = lse_a.to(c), lse_b.to(c)
    wa, wb, _ = _weights(la, lb)
    out = wa[..., None] * out_a.to(c) + wb[..., None] * out_b.to(c)
    return out.to(out_a.dtype), torch.maximum(lse_a, lse_b)


def mas_swapped_weights(out_a, lse_a, out_b, lse_b):
    c = _cdt(out_a)
    la, lb = lse_a.to(c), lse_b.to(c)
    wa, wb, lse = _weights(la, lb)
    out = wb[..., None] * out_a.to(c) + wa[..., None] * out_b.to(c)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def mas_no_cast_back(out_a, lse_a, out_b, lse_b):
    c = _cdt(out_a)
    la, lb = lse_a.to(c), lse_b.to(c)
    wa, wb, lse = _weights(la, lb)
    out = wa[..., None] * out_a.to(c) + wb[..., None] * out_b.to(c)
    return out, lse


# ----------------------------------------------------------------------------- merge: right
def mas_stacked_softmax_float64(out_a, lse_a, out_b, lse_b):
    lses = torch.stack([lse_a.double(), lse_b.double()], dim=-1)  # (..., N_q, 2)
    lse = torch.logsumexp(lses, dim=-1)  # -inf where both are -inf
    finite = torch.isfinite(lse)
    w = torch.exp(lses - torch.where(finite, lse, torch.zeros_like(lse))[..., None])
    w = torch.where(finite[..., None], w, torch.zeros_like(w))
    out = w[..., 0:1] * out_a.double() + w[..., 1:2] * out_b.double()
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def mas_sigmoid(out_a, lse_a, out_b, lse_b):
    c = _cdt(out_a)
    la, lb = lse_a.to(c), lse_b.to(c)
    a_empty, b_empty = torch.isneginf(la), torch.isneginf(lb)
    diff = torch.where(a_empty | b_empty, torch.zeros_like(la), la - lb)
    wa = torch.sigmoid(diff)
    wa = torch.where(a_empty, torch.zeros_like(wa), torch.where(b_empty, torch.ones_like(wa), wa))
    wa = torch.where(a_empty & b_empty, torch.zeros_like(wa), wa)
    wb = torch.where(a_empty & b_empty, torch.zeros_like(wa), 1.0 - wa)
    lse = torch.logaddexp(la, lb)
    out = wa[..., None] * out_a.to(c) + wb[..., None] * out_b.to(c)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


# ----------------------------------------------------------------------------- online softmax
def _online(q, k, v, block_size, causal, *, rescale_acc=True, top_left=False, guard=True,
            drop_tail=False):
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    c = _cdt(q)
    qs = q.to(c) / math.sqrt(d)
    m = torch.full((b, h, n_q, 1), -math.inf, dtype=c)
    l = torch.zeros((b, h, n_q, 1), dtype=c)
    acc = torch.zeros((b, h, n_q, v.shape[-1]), dtype=c)
    offset = 0 if top_left else n_k - n_q
    qpos = torch.arange(n_q)[:, None] + offset
    stop_at = (n_k // block_size) * block_size if drop_tail else n_k
    for s0 in range(0, stop_at, block_size):
        s1 = min(s0 + block_size, n_k)
        sc = qs @ k[:, :, s0:s1].to(c).transpose(-2, -1)
        if causal:
            sc = sc.masked_fill(torch.arange(s0, s1)[None, :] > qpos, -math.inf)
        new_m = torch.maximum(m, sc.amax(-1, keepdim=True))
        shift = torch.where(torch.isinf(new_m), torch.zeros_like(new_m), new_m) if guard else new_m
        p = torch.exp(sc - shift)
        r = torch.exp(m - shift)
        l = l * r + p.sum(-1, keepdim=True)
        acc = (acc * r if rescale_acc else acc) + p @ v[:, :, s0:s1].to(c)
        m = new_m
    if guard:
        out = acc / torch.where(l == 0, torch.ones_like(l), l)
    else:
        out = acc / l
    return out.to(q.dtype)


def osa_no_acc_rescale(q, k, v, block_size=64, causal=False):
    return _online(q, k, v, block_size, causal, rescale_acc=False)


def osa_top_left_causal(q, k, v, block_size=64, causal=False):
    return _online(q, k, v, block_size, causal, top_left=True)


def osa_nan_empty_rows(q, k, v, block_size=64, causal=False):
    return _online(q, k, v, block_size, causal, guard=False)


def osa_drops_ragged_block(q, k, v, block_size=64, causal=False):
    return _online(q, k, v, block_size, causal, drop_tail=True)


def osa_average_of_blocks(q, k, v, block_size=64, causal=False):
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    c = _cdt(q)
    qs = q.to(c) / math.sqrt(d)
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    outs = []
    for s0 in range(0, n_k, block_size):
        s1 = min(s0 + block_size, n_k)
        sc = qs @ k[:, :, s0:s1].to(c).transpose(-2, -1)
        if causal:
            sc = sc.masked_fill(torch.arange(s0, s1)[None, :] > qpos, -math.inf)
        w = torch.nan_to_num(torch.softmax(sc, -1), nan=0.0)
        outs.append(w @ v[:, :, s0:s1].to(c))
    return (sum(outs) / len(outs)).to(q.dtype)


def osa_full_matrix(q, k, v, block_size=64, causal=False):
    n_q, n_k = q.shape[2], k.shape[2]
    c = _cdt(q)
    s = q.to(c) @ k.to(c).transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        s = s.masked_fill(~torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q), -math.inf)
    w = torch.nan_to_num(torch.softmax(s, -1), nan=0.0)
    return (w @ v.to(c)).to(q.dtype)


def osa_merge_blocks_float64(q, k, v, block_size=64, causal=False):
    """Each key block gives a normalised (out, lse); blocks are merged pairwise, in float64."""
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    qs = q.double() * (1.0 / math.sqrt(d))
    out = torch.zeros((b, h, n_q, v.shape[-1]), dtype=torch.float64, device=q.device)
    lse = torch.full((b, h, n_q), -math.inf, dtype=torch.float64, device=q.device)
    qpos = torch.arange(n_q, device=q.device)[:, None] + (n_k - n_q)
    for s0 in range(0, n_k, block_size):
        s1 = min(s0 + block_size, n_k)
        sc = qs @ k[:, :, s0:s1].double().transpose(-2, -1)
        if causal:
            sc = sc.masked_fill(torch.arange(s0, s1, device=q.device)[None, :] > qpos, -math.inf)
        blk_lse = torch.logsumexp(sc, dim=-1)
        ok = torch.isfinite(blk_lse)
        p = torch.exp(sc - torch.where(ok, blk_lse, torch.zeros_like(blk_lse))[..., None])
        blk_out = p @ v[:, :, s0:s1].double()
        new_lse = torch.logaddexp(lse, blk_lse)
        fin = torch.isfinite(new_lse)
        base = torch.where(fin, new_lse, torch.zeros_like(new_lse))
        wa = torch.where(fin, torch.exp(lse - base), torch.zeros_like(base))[..., None]
        wb = torch.where(fin, torch.exp(blk_lse - base), torch.zeros_like(base))[..., None]
        out = wa * out + wb * blk_out
        lse = new_lse
    return out.to(q.dtype)


def osa_row_chunks_loop(q, k, v, block_size=64, causal=False):
    """Loops over key blocks and keeps (max, sum, acc) with explicit einsums in float32/64."""
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    c = _cdt(q)
    m = q.new_full((b, h, n_q), -math.inf, dtype=c)
    l = q.new_zeros((b, h, n_q), dtype=c)
    acc = q.new_zeros((b, h, n_q, v.shape[-1]), dtype=c)
    scale = d ** -0.5
    first_key_allowed = torch.arange(n_q, device=q.device) + (n_k - n_q)  # last visible key of each query
    for s0 in range(0, n_k, block_size):
        kb = k[:, :, s0:s0 + block_size].to(c)
        vb = v[:, :, s0:s0 + block_size].to(c)
        sc = torch.einsum("bhid,bhjd->bhij", q.to(c), kb) * scale
        if causal:
            keys = torch.arange(s0, s0 + kb.shape[2], device=q.device)
            sc = torch.where(keys[None, :] <= first_key_allowed[:, None], sc,
                             torch.tensor(-math.inf, dtype=c, device=q.device))
        bm = sc.max(dim=-1).values
        nm = torch.maximum(m, bm)
        safe = torch.nan_to_num(nm, neginf=0.0)
        p = torch.exp(sc - safe[..., None])
        corr = torch.exp(m - safe)
        l = l * corr + p.sum(-1)
        acc = acc * corr[..., None] + torch.einsum("bhij,bhjd->bhid", p, vb)
        m = nm
    l = torch.where(l > 0, l, torch.ones_like(l))
    return (acc / l[..., None]).to(q.dtype)


ENTRIES = [
    Entry("merge_attention_states", "wrong", "exp_without_shift",
          "Exponentiates the raw log-sum-exps without subtracting their maximum, so lse around 1e4 overflows.",
          mas_no_shift),
    Entry("merge_attention_states", "wrong", "plain_average",
          "Averages the two outputs with equal weights instead of weighting each by exp(lse_set - lse).",
          mas_average),
    Entry("merge_attention_states", "wrong", "nan_when_both_empty",
          "Computes exp(lse_a - lse) with lse = logaddexp(...), which is -inf - (-inf) = NaN on rows where both sets are empty.",
          mas_nan_when_both_empty),
    Entry("merge_attention_states", "wrong", "lse_is_max",
          "Returns max(lse_a, lse_b) as the merged log-sum-exp instead of log(e^lse_a + e^lse_b).",
          mas_lse_is_max),
    Entry("merge_attention_states", "wrong", "weights_swapped",
          "Weights out_a with B's share and out_b with A's share.",
          mas_swapped_weights),
    Entry("merge_attention_states", "wrong", "no_cast_back",
          "Computes in float32 but returns float32 tensors for half-precision inputs instead of the inputs' dtype.",
          mas_no_cast_back),
    Entry("merge_attention_states", "right", "stacked_logsumexp_float64", None,
          mas_stacked_softmax_float64),
    Entry("merge_attention_states", "right", "sigmoid_of_difference", None, mas_sigmoid),

    Entry("online_softmax_attention", "wrong", "accumulator_not_rescaled",
          "Rescales the running sum when the maximum grows but forgets to rescale the output accumulator.",
          osa_no_acc_rescale),
    Entry("online_softmax_attention", "wrong", "causal_top_left",
          "Aligns the causal mask top-left (key j <= query i) instead of bottom-right when N_q != N_k.",
          osa_top_left_causal),
    Entry("online_softmax_attention", "wrong", "nan_on_empty_rows",
          "Does not guard rows whose running maximum is still -inf, so fully masked rows become NaN.",
          osa_nan_empty_rows),
    Entry("online_softmax_attention", "wrong", "drops_ragged_last_block",
          "Loops over N_k // block_size full blocks only, dropping the keys of a ragged last block.",
          osa_drops_ragged_block),
    Entry("online_softmax_attention", "wrong", "averages_block_softmaxes",
          "Normalises each block on its own and averages the block outputs instead of carrying a running max and sum.",
          osa_average_of_blocks),
    Entry("online_softmax_attention", "wrong", "builds_full_score_matrix",
          "Computes the full N_q x N_k score matrix and one softmax, ignoring the block-by-block requirement.",
          osa_full_matrix),
    Entry("online_softmax_attention", "right", "merge_block_states_float64", None,
          osa_merge_blocks_float64),
    Entry("online_softmax_attention", "right", "einsum_running_stats", None, osa_row_chunks_loop),
]
