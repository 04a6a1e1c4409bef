"""Round k, lesson 02 (numpy): split_heads, merge_heads, multi_head_attention."""

import math

import numpy as np
import scipy.special
import torch
import torch.nn.functional as F

from entry import Entry

ENTRIES = []


def add(exercise, kind, label, mistake=None):
    def deco(func):
        ENTRIES.append(Entry(exercise, kind, label, mistake, func))
        return func
    return deco


def _check_heads(d_model, num_heads):
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")


# ============================================================================ split_heads
@add("split_heads", "wrong", "reshape_without_transpose",
     "It reshapes (B, N, d_model) straight to (B, H, N, d_head) without a transpose, so the "
     "'heads' are cut from the flattened sequence instead of from each token's features.")
def split_reshape_only(x, num_heads):
    b, n, d_model = x.shape
    _check_heads(d_model, num_heads)
    return x.reshape(b, num_heads, n, d_model // num_heads)


@add("split_heads", "wrong", "interleaved_features",
     "It factors the feature axis as (d_head, num_heads), so head h gets every num_heads-th "
     "feature instead of the contiguous block h*d_head:(h+1)*d_head.")
def split_interleaved(x, num_heads):
    b, n, d_model = x.shape
    _check_heads(d_model, num_heads)
    d_head = d_model // num_heads
    return x.reshape(b, n, d_head, num_heads).transpose(0, 3, 1, 2)


@add("split_heads", "wrong", "guard_operands_swapped",
     "The divisibility guard tests num_heads % d_model instead of d_model % num_heads, so valid "
     "head counts are rejected with ValueError.")
def split_guard_swapped(x, num_heads):
    b, n, d_model = x.shape
    if num_heads % d_model:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    return x.reshape(b, n, num_heads, d_model // num_heads).transpose(0, 2, 1, 3)


@add("split_heads", "wrong", "permute_d_before_n",
     "The final permutation is (0, 2, 3, 1), giving (B, H, d_head, N) instead of "
     "(B, H, N, d_head).")
def split_bad_permutation(x, num_heads):
    b, n, d_model = x.shape
    _check_heads(d_model, num_heads)
    return np.transpose(x.reshape(b, n, num_heads, -1), (0, 2, 3, 1))


@add("split_heads", "wrong", "stack_heads_on_axis0",
     "It splits the features correctly but stacks the heads on axis 0, returning "
     "(H, B, N, d_head) instead of (B, H, N, d_head).")
def split_stack_axis0(x, num_heads):
    _check_heads(x.shape[-1], num_heads)
    return np.stack(np.split(x, num_heads, axis=-1), axis=0)


@add("split_heads", "wrong", "d_model_from_shape_1",
     "It reads d_model from x.shape[1] (the sequence length) instead of x.shape[-1], so the "
     "divisibility check and head width use the wrong number and valid input raises ValueError.")
def split_wrong_dim(x, num_heads):
    b, n = x.shape[0], x.shape[1]
    d_model = x.shape[1]
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    return x.reshape(b, n, num_heads, d_head).swapaxes(1, 2)


@add("split_heads", "right", "slice_loop_stack")
def split_loop(x, num_heads):
    x = np.asarray(x)
    d_model = x.shape[-1]
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d = d_model // num_heads
    heads = [x[:, :, h * d:(h + 1) * d] for h in range(num_heads)]
    return np.stack(heads, axis=1)


@add("split_heads", "right", "torch_unflatten")
def split_torch(x, num_heads):
    d_model = x.shape[-1]
    if d_model % num_heads != 0:
        raise ValueError(f"num_heads={num_heads} does not divide d_model={d_model}")
    t = torch.from_numpy(np.ascontiguousarray(x))
    return t.unflatten(-1, (num_heads, d_model // num_heads)).transpose(1, 2).numpy()


# ============================================================================ merge_heads
@add("merge_heads", "wrong", "reshape_without_transpose",
     "It reshapes (B, H, N, d_head) straight to (B, N, H*d_head) without moving the head axis "
     "next to d_head first, which scrambles tokens and heads.")
def merge_reshape_only(x):
    b, h, n, d = x.shape
    return x.reshape(b, n, h * d)


@add("merge_heads", "wrong", "head_axis_last",
     "It moves the head axis to the end before flattening, so the features come out "
     "interleaved (d_head-major) instead of head by head.")
def merge_head_last(x):
    b, h, n, d = x.shape
    return x.transpose(0, 2, 3, 1).reshape(b, n, h * d)


@add("merge_heads", "wrong", "concat_on_sequence_axis",
     "It concatenates the heads along the sequence axis, giving (B, H*N, d_head) instead of "
     "(B, N, H*d_head).")
def merge_concat_seq(x):
    return np.concatenate([x[:, h] for h in range(x.shape[1])], axis=1)


@add("merge_heads", "wrong", "stale_shape_after_transpose",
     "After swapping axes it reshapes with x.shape[1] read before the swap (the head count) as "
     "the sequence length, giving (B, H, N*d_head).")
def merge_stale_shape(x):
    y = x.swapaxes(1, 2)
    return y.reshape(x.shape[0], x.shape[1], -1)


@add("merge_heads", "wrong", "loop_skips_first_head",
     "The loop over heads starts at 1, so the first head's block of features stays zero.")
def merge_loop_from_one(x):
    b, h, n, d = x.shape
    out = np.zeros((b, n, h * d), dtype=x.dtype)
    for i in range(1, h):
        out[:, :, i * d:(i + 1) * d] = x[:, i]
    return out


@add("merge_heads", "wrong", "torch_flatten_from_1",
     "torch's flatten(1) flattens every axis from 1 on, giving (B, N*H*d_head) instead of "
     "flattening only the last two axes.")
def merge_torch_flatten(x):
    t = torch.from_numpy(np.ascontiguousarray(x)).permute(0, 2, 1, 3)
    return t.flatten(1).numpy()


@add("merge_heads", "right", "concat_on_feature_axis")
def merge_concat(x):
    return np.concatenate([x[:, h, :, :] for h in range(x.shape[1])], axis=-1)


@add("merge_heads", "right", "einsum_then_reshape")
def merge_einsum(x):
    b, h, n, d = x.shape
    return np.einsum("bhnd->bnhd", x).reshape(b, n, h * d)


# ============================================================================ multi_head_attention
def _softmax(s):
    s = s - s.max(axis=-1, keepdims=True)
    e = np.exp(s)
    return e / e.sum(axis=-1, keepdims=True)


def _split(t, h):
    b, n, d = t.shape
    return t.reshape(b, n, h, d // h).transpose(0, 2, 1, 3)


def _merge(t):
    b, h, n, d = t.shape
    return t.transpose(0, 2, 1, 3).reshape(b, n, h * d)


@add("multi_head_attention", "wrong", "merge_without_transpose",
     "It merges the heads by reshaping (B, H, N, d_head) directly to (B, N, d_model) without "
     "transposing back, scrambling tokens and heads before w_o.")
def mha_merge_reshape(x, w_q, w_k, w_v, w_o, num_heads):
    b, n, d_model = x.shape
    _check_heads(d_model, num_heads)
    q, k, v = _split(x @ w_q, num_heads), _split(x @ w_k, num_heads), _split(x @ w_v, num_heads)
    w = _softmax(q @ k.swapaxes(-1, -2) / math.sqrt(d_model // num_heads))
    ctx = w @ v
    return ctx.reshape(b, n, d_model) @ w_o


@add("multi_head_attention", "wrong", "scale_by_d_model",
     "It scales the scores by 1/sqrt(d_model) instead of 1/sqrt(d_head).")
def mha_scale_d_model(x, w_q, w_k, w_v, w_o, num_heads):
    d_model = x.shape[-1]
    _check_heads(d_model, num_heads)
    q, k, v = (_split(x @ w, num_heads) for w in (w_q, w_k, w_v))
    w = _softmax(np.einsum("bhqd,bhkd->bhqk", q, k) / np.sqrt(d_model))
    return _merge(np.einsum("bhqk,bhkd->bhqd", w, v)) @ w_o


@add("multi_head_attention", "wrong", "w_o_linear_layout",
     "It applies the output projection in nn.Linear's layout (x @ w_o.T) instead of the "
     "course's x @ w_o.")
def mha_wo_transposed(x, w_q, w_k, w_v, w_o, num_heads):
    d_model = x.shape[-1]
    _check_heads(d_model, num_heads)
    q, k, v = (_split(x @ w, num_heads) for w in (w_q, w_k, w_v))
    w = _softmax(q @ k.swapaxes(-1, -2) / np.sqrt(d_model // num_heads))
    return _merge(w @ v) @ w_o.T


@add("multi_head_attention", "wrong", "keys_projected_with_w_q",
     "The keys are projected with w_q (a copy-paste of the query line) instead of w_k.")
def mha_keys_wq(x, w_q, w_k, w_v, w_o, num_heads):
    d_model = x.shape[-1]
    _check_heads(d_model, num_heads)
    q = _split(x @ w_q, num_heads)
    k = _split(x @ w_q, num_heads)
    v = _split(x @ w_v, num_heads)
    w = _softmax(q @ k.swapaxes(-1, -2) / np.sqrt(d_model // num_heads))
    return _merge(w @ v) @ w_o


@add("multi_head_attention", "wrong", "adds_residual",
     "It returns x + attention(x): the residual connection belongs to the transformer block, "
     "not to the attention layer the contract asks for.")
def mha_residual(x, w_q, w_k, w_v, w_o, num_heads):
    d_model = x.shape[-1]
    _check_heads(d_model, num_heads)
    q, k, v = (_split(x @ w, num_heads) for w in (w_q, w_k, w_v))
    w = _softmax(q @ k.swapaxes(-1, -2) / np.sqrt(d_model // num_heads))
    return x + _merge(w @ v) @ w_o


@add("multi_head_attention", "wrong", "guard_only_too_many_heads",
     "The guard only rejects num_heads > d_model, so a head count that does not divide d_model "
     "(6 and 4) silently drops features instead of raising ValueError.")
def mha_weak_guard(x, w_q, w_k, w_v, w_o, num_heads):
    d_model = x.shape[-1]
    if num_heads > d_model:
        raise ValueError(f"num_heads={num_heads} exceeds d_model={d_model}")
    d = d_model // num_heads
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    out = np.zeros_like(q)
    for h in range(num_heads):
        sl = slice(h * d, (h + 1) * d)
        w = _softmax(q[..., sl] @ np.swapaxes(k[..., sl], -1, -2) / math.sqrt(d))
        out[..., sl] = w @ v[..., sl]
    return out @ w_o


@add("multi_head_attention", "right", "torch_sdpa_float64")
def mha_sdpa(x, w_q, w_k, w_v, w_o, num_heads):
    b, n, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    dtype = np.asarray(x).dtype
    xt, wq, wk, wv, wo = (torch.from_numpy(np.asarray(a, dtype=np.float64))
                          for a in (x, w_q, w_k, w_v, w_o))

    def heads(t):
        return t.view(b, n, num_heads, -1).transpose(1, 2)

    ctx = F.scaled_dot_product_attention(heads(xt @ wq), heads(xt @ wk), heads(xt @ wv))
    return (ctx.transpose(1, 2).reshape(b, n, d_model) @ wo).numpy().astype(dtype)


@add("multi_head_attention", "right", "per_head_loop_scipy")
def mha_loop(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x)
    d_model = x.shape[-1]
    if num_heads <= 0 or d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d = d_model // num_heads
    q, k, v = (x.astype(np.float64) @ np.asarray(w, dtype=np.float64) for w in (w_q, w_k, w_v))
    pieces = []
    for h in range(num_heads):
        cols = slice(h * d, (h + 1) * d)
        s = q[:, :, cols] @ k[:, :, cols].transpose(0, 2, 1) / math.sqrt(d)
        pieces.append(scipy.special.softmax(s, axis=-1) @ v[:, :, cols])
    out = np.concatenate(pieces, axis=-1) @ np.asarray(w_o, dtype=np.float64)
    return out.astype(x.dtype)
