"""Held-out learners' answers, lesson 02 (split_heads, merge_heads, multi_head_attention)."""

import math

import numpy as np
import torch
import torch.nn.functional as F

from entry import Entry


# ----------------------------------------------------------------------------- split_heads, wrong
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
    y = x.reshape(b, n, d_head, num_heads)
    return y.transpose(0, 3, 1, 2)


def split_heads_dot_T(x, num_heads):
    batch, seq, width = x.shape
    if width % num_heads != 0:
        raise ValueError(f"d_model={width} is not divisible by num_heads={num_heads}")
    return x.reshape(batch, seq, num_heads, width // num_heads).T


def split_heads_minus_one(x, num_heads):
    B, N, D = x.shape
    d_head = D // num_heads
    y = x.reshape(B, N, -1, d_head)  # -1 lets numpy work out the number of heads
    return y.transpose(0, 2, 1, 3)


def split_heads_modulo_swapped(x, num_heads):
    B, N, D = x.shape
    if num_heads % D != 0:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    return np.swapaxes(x.reshape(B, N, num_heads, D // num_heads), 1, 2)


def split_heads_stack_axis2(x, num_heads):
    if x.shape[-1] % num_heads:
        raise ValueError(f"d_model={x.shape[-1]} is not divisible by num_heads={num_heads}")
    pieces = np.split(x, num_heads, axis=-1)  # num_heads arrays (B, N, d_head)
    return np.stack(pieces, axis=2)


# ----------------------------------------------------------------------------- split_heads, right
def split_heads_loop(x, num_heads):
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads
    out = np.empty((B, num_heads, N, dh), dtype=x.dtype)
    for h in range(num_heads):
        out[:, h, :, :] = x[:, :, h * dh:(h + 1) * dh]
    return out


def split_heads_split_stack(x, num_heads):
    d_model = x.shape[2]
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    return np.stack(np.split(x, num_heads, axis=2), axis=1)


# ----------------------------------------------------------------------------- merge_heads, wrong
def merge_heads_reshape_only(x):
    B, H, N, dh = x.shape
    return x.reshape(B, N, H * dh)


def merge_heads_feature_major(x):
    b, h, n, d = x.shape
    return x.transpose(0, 2, 3, 1).reshape(b, n, h * d)


def merge_heads_concat_seq(x):
    heads = [x[:, i] for i in range(x.shape[1])]  # each (B, N, d_head)
    return np.concatenate(heads, axis=1)


def merge_heads_loop_off_by_one(x):
    B, H, N, dh = x.shape
    out = np.zeros((B, N, H * dh), dtype=x.dtype)
    for h in range(H - 1):
        out[:, :, h * dh:(h + 1) * dh] = x[:, h]
    return out


def merge_heads_unpack_order(x):
    B, N, H, dh = x.shape
    return x.transpose(0, 2, 1, 3).reshape(B, N, H * dh)


def merge_heads_int_buffer(x):
    batch, heads, seq, d_head = x.shape
    merged = np.zeros((batch, seq, heads * d_head), dtype=int)
    for h in range(heads):
        merged[:, :, h * d_head:(h + 1) * d_head] = x[:, h, :, :]
    return merged


# ----------------------------------------------------------------------------- merge_heads, right
def merge_heads_concat_features(x):
    return np.concatenate([x[:, h] for h in range(x.shape[1])], axis=-1)


def merge_heads_einsum(x):
    b, h, n, d = x.shape
    return np.ascontiguousarray(np.einsum("bhnd->bnhd", x)).reshape(b, n, h * d)


# ----------------------------------------------------------------------------- MHA, wrong
def mha_scale_d_model(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads

    def heads(t):
        return t.reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)

    q, k, v = heads(x @ w_q), heads(x @ w_k), heads(x @ w_v)
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(D)
    s = s - s.max(axis=-1, keepdims=True)
    p = np.exp(s)
    p /= p.sum(axis=-1, keepdims=True)
    o = (p @ v).transpose(0, 2, 1, 3).reshape(B, N, D)
    return o @ w_o


def mha_no_output_projection(x, w_q, w_k, w_v, w_o, num_heads):
    b, n, d = x.shape
    if d % num_heads != 0:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    hd = d // num_heads
    q = (x @ w_q).reshape(b, n, num_heads, hd).swapaxes(1, 2)
    k = (x @ w_k).reshape(b, n, num_heads, hd).swapaxes(1, 2)
    v = (x @ w_v).reshape(b, n, num_heads, hd).swapaxes(1, 2)
    scores = q @ k.swapaxes(-1, -2) / math.sqrt(hd)
    scores -= scores.max(-1, keepdims=True)
    w = np.exp(scores)
    w /= w.sum(-1, keepdims=True)
    return (w @ v).swapaxes(1, 2).reshape(b, n, d)


def mha_key_from_w_q(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, D = x.shape
    if D % num_heads != 0:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    d_head = D // num_heads
    Q = x @ w_q
    K = x @ w_q
    V = x @ w_v
    Q, K, V = (t.reshape(B, N, num_heads, d_head).transpose(0, 2, 1, 3) for t in (Q, K, V))
    att = np.einsum("bhid,bhjd->bhij", Q, K) / np.sqrt(d_head)
    att = np.exp(att - att.max(axis=-1, keepdims=True))
    att = att / att.sum(axis=-1, keepdims=True)
    ctx = np.einsum("bhij,bhjd->bhid", att, V)
    return ctx.transpose(0, 2, 1, 3).reshape(B, N, D) @ w_o


def mha_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads
    q = (x @ w_q).reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)
    k = (x @ w_k).reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)
    v = (x @ w_v).reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(dh)
    scores = scores - scores.max(axis=-1, keepdims=True)
    a = np.exp(scores)
    a = a / a.sum(axis=-1, keepdims=True)
    heads = a @ v  # (B, H, N, dh)
    return heads.reshape(B, N, D) @ w_o


def mha_with_residual(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads
    split = lambda t: t.reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)  # noqa: E731
    q, k, v = split(x @ w_q), split(x @ w_k), split(x @ w_v)
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(dh)
    s = np.exp(s - s.max(-1, keepdims=True))
    s = s / s.sum(-1, keepdims=True)
    out = (s @ v).transpose(0, 2, 1, 3).reshape(B, N, D) @ w_o
    return x + out


def mha_strided_heads(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads

    def to_heads(t):  # (B, N, D) -> (B, H, N, dh)
        return t.reshape(B, N, dh, num_heads).transpose(0, 3, 1, 2)

    def from_heads(t):  # (B, H, N, dh) -> (B, N, D)
        return t.transpose(0, 2, 3, 1).reshape(B, N, D)

    q, k, v = to_heads(x @ w_q), to_heads(x @ w_k), to_heads(x @ w_v)
    sc = q @ np.swapaxes(k, -1, -2) / math.sqrt(dh)
    sc = sc - sc.max(axis=-1, keepdims=True)
    pr = np.exp(sc)
    pr = pr / pr.sum(axis=-1, keepdims=True)
    return from_heads(pr @ v) @ w_o


# ----------------------------------------------------------------------------- MHA, right
def mha_per_head_sum(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, D = x.shape
    if D % num_heads != 0:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads
    total = np.zeros((B, N, D))
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        qh = np.einsum("bnd,de->bne", x, w_q[:, cols])
        kh = np.einsum("bnd,de->bne", x, w_k[:, cols])
        vh = np.einsum("bnd,de->bne", x, w_v[:, cols])
        s = np.einsum("bie,bje->bij", qh, kh) / math.sqrt(dh)
        s = np.exp(s - s.max(axis=-1, keepdims=True))
        s = s / s.sum(axis=-1, keepdims=True)
        total += np.einsum("bij,bje->bie", s, vh) @ w_o[cols, :]
    return total


def mha_torch_sdpa(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, D = np.shape(x)
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    X = torch.tensor(np.asarray(x), dtype=torch.float64)
    Wq, Wk, Wv, Wo = (torch.tensor(np.asarray(w), dtype=torch.float64) for w in (w_q, w_k, w_v, w_o))
    q = (X @ Wq).view(B, N, num_heads, -1).transpose(1, 2)
    k = (X @ Wk).view(B, N, num_heads, -1).transpose(1, 2)
    v = (X @ Wv).view(B, N, num_heads, -1).transpose(1, 2)
    o = F.scaled_dot_product_attention(q, k, v)
    return (o.transpose(1, 2).reshape(B, N, D) @ Wo).numpy()


ENTRIES = [
    Entry("split_heads", "wrong", "reshape_without_transpose",
          "it reshapes straight to (B, H, N, d_head) without a transpose, so each 'head' takes "
          "consecutive chunks of the flattened tokens instead of one feature block of every token",
          split_heads_reshape_only),
    Entry("split_heads", "wrong", "strided_features",
          "it reshapes to (B, N, d_head, H), so head h gets the strided features h::H instead of "
          "the contiguous block h*d_head:(h+1)*d_head", split_heads_strided),
    Entry("split_heads", "wrong", "dot_T",
          "it uses .T to move the head axis, but .T reverses every axis and gives "
          "(d_head, H, N, B) instead of (B, H, N, d_head)", split_heads_dot_T),
    Entry("split_heads", "wrong", "minus_one_no_guard",
          "it reshapes with -1 for the number of heads and never checks divisibility, so when "
          "num_heads does not divide d_model it silently returns a different number of heads "
          "instead of raising ValueError", split_heads_minus_one),
    Entry("split_heads", "wrong", "modulo_operands_swapped",
          "the divisibility check is written num_heads % d_model instead of d_model % num_heads, "
          "so valid head counts raise ValueError", split_heads_modulo_swapped),
    Entry("split_heads", "wrong", "stack_on_axis2",
          "the per-head pieces are stacked on axis 2, giving (B, N, H, d_head) instead of "
          "(B, H, N, d_head)", split_heads_stack_axis2),
    Entry("split_heads", "right", "loop_over_heads", None, split_heads_loop),
    Entry("split_heads", "right", "split_then_stack", None, split_heads_split_stack),
    Entry("merge_heads", "wrong", "reshape_without_transpose",
          "it reshapes (B, H, N, d_head) straight to (B, N, H*d_head) without swapping the head "
          "and token axes, which scrambles tokens and heads", merge_heads_reshape_only),
    Entry("merge_heads", "wrong", "feature_major_order",
          "it transposes to (B, N, d_head, H) before reshaping, so the heads' features end up "
          "interleaved instead of head 0's block first", merge_heads_feature_major),
    Entry("merge_heads", "wrong", "concat_along_tokens",
          "the heads are concatenated along axis 1 (the tokens) instead of the last axis, "
          "giving (B, H*N, d_head)", merge_heads_concat_seq),
    Entry("merge_heads", "wrong", "loop_skips_last_head",
          "the loop runs over range(H - 1), so the last head is never copied and its block "
          "stays zero", merge_heads_loop_off_by_one),
    Entry("merge_heads", "wrong", "shape_unpacked_in_wrong_order",
          "the shape is unpacked as B, N, H, d_head although the input is (B, H, N, d_head), so "
          "the reshape uses swapped sizes and the result has the wrong shape",
          merge_heads_unpack_order),
    Entry("merge_heads", "wrong", "int_output_buffer",
          "the output buffer is created with dtype=int, so copying the heads into it truncates "
          "every value to an integer", merge_heads_int_buffer),
    Entry("merge_heads", "right", "concatenate_last_axis", None, merge_heads_concat_features),
    Entry("merge_heads", "right", "einsum_permute", None, merge_heads_einsum),
    Entry("multi_head_attention", "wrong", "scale_by_d_model",
          "the scores are divided by sqrt(d_model) instead of sqrt(d_head)", mha_scale_d_model),
    Entry("multi_head_attention", "wrong", "no_output_projection",
          "the merged heads are returned without the final @ w_o", mha_no_output_projection),
    Entry("multi_head_attention", "wrong", "keys_from_w_q",
          "the keys are projected with w_q (copied line) instead of w_k", mha_key_from_w_q),
    Entry("multi_head_attention", "wrong", "merge_without_transpose",
          "the heads (B, H, N, d_head) are reshaped to (B, N, d_model) without first swapping "
          "the head and token axes, which scrambles tokens across heads", mha_merge_without_transpose),
    Entry("multi_head_attention", "wrong", "adds_residual",
          "it adds the input x to the result (a residual connection the exercise does not ask "
          "for)", mha_with_residual),
    Entry("multi_head_attention", "wrong", "strided_heads",
          "the projections are split into heads with stride (features h::H) instead of "
          "contiguous blocks, so each head attends with different features than the contract's",
          mha_strided_heads),
    Entry("multi_head_attention", "right", "per_head_weight_slices_summed", None, mha_per_head_sum),
    Entry("multi_head_attention", "right", "torch_sdpa_float64", None, mha_torch_sdpa),
]
