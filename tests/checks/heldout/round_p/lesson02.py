"""Held-out catalogue, lesson 02 (numpy): split_heads, merge_heads, multi_head_attention."""

import math

import numpy as np
import torch
import torch.nn.functional as F

from entry import Entry

# ============================================================================ split_heads


def split_heads_no_transpose(x, num_heads):
    B, N, D = x.shape
    if D % num_heads != 0:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    return x.reshape(B, num_heads, N, D // num_heads)


def split_heads_dhead_then_heads(x, num_heads):
    batch, seq, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    return x.reshape(batch, seq, d_head, num_heads).transpose(0, 3, 1, 2)


def split_heads_guard_reversed(x, num_heads):
    b, n, d_model = x.shape
    if num_heads % d_model != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    return x.reshape(b, n, num_heads, d_model // num_heads).transpose(0, 2, 1, 3)


def split_heads_stack_default_axis(x, num_heads):
    d_model = x.shape[-1]
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    chunks = np.split(x, num_heads, axis=-1)  # H arrays of (B, N, d_head)
    return np.stack(chunks)


def split_heads_assert_guard(x, num_heads):
    B, N, d_model = x.shape
    assert d_model % num_heads == 0, f"d_model={d_model} not divisible by {num_heads}"
    d_head = d_model // num_heads
    return np.swapaxes(x.reshape(B, N, num_heads, d_head), 1, 2)


def split_heads_true_division(x, num_heads):
    B, N, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model / num_heads
    return x.reshape(B, N, num_heads, d_head).transpose(0, 2, 1, 3)


def split_heads_slices(x, num_heads):
    x = np.asarray(x)
    d_model = x.shape[2]
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    w = d_model // num_heads
    return np.stack([x[:, :, h * w:(h + 1) * w] for h in range(num_heads)], axis=1)


def split_heads_fill_loop(x, num_heads):
    x = np.asarray(x)
    b, n, d_model = x.shape
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    out = np.empty((b, num_heads, n, d_head), dtype=x.dtype)
    for f in range(d_model):
        out[:, f // d_head, :, f % d_head] = x[:, :, f]
    return out


# ============================================================================ merge_heads


def merge_heads_no_transpose(x):
    B, H, N, dh = x.shape
    return x.reshape(B, N, H * dh)


def merge_heads_feature_major(x):
    B, H, N, dh = x.shape
    return x.transpose(0, 2, 3, 1).reshape(B, N, H * dh)


def merge_heads_concat_axis1(x):
    heads = [x[:, h] for h in range(x.shape[1])]  # each (B, N, d_head)
    return np.concatenate(heads, axis=1)


def merge_heads_unpack_order(x):
    b, n, h, d = x.shape
    return x.transpose(0, 2, 1, 3).reshape(b, n, h * d)


def merge_heads_sum(x):
    return x.sum(axis=1)


def merge_heads_rollaxis(x):
    B, H, N, dh = x.shape
    return np.rollaxis(x, 1).reshape(B, N, H * dh)


def merge_heads_concat_last(x):
    return np.concatenate([x[:, h, :, :] for h in range(x.shape[1])], axis=-1)


def merge_heads_fill_loop(x):
    B, H, N, dh = x.shape
    out = np.zeros((B, N, H * dh), dtype=np.float64)
    for h in range(H):
        for j in range(dh):
            out[:, :, h * dh + j] = x[:, h, :, j]
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


def _softmax(s):
    s = s - s.max(axis=-1, keepdims=True)
    e = np.exp(s)
    return e / e.sum(axis=-1, keepdims=True)


def mha_scale_d_model(x, w_q, w_k, w_v, w_o, num_heads):
    d_model = x.shape[-1]
    q, k, v = (_split(x @ w, num_heads) for w in (w_q, w_k, w_v))
    scores = q @ k.swapaxes(-1, -2) / np.sqrt(d_model)
    return _merge(_softmax(scores) @ v) @ w_o


def mha_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, D = x.shape
    q = _split(x @ w_q, num_heads)
    k = _split(x @ w_k, num_heads)
    v = _split(x @ w_v, num_heads)
    s = q @ k.swapaxes(-1, -2) / math.sqrt(D // num_heads)
    ctx = _softmax(s) @ v  # (B, H, N, d_head)
    return ctx.reshape(B, N, D) @ w_o


def mha_w_o_transposed(x, w_q, w_k, w_v, w_o, num_heads):
    d_head = x.shape[-1] // num_heads
    q, k, v = _split(x @ w_q, num_heads), _split(x @ w_k, num_heads), _split(x @ w_v, num_heads)
    w = _softmax(np.einsum("bhid,bhjd->bhij", q, k) / np.sqrt(d_head))
    ctx = np.einsum("bhij,bhjd->bhid", w, v)
    return _merge(ctx) @ w_o.T


def mha_keys_from_w_q(x, w_q, w_k, w_v, w_o, num_heads):
    Q = _split(x @ w_q, num_heads)
    K = _split(x @ w_q, num_heads)
    V = _split(x @ w_v, num_heads)
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    return _merge(_softmax(scores) @ V) @ w_o


def mha_max_without_keepdims(x, w_q, w_k, w_v, w_o, num_heads):
    q = _split(x @ w_q, num_heads)
    k = _split(x @ w_k, num_heads)
    v = _split(x @ w_v, num_heads)
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    e = np.exp(s - s.max(axis=-1))
    p = e / e.sum(axis=-1, keepdims=True)
    return _merge(p @ v) @ w_o


def mha_returns_weights_too(x, w_q, w_k, w_v, w_o, num_heads):
    q = _split(x @ w_q, num_heads)
    k = _split(x @ w_k, num_heads)
    v = _split(x @ w_v, num_heads)
    weights = _softmax(q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1]))
    return _merge(weights @ v) @ w_o, weights


def mha_per_head_blocks(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x, dtype=np.float64)
    d_model = x.shape[-1]
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    dh = d_model // num_heads
    out = np.zeros(x.shape)
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        qh = x @ w_q[:, cols]
        kh = x @ w_k[:, cols]
        vh = x @ w_v[:, cols]
        s = np.einsum("bid,bjd->bij", qh, kh) / math.sqrt(dh)
        s -= s.max(axis=-1, keepdims=True)
        p = np.exp(s)
        p /= p.sum(axis=-1, keepdims=True)
        out += (p @ vh) @ w_o[cols, :]  # head h's block of rows of w_o
    return out


def mha_torch_sdpa(x, w_q, w_k, w_v, w_o, num_heads):
    d_model = np.shape(x)[-1]
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    xt = torch.from_numpy(np.asarray(x, dtype=np.float64))
    wq, wk, wv, wo = (torch.from_numpy(np.asarray(w, dtype=np.float64))
                      for w in (w_q, w_k, w_v, w_o))
    b, n, _ = xt.shape

    def heads(t):
        return t.view(b, n, num_heads, -1).transpose(1, 2)

    ctx = F.scaled_dot_product_attention(heads(xt @ wq), heads(xt @ wk), heads(xt @ wv))
    return (ctx.transpose(1, 2).reshape(b, n, d_model) @ wo).numpy()


ENTRIES = [
    Entry("split_heads", "wrong", "reshape_no_transpose",
          "reshapes (B, N, d_model) straight to (B, H, N, d_head) without the transpose, so each "
          "'head' holds a block of consecutive values mixing tokens instead of one feature slice",
          split_heads_no_transpose),
    Entry("split_heads", "wrong", "dhead_then_heads",
          "reshapes to (B, N, d_head, H) instead of (B, N, H, d_head), so head h gets the strided "
          "features h, h+H, h+2H, ... instead of the block h*d_head:(h+1)*d_head",
          split_heads_dhead_then_heads),
    Entry("split_heads", "wrong", "guard_reversed",
          "writes the divisibility guard as `num_heads % d_model`, the operands swapped, so it "
          "raises ValueError on valid inputs (and misses some invalid ones)",
          split_heads_guard_reversed),
    Entry("split_heads", "wrong", "stack_default_axis",
          "stacks the head slices with np.stack's default axis=0, giving (H, B, N, d_head) "
          "instead of (B, H, N, d_head)",
          split_heads_stack_default_axis),
    Entry("split_heads", "wrong", "assert_guard",
          "checks divisibility with `assert`, which raises AssertionError instead of the "
          "ValueError the contract asks for",
          split_heads_assert_guard),
    Entry("split_heads", "wrong", "true_division",
          "computes d_head with `/` instead of `//`, so d_head is a float and reshape raises a "
          "TypeError on every valid input",
          split_heads_true_division),
    Entry("split_heads", "right", "stack_slices_axis1", None, split_heads_slices),
    Entry("split_heads", "right", "feature_fill_loop", None, split_heads_fill_loop),

    Entry("merge_heads", "wrong", "reshape_no_transpose",
          "reshapes (B, H, N, d_head) straight to (B, N, H*d_head) without first moving the head "
          "axis next to d_head, which scrambles tokens and heads",
          merge_heads_no_transpose),
    Entry("merge_heads", "wrong", "feature_major",
          "transposes to (B, N, d_head, H) before the reshape, so features come out interleaved "
          "across heads instead of head 0's block first",
          merge_heads_feature_major),
    Entry("merge_heads", "wrong", "concat_axis1",
          "concatenates the heads along axis 1 (the token axis), giving (B, H*N, d_head) instead "
          "of (B, N, H*d_head)",
          merge_heads_concat_axis1),
    Entry("merge_heads", "wrong", "unpack_order",
          "unpacks x.shape as (B, N, H, d_head) although the input is (B, H, N, d_head), so the "
          "reshape uses H as the sequence length and N as the head count",
          merge_heads_unpack_order),
    Entry("merge_heads", "wrong", "sum_heads",
          "adds the heads together instead of concatenating them, returning (B, N, d_head)",
          merge_heads_sum),
    Entry("merge_heads", "wrong", "rollaxis_default",
          "uses np.rollaxis(x, 1), whose default start=0 moves the head axis to the front, "
          "(H, B, N, d_head), before the reshape",
          merge_heads_rollaxis),
    Entry("merge_heads", "right", "concat_last_axis", None, merge_heads_concat_last),
    Entry("merge_heads", "right", "fill_loop_float64", None, merge_heads_fill_loop),

    Entry("multi_head_attention", "wrong", "scale_d_model",
          "scales the scores by 1/sqrt(d_model) instead of 1/sqrt(d_head), the size of each "
          "head's dot product",
          mha_scale_d_model),
    Entry("multi_head_attention", "wrong", "merge_without_transpose",
          "merges the heads' outputs with a plain reshape of (B, H, N, d_head) to (B, N, d_model), "
          "without moving the head axis back next to d_head first",
          mha_merge_without_transpose),
    Entry("multi_head_attention", "wrong", "w_o_transposed",
          "applies the output projection as `@ w_o.T` (nn.Linear's layout) instead of `@ w_o`",
          mha_w_o_transposed),
    Entry("multi_head_attention", "wrong", "keys_from_w_q",
          "projects the keys with w_q (a copy-paste slip), so keys equal queries",
          mha_keys_from_w_q),
    Entry("multi_head_attention", "wrong", "max_without_keepdims",
          "subtracts the row maximum without keepdims=True: the (B, H, N) maxima line up with "
          "the wrong axes, so it raises a broadcasting error for most shapes, and where it does "
          "broadcast (one head) it subtracts row j's maximum from column j, changing the softmax",
          mha_max_without_keepdims),
    Entry("multi_head_attention", "wrong", "returns_weights_too",
          "returns the tuple (output, weights) as lesson 01's attention does, instead of the "
          "(B, N, d_model) output alone",
          mha_returns_weights_too),
    Entry("multi_head_attention", "right", "per_head_weight_blocks", None, mha_per_head_blocks),
    Entry("multi_head_attention", "right", "torch_sdpa_float64", None, mha_torch_sdpa),
]
