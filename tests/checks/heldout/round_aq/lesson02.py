"""Held-out learners' answers, lesson 02 (split_heads, merge_heads, multi_head_attention)."""

import math

import numpy as np

from entry import Entry


# ============================================================================ split_heads
def split_heads_plain_reshape(x, num_heads):
    B, N, D = x.shape
    if D % num_heads != 0:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    return x.reshape(B, num_heads, N, D // num_heads)


def split_heads_dhead_first(x, num_heads):
    batch, seq, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    return x.reshape(batch, seq, d_head, num_heads).transpose(0, 3, 1, 2)


def split_heads_heads_in_front(x, num_heads):
    b, n, d = x.shape
    if d % num_heads:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    return x.reshape(b, n, num_heads, d // num_heads).transpose(2, 0, 1, 3)


def split_heads_infer_heads(x, num_heads):
    B, N, d_model = x.shape
    d_head = d_model // num_heads
    return x.reshape(B, N, -1, d_head).transpose(0, 2, 1, 3)


def split_heads_true_division(x, num_heads):
    B, N, d_model = x.shape
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model / num_heads
    return np.transpose(x.reshape(B, N, num_heads, d_head), (0, 2, 1, 3))


def split_heads_seq_first(x, num_heads):
    seq_len, batch, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    heads = x.reshape(batch, seq_len, num_heads, d_model // num_heads)
    return heads.transpose(0, 2, 1, 3)


def split_heads_slices_loop(x, num_heads):
    x = np.asarray(x)
    d_model = x.shape[-1]
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    width = d_model // num_heads
    pieces = []
    for h in range(num_heads):
        pieces.append(x[:, :, h * width:(h + 1) * width])
    return np.stack(pieces, axis=1)


def split_heads_np_split(x, num_heads):
    x = np.asarray(x)
    if x.shape[2] % num_heads != 0:
        raise ValueError(f"d_model={x.shape[2]} is not divisible by num_heads={num_heads}")
    chunks = np.split(x, num_heads, axis=2)  # H arrays (B, N, d_head)
    return np.moveaxis(np.array(chunks), 0, 1)


# ============================================================================ merge_heads
def merge_heads_plain_reshape(x):
    B, H, N, d = x.shape
    return x.reshape(B, N, H * d)


def merge_heads_interleaved(x):
    b, h, n, d = x.shape
    return x.transpose(0, 2, 3, 1).reshape(b, n, h * d)


def merge_heads_concat_tokens(x):
    heads = [x[:, i] for i in range(x.shape[1])]
    return np.concatenate(heads, axis=1)


def merge_heads_unpack_order(x):
    batch, seq_len, num_heads, d_head = x.shape
    return x.transpose(0, 2, 1, 3).reshape(batch, seq_len, num_heads * d_head)


def merge_heads_sum(x):
    return x.sum(axis=1)


def merge_heads_np_transpose(x):
    B, H, N, d = x.shape
    return np.transpose(x).reshape(B, N, H * d)


def merge_heads_fill_loop(x):
    B, H, N, d = x.shape
    out = np.empty((B, N, H * d), dtype=x.dtype)
    for h in range(H):
        out[:, :, h * d:(h + 1) * d] = x[:, h, :, :]
    return out


def merge_heads_concat_last(x):
    return np.concatenate(list(np.moveaxis(x, 1, 0)), axis=-1)


# ============================================================================ multi_head_attention
def mha_scale_dmodel(x, w_q, w_k, w_v, w_o, num_heads):
    def softmax_keys(s):
        s = s - s.max(axis=-1, keepdims=True)
        e = np.exp(s)
        return e / e.sum(axis=-1, keepdims=True)

    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads

    def split(t):
        return t.reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)

    q, k, v = split(x @ w_q), split(x @ w_k), split(x @ w_v)
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(D)
    ctx = softmax_keys(s) @ v
    return ctx.transpose(0, 2, 1, 3).reshape(B, N, D) @ w_o


def mha_linear_layout(x, w_q, w_k, w_v, w_o, num_heads):
    b, n, d = x.shape
    if d % num_heads != 0:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    hd = d // num_heads
    q = (x @ w_q.T).reshape(b, n, num_heads, hd).transpose(0, 2, 1, 3)
    k = (x @ w_k.T).reshape(b, n, num_heads, hd).transpose(0, 2, 1, 3)
    v = (x @ w_v.T).reshape(b, n, num_heads, hd).transpose(0, 2, 1, 3)
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(hd)
    scores = np.exp(scores - scores.max(-1, keepdims=True))
    weights = scores / scores.sum(-1, keepdims=True)
    merged = (weights @ v).transpose(0, 2, 1, 3).reshape(b, n, d)
    return merged @ w_o.T


def mha_merge_no_transpose(x, w_q, w_k, w_v, w_o, num_heads):
    def norm(z):
        z = np.exp(z - np.max(z, axis=-1, keepdims=True))
        return z / np.sum(z, axis=-1, keepdims=True)

    batch, seq, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    heads = lambda t: t.reshape(batch, seq, num_heads, d_head).transpose(0, 2, 1, 3)  # noqa: E731
    q, k, v = heads(x @ w_q), heads(x @ w_k), heads(x @ w_v)
    att = norm(q @ k.swapaxes(-1, -2) / np.sqrt(d_head))
    out = att @ v  # (B, H, N, d_head)
    return out.reshape(batch, seq, d_model) @ w_o


def mha_value_from_wk(x, w_q, w_k, w_v, w_o, num_heads):
    def row_softmax(a):
        a = a - a.max(-1, keepdims=True)
        return np.exp(a) / np.exp(a).sum(-1, keepdims=True)

    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    d = D // num_heads
    Q = (x @ w_q).reshape(B, N, num_heads, d).transpose(0, 2, 1, 3)
    K = (x @ w_k).reshape(B, N, num_heads, d).transpose(0, 2, 1, 3)
    V = (x @ w_k).reshape(B, N, num_heads, d).transpose(0, 2, 1, 3)
    A = row_softmax(Q @ K.transpose(0, 1, 3, 2) / math.sqrt(d))
    return (A @ V).transpose(0, 2, 1, 3).reshape(B, N, D) @ w_o


def mha_guard_swapped(x, w_q, w_k, w_v, w_o, num_heads):
    def sm(t):
        t = np.exp(t - t.max(axis=3, keepdims=True))
        return t / t.sum(axis=3, keepdims=True)

    B, N, d_model = x.shape
    if num_heads % d_model:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    q = (x @ w_q).reshape(B, N, num_heads, d_head).swapaxes(1, 2)
    k = (x @ w_k).reshape(B, N, num_heads, d_head).swapaxes(1, 2)
    v = (x @ w_v).reshape(B, N, num_heads, d_head).swapaxes(1, 2)
    w = sm(q @ k.swapaxes(2, 3) / np.sqrt(d_head))
    return (w @ v).swapaxes(1, 2).reshape(B, N, d_model) @ w_o


def mha_scale_after_softmax(x, w_q, w_k, w_v, w_o, num_heads):
    def softmax_keys(s):
        s = s - s.max(axis=-1, keepdims=True)
        e = np.exp(s)
        return e / e.sum(axis=-1, keepdims=True)

    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads
    split = lambda t: t.reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)  # noqa: E731
    q, k, v = split(x @ w_q), split(x @ w_k), split(x @ w_v)
    weights = softmax_keys(q @ k.transpose(0, 1, 3, 2)) / np.sqrt(dh)
    return (weights @ v).transpose(0, 2, 1, 3).reshape(B, N, D) @ w_o


def mha_per_head_loop(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x)
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads
    out = np.zeros((B, N, D), dtype=np.float64)
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        qh = x @ w_q[:, cols]
        kh = x @ w_k[:, cols]
        vh = x @ w_v[:, cols]
        for b in range(B):
            s = qh[b] @ kh[b].T / math.sqrt(dh)
            s = np.exp(s - s.max(axis=1, keepdims=True))
            s = s / s.sum(axis=1, keepdims=True)
            out[b] += (s @ vh[b]) @ w_o[cols, :]  # concat @ w_o == sum of row blocks
    return out.astype(x.dtype)


def mha_einsum_weights(x, w_q, w_k, w_v, w_o, num_heads):
    D = x.shape[-1]
    if D % num_heads != 0:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads
    x64 = np.asarray(x, dtype=np.float64)
    wq, wk, wv = (np.asarray(w, dtype=np.float64).reshape(D, num_heads, dh)
                  for w in (w_q, w_k, w_v))
    wo = np.asarray(w_o, dtype=np.float64).reshape(num_heads, dh, D)
    q = np.einsum("bnD,Dhe->bhne", x64, wq)
    k = np.einsum("bnD,Dhe->bhne", x64, wk)
    v = np.einsum("bnD,Dhe->bhne", x64, wv)
    s = np.einsum("bhie,bhje->bhij", q, k) / math.sqrt(dh)
    s -= s.max(axis=-1, keepdims=True)
    p = np.exp(s)
    p /= p.sum(axis=-1, keepdims=True)
    ctx = np.einsum("bhij,bhje->bhie", p, v)
    return np.einsum("bhie,heD->biD", ctx, wo).astype(x.dtype)


ENTRIES = [
    Entry("split_heads", "wrong", "reshape-without-transpose",
          "it reshapes straight to (B, H, N, d_head) without the transpose, so each head "
          "gets a block of consecutive values of the flattened (N, d_model) array (mixing "
          "tokens) instead of features h*d_head:(h+1)*d_head of every token",
          split_heads_plain_reshape),
    Entry("split_heads", "wrong", "d-head-before-heads",
          "it factors d_model as (d_head, H) instead of (H, d_head), so head h gets the "
          "strided features h, h+H, h+2H, ... instead of the contiguous block "
          "h*d_head:(h+1)*d_head", split_heads_dhead_first),
    Entry("split_heads", "wrong", "heads-axis-first",
          "the transpose (2, 0, 1, 3) puts the head axis before the batch axis, returning "
          "(H, B, N, d_head) instead of (B, H, N, d_head)", split_heads_heads_in_front),
    Entry("split_heads", "wrong", "infers-heads-no-guard",
          "it reshapes with -1 for the head axis after d_head = d_model // num_heads and has "
          "no divisibility check, so when num_heads does not divide d_model it silently "
          "returns d_model // d_head heads instead of raising ValueError",
          split_heads_infer_heads),
    Entry("split_heads", "wrong", "float-d-head",
          "d_head = d_model / num_heads is a float, and reshape refuses a float size, so "
          "every call raises TypeError", split_heads_true_division),
    Entry("split_heads", "wrong", "sequence-first-unpacking",
          "it unpacks x.shape as (N, B, d_model), the sequence-first layout, so batch and "
          "sequence are swapped: tokens of different sequences get mixed and the result "
          "has shape (N, H, B, d_head)", split_heads_seq_first),
    Entry("split_heads", "right", "slices-and-stack", None, split_heads_slices_loop),
    Entry("split_heads", "right", "np-split-moveaxis", None, split_heads_np_split),

    Entry("merge_heads", "wrong", "reshape-without-transpose",
          "it reshapes (B, H, N, d_head) straight to (B, N, H*d_head) without first moving "
          "the head axis after the token axis, so tokens and heads get mixed",
          merge_heads_plain_reshape),
    Entry("merge_heads", "wrong", "features-interleaved",
          "the transpose (0, 2, 3, 1) puts d_head before H, so the heads' features are "
          "interleaved instead of placed side by side, head 0's block first",
          merge_heads_interleaved),
    Entry("merge_heads", "wrong", "concat-along-tokens",
          "it concatenates the heads along axis 1 (the token axis of each (B, N, d_head) "
          "head) instead of the last axis, giving (B, H*N, d_head)",
          merge_heads_concat_tokens),
    Entry("merge_heads", "wrong", "shape-unpacked-as-B-N-H-d",
          "it unpacks x.shape as (B, N, H, d_head) although the input is (B, H, N, d_head), "
          "so the final reshape uses the wrong sizes and returns (B, H, N*d_head)",
          merge_heads_unpack_order),
    Entry("merge_heads", "wrong", "sums-heads",
          "it adds the heads together (sum over axis 1) instead of concatenating them, "
          "returning (B, N, d_head)", merge_heads_sum),
    Entry("merge_heads", "wrong", "np-transpose-reverses-all",
          "np.transpose(x) without axes reverses all four axes, not just H and N, so the "
          "reshape scrambles the values", merge_heads_np_transpose),
    Entry("merge_heads", "right", "fill-blocks-loop", None, merge_heads_fill_loop),
    Entry("merge_heads", "right", "concat-last-axis", None, merge_heads_concat_last),

    Entry("multi_head_attention", "wrong", "scale-by-d-model",
          "the scores are divided by sqrt(d_model) instead of sqrt(d_head)",
          mha_scale_dmodel),
    Entry("multi_head_attention", "wrong", "nn-linear-layout",
          "it applies the weights as x @ W.T (nn.Linear's (out, in) layout) although the "
          "course's weights are (d_in, d_out) and applied as x @ W", mha_linear_layout),
    Entry("multi_head_attention", "wrong", "merge-without-transpose",
          "the heads' outputs (B, H, N, d_head) are reshaped to (B, N, d_model) without "
          "moving the head axis back after the token axis, so tokens and heads get mixed "
          "before w_o", mha_merge_no_transpose),
    Entry("multi_head_attention", "wrong", "values-from-w_k",
          "the values are projected with w_k instead of w_v (copy-paste of the key line)",
          mha_value_from_wk),
    Entry("multi_head_attention", "wrong", "guard-operands-swapped",
          "the divisibility check tests num_heads % d_model instead of d_model % num_heads, "
          "so it raises ValueError on valid inputs (e.g. d_model=8, num_heads=2)",
          mha_guard_swapped),
    Entry("multi_head_attention", "wrong", "scale-after-softmax",
          "it divides the softmax weights by sqrt(d_head) instead of the scores before the "
          "softmax, so the weights no longer sum to 1", mha_scale_after_softmax),
    Entry("multi_head_attention", "right", "per-head-column-blocks", None, mha_per_head_loop),
    Entry("multi_head_attention", "right", "einsum-reshaped-weights", None,
          mha_einsum_weights),
]
