"""Held-out learners' answers, lesson 02 (split_heads, merge_heads, multi_head_attention)."""

import math

import numpy as np
import torch

from entry import Entry


# =============================================================================== split_heads
def split_heads_reshape_only(x, num_heads):
    B, N, D = x.shape
    if D % num_heads != 0:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    return x.reshape(B, num_heads, N, D // num_heads)


def split_heads_strided(x, num_heads):
    b, n, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    return x.reshape(b, n, d_head, num_heads).transpose(0, 3, 1, 2)


def split_heads_no_guard(x, num_heads):
    d_head = x.shape[-1] // num_heads
    heads = [x[:, :, h * d_head:(h + 1) * d_head] for h in range(num_heads)]
    return np.stack(heads, axis=1)


def split_heads_true_division(x, num_heads):
    batch, seq, width = x.shape
    if width % num_heads:
        raise ValueError(f"d_model={width} is not divisible by num_heads={num_heads}")
    d_head = width / num_heads
    return np.swapaxes(x.reshape(batch, seq, num_heads, d_head), 1, 2)


def split_heads_split_tokens(x, num_heads):
    if x.shape[-1] % num_heads:
        raise ValueError(f"d_model={x.shape[-1]} is not divisible by num_heads={num_heads}")
    chunks = np.split(x, num_heads, axis=1)
    return np.stack(chunks, axis=1)


def split_heads_assert(x, num_heads):
    B, N, d_model = x.shape
    assert d_model % num_heads == 0, f"d_model={d_model} not divisible by num_heads={num_heads}"
    d_head = d_model // num_heads
    out = x.reshape(B, N, num_heads, d_head)
    return out.transpose(0, 2, 1, 3)


def split_heads_stack_slices(x, num_heads):
    x = np.asarray(x)
    d_model = x.shape[2]
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    size = d_model // num_heads
    return np.stack([x[..., h * size:(h + 1) * size] for h in range(num_heads)], axis=1)


def split_heads_moveaxis(x, num_heads):
    B, N, d_model = np.shape(x)
    d_head, rest = divmod(d_model, num_heads)
    if rest:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    return np.moveaxis(np.reshape(x, (B, N, num_heads, d_head)), 2, 1).copy()


# =============================================================================== merge_heads
def merge_heads_reshape_only(x):
    B, H, N, d = x.shape
    return x.reshape(B, N, H * d)


def merge_heads_interleaved(x):
    B, H, N, d = x.shape
    return x.transpose(0, 2, 3, 1).reshape(B, N, H * d)


def merge_heads_concat_tokens(x):
    return np.concatenate([x[:, h] for h in range(x.shape[1])], axis=1)


def merge_heads_unpack_order(x):
    batch, seq, heads, dh = x.shape
    y = x.transpose(0, 2, 1, 3)
    return y.reshape(batch, seq, heads * dh)


def merge_heads_concat_iterates_batch(x):
    return np.concatenate(x, axis=-1)


def merge_heads_squeeze(x):
    B, H, N, d = x.shape
    return np.swapaxes(x, 1, 2).reshape(B, N, H * d).squeeze()


def merge_heads_concat_heads(x):
    return np.concatenate([x[:, h, :, :] for h in range(x.shape[1])], axis=-1)


def merge_heads_einsum(x):
    b, h, n, d = x.shape
    return np.einsum("bhnd->bnhd", x).reshape(b, n, h * d)


# =============================================================================== multi_head_attention
def mha_scale_d_model(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads

    def split(t):
        return t.reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)

    q, k, v = split(x @ w_q), split(x @ w_k), split(x @ w_v)
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(D)
    scores = scores - scores.max(axis=-1, keepdims=True)
    probs = np.exp(scores)
    probs /= probs.sum(axis=-1, keepdims=True)
    ctx = probs @ v
    return ctx.transpose(0, 2, 1, 3).reshape(B, N, D) @ w_o


def mha_merge_no_transpose(x, w_q, w_k, w_v, w_o, num_heads):
    b, n, d = x.shape
    if d % num_heads:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    hd = d // num_heads
    q = (x @ w_q).reshape(b, n, num_heads, hd).transpose(0, 2, 1, 3)
    k = (x @ w_k).reshape(b, n, num_heads, hd).transpose(0, 2, 1, 3)
    v = (x @ w_v).reshape(b, n, num_heads, hd).transpose(0, 2, 1, 3)
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(hd)
    s = s - s.max(axis=-1, keepdims=True)
    p = np.exp(s)
    p /= p.sum(axis=-1, keepdims=True)
    heads = p @ v
    return heads.reshape(b, n, d) @ w_o


def mha_key_uses_wq(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, D = x.shape
    if D % num_heads != 0:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    d_head = D // num_heads
    Q = x @ w_q
    K = x @ w_q
    V = x @ w_v
    Q, K, V = (np.swapaxes(t.reshape(B, N, num_heads, d_head), 1, 2) for t in (Q, K, V))
    logits = Q @ np.swapaxes(K, -1, -2) / np.sqrt(d_head)
    att = np.exp(logits - logits.max(axis=-1, keepdims=True))
    att = att / att.sum(axis=-1, keepdims=True)
    out = np.swapaxes(att @ V, 1, 2).reshape(B, N, D)
    return out @ w_o


def mha_attend_before_split(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    d_head = D // num_heads
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(d_head)
    e = np.exp(scores - np.max(scores, axis=-1, keepdims=True))
    ctx = (e / np.sum(e, axis=-1, keepdims=True)) @ v  # (B, N, D)
    heads = ctx.reshape(B, N, num_heads, d_head).transpose(0, 2, 1, 3)
    merged = heads.transpose(0, 2, 1, 3).reshape(B, N, D)
    return merged @ w_o


def mha_no_output_projection(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads
    q = (x @ w_q).reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)
    k = (x @ w_k).reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)
    v = (x @ w_v).reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)
    s = np.einsum("bhid,bhjd->bhij", q, k) / np.sqrt(dh)
    weights = np.exp(s - s.max(-1, keepdims=True))
    weights = weights / weights.sum(-1, keepdims=True)
    ctx = np.einsum("bhij,bhjd->bhid", weights, v)
    return ctx.transpose(0, 2, 1, 3).reshape(B, N, D)


def mha_linear_layout(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads

    def heads(t):
        return t.reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)

    q, k, v = heads(x @ w_q.T), heads(x @ w_k.T), heads(x @ w_v.T)
    sc = q @ k.transpose(0, 1, 3, 2) / np.sqrt(dh)
    w = np.exp(sc - sc.max(axis=3, keepdims=True))
    w /= w.sum(axis=3, keepdims=True)
    return (w @ v).transpose(0, 2, 1, 3).reshape(B, N, D) @ w_o.T


def mha_per_head_columns(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x, dtype=np.float64)
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads
    out = np.zeros((B, N, D))
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        qh, kh, vh = x @ w_q[:, cols], x @ w_k[:, cols], x @ w_v[:, cols]
        s = np.einsum("bid,bjd->bij", qh, kh) / math.sqrt(dh)
        s -= s.max(axis=-1, keepdims=True)
        p = np.exp(s)
        p /= p.sum(axis=-1, keepdims=True)
        out += (p @ vh) @ w_o[cols, :]  # concat then @ w_o == sum of row blocks
    return out


def mha_torch_sdpa(x, w_q, w_k, w_v, w_o, num_heads):
    xt = torch.as_tensor(np.asarray(x), dtype=torch.float64)
    B, N, D = xt.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    W = [torch.as_tensor(np.asarray(w), dtype=torch.float64) for w in (w_q, w_k, w_v, w_o)]
    q, k, v = ((xt @ w).view(B, N, num_heads, D // num_heads).transpose(1, 2) for w in W[:3])
    ctx = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    return (ctx.transpose(1, 2).reshape(B, N, D) @ W[3]).numpy()


ENTRIES = [
    Entry("split_heads", "wrong", "reshape_without_transpose",
          "reshapes straight to (B, H, N, d_head) without going through (B, N, H, d_head) and "
          "transposing, so each 'head' mixes features of different tokens",
          split_heads_reshape_only),
    Entry("split_heads", "wrong", "strided_heads",
          "reshapes to (B, N, d_head, H) instead of (B, N, H, d_head), so head h gets every "
          "H-th feature instead of the contiguous block h*d_head:(h+1)*d_head",
          split_heads_strided),
    Entry("split_heads", "wrong", "no_divisibility_guard",
          "slices the features without checking that num_heads divides d_model, so a bad "
          "num_heads silently drops the last features instead of raising ValueError",
          split_heads_no_guard),
    Entry("split_heads", "wrong", "float_head_size",
          "computes d_head with `/` (a float), and numpy's reshape refuses a float size, so "
          "every call raises TypeError", split_heads_true_division),
    Entry("split_heads", "wrong", "split_along_tokens",
          "np.split along axis 1 cuts the sequence (tokens) into H pieces instead of cutting "
          "the features, giving (B, H, N/H, d_model) (or raising when H does not divide N)",
          split_heads_split_tokens),
    Entry("split_heads", "wrong", "assert_not_valueerror",
          "guards divisibility with `assert`, which raises AssertionError instead of the "
          "ValueError the contract requires", split_heads_assert),
    Entry("split_heads", "right", "stack_slices", None, split_heads_stack_slices),
    Entry("split_heads", "right", "moveaxis_divmod", None, split_heads_moveaxis),
    Entry("merge_heads", "wrong", "reshape_without_transpose",
          "reshapes (B, H, N, d_head) straight to (B, N, H*d_head) without moving the head "
          "axis after the token axis, so tokens and heads get scrambled",
          merge_heads_reshape_only),
    Entry("merge_heads", "wrong", "interleaved_features",
          "transposes to (B, N, d_head, H) before reshaping, so the heads' features are "
          "interleaved instead of placed side by side (head 0's block first)",
          merge_heads_interleaved),
    Entry("merge_heads", "wrong", "concat_along_tokens",
          "concatenates the heads along axis 1 (tokens) instead of the feature axis, giving "
          "(B, H*N, d_head)", merge_heads_concat_tokens),
    Entry("merge_heads", "wrong", "shape_unpacked_in_wrong_order",
          "unpacks x.shape as (B, N, H, d) although x is (B, H, N, d), so the reshape uses "
          "H tokens of N*d features", merge_heads_unpack_order),
    Entry("merge_heads", "wrong", "concatenate_iterates_batch",
          "np.concatenate(x, axis=-1) iterates over the first axis (the batch), not the heads, "
          "so it glues the batch elements together and returns (H, N, B*d_head)",
          merge_heads_concat_iterates_batch),
    Entry("merge_heads", "wrong", "squeeze_drops_axes",
          "adds a .squeeze() at the end, which drops the batch or token axis when it has "
          "length 1", merge_heads_squeeze),
    Entry("merge_heads", "right", "concat_head_blocks", None, merge_heads_concat_heads),
    Entry("merge_heads", "right", "einsum_permute", None, merge_heads_einsum),
    Entry("multi_head_attention", "wrong", "scale_sqrt_d_model",
          "scales every head's scores by 1/sqrt(d_model) instead of 1/sqrt(d_head)",
          mha_scale_d_model),
    Entry("multi_head_attention", "wrong", "merge_without_transpose",
          "merges the heads by reshaping (B, H, N, d_head) straight to (B, N, d_model) "
          "without transposing back, scrambling tokens and heads", mha_merge_no_transpose),
    Entry("multi_head_attention", "wrong", "keys_projected_with_w_q",
          "projects the keys with w_q instead of w_k (copy-paste), so every head compares "
          "queries with queries", mha_key_uses_wq),
    Entry("multi_head_attention", "wrong", "attention_before_split",
          "computes one attention over the full d_model before splitting into heads, so it is "
          "single-head attention (scaled by 1/sqrt(d_head)), not H separate heads",
          mha_attend_before_split),
    Entry("multi_head_attention", "wrong", "forgets_w_o",
          "returns the merged heads without the output projection w_o",
          mha_no_output_projection),
    Entry("multi_head_attention", "wrong", "nn_linear_layout",
          "applies the weights as x @ W.T (nn.Linear's (out, in) layout) instead of the "
          "course's x @ W", mha_linear_layout),
    Entry("multi_head_attention", "right", "per_head_weight_columns", None,
          mha_per_head_columns),
    Entry("multi_head_attention", "right", "torch_sdpa_float64", None, mha_torch_sdpa),
]
