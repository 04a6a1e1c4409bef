"""Lesson 02 (numpy): split_heads, merge_heads and multi_head_attention, as learners write them."""

import numpy as np

from entry import Entry


# ----------------------------------------------------------------------------- split_heads: wrong
def split_heads_no_transpose(x, num_heads):
    batch, seq_len, d_model = x.shape
    d_head = d_model // num_heads
    return x.reshape(batch, num_heads, seq_len, d_head)


def split_heads_strided_features(x, num_heads):
    batch, seq_len, d_model = x.shape
    d_head = d_model // num_heads
    heads = x.reshape(batch, seq_len, d_head, num_heads)  # (B, N, d_head, H)
    return heads.transpose(0, 3, 1, 2)


def split_heads_forgets_transpose(x, num_heads):
    batch, seq_len, d_model = x.shape
    d_head = d_model // num_heads
    return x.reshape(batch, seq_len, num_heads, d_head)


def split_heads_torch_style_transpose(x, num_heads):
    batch, seq_len, d_model = x.shape
    d_head = d_model // num_heads
    return x.reshape(batch, seq_len, num_heads, d_head).transpose(1, 2)


def split_heads_slices_loop(x, num_heads):
    d_head = x.shape[-1] // num_heads
    heads = [x[:, :, h * d_head:(h + 1) * d_head] for h in range(num_heads)]
    return np.stack(heads, axis=1)


def split_heads_float_width(x, num_heads):
    batch, seq_len, d_model = x.shape
    d_head = d_model / num_heads
    return x.reshape(batch, seq_len, num_heads, d_head).transpose(0, 2, 1, 3)


def split_heads_reshape_order(x, num_heads):
    batch, seq_len, d_model = x.shape
    d_head = d_model // num_heads
    return x.reshape(batch, seq_len, num_heads, d_head).transpose(0, 2, 3, 1).reshape(
        batch, num_heads, seq_len, d_head)


# ----------------------------------------------------------------------------- split_heads: right
def split_heads_np_split(x, num_heads):
    return np.stack(np.split(np.asarray(x), num_heads, axis=-1), axis=1)


def split_heads_moveaxis_checked(x, num_heads):
    x = np.asarray(x)
    b, n, d = x.shape
    if d % num_heads != 0:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    return np.moveaxis(x.reshape(b, n, num_heads, -1), 2, 1)


# ----------------------------------------------------------------------------- merge_heads: wrong
def merge_heads_no_transpose(x):
    batch, num_heads, seq_len, d_head = x.shape
    return x.reshape(batch, seq_len, num_heads * d_head)


def merge_heads_interleaves(x):
    batch, num_heads, seq_len, d_head = x.shape
    return x.transpose(0, 2, 3, 1).reshape(batch, seq_len, num_heads * d_head)


def merge_heads_forgets_reshape(x):
    return x.transpose(0, 2, 1, 3)


def merge_heads_concat_tokens(x):
    return np.concatenate([x[:, h] for h in range(x.shape[1])], axis=1)


def merge_heads_unpacks_wrong_order(x):
    batch, seq_len, num_heads, d_head = x.shape  # thinks the input is (B, N, H, d_head)
    return x.transpose(0, 2, 1, 3).reshape(batch, seq_len, num_heads * d_head)


def merge_heads_reversed_heads(x):
    return np.concatenate([x[:, h] for h in range(x.shape[1] - 1, -1, -1)], axis=-1)


# ----------------------------------------------------------------------------- merge_heads: right
def merge_heads_concat_loop(x):
    return np.concatenate([x[:, h, :, :] for h in range(x.shape[1])], axis=-1)


def merge_heads_einsum_copy(x):
    b, h, n, d = x.shape
    out = np.empty((b, n, h * d), dtype=x.dtype)
    out.reshape(b, n, h, d)[...] = np.einsum("bhnd->bnhd", x)
    return out


# ----------------------------------------------------------------------------- mha helpers
def _split(x, h):
    b, n, d = x.shape
    return x.reshape(b, n, h, d // h).transpose(0, 2, 1, 3)


def _merge(x):
    b, h, n, d = x.shape
    return x.transpose(0, 2, 1, 3).reshape(b, n, h * d)


def _softmax(s, axis=-1):
    e = np.exp(s - s.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


# ----------------------------------------------------------------------------- mha: wrong
def mha_scale_d_model(x, w_q, w_k, w_v, w_o, num_heads):
    q, k, v = _split(x @ w_q, num_heads), _split(x @ w_k, num_heads), _split(x @ w_v, num_heads)
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(x.shape[-1])
    return _merge(_softmax(scores) @ v) @ w_o


def mha_split_without_transpose(x, w_q, w_k, w_v, w_o, num_heads):
    b, n, d = x.shape

    def split(t):
        return t.reshape(b, num_heads, n, d // num_heads)

    q, k, v = split(x @ w_q), split(x @ w_k), split(x @ w_v)
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(d // num_heads)
    heads = _softmax(scores) @ v
    return heads.reshape(b, n, d) @ w_o


def mha_forgets_w_o(x, w_q, w_k, w_v, w_o, num_heads):
    q, k, v = _split(x @ w_q, num_heads), _split(x @ w_k, num_heads), _split(x @ w_v, num_heads)
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    return _merge(_softmax(scores) @ v)


def mha_softmax_over_queries(x, w_q, w_k, w_v, w_o, num_heads):
    q, k, v = _split(x @ w_q, num_heads), _split(x @ w_k, num_heads), _split(x @ w_v, num_heads)
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    return _merge(_softmax(scores, axis=-2) @ v) @ w_o


def mha_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads):
    q, k, v = _split(x @ w_q, num_heads), _split(x @ w_k, num_heads), _split(x @ w_v, num_heads)
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    heads = _softmax(scores) @ v  # (B, H, N, d_head)
    return heads.reshape(x.shape) @ w_o


def mha_keys_from_w_q(x, w_q, w_k, w_v, w_o, num_heads):
    q = _split(x @ w_q, num_heads)
    k = _split(x @ w_q, num_heads)
    v = _split(x @ w_v, num_heads)
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    return _merge(_softmax(scores) @ v) @ w_o


def mha_linear_layout(x, w_q, w_k, w_v, w_o, num_heads):
    q = _split(x @ w_q.T, num_heads)
    k = _split(x @ w_k.T, num_heads)
    v = _split(x @ w_v.T, num_heads)
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    return _merge(_softmax(scores) @ v) @ w_o.T


# ----------------------------------------------------------------------------- mha: right
def mha_per_head_sum(x, w_q, w_k, w_v, w_o, num_heads):
    d_model = x.shape[-1]
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    out = np.zeros(x.shape[:-1] + (w_o.shape[1],))
    for h in range(num_heads):
        cols = slice(h * d_head, (h + 1) * d_head)
        q, k, v = x @ w_q[:, cols], x @ w_k[:, cols], x @ w_v[:, cols]  # (B, N, d_head)
        s = np.einsum("bid,bjd->bij", q, k) / np.sqrt(d_head)
        w = np.exp(s - s.max(-1, keepdims=True))
        w /= w.sum(-1, keepdims=True)
        out += (w @ v) @ w_o[cols, :]  # head h writes through its rows of W_O
    return out


def mha_einsum_float32(x, w_q, w_k, w_v, w_o, num_heads):
    x32 = np.asarray(x, np.float32)
    b, n, d = x32.shape
    if d % num_heads:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    dh = d // num_heads
    q = np.einsum("bnd,de->bne", x32, np.float32(w_q)).reshape(b, n, num_heads, dh)
    k = np.einsum("bnd,de->bne", x32, np.float32(w_k)).reshape(b, n, num_heads, dh)
    v = np.einsum("bnd,de->bne", x32, np.float32(w_v)).reshape(b, n, num_heads, dh)
    s = np.einsum("bqhd,bkhd->bhqk", q, k) / np.float32(np.sqrt(dh))
    s -= s.max(-1, keepdims=True)
    p = np.exp(s)
    p /= p.sum(-1, keepdims=True)
    ctx = np.einsum("bhqk,bkhd->bqhd", p, v).reshape(b, n, d)
    return ctx @ np.float32(w_o)


ENTRIES = [
    Entry("split_heads", "wrong", "reshape_straight_to_heads",
          "Reshapes (B, N, d_model) straight to (B, H, N, d_head) instead of reshaping to "
          "(B, N, H, d_head) and transposing, so each 'head' mixes features of several tokens.",
          split_heads_no_transpose),
    Entry("split_heads", "wrong", "strided_features",
          "Reshapes to (B, N, d_head, H), so head h gets every H-th feature instead of the "
          "contiguous block h*d_head:(h+1)*d_head.", split_heads_strided_features),
    Entry("split_heads", "wrong", "forgets_transpose",
          "Stops after the reshape and returns (B, N, H, d_head) without moving the head axis "
          "in front of the token axis.", split_heads_forgets_transpose),
    Entry("split_heads", "wrong", "torch_style_transpose",
          "Calls transpose(1, 2) as in PyTorch; numpy's transpose takes a full permutation, so "
          "this raises.", split_heads_torch_style_transpose),
    Entry("split_heads", "wrong", "slices_drop_remainder",
          "Slices the heads in a loop with d_model // num_heads and never checks divisibility, "
          "so a width that does not divide silently drops features instead of raising "
          "ValueError.", split_heads_slices_loop),
    Entry("split_heads", "wrong", "float_head_width",
          "Computes d_head with true division (/), a float that reshape refuses.",
          split_heads_float_width),
    Entry("split_heads", "wrong", "transpose_then_reshape_scramble",
          "Transposes the features before the token axis and reshapes back to (B, H, N, d_head), "
          "scrambling tokens and features inside each head.", split_heads_reshape_order),
    Entry("split_heads", "right", "np_split_stack", None, split_heads_np_split),
    Entry("split_heads", "right", "moveaxis_checked", None, split_heads_moveaxis_checked),

    Entry("merge_heads", "wrong", "reshape_without_transpose",
          "Reshapes (B, H, N, d_head) to (B, N, H*d_head) without first moving the token axis "
          "in front of the heads, so tokens and heads get mixed up.", merge_heads_no_transpose),
    Entry("merge_heads", "wrong", "interleaves_heads",
          "Transposes to (B, N, d_head, H) before reshaping, so the heads' features end up "
          "interleaved instead of side by side.", merge_heads_interleaves),
    Entry("merge_heads", "wrong", "forgets_reshape",
          "Transposes back to (B, N, H, d_head) but never reshapes to (B, N, H*d_head).",
          merge_heads_forgets_reshape),
    Entry("merge_heads", "wrong", "concat_along_tokens",
          "Concatenates the heads along the token axis instead of the feature axis.",
          merge_heads_concat_tokens),
    Entry("merge_heads", "wrong", "unpacks_shape_wrong_order",
          "Unpacks x.shape as (B, N, H, d_head) although the input is (B, H, N, d_head), so the "
          "reshape uses the head count as the sequence length.", merge_heads_unpacks_wrong_order),
    Entry("merge_heads", "wrong", "reversed_head_order",
          "Concatenates the heads in reverse order, so head 0's features land in the last block.",
          merge_heads_reversed_heads),
    Entry("merge_heads", "right", "concat_loop", None, merge_heads_concat_loop),
    Entry("merge_heads", "right", "einsum_into_view", None, merge_heads_einsum_copy),

    Entry("multi_head_attention", "wrong", "scale_sqrt_d_model",
          "Scales the scores by sqrt(d_model) instead of sqrt(d_head).", mha_scale_d_model),
    Entry("multi_head_attention", "wrong", "split_without_transpose",
          "Splits the heads by reshaping straight to (B, H, N, d_head) without the transpose "
          "(and merges the same way), so each head sees a jumble of tokens and features.",
          mha_split_without_transpose),
    Entry("multi_head_attention", "wrong", "forgets_w_o",
          "Never applies the output projection w_o to the merged heads.", mha_forgets_w_o),
    Entry("multi_head_attention", "wrong", "softmax_over_queries",
          "Takes the softmax over the query axis instead of the key axis.",
          mha_softmax_over_queries),
    Entry("multi_head_attention", "wrong", "merge_without_transpose",
          "Merges the heads with a plain reshape to (B, N, d_model), without moving the token "
          "axis back in front of the heads.", mha_merge_without_transpose),
    Entry("multi_head_attention", "wrong", "keys_from_w_q",
          "Copy-paste slip: projects the keys with w_q instead of w_k.", mha_keys_from_w_q),
    Entry("multi_head_attention", "wrong", "linear_layout",
          "Applies the weights as x @ W.T (nn.Linear's (out, in) layout) although the course "
          "stores them (d_in, d_out) and applies x @ W.", mha_linear_layout),
    Entry("multi_head_attention", "right", "per_head_sum_of_w_o_blocks", None, mha_per_head_sum),
    Entry("multi_head_attention", "right", "einsum_float32", None, mha_einsum_float32),
]
