"""Held-out catalogue, lesson 02 (multi-head): split_heads, merge_heads, multi_head_attention."""

import numpy as np

from entry import Entry


# ============================================================================ split_heads
def split_heads_no_transpose(x, num_heads):
    B, N, D = x.shape
    if D % num_heads != 0:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    return x.reshape(B, num_heads, N, D // num_heads)


def split_heads_dhead_first(x, num_heads):
    batch, seq, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    y = x.reshape(batch, seq, d_head, num_heads)
    return y.transpose(0, 3, 1, 2)


def split_heads_slices_no_guard(x, num_heads):
    d_head = x.shape[-1] // num_heads
    pieces = [x[:, :, h * d_head:(h + 1) * d_head] for h in range(num_heads)]
    return np.stack(pieces, axis=1)


def split_heads_assert(x, num_heads):
    b, n, d = x.shape
    assert d % num_heads == 0, f"d_model={d} is not divisible by num_heads={num_heads}"
    return x.reshape(b, n, num_heads, d // num_heads).transpose(0, 2, 1, 3)


def split_heads_seq_len_for_dhead(x, num_heads):
    b, n, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = n // num_heads
    return np.swapaxes(x.reshape(b, n, num_heads, d_head), 1, 2)


def split_heads_split_tokens(x, num_heads):
    d_model = x.shape[2]
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    chunks = np.split(x, num_heads, axis=1)
    return np.stack(chunks, axis=1)


def split_heads_stack_slices(x, num_heads):
    x = np.asarray(x)
    width = x.shape[-1]
    if width % num_heads:
        raise ValueError(f"d_model={width} is not divisible by num_heads={num_heads}")
    step = width // num_heads
    return np.stack([x[..., lo:lo + step] for lo in range(0, width, step)], axis=1)


def split_heads_element_loop(x, num_heads):
    x = np.asarray(x)
    B, N, D = x.shape
    if D % num_heads != 0:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads
    out = np.empty((B, num_heads, N, dh), dtype=x.dtype)
    for b in range(B):
        for t in range(N):
            for f in range(D):
                out[b, f // dh, t, f % dh] = x[b, t, f]
    return out


# ============================================================================ merge_heads
def merge_heads_no_transpose(x):
    B, H, N, d = x.shape
    return x.reshape(B, N, H * d)


def merge_heads_head_axis_last(x):
    b, h, n, dh = x.shape
    return x.transpose(0, 2, 3, 1).reshape(b, n, h * dh)


def merge_heads_concat_tokens(x):
    heads = [x[:, h] for h in range(x.shape[1])]
    return np.concatenate(heads, axis=1)


def merge_heads_unpack_order(x):
    B, N, H, d = x.shape
    return x.transpose(0, 2, 1, 3).reshape(B, N, H * d)


def merge_heads_drop_last(x):
    n_heads = x.shape[1]
    parts = []
    for h in range(n_heads - 1):
        parts.append(x[:, h, :, :])
    return np.concatenate(parts, axis=-1)


def merge_heads_swap_batch_heads(x):
    batch, heads, seq, dh = x.shape
    return np.swapaxes(x, 0, 1).reshape(batch, seq, heads * dh)


def merge_heads_concat_features(x):
    x = np.asarray(x)
    return np.concatenate([x[:, h] for h in range(x.shape[1])], axis=-1)


def merge_heads_einsum_fill(x):
    x = np.asarray(x)
    B, H, N, dh = x.shape
    out = np.zeros((B, N, H, dh), dtype=x.dtype)
    out[...] = np.einsum("bhnd->bnhd", x)
    return out.reshape(B, N, H * dh)


# ============================================================================ multi_head_attention
def mha_scale_d_model(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads

    def split(t):
        return t.reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)

    q, k, v = split(x @ w_q), split(x @ w_k), split(x @ w_v)
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(D)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    w = e / e.sum(axis=-1, keepdims=True)
    ctx = (w @ v).transpose(0, 2, 1, 3).reshape(B, N, D)
    return ctx @ w_o


def mha_no_output_projection(x, w_q, w_k, w_v, w_o, num_heads):
    b, n, d = x.shape
    if d % num_heads != 0:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    hd = d // num_heads
    q = (x @ w_q).reshape(b, n, num_heads, hd).swapaxes(1, 2)
    k = (x @ w_k).reshape(b, n, num_heads, hd).swapaxes(1, 2)
    v = (x @ w_v).reshape(b, n, num_heads, hd).swapaxes(1, 2)
    scores = q @ k.swapaxes(-1, -2) / np.sqrt(hd)
    scores -= scores.max(-1, keepdims=True)
    p = np.exp(scores)
    p /= p.sum(-1, keepdims=True)
    return (p @ v).swapaxes(1, 2).reshape(b, n, d)


def mha_keys_from_w_q(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    d_head = D // num_heads
    Q = (x @ w_q).reshape(B, N, num_heads, d_head).transpose(0, 2, 1, 3)
    K = (x @ w_q).reshape(B, N, num_heads, d_head).transpose(0, 2, 1, 3)
    V = (x @ w_v).reshape(B, N, num_heads, d_head).transpose(0, 2, 1, 3)
    S = Q @ K.transpose(0, 1, 3, 2) / np.sqrt(d_head)
    A = np.exp(S - S.max(axis=-1, keepdims=True))
    A /= A.sum(axis=-1, keepdims=True)
    return (A @ V).transpose(0, 2, 1, 3).reshape(B, N, D) @ w_o


def mha_linear_layout(x, w_q, w_k, w_v, w_o, num_heads):
    bsz, seq, dm = x.shape
    if dm % num_heads:
        raise ValueError(f"d_model={dm} is not divisible by num_heads={num_heads}")
    dh = dm // num_heads
    heads = lambda t: t.reshape(bsz, seq, num_heads, dh).transpose(0, 2, 1, 3)  # noqa: E731
    q = heads(x @ w_q.T)
    k = heads(x @ w_k.T)
    v = heads(x @ w_v.T)
    logits = q @ np.swapaxes(k, -1, -2) / np.sqrt(dh)
    att = np.exp(logits - np.max(logits, axis=-1, keepdims=True))
    att = att / np.sum(att, axis=-1, keepdims=True)
    merged = (att @ v).transpose(0, 2, 1, 3).reshape(bsz, seq, dm)
    return merged @ w_o.T


def mha_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads
    q = (x @ w_q).reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)
    k = (x @ w_k).reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)
    v = (x @ w_v).reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)
    sc = q @ np.swapaxes(k, -1, -2) / np.sqrt(dh)
    pr = np.exp(sc - sc.max(-1, keepdims=True))
    pr /= pr.sum(-1, keepdims=True)
    heads = pr @ v  # (B, H, N, dh)
    return heads.reshape(B, N, D) @ w_o


def mha_wo_columns(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, D = x.shape
    if D % num_heads != 0:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads
    out = np.zeros((B, N, D), dtype=x.dtype)
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        q = x @ w_q[:, cols]
        k = x @ w_k[:, cols]
        v = x @ w_v[:, cols]
        s = q @ np.swapaxes(k, 1, 2) / np.sqrt(dh)
        p = np.exp(s - s.max(axis=2, keepdims=True))
        p = p / p.sum(axis=2, keepdims=True)
        out += (p @ v) @ w_o[:, cols]
    return out


def mha_einsum_heads(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x)
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads
    wq = w_q.reshape(D, num_heads, dh)
    wk = w_k.reshape(D, num_heads, dh)
    wv = w_v.reshape(D, num_heads, dh)
    wo = w_o.reshape(num_heads, dh, D)
    q = np.einsum("bnd,dhe->bhne", x, wq)
    k = np.einsum("bnd,dhe->bhne", x, wk)
    v = np.einsum("bnd,dhe->bhne", x, wv)
    s = np.einsum("bhqe,bhke->bhqk", q, k) / np.sqrt(dh)
    p = np.exp(s - s.max(-1, keepdims=True))
    p = p / p.sum(-1, keepdims=True)
    ctx = np.einsum("bhqk,bhke->bhqe", p, v)
    return np.einsum("bhqe,hef->bqf", ctx, wo)


def mha_head_loop_concat(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x)
    d_model = x.shape[-1]
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    size = d_model // num_heads
    outs = []
    for h in range(num_heads):
        sl = slice(h * size, (h + 1) * size)
        qh, kh, vh = x @ w_q[:, sl], x @ w_k[:, sl], x @ w_v[:, sl]
        logits = (qh @ kh.transpose(0, 2, 1)) * (size ** -0.5)
        logits = logits - logits.max(axis=2, keepdims=True)
        wts = np.exp(logits)
        wts = wts / wts.sum(axis=2, keepdims=True)
        outs.append(wts @ vh)
    return np.concatenate(outs, axis=2) @ w_o


ENTRIES = [
    Entry("split_heads", "wrong", "reshape_without_transpose",
          "reshapes straight to (B, H, N, d_head) without the transpose, so each 'head' holds "
          "a mix of tokens and features", split_heads_no_transpose),
    Entry("split_heads", "wrong", "d_head_before_heads",
          "reshapes to (B, N, d_head, H), so head h gets every H-th feature (strided) instead "
          "of the block h*d_head:(h+1)*d_head", split_heads_dhead_first),
    Entry("split_heads", "wrong", "no_divisibility_check",
          "has no divisibility check: with d_model % num_heads != 0 the slicing loop silently "
          "drops the leftover features instead of raising ValueError",
          split_heads_slices_no_guard),
    Entry("split_heads", "wrong", "assert_instead_of_valueerror",
          "guards divisibility with assert, which raises AssertionError, not the ValueError "
          "the contract asks for", split_heads_assert),
    Entry("split_heads", "wrong", "d_head_from_seq_len",
          "computes d_head from the sequence length N instead of d_model, so the reshape fails "
          "or cuts the features wrongly", split_heads_seq_len_for_dhead),
    Entry("split_heads", "wrong", "splits_token_axis",
          "splits along the token axis (axis=1) instead of the feature axis, so heads get "
          "groups of tokens (or np.split raises when N is not a multiple of H)",
          split_heads_split_tokens),
    Entry("split_heads", "right", "stack_of_slices", None, split_heads_stack_slices),
    Entry("split_heads", "right", "element_loop", None, split_heads_element_loop),

    Entry("merge_heads", "wrong", "reshape_without_transpose",
          "reshapes (B, H, N, d_head) straight to (B, N, H*d_head) without moving the head "
          "axis back, mixing tokens and heads", merge_heads_no_transpose),
    Entry("merge_heads", "wrong", "head_axis_last",
          "moves the head axis last before flattening, so the features come out interleaved "
          "(d_head-major) instead of head 0's block first", merge_heads_head_axis_last),
    Entry("merge_heads", "wrong", "concatenates_tokens",
          "concatenates the heads along the token axis (axis=1) instead of the feature axis, "
          "giving (B, H*N, d_head)", merge_heads_concat_tokens),
    Entry("merge_heads", "wrong", "shape_unpacked_in_wrong_order",
          "unpacks x.shape as (B, N, H, d_head) although x is (B, H, N, d_head), so the final "
          "reshape uses H as the token count", merge_heads_unpack_order),
    Entry("merge_heads", "wrong", "drops_last_head",
          "loops over range(H - 1), so the last head is left out of the concatenation",
          merge_heads_drop_last),
    Entry("merge_heads", "wrong", "swaps_batch_and_heads",
          "swaps the batch and head axes (0, 1) instead of the head and token axes (1, 2), "
          "so values are mixed across the batch", merge_heads_swap_batch_heads),
    Entry("merge_heads", "right", "concat_features", None, merge_heads_concat_features),
    Entry("merge_heads", "right", "einsum_into_buffer", None, merge_heads_einsum_fill),

    Entry("multi_head_attention", "wrong", "scale_by_d_model",
          "scales the scores by 1/sqrt(d_model) instead of 1/sqrt(d_head)", mha_scale_d_model),
    Entry("multi_head_attention", "wrong", "no_output_projection",
          "returns the merged heads without the final @ w_o output projection",
          mha_no_output_projection),
    Entry("multi_head_attention", "wrong", "keys_from_w_q",
          "projects the keys with w_q (copy-paste) instead of w_k", mha_keys_from_w_q),
    Entry("multi_head_attention", "wrong", "nn_linear_layout",
          "applies the weights as x @ W.T (nn.Linear's (out, in) layout) although the course "
          "applies them as x @ W", mha_linear_layout),
    Entry("multi_head_attention", "wrong", "merge_without_transpose",
          "merges the heads by reshaping (B, H, N, d_head) straight to (B, N, d_model) "
          "without moving the head axis back", mha_merge_without_transpose),
    Entry("multi_head_attention", "wrong", "w_o_sliced_by_columns",
          "slices head h's part of w_o by columns instead of rows, so each head's output is "
          "multiplied by the wrong block (a shape error when H > 1)", mha_wo_columns),
    Entry("multi_head_attention", "right", "einsum_head_weights", None, mha_einsum_heads),
    Entry("multi_head_attention", "right", "per_head_loop_concat", None, mha_head_loop_concat),
]
