"""Held-out catalogue, lesson 02 (split_heads, merge_heads, multi_head_attention)."""

import math

import numpy as np

from entry import Entry


def _check_heads(d_model, num_heads):
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")


# ============================================================================ split_heads
def split_heads_no_transpose(x, num_heads):
    B, N, D = x.shape
    _check_heads(D, num_heads)
    return x.reshape(B, num_heads, N, D // num_heads)


def split_heads_interleaved(x, num_heads):
    B, N, D = x.shape
    _check_heads(D, num_heads)
    d_head = D // num_heads
    return x.reshape(B, N, d_head, num_heads).transpose(0, 3, 1, 2)


def split_heads_guard_swapped(x, num_heads):
    batch, seq, d_model = x.shape
    if num_heads % d_model:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    return x.reshape(batch, seq, num_heads, d_head).transpose(0, 2, 1, 3)


def split_heads_true_division(x, num_heads):
    batch, seq, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model / num_heads
    return x.reshape(batch, seq, num_heads, d_head).transpose(0, 2, 1, 3)


def split_heads_rollaxis(x, num_heads):
    B, N, D = x.shape
    _check_heads(D, num_heads)
    y = x.reshape(B, N, num_heads, D // num_heads)
    return np.rollaxis(y, 2)  # meant: move the heads axis next to batch


def split_heads_seq_first_unpack(x, num_heads):
    seq_len, batch, d_model = x.shape
    _check_heads(d_model, num_heads)
    d_head = d_model // num_heads
    return x.reshape(batch, seq_len, num_heads, d_head).transpose(0, 2, 1, 3)


def split_heads_stack_slices(x, num_heads):
    x = np.asarray(x)
    d_model = x.shape[-1]
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    width = d_model // num_heads
    pieces = [x[:, :, h * width:(h + 1) * width] for h in range(num_heads)]
    return np.stack(pieces, axis=1)


def split_heads_moveaxis(x, num_heads):
    b, n, d = np.shape(x)
    q, r = divmod(d, num_heads)
    if r:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    return np.moveaxis(np.reshape(x, (b, n, num_heads, q)), 2, 1).copy()


# ============================================================================ merge_heads
def merge_heads_no_transpose(x):
    B, H, N, dh = x.shape
    return x.reshape(B, N, H * dh)


def merge_heads_dhead_before_heads(x):
    B, H, N, dh = x.shape
    return x.transpose(0, 2, 3, 1).reshape(B, N, H * dh)


def merge_heads_unpack_order(x):
    B, N, H, dh = x.shape
    return x.transpose(0, 2, 1, 3).reshape(B, N, H * dh)


def merge_heads_concat_seq_axis(x):
    heads = [x[:, h] for h in range(x.shape[1])]
    return np.concatenate(heads, axis=1)


def merge_heads_forgot_reshape(x):
    return np.swapaxes(x, 1, 2)


def merge_heads_summed(x):
    return x.sum(axis=1)


def merge_heads_concat_last(x):
    return np.concatenate([x[:, h, :, :] for h in range(x.shape[1])], axis=-1)


def merge_heads_fill_loop(x):
    batch, heads, n, dh = x.shape
    out = np.empty((batch, n, heads * dh), dtype=x.dtype)
    for h in range(heads):
        out[..., h * dh:(h + 1) * dh] = x[:, h]
    return out


# ============================================================================ multi_head_attention
def _split(t, h):
    b, n, d = t.shape
    if d % h:
        raise ValueError(f"d_model={d} is not divisible by num_heads={h}")
    return t.reshape(b, n, h, d // h).transpose(0, 2, 1, 3)


def _merge(t):
    b, h, n, dh = t.shape
    return t.transpose(0, 2, 1, 3).reshape(b, n, h * dh)


def _softmax(s, axis=-1):
    s = s - s.max(axis=axis, keepdims=True)
    e = np.exp(s)
    return e / e.sum(axis=axis, keepdims=True)


def mha_scale_dmodel(x, w_q, w_k, w_v, w_o, num_heads):
    q, k, v = _split(x @ w_q, num_heads), _split(x @ w_k, num_heads), _split(x @ w_v, num_heads)
    d_model = x.shape[-1]
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d_model)
    return _merge(_softmax(s) @ v) @ w_o


def mha_wo_transposed(x, w_q, w_k, w_v, w_o, num_heads):
    q, k, v = _split(x @ w_q, num_heads), _split(x @ w_k, num_heads), _split(x @ w_v, num_heads)
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(q.shape[-1])
    return _merge(_softmax(s) @ v) @ w_o.T


def mha_head_loop_no_guard(x, w_q, w_k, w_v, w_o, num_heads):
    d_model = x.shape[-1]
    d_head = d_model // num_heads
    out = 0.0
    for h in range(num_heads):
        sl = slice(h * d_head, (h + 1) * d_head)
        q_h, k_h, v_h = x @ w_q[:, sl], x @ w_k[:, sl], x @ w_v[:, sl]
        s = q_h @ np.swapaxes(k_h, -1, -2) / math.sqrt(d_head)
        out = out + (_softmax(s) @ v_h) @ w_o[sl, :]
    return out


def mha_softmax_axis_queries(x, w_q, w_k, w_v, w_o, num_heads):
    q, k, v = _split(x @ w_q, num_heads), _split(x @ w_k, num_heads), _split(x @ w_v, num_heads)
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(q.shape[-1])
    return _merge(_softmax(s, axis=-2) @ v) @ w_o


def mha_key_from_wq(x, w_q, w_k, w_v, w_o, num_heads):
    q = _split(x @ w_q, num_heads)
    k = _split(x @ w_q, num_heads)
    v = _split(x @ w_v, num_heads)
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(q.shape[-1])
    return _merge(_softmax(s) @ v) @ w_o


def mha_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, D = x.shape
    q, k, v = _split(x @ w_q, num_heads), _split(x @ w_k, num_heads), _split(x @ w_v, num_heads)
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(q.shape[-1])
    ctx = _softmax(s) @ v  # (B, H, N, d_head)
    return ctx.reshape(B, N, D) @ w_o


def mha_blockwise_output(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x, dtype=np.float64)
    d_model = x.shape[-1]
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    dh = d_model // num_heads
    total = np.zeros_like(x)
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        qh, kh, vh = x @ w_q[:, cols], x @ w_k[:, cols], x @ w_v[:, cols]
        sc = qh @ np.swapaxes(kh, 1, 2) / math.sqrt(dh)
        sc -= sc.max(axis=-1, keepdims=True)
        p = np.exp(sc)
        p /= p.sum(axis=-1, keepdims=True)
        total += (p @ vh) @ w_o[cols, :]  # block row of W_o for head h
    return total


def mha_einsum_weights(x, w_q, w_k, w_v, w_o, num_heads):
    D = x.shape[-1]
    H = num_heads
    if D % H:
        raise ValueError(f"d_model={D} is not divisible by num_heads={H}")
    dh = D // H
    Wq, Wk, Wv = (np.asarray(w, np.float64).reshape(D, H, dh) for w in (w_q, w_k, w_v))
    q = np.einsum("bnd,dhe->bhne", x, Wq)
    k = np.einsum("bnd,dhe->bhne", x, Wk)
    v = np.einsum("bnd,dhe->bhne", x, Wv)
    s = np.einsum("bhqe,bhke->bhqk", q, k) / np.sqrt(dh)
    p = np.exp(s - s.max(-1, keepdims=True))
    p = p / p.sum(-1, keepdims=True)
    ctx = np.einsum("bhqk,bhke->bhqe", p, v)
    return np.einsum("bhne,hef->bnf", ctx, np.asarray(w_o, np.float64).reshape(H, dh, D))


ENTRIES = [
    Entry("split_heads", "wrong", "reshape_without_transpose",
          "reshapes (B, N, d_model) straight to (B, H, N, d_head) instead of reshaping to "
          "(B, N, H, d_head) and swapping axes 1 and 2, so tokens and heads get mixed",
          split_heads_no_transpose),
    Entry("split_heads", "wrong", "interleaved_features",
          "reshapes to (B, N, d_head, H), so head h gets every H-th feature (h, h+H, ...) instead "
          "of the contiguous block h*d_head:(h+1)*d_head", split_heads_interleaved),
    Entry("split_heads", "wrong", "divisibility_check_swapped",
          "the divisibility check is written num_heads % d_model, operands swapped, so it "
          "raises ValueError on valid head counts such as d_model=12, num_heads=3",
          split_heads_guard_swapped),
    Entry("split_heads", "wrong", "true_division_d_head",
          "computes d_head with / instead of //, a float, which reshape rejects (TypeError "
          "on every call)", split_heads_true_division),
    Entry("split_heads", "wrong", "rollaxis_to_front",
          "np.rollaxis(y, 2) moves the heads axis to position 0, not 1, giving "
          "(H, B, N, d_head)", split_heads_rollaxis),
    Entry("split_heads", "wrong", "seq_first_shape_unpack",
          "unpacks x.shape as (N, B, d_model) (sequence-first habit), so the reshape swaps the "
          "batch and sequence sizes", split_heads_seq_first_unpack),
    Entry("split_heads", "right", "stack_feature_slices", None, split_heads_stack_slices),
    Entry("split_heads", "right", "divmod_moveaxis", None, split_heads_moveaxis),

    Entry("merge_heads", "wrong", "reshape_without_transpose",
          "reshapes (B, H, N, d_head) straight to (B, N, H*d_head) without first moving the "
          "heads axis next to d_head, so tokens and heads get mixed", merge_heads_no_transpose),
    Entry("merge_heads", "wrong", "d_head_before_heads",
          "transposes to (B, N, d_head, H) before reshaping, so the features of the heads come "
          "out interleaved instead of head 0's block first", merge_heads_dhead_before_heads),
    Entry("merge_heads", "wrong", "shape_unpacked_as_BNHd",
          "unpacks x.shape as (B, N, H, d_head) although the input is (B, H, N, d_head), so the "
          "reshape uses H as the sequence length", merge_heads_unpack_order),
    Entry("merge_heads", "wrong", "concat_along_sequence",
          "concatenates the heads along axis 1 (the sequence axis of each head's (B, N, d_head) "
          "slice) instead of the feature axis", merge_heads_concat_seq_axis),
    Entry("merge_heads", "wrong", "forgot_reshape",
          "swaps the head and sequence axes but never reshapes, returning the 4-D "
          "(B, N, H, d_head) array", merge_heads_forgot_reshape),
    Entry("merge_heads", "wrong", "heads_summed",
          "sums the heads instead of concatenating them, so the result has d_head features, "
          "not H*d_head", merge_heads_summed),
    Entry("merge_heads", "right", "concatenate_last_axis", None, merge_heads_concat_last),
    Entry("merge_heads", "right", "preallocated_fill_loop", None, merge_heads_fill_loop),

    Entry("multi_head_attention", "wrong", "scale_sqrt_d_model",
          "scales the scores by 1/sqrt(d_model) instead of 1/sqrt(d_head)", mha_scale_dmodel),
    Entry("multi_head_attention", "wrong", "w_o_transposed",
          "applies the output projection as @ w_o.T (nn.Linear's layout) instead of @ w_o",
          mha_wo_transposed),
    Entry("multi_head_attention", "wrong", "head_loop_without_guard",
          "loops over heads with column slices of the weights and d_head = d_model // num_heads "
          "but never checks divisibility, so d_model=6 with 4 heads silently drops 2 features "
          "instead of raising ValueError", mha_head_loop_no_guard),
    Entry("multi_head_attention", "wrong", "softmax_over_queries",
          "normalises the attention weights over the query axis (-2) instead of the keys",
          mha_softmax_axis_queries),
    Entry("multi_head_attention", "wrong", "keys_projected_with_w_q",
          "copy-paste slip: the keys are projected with w_q instead of w_k",
          mha_key_from_wq),
    Entry("multi_head_attention", "wrong", "merge_without_transpose",
          "merges the heads' outputs with a plain reshape of (B, H, N, d_head) to "
          "(B, N, d_model), without moving the heads axis back next to d_head",
          mha_merge_without_transpose),
    Entry("multi_head_attention", "right", "per_head_blocks_of_w_o", None, mha_blockwise_output),
    Entry("multi_head_attention", "right", "einsum_reshaped_weights", None, mha_einsum_weights),
]
