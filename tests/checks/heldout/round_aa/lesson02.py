"""Held-out catalogue, lesson 02 (multi-head): split_heads, merge_heads, multi_head_attention."""

import math

import numpy as np
import torch

from entry import Entry


# ============================================================================ split_heads
def split_heads_no_transpose(x, num_heads):
    b, n, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    return x.reshape(b, num_heads, n, d_model // num_heads)


def split_heads_dhead_first(x, num_heads):
    batch, seq, width = x.shape
    if width % num_heads != 0:
        raise ValueError(f"d_model={width} is not divisible by num_heads={num_heads}")
    head_dim = width // num_heads
    return x.reshape(batch, seq, head_dim, num_heads).transpose(0, 3, 1, 2)


def split_heads_heads_first(x, num_heads):
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    return x.reshape(B, N, num_heads, D // num_heads).transpose(2, 0, 1, 3)


def split_heads_assert(x, num_heads):
    B, N, d_model = x.shape
    assert d_model % num_heads == 0, f"d_model={d_model} is not divisible by num_heads={num_heads}"
    d_head = d_model // num_heads
    return np.swapaxes(x.reshape(B, N, num_heads, d_head), 1, 2)


def split_heads_float_dhead(x, num_heads):
    B, N, d_model = x.shape
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model / num_heads
    return x.reshape(B, N, num_heads, d_head).transpose(0, 2, 1, 3)


def split_heads_loop_from_one(x, num_heads):
    d_model = x.shape[-1]
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    size = d_model // num_heads
    pieces = [x[:, :, h * size:(h + 1) * size] for h in range(1, num_heads + 1)]
    return np.stack(pieces, axis=1)


def split_heads_slices_stack(x, num_heads):
    x = np.asarray(x)
    d_model = x.shape[2]
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    step = d_model // num_heads
    return np.stack([x[..., i * step:(i + 1) * step] for i in range(num_heads)], axis=1)


def split_heads_torch_unflatten(x, num_heads):
    d_model = x.shape[-1]
    if num_heads <= 0 or d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    t = torch.from_numpy(np.ascontiguousarray(x))
    return t.unflatten(-1, (num_heads, d_model // num_heads)).permute(0, 2, 1, 3).numpy()


# ============================================================================ merge_heads
def merge_heads_no_transpose(x):
    B, H, N, Dh = x.shape
    return x.reshape(B, N, H * Dh)


def merge_heads_interleaved(x):
    b, h, n, dh = x.shape
    return x.transpose(0, 2, 3, 1).reshape(b, n, h * dh)


def merge_heads_unpack_order(x):
    B, N, H, D = x.shape
    return x.transpose(0, 2, 1, 3).reshape(B, N, H * D)


def merge_heads_concat_tokens(x):
    heads = [x[:, h] for h in range(x.shape[1])]
    return np.concatenate(heads, axis=1)


def merge_heads_swap_1_3(x):
    batch, heads, seq, dh = x.shape
    return np.swapaxes(x, 1, 3).reshape(batch, seq, heads * dh)


def merge_heads_squeeze(x):
    B, H, N, d = x.shape
    return x.transpose(0, 2, 1, 3).reshape(B, N, H * d).squeeze()


def merge_heads_concatenate(x):
    return np.concatenate([x[:, h, :, :] for h in range(x.shape[1])], axis=-1)


def merge_heads_fill_loop(x):
    B, H, N, dh = x.shape
    out = np.empty((B, N, H * dh), dtype=x.dtype)
    for h in range(H):
        out[:, :, h * dh:(h + 1) * dh] = x[:, h]
    return out


# ============================================================================ multi_head_attention
def mha_scale_d_model(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    dh = d_model // num_heads

    def split(t):
        return t.reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)

    q, k, v = split(x @ w_q), split(x @ w_k), split(x @ w_v)
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d_model)
    s = s - s.max(-1, keepdims=True)
    p = np.exp(s)
    p /= p.sum(-1, keepdims=True)
    ctx = (p @ v).transpose(0, 2, 1, 3).reshape(B, N, d_model)
    return ctx @ w_o


def mha_values_with_w_k(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, D = x.shape
    if D % num_heads != 0:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    hd = D // num_heads
    q = (x @ w_q).reshape(B, N, num_heads, hd).transpose(0, 2, 1, 3)
    k = (x @ w_k).reshape(B, N, num_heads, hd).transpose(0, 2, 1, 3)
    v = (x @ w_k).reshape(B, N, num_heads, hd).transpose(0, 2, 1, 3)
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(hd)
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = weights / weights.sum(axis=-1, keepdims=True)
    return (weights @ v).transpose(0, 2, 1, 3).reshape(B, N, D) @ w_o


def mha_no_output_projection(x, w_q, w_k, w_v, w_o, num_heads):
    batch, seq, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    heads = []
    for h in range(num_heads):
        cols = slice(h * d_head, (h + 1) * d_head)
        qh, kh, vh = x @ w_q[:, cols], x @ w_k[:, cols], x @ w_v[:, cols]
        sc = qh @ np.swapaxes(kh, 1, 2) / math.sqrt(d_head)
        sc = np.exp(sc - sc.max(axis=2, keepdims=True))
        heads.append((sc / sc.sum(axis=2, keepdims=True)) @ vh)
    return np.concatenate(heads, axis=-1)


def mha_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, d = x.shape
    if d % num_heads:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    dh = d // num_heads
    q = np.swapaxes((x @ w_q).reshape(B, N, num_heads, dh), 1, 2)
    k = np.swapaxes((x @ w_k).reshape(B, N, num_heads, dh), 1, 2)
    v = np.swapaxes((x @ w_v).reshape(B, N, num_heads, dh), 1, 2)
    a = q @ np.swapaxes(k, -1, -2) / np.sqrt(dh)
    a = np.exp(a - a.max(axis=-1, keepdims=True))
    a = a / a.sum(axis=-1, keepdims=True)
    heads = a @ v  # (B, H, N, dh)
    return heads.reshape(B, N, d) @ w_o


def mha_softmax_over_heads(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    dh = d_model // num_heads
    q = (x @ w_q).reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)
    k = (x @ w_k).reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)
    v = (x @ w_v).reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)
    scores = np.einsum("bhqd,bhkd->bhqk", q, k) / np.sqrt(dh)
    e = np.exp(scores - scores.max(axis=1, keepdims=True))
    w = e / e.sum(axis=1, keepdims=True)
    out = np.einsum("bhqk,bhkd->bqhd", w, v).reshape(B, N, d_model)
    return out @ w_o


def mha_plus_residual(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    Dh = D // num_heads
    q = (x @ w_q).reshape(B, N, num_heads, Dh).transpose(0, 2, 1, 3)
    k = (x @ w_k).reshape(B, N, num_heads, Dh).transpose(0, 2, 1, 3)
    v = (x @ w_v).reshape(B, N, num_heads, Dh).transpose(0, 2, 1, 3)
    logits = q @ k.transpose(0, 1, 3, 2) / math.sqrt(Dh)
    logits -= logits.max(axis=-1, keepdims=True)
    probs = np.exp(logits)
    probs /= probs.sum(axis=-1, keepdims=True)
    merged = (probs @ v).transpose(0, 2, 1, 3).reshape(B, N, D)
    return x + merged @ w_o


def mha_per_head_weight_slices(x, w_q, w_k, w_v, w_o, num_heads):
    d_model = x.shape[-1]
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    dh = d_model // num_heads
    out = np.zeros(x.shape, dtype=np.result_type(x, w_o))
    for h in range(num_heads):
        c = slice(h * dh, (h + 1) * dh)
        qh, kh, vh = x @ w_q[:, c], x @ w_k[:, c], x @ w_v[:, c]
        s = np.einsum("bid,bjd->bij", qh, kh) / math.sqrt(dh)
        s = np.exp(s - s.max(axis=-1, keepdims=True))
        s /= s.sum(axis=-1, keepdims=True)
        out += (s @ vh) @ w_o[c, :]  # head h's block of rows of w_o
    return out


def mha_einsum_weights_float64(x, w_q, w_k, w_v, w_o, num_heads):
    x64 = np.asarray(x, dtype=np.float64)
    d = x64.shape[-1]
    if d % num_heads != 0:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    dh = d // num_heads
    wq, wk, wv = (np.asarray(w, dtype=np.float64).reshape(d, num_heads, dh)
                  for w in (w_q, w_k, w_v))
    q = np.einsum("bnd,dhe->bhne", x64, wq)
    k = np.einsum("bnd,dhe->bhne", x64, wk)
    v = np.einsum("bnd,dhe->bhne", x64, wv)
    s = np.einsum("bhie,bhje->bhij", q, k) / np.sqrt(dh)
    lse = np.log(np.exp(s - s.max(-1, keepdims=True)).sum(-1, keepdims=True)) + s.max(-1, keepdims=True)
    ctx = np.einsum("bhij,bhje->bihe", np.exp(s - lse), v)
    wo = np.asarray(w_o, dtype=np.float64).reshape(num_heads, dh, d)
    return np.einsum("bihe,hef->bif", ctx, wo).astype(np.result_type(x, w_o))


ENTRIES = [
    Entry("split_heads", "wrong", "reshape_without_transpose",
          "reshapes straight to (B, H, N, d_head) with no transpose, so each 'head' is a "
          "scrambled run of several tokens' features instead of one feature block of every "
          "token", split_heads_no_transpose),
    Entry("split_heads", "wrong", "d_head_before_heads",
          "splits d_model as (d_head, H) instead of (H, d_head), so head h gets every H-th "
          "feature instead of the contiguous block h*d_head:(h+1)*d_head",
          split_heads_dhead_first),
    Entry("split_heads", "wrong", "heads_axis_first",
          "transposes with (2, 0, 1, 3), putting the head axis first: (H, B, N, d_head) instead "
          "of (B, H, N, d_head)", split_heads_heads_first),
    Entry("split_heads", "wrong", "assert_instead_of_valueerror",
          "checks divisibility with assert, which raises AssertionError instead of the "
          "ValueError the contract asks for", split_heads_assert),
    Entry("split_heads", "wrong", "true_division_d_head",
          "computes d_head with / instead of //, a float, so reshape raises TypeError on every "
          "input", split_heads_float_dhead),
    Entry("split_heads", "wrong", "heads_loop_from_one",
          "loops h over 1..num_heads instead of 0..num_heads-1: the first feature block is "
          "skipped and the last slice is empty, so np.stack raises", split_heads_loop_from_one),
    Entry("split_heads", "right", "slices_and_stack", None, split_heads_slices_stack),
    Entry("split_heads", "right", "torch_unflatten_permute", None, split_heads_torch_unflatten),

    Entry("merge_heads", "wrong", "reshape_without_transpose",
          "reshapes (B, H, N, d_head) straight to (B, N, H*d_head) without moving the head axis "
          "next to d_head first, so tokens and heads get mixed", merge_heads_no_transpose),
    Entry("merge_heads", "wrong", "interleaved_features",
          "transposes to (B, N, d_head, H) before flattening, so the heads' features come out "
          "interleaved instead of head 0's block first", merge_heads_interleaved),
    Entry("merge_heads", "wrong", "unpacks_shape_in_wrong_order",
          "unpacks x.shape as (B, N, H, D) although the input is (B, H, N, d_head), so the final "
          "reshape uses H where N belongs: shape (B, H, N*d_head)", merge_heads_unpack_order),
    Entry("merge_heads", "wrong", "concatenate_along_tokens",
          "concatenates the heads along axis 1 (the tokens) instead of the last axis (the "
          "features): shape (B, H*N, d_head)", merge_heads_concat_tokens),
    Entry("merge_heads", "wrong", "swapaxes_1_3",
          "swaps axes 1 and 3 (heads with features) instead of 1 and 2 (heads with tokens) "
          "before the reshape", merge_heads_swap_1_3),
    Entry("merge_heads", "wrong", "squeeze_result",
          "calls .squeeze() on the result, which drops the batch or token axis when B or N is "
          "1", merge_heads_squeeze),
    Entry("merge_heads", "right", "concatenate_heads", None, merge_heads_concatenate),
    Entry("merge_heads", "right", "fill_blocks_loop", None, merge_heads_fill_loop),

    Entry("multi_head_attention", "wrong", "scale_by_d_model",
          "scales the scores by 1/sqrt(d_model) instead of 1/sqrt(d_head): each head's dot "
          "products only have d_head terms", mha_scale_d_model),
    Entry("multi_head_attention", "wrong", "values_from_w_k",
          "projects the values with w_k instead of w_v (copy-paste of the key line)",
          mha_values_with_w_k),
    Entry("multi_head_attention", "wrong", "no_output_projection",
          "returns the concatenated heads without the final output projection @ w_o",
          mha_no_output_projection),
    Entry("multi_head_attention", "wrong", "merge_without_transpose",
          "merges the heads by reshaping (B, H, N, d_head) straight to (B, N, d_model) without "
          "moving the head axis back behind the tokens", mha_merge_without_transpose),
    Entry("multi_head_attention", "wrong", "softmax_over_heads",
          "normalises the scores over axis 1 (the heads) instead of the last axis (the keys)",
          mha_softmax_over_heads),
    Entry("multi_head_attention", "wrong", "adds_residual",
          "adds the input x to the result (a residual connection that belongs to the transformer "
          "block, not to the attention layer the contract asks for)", mha_plus_residual),
    Entry("multi_head_attention", "right", "per_head_weight_slices", None,
          mha_per_head_weight_slices),
    Entry("multi_head_attention", "right", "einsum_reshaped_weights_float64", None,
          mha_einsum_weights_float64),
]
