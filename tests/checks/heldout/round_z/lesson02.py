"""Held-out catalogue, lesson 02 (split_heads, merge_heads, multi_head_attention)."""

import math

import numpy as np
import scipy.special

from entry import Entry


# ----------------------------------------------------------------------------- split_heads (wrong)
def split_no_transpose(x, num_heads):
    b, n, d_model = x.shape
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    return x.reshape(b, num_heads, n, d_model // num_heads)


def split_interleaved(x, num_heads):
    b, n, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    y = x.reshape(b, n, d_head, num_heads)
    return y.transpose(0, 3, 1, 2)


def split_torch_transpose(x, num_heads):
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    return x.reshape(B, N, num_heads, D // num_heads).transpose(1, 2)


def split_assert_guard(x, num_heads):
    batch, seq, width = x.shape
    assert width % num_heads == 0, f"d_model={width} is not divisible by num_heads={num_heads}"
    d_head = width // num_heads
    return np.transpose(x.reshape(batch, seq, num_heads, d_head), (0, 2, 1, 3))


def split_modulo_swapped(x, num_heads):
    d_model = x.shape[-1]
    if num_heads % d_model != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    return x.reshape(x.shape[0], x.shape[1], num_heads, d_head).swapaxes(1, 2)


def split_stack_axis0(x, num_heads):
    d_model = x.shape[2]
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    size = d_model // num_heads
    heads = [x[:, :, h * size:(h + 1) * size] for h in range(num_heads)]
    return np.stack(heads)


# ----------------------------------------------------------------------------- split_heads (right)
def split_loop_slices(x, num_heads):
    x = np.asarray(x)
    d_model = x.shape[-1]
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    dh = d_model // num_heads
    out = np.empty((x.shape[0], num_heads, x.shape[1], dh), dtype=x.dtype)
    for h in range(num_heads):
        out[:, h] = x[..., h * dh:(h + 1) * dh]
    return out


def split_moveaxis(x, num_heads):
    b, n, d = np.shape(x)
    q, r = divmod(d, num_heads)
    if r:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    return np.moveaxis(np.reshape(x, (b, n, num_heads, q)), 2, 1)


# ----------------------------------------------------------------------------- merge_heads (wrong)
def merge_no_transpose(x):
    b, h, n, d = x.shape
    return x.reshape(b, n, h * d)


def merge_head_axis_last(x):
    b, h, n, d = x.shape
    return x.transpose(0, 2, 3, 1).reshape(b, n, h * d)


def merge_concat_tokens(x):
    return np.concatenate([x[:, h] for h in range(x.shape[1])], axis=1)


def merge_unpack_order(x):
    B, N, H, D = x.shape
    return x.transpose(0, 2, 1, 3).reshape(B, N, H * D)


def merge_head0_twice(x):
    out = x[:, 0]
    for h in range(x.shape[1]):
        out = np.concatenate([out, x[:, h]], axis=-1)
    return out


def merge_concatenate_array(x):
    return np.concatenate(x, axis=-1)


# ----------------------------------------------------------------------------- merge_heads (right)
def merge_fill_blocks(x):
    batch, heads, seq, dh = x.shape
    out = np.zeros((batch, seq, heads * dh), dtype=x.dtype)
    for h in range(heads):
        out[:, :, h * dh:(h + 1) * dh] = x[:, h, :, :]
    return out


def merge_list_over_heads(x):
    return np.concatenate(list(np.moveaxis(x, 1, 0)), axis=-1)


# --------------------------------------------------------------------- multi_head_attention (wrong)
def mha_pow_precedence(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads

    def heads(t):
        return t.reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)

    q, k, v = heads(x @ w_q), heads(x @ w_k), heads(x @ w_v)
    s = q @ k.transpose(0, 1, 3, 2) / dh ** 1 / 2
    s = s - s.max(-1, keepdims=True)
    p = np.exp(s)
    p = p / p.sum(-1, keepdims=True)
    ctx = (p @ v).transpose(0, 2, 1, 3).reshape(B, N, D)
    return ctx @ w_o


def mha_no_output_projection(x, w_q, w_k, w_v, w_o, num_heads):
    b, n, d = x.shape
    if d % num_heads:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    hd = d // num_heads
    q = (x @ w_q).reshape(b, n, num_heads, hd).transpose(0, 2, 1, 3)
    k = (x @ w_k).reshape(b, n, num_heads, hd).transpose(0, 2, 1, 3)
    v = (x @ w_v).reshape(b, n, num_heads, hd).transpose(0, 2, 1, 3)
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(hd)
    w = np.exp(scores - scores.max(axis=-1, keepdims=True))
    w /= w.sum(axis=-1, keepdims=True)
    return (w @ v).transpose(0, 2, 1, 3).reshape(b, n, d)


def mha_split_without_transpose(x, w_q, w_k, w_v, w_o, num_heads):
    batch, seq, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    q = (x @ w_q).reshape(batch, num_heads, seq, d_head)
    k = (x @ w_k).reshape(batch, num_heads, seq, d_head)
    v = (x @ w_v).reshape(batch, num_heads, seq, d_head)
    att = q @ k.swapaxes(-1, -2) / np.sqrt(d_head)
    att = np.exp(att - att.max(axis=-1, keepdims=True))
    att = att / att.sum(axis=-1, keepdims=True)
    ctx = att @ v
    return ctx.reshape(batch, seq, d_model) @ w_o


def mha_weights_transposed(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    H, dh = num_heads, D // num_heads
    q = np.einsum("bnd,ed->bne", x, w_q).reshape(B, N, H, dh)
    k = np.einsum("bnd,ed->bne", x, w_k).reshape(B, N, H, dh)
    v = np.einsum("bnd,ed->bne", x, w_v).reshape(B, N, H, dh)
    s = np.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(dh)
    p = scipy.special.softmax(s, axis=-1)
    ctx = np.einsum("bhqk,bkhd->bqhd", p, v).reshape(B, N, D)
    return np.einsum("bnd,ed->bne", ctx, w_o)


def mha_values_from_wk(x, w_q, w_k, w_v, w_o, num_heads):
    b, n, d = x.shape
    if d % num_heads:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    dh = d // num_heads
    split = lambda t: t.reshape(b, n, num_heads, dh).transpose(0, 2, 1, 3)  # noqa: E731
    q = split(x @ w_q)
    k = split(x @ w_k)
    v = split(x @ w_k)
    s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(dh)
    s -= s.max(axis=-1, keepdims=True)
    p = np.exp(s)
    p /= p.sum(axis=-1, keepdims=True)
    return (p @ v).transpose(0, 2, 1, 3).reshape(b, n, d) @ w_o


def mha_sum_no_keepdims(x, w_q, w_k, w_v, w_o, num_heads):
    b, n, d = x.shape
    if d % num_heads:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    dh = d // num_heads
    q = (x @ w_q).reshape(b, n, num_heads, dh).transpose(0, 2, 1, 3)
    k = (x @ w_k).reshape(b, n, num_heads, dh).transpose(0, 2, 1, 3)
    v = (x @ w_v).reshape(b, n, num_heads, dh).transpose(0, 2, 1, 3)
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(dh)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    w = e / e.sum(axis=-1)
    return (w @ v).transpose(0, 2, 1, 3).reshape(b, n, d) @ w_o


# --------------------------------------------------------------------- multi_head_attention (right)
def mha_loop_weight_columns(x, w_q, w_k, w_v, w_o, num_heads):
    d_model = x.shape[-1]
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    dh = d_model // num_heads
    outs = []
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        qh, kh, vh = x @ w_q[:, cols], x @ w_k[:, cols], x @ w_v[:, cols]  # (B, N, dh)
        s = qh @ np.swapaxes(kh, 1, 2) / math.sqrt(dh)
        lse = scipy.special.logsumexp(s, axis=-1, keepdims=True)
        outs.append(np.exp(s - lse) @ vh)
    return np.concatenate(outs, axis=-1) @ w_o


def mha_einsum_float64(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x, dtype=np.float64)
    d = x.shape[-1]
    if d % num_heads:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    dh = d // num_heads
    wq, wk, wv = (np.asarray(w, np.float64).reshape(d, num_heads, dh) for w in (w_q, w_k, w_v))
    q = np.einsum("bnd,dhe->bhne", x, wq)
    k = np.einsum("bnd,dhe->bhne", x, wk)
    v = np.einsum("bnd,dhe->bhne", x, wv)
    p = scipy.special.softmax(np.einsum("bhqe,bhke->bhqk", q, k) / np.sqrt(dh), axis=-1)
    ctx = np.einsum("bhqk,bhke->bhqe", p, v)
    wo = np.asarray(w_o, np.float64).reshape(num_heads, dh, d)
    return np.einsum("bhne,hef->bnf", ctx, wo)


ENTRIES = [
    Entry("split_heads", "wrong", "reshape_without_transpose", "reshapes straight to "
          "(B, H, N, d_head) with no transpose, so each 'head' mixes tokens and features "
          "instead of holding one feature block of every token", split_no_transpose),
    Entry("split_heads", "wrong", "interleaved_features", "reshapes to (B, N, d_head, H), so "
          "head h gets every H-th feature (h, h+H, ...) instead of the block "
          "h*d_head:(h+1)*d_head", split_interleaved),
    Entry("split_heads", "wrong", "torch_style_transpose", "calls transpose(1, 2) as in "
          "PyTorch; numpy's transpose wants the full permutation, so it raises on every input",
          split_torch_transpose),
    Entry("split_heads", "wrong", "assert_guard", "guards divisibility with assert, which "
          "raises AssertionError instead of the ValueError the contract requires",
          split_assert_guard),
    Entry("split_heads", "wrong", "modulo_operands_swapped", "tests num_heads % d_model "
          "instead of d_model % num_heads, so valid head counts are rejected with ValueError",
          split_modulo_swapped),
    Entry("split_heads", "wrong", "stack_on_axis0", "np.stack puts the heads on axis 0, giving "
          "(H, B, N, d_head) instead of (B, H, N, d_head)", split_stack_axis0),
    Entry("split_heads", "right", "loop_fill", None, split_loop_slices),
    Entry("split_heads", "right", "divmod_moveaxis", None, split_moveaxis),
    Entry("merge_heads", "wrong", "reshape_without_transpose", "reshapes (B, H, N, d_head) "
          "straight to (B, N, H*d_head) without moving the head axis next to the features, so "
          "tokens and heads are scrambled", merge_no_transpose),
    Entry("merge_heads", "wrong", "head_axis_last", "transposes to (B, N, d_head, H) before "
          "reshaping, so the features come out interleaved across heads instead of head 0's "
          "block first", merge_head_axis_last),
    Entry("merge_heads", "wrong", "concat_along_tokens", "concatenates the heads along axis 1 "
          "(the tokens) instead of the feature axis, giving (B, H*N, d_head)",
          merge_concat_tokens),
    Entry("merge_heads", "wrong", "unpacked_shape_in_wrong_order", "unpacks x.shape as "
          "(B, N, H, d) although x is (B, H, N, d), so the result is reshaped to "
          "(B, H, N*d_head)", merge_unpack_order),
    Entry("merge_heads", "wrong", "head0_twice", "starts from head 0 and then appends every "
          "head again, so head 0 appears twice and the width is (H+1)*d_head",
          merge_head0_twice),
    Entry("merge_heads", "wrong", "concatenate_iterates_batch", "np.concatenate(x, axis=-1) "
          "iterates over axis 0 of x, the batch, not the heads", merge_concatenate_array),
    Entry("merge_heads", "right", "fill_blocks_loop", None, merge_fill_blocks),
    Entry("merge_heads", "right", "concatenate_moved_heads", None, merge_list_over_heads),
    Entry("multi_head_attention", "wrong", "pow_precedence", "writes / dh ** 1 / 2 for the "
          "square root; ** binds first and / runs left to right, so the scores are divided by "
          "d_head and then by 2, i.e. by 2*d_head instead of sqrt(d_head)", mha_pow_precedence),
    Entry("multi_head_attention", "wrong", "no_output_projection", "returns the merged heads "
          "without the final @ w_o", mha_no_output_projection),
    Entry("multi_head_attention", "wrong", "split_without_transpose", "splits q, k, v by "
          "reshaping to (B, H, N, d_head) directly (and merges back the same way), so heads "
          "are not the feature blocks of each token", mha_split_without_transpose),
    Entry("multi_head_attention", "wrong", "weights_transposed", "applies the weights as "
          "x @ W.T (nn.Linear's layout) instead of x @ W", mha_weights_transposed),
    Entry("multi_head_attention", "wrong", "values_from_w_k", "projects the values with w_k "
          "(copy-paste) instead of w_v", mha_values_from_wk),
    Entry("multi_head_attention", "wrong", "softmax_sum_no_keepdims", "the softmax denominator "
          "is summed without keepdims, so it broadcasts against the wrong axis (raises, or "
          "divides by another row's total)", mha_sum_no_keepdims),
    Entry("multi_head_attention", "right", "loop_over_weight_columns", None,
          mha_loop_weight_columns),
    Entry("multi_head_attention", "right", "einsum_reshaped_weights", None, mha_einsum_float64),
]
