"""Held-out catalogue, lesson 02 (multi-head): split_heads, merge_heads, multi_head_attention."""

import math

import numpy as np
import scipy.special

from entry import Entry


# ----------------------------------------------------------------------------- split_heads, wrong
def split_heads_no_transpose(x, num_heads):
    b, n, d_model = x.shape
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    return x.reshape(b, num_heads, n, d_model // num_heads)


def split_heads_strided(x, num_heads):
    b, n, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    return x.reshape(b, n, d_head, num_heads).transpose(0, 3, 1, 2)


def split_heads_slices_unchecked(x, num_heads):
    d_head = x.shape[-1] // num_heads
    heads = [x[:, :, h * d_head:(h + 1) * d_head] for h in range(num_heads)]
    return np.stack(heads, axis=1)


def split_heads_assert(x, num_heads):
    batch, seq, width = x.shape
    assert width % num_heads == 0, f"d_model={width} is not divisible by num_heads={num_heads}"
    out = x.reshape(batch, seq, num_heads, width // num_heads)
    return np.swapaxes(out, 1, 2)


def split_heads_modulo_swapped(x, num_heads):
    B, N, D = x.shape
    if num_heads % D != 0:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    return x.reshape(B, N, num_heads, D // num_heads).transpose(0, 2, 1, 3)


def split_heads_stack_axis0(x, num_heads):
    parts = np.split(x, num_heads, axis=-1)  # raises ValueError if not divisible
    return np.stack(parts, axis=0)


# ----------------------------------------------------------------------------- split_heads, right
def split_heads_moveaxis_copy(x, num_heads):
    x = np.asarray(x)
    d_model = x.shape[-1]
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    four = x.reshape(x.shape[0], x.shape[1], num_heads, -1)
    return np.ascontiguousarray(np.moveaxis(four, 2, 1))


def split_heads_index_loops(x, num_heads):
    B, N, D = x.shape
    if D % num_heads != 0:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads
    out = np.empty((B, num_heads, N, dh), dtype=x.dtype)
    for h in range(num_heads):
        for j in range(dh):
            out[:, h, :, j] = x[:, :, h * dh + j]
    return out


# ----------------------------------------------------------------------------- merge_heads, wrong
def merge_heads_no_transpose(x):
    b, h, n, d = x.shape
    return x.reshape(b, n, h * d)


def merge_heads_heads_last(x):
    b, h, n, d = x.shape
    return x.transpose(0, 2, 3, 1).reshape(b, n, h * d)


def merge_heads_concat_axis1(x):
    heads = [x[:, i] for i in range(x.shape[1])]
    return np.concatenate(heads, axis=1)


def merge_heads_unpack_order(x):
    B, N, H, D = x.shape
    return x.transpose(0, 2, 1, 3).reshape(B, N, H * D)


def merge_heads_range_short(x):
    n_heads = x.shape[1]
    return np.concatenate([x[:, h, :, :] for h in range(n_heads - 1)], axis=-1)


def merge_heads_slice_no_stride(x):
    B, H, N, d = x.shape
    out = np.zeros((B, N, H * d), dtype=x.dtype)
    for h in range(H):
        out[:, :, h:h + d] = x[:, h]
    return out


# ----------------------------------------------------------------------------- merge_heads, right
def merge_heads_einsum(x):
    B, H, N, d = x.shape
    return np.einsum("bhnd->bnhd", x).reshape(B, N, H * d)


def merge_heads_hstack_loop(x):
    B = x.shape[0]
    rows = []
    for b in range(B):
        rows.append(np.hstack([x[b, h] for h in range(x.shape[1])]))
    return np.stack(rows)


# ----------------------------------------------------------------------------- MHA, wrong
def mha_no_output_projection(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads

    def split(t):
        return t.reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)

    q, k, v = split(x @ w_q), split(x @ w_k), split(x @ w_v)
    s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(dh)
    s = np.exp(s - s.max(-1, keepdims=True))
    w = s / s.sum(-1, keepdims=True)
    return (w @ v).transpose(0, 2, 1, 3).reshape(B, N, D)


def mha_scale_d_model(x, w_q, w_k, w_v, w_o, num_heads):
    batch, n, d_model = x.shape
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    q = (x @ w_q).reshape(batch, n, num_heads, d_head).transpose(0, 2, 1, 3)
    k = (x @ w_k).reshape(batch, n, num_heads, d_head).transpose(0, 2, 1, 3)
    v = (x @ w_v).reshape(batch, n, num_heads, d_head).transpose(0, 2, 1, 3)
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(d_model)
    scores -= scores.max(axis=-1, keepdims=True)
    attn = np.exp(scores)
    attn /= attn.sum(axis=-1, keepdims=True)
    ctx = (attn @ v).transpose(0, 2, 1, 3).reshape(batch, n, d_model)
    return ctx @ w_o


def mha_reshape_no_transpose(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    hd = D // num_heads
    q = (x @ w_q).reshape(B, num_heads, N, hd)
    k = (x @ w_k).reshape(B, num_heads, N, hd)
    v = (x @ w_v).reshape(B, num_heads, N, hd)
    logits = q @ np.swapaxes(k, -1, -2) / math.sqrt(hd)
    p = scipy.special.softmax(logits, axis=-1)
    merged = (p @ v).reshape(B, N, D)
    return merged @ w_o


def mha_values_from_wk(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads
    proj = {name: (x @ w).reshape(B, N, num_heads, dh).swapaxes(1, 2)
            for name, w in (("q", w_q), ("k", w_k), ("v", w_k))}
    s = proj["q"] @ proj["k"].swapaxes(-1, -2) / np.sqrt(dh)
    s = s - s.max(axis=-1, keepdims=True)
    a = np.exp(s)
    a = a / a.sum(axis=-1, keepdims=True)
    out = (a @ proj["v"]).swapaxes(1, 2).reshape(B, N, D)
    return out @ w_o


def mha_linear_layout(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads
    q = (x @ w_q.T).reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)
    k = (x @ w_k.T).reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)
    v = (x @ w_v.T).reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)
    sc = q @ k.transpose(0, 1, 3, 2) / math.sqrt(dh)
    sc = np.exp(sc - sc.max(axis=-1, keepdims=True))
    sc = sc / sc.sum(axis=-1, keepdims=True)
    return (sc @ v).transpose(0, 2, 1, 3).reshape(B, N, D) @ w_o.T


def mha_head_slices_unchecked(x, w_q, w_k, w_v, w_o, num_heads):
    d_model = x.shape[-1]
    d_head = d_model // num_heads
    q_all, k_all, v_all = x @ w_q, x @ w_k, x @ w_v
    outs = []
    for h in range(num_heads):
        cols = slice(h * d_head, (h + 1) * d_head)
        q, k, v = q_all[..., cols], k_all[..., cols], v_all[..., cols]
        s = q @ np.swapaxes(k, -1, -2) / math.sqrt(d_head)
        s = np.exp(s - s.max(axis=-1, keepdims=True))
        s /= s.sum(axis=-1, keepdims=True)
        outs.append(s @ v)
    return np.concatenate(outs, axis=-1) @ w_o[:num_heads * d_head]


# ----------------------------------------------------------------------------- MHA, right
def mha_per_head_block_sum(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x, dtype=np.float64)
    d_model = x.shape[-1]
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    dh = d_model // num_heads
    total = np.zeros(x.shape, dtype=np.float64)
    for h in range(num_heads):
        c = slice(h * dh, (h + 1) * dh)
        qh = x @ np.asarray(w_q, np.float64)[:, c]
        kh = x @ np.asarray(w_k, np.float64)[:, c]
        vh = x @ np.asarray(w_v, np.float64)[:, c]
        s = qh @ np.swapaxes(kh, 1, 2) / math.sqrt(dh)
        p = scipy.special.softmax(s, axis=2)
        total += (p @ vh) @ np.asarray(w_o, np.float64)[c, :]
    return total


def mha_einsum(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, D = np.shape(x)
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    H, dh = num_heads, D // num_heads
    q = np.einsum("bnd,de->bne", x, w_q).reshape(B, N, H, dh)
    k = np.einsum("bnd,de->bne", x, w_k).reshape(B, N, H, dh)
    v = np.einsum("bnd,de->bne", x, w_v).reshape(B, N, H, dh)
    s = np.einsum("bqhe,bkhe->bhqk", q, k) * dh ** -0.5
    lse = scipy.special.logsumexp(s, axis=-1, keepdims=True)
    p = np.exp(s - lse)
    ctx = np.einsum("bhqk,bkhe->bqhe", p, v).reshape(B, N, D)
    return np.einsum("bnd,de->bne", ctx, w_o)


ENTRIES = [
    Entry("split_heads", "wrong", "reshape_without_transpose",
          "reshapes straight to (B, H, N, d_head) without going through (B, N, H, d_head) "
          "and transposing, so each 'head' holds a block of the flattened token-feature "
          "array instead of features h*d_head:(h+1)*d_head of every token",
          split_heads_no_transpose),
    Entry("split_heads", "wrong", "strided_features",
          "reshapes to (B, N, d_head, H) and moves the last axis up, so head h gets the "
          "strided features h, h+H, h+2H, ... instead of the contiguous block",
          split_heads_strided),
    Entry("split_heads", "wrong", "slicing_without_divisibility_check",
          "slices heads with d_head = d_model // num_heads and never checks divisibility, "
          "so a non-divisible d_model silently drops the leftover features instead of "
          "raising ValueError", split_heads_slices_unchecked),
    Entry("split_heads", "wrong", "assert_instead_of_valueerror",
          "guards divisibility with assert, which raises AssertionError, not the ValueError "
          "the contract requires", split_heads_assert),
    Entry("split_heads", "wrong", "modulo_operands_swapped",
          "tests num_heads % d_model instead of d_model % num_heads, so it raises on valid "
          "inputs whenever num_heads < d_model (e.g. 3 heads of a 12-wide model)", split_heads_modulo_swapped),
    Entry("split_heads", "wrong", "stack_heads_on_axis0",
          "stacks the np.split pieces along axis 0, giving (H, B, N, d_head) instead of "
          "(B, H, N, d_head)", split_heads_stack_axis0),
    Entry("split_heads", "right", "moveaxis_contiguous", None, split_heads_moveaxis_copy),
    Entry("split_heads", "right", "feature_index_loops", None, split_heads_index_loops),
    Entry("merge_heads", "wrong", "reshape_without_transpose",
          "reshapes (B, H, N, d_head) straight to (B, N, H*d_head) without swapping the head "
          "and token axes, mixing tokens of different positions",
          merge_heads_no_transpose),
    Entry("merge_heads", "wrong", "head_axis_last",
          "transposes to (B, N, d_head, H) before flattening, so the heads come out "
          "interleaved feature by feature instead of side by side",
          merge_heads_heads_last),
    Entry("merge_heads", "wrong", "concatenate_on_token_axis",
          "concatenates the heads along axis 1 (the tokens) instead of the feature axis, "
          "giving (B, H*N, d_head)", merge_heads_concat_axis1),
    Entry("merge_heads", "wrong", "shape_unpacked_in_wrong_order",
          "unpacks x.shape as (B, N, H, d_head) although it is (B, H, N, d_head), so the "
          "final reshape uses the head count as the sequence length",
          merge_heads_unpack_order),
    Entry("merge_heads", "wrong", "range_drops_last_head",
          "loops over range(n_heads - 1), so the last head is left out of the concatenation",
          merge_heads_range_short),
    Entry("merge_heads", "wrong", "slice_offset_not_scaled",
          "writes head h into columns h:h+d instead of h*d:(h+1)*d, so the heads overwrite "
          "each other", merge_heads_slice_no_stride),
    Entry("merge_heads", "right", "einsum_permute", None, merge_heads_einsum),
    Entry("merge_heads", "right", "hstack_per_batch", None, merge_heads_hstack_loop),
    Entry("multi_head_attention", "wrong", "no_output_projection",
          "returns the merged heads without the final @ w_o output projection",
          mha_no_output_projection),
    Entry("multi_head_attention", "wrong", "scale_by_d_model",
          "scales the scores by 1/sqrt(d_model) instead of 1/sqrt(d_head) of each head",
          mha_scale_d_model),
    Entry("multi_head_attention", "wrong", "split_without_transpose",
          "splits the projections with reshape(B, H, N, d_head) directly, without the "
          "transpose, so heads mix tokens and features", mha_reshape_no_transpose),
    Entry("multi_head_attention", "wrong", "values_projected_with_w_k",
          "projects the values with w_k instead of w_v (copy-paste slip)",
          mha_values_from_wk),
    Entry("multi_head_attention", "wrong", "nn_linear_layout",
          "applies the weights as x @ W.T (nn.Linear's (out, in) layout) instead of x @ W",
          mha_linear_layout),
    Entry("multi_head_attention", "wrong", "no_divisibility_check",
          "never checks that num_heads divides d_model: the per-head slicing quietly "
          "uses only num_heads*(d_model//num_heads) features instead of raising ValueError",
          mha_head_slices_unchecked),
    Entry("multi_head_attention", "right", "per_head_block_of_w_o", None,
          mha_per_head_block_sum),
    Entry("multi_head_attention", "right", "einsum_logsumexp", None, mha_einsum),
]
