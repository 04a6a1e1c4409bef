"""Lesson 02 (multi-head, numpy): split_heads, merge_heads, multi_head_attention."""

import math

import numpy as np

from entry import Entry


def _check(d_model, num_heads):
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")


# ============================================================================ split_heads
def sh_w_reshape_only(x, num_heads):
    b, n, d = x.shape
    _check(d, num_heads)
    return x.reshape(b, num_heads, n, d // num_heads)


def sh_w_interleaved(x, num_heads):
    b, n, d = x.shape
    _check(d, num_heads)
    return x.reshape(b, n, d // num_heads, num_heads).transpose(0, 3, 1, 2)


def sh_w_assert(x, num_heads):
    b, n, d = x.shape
    assert d % num_heads == 0, "d_model must divide"
    return x.reshape(b, n, num_heads, d // num_heads).transpose(0, 2, 1, 3)


def sh_w_bad_permutation(x, num_heads):
    b, n, d = x.shape
    _check(d, num_heads)
    return x.reshape(b, n, num_heads, d // num_heads).transpose(0, 2, 3, 1)


def sh_w_true_division(x, num_heads):
    b, n, d = x.shape
    _check(d, num_heads)
    return x.reshape(b, n, num_heads, d / num_heads).transpose(0, 2, 1, 3)


def sh_w_no_transpose(x, num_heads):
    b, n, d = x.shape
    _check(d, num_heads)
    return x.reshape(b, n, num_heads, d // num_heads)


def sh_w_heads_width_swapped(x, num_heads):
    b, n, d = x.shape
    _check(d, num_heads)
    return x.reshape(b, n, -1, num_heads).transpose(0, 2, 1, 3)  # (B, d_head, N, H)


def sh_r_stack_slices(x, num_heads):
    d = x.shape[-1]
    if d % num_heads:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    w = d // num_heads
    return np.stack([x[:, :, h * w:(h + 1) * w] for h in range(num_heads)], axis=1)


def sh_r_moveaxis(x, num_heads):
    b, n, d = x.shape
    if num_heads <= 0 or d % num_heads:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    return np.moveaxis(x.reshape(b, n, num_heads, -1), 2, 1)


# ============================================================================ merge_heads
def mh_w_reshape_only(x):
    b, h, n, d = x.shape
    return x.reshape(b, n, h * d)


def mh_w_d_major(x):
    b, h, n, d = x.shape
    return x.transpose(0, 2, 3, 1).reshape(b, n, h * d)


def mh_w_sum_heads(x):
    return x.sum(axis=1)


def mh_w_torch_permute(x):
    b, h, n, d = x.shape
    return x.permute(0, 2, 1, 3).reshape(b, n, h * d)


def mh_w_unpack_order(x):
    b, n, h, d = x.shape  # unpacked in the wrong order
    return x.transpose(0, 2, 1, 3).reshape(b, n, h * d)


def mh_w_concat_seq(x):
    return np.concatenate([x[:, i] for i in range(x.shape[1])], axis=-2)


def mh_r_concat(x):
    return np.concatenate([x[:, h] for h in range(x.shape[1])], axis=-1)


def mh_r_moveaxis(x):
    return np.moveaxis(x, 1, 2).reshape(x.shape[0], x.shape[2], -1)


def mh_r_loops(x):
    b, h, n, d = x.shape
    out = np.zeros((b, n, h * d), dtype=x.dtype)
    for head in range(h):
        out[:, :, head * d:(head + 1) * d] = x[:, head]
    return out


# ============================================================================ multi_head_attention
def _softmax(s):
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _split(x, h):
    b, n, d = x.shape
    return x.reshape(b, n, h, d // h).transpose(0, 2, 1, 3)


def _merge(x):
    b, h, n, d = x.shape
    return x.transpose(0, 2, 1, 3).reshape(b, n, h * d)


def _mha(x, w_q, w_k, w_v, w_o, num_heads, *, scale_width=None, split=_split, use_wo=True,
         transpose_w=False, causal=False, check=True):
    d_model = x.shape[-1]
    if check:
        _check(d_model, num_heads)
    if transpose_w:
        w_q, w_k, w_v, w_o = w_q.T, w_k.T, w_v.T, w_o.T
    q, k, v = (split(x @ w, num_heads) for w in (w_q, w_k, w_v))
    width = q.shape[-1] if scale_width is None else scale_width
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(width)
    if causal:
        n = x.shape[1]
        s = np.where(np.tril(np.ones((n, n), dtype=bool)), s, -np.inf)
    out = _merge(_softmax(s) @ v)
    return out @ w_o if use_wo else out


def mha_w_scale_d_model(x, w_q, w_k, w_v, w_o, num_heads):
    return _mha(x, w_q, w_k, w_v, w_o, num_heads, scale_width=x.shape[-1])


def mha_w_reshape_split(x, w_q, w_k, w_v, w_o, num_heads):
    def split(t, h):
        b, n, d = t.shape
        return t.reshape(b, h, n, d // h)

    return _mha(x, w_q, w_k, w_v, w_o, num_heads, split=split)


def mha_w_no_output_projection(x, w_q, w_k, w_v, w_o, num_heads):
    return _mha(x, w_q, w_k, w_v, w_o, num_heads, use_wo=False)


def mha_w_linear_layout(x, w_q, w_k, w_v, w_o, num_heads):
    return _mha(x, w_q, w_k, w_v, w_o, num_heads, transpose_w=True)


def mha_w_causal(x, w_q, w_k, w_v, w_o, num_heads):
    return _mha(x, w_q, w_k, w_v, w_o, num_heads, causal=True)


def mha_w_array_split(x, w_q, w_k, w_v, w_o, num_heads):
    def heads(t):
        return np.array_split(t, num_heads, axis=-1)

    outs = []
    for qh, kh, vh in zip(heads(x @ w_q), heads(x @ w_k), heads(x @ w_v)):
        w = _softmax(qh @ np.swapaxes(kh, -1, -2) / math.sqrt(qh.shape[-1]))
        outs.append(w @ vh)
    return np.concatenate(outs, axis=-1) @ w_o


def mha_w_shared_softmax(x, w_q, w_k, w_v, w_o, num_heads):
    """Averages the heads' scores and uses one weight matrix for every head."""
    _check(x.shape[-1], num_heads)
    q, k, v = (_split(x @ w, num_heads) for w in (w_q, w_k, w_v))
    s = (q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])).mean(axis=1, keepdims=True)
    return _merge(_softmax(s) @ v) @ w_o


def mha_r_einsum(x, w_q, w_k, w_v, w_o, num_heads):
    d = x.shape[-1]
    if d % num_heads:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    dh = d // num_heads
    q = np.einsum("bnd,dhe->bhne", x, w_q.reshape(d, num_heads, dh))
    k = np.einsum("bnd,dhe->bhne", x, w_k.reshape(d, num_heads, dh))
    v = np.einsum("bnd,dhe->bhne", x, w_v.reshape(d, num_heads, dh))
    s = np.einsum("bhqe,bhke->bhqk", q, k) / np.sqrt(dh)
    w = np.exp(s - s.max(-1, keepdims=True))
    w /= w.sum(-1, keepdims=True)
    o = np.einsum("bhqk,bhke->bhqe", w, v)
    return np.einsum("bhqe,hef->bqf", o, w_o.reshape(num_heads, dh, d))


def mha_r_head_loop(x, w_q, w_k, w_v, w_o, num_heads):
    d = x.shape[-1]
    if d % num_heads:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    dh = d // num_heads
    out = np.zeros(x.shape)
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        q, k, v = x @ w_q[:, cols], x @ w_k[:, cols], x @ w_v[:, cols]
        w = _softmax(q @ k.transpose(0, 2, 1) / math.sqrt(dh))
        out += (w @ v) @ w_o[cols, :]  # each head's share of the output projection
    return out


def mha_r_float32(x, w_q, w_k, w_v, w_o, num_heads):
    args = [np.asarray(a, dtype=np.float32) for a in (x, w_q, w_k, w_v, w_o)]
    return _mha(*args, num_heads)


E = Entry
ENTRIES = [
    E("split_heads", "wrong", "reshape_without_transpose",
      "Reshapes straight to (B, H, N, d_head), mixing tokens and features across heads.",
      sh_w_reshape_only),
    E("split_heads", "wrong", "interleaved_features",
      "Reshapes to (B, N, d_head, H), so head h gets every H-th feature instead of a "
      "contiguous block.", sh_w_interleaved),
    E("split_heads", "wrong", "assert_not_valueerror",
      "Checks divisibility with assert, which raises AssertionError rather than ValueError.",
      sh_w_assert),
    E("split_heads", "wrong", "wrong_permutation",
      "Transposes with (0, 2, 3, 1), giving (B, H, d_head, N).", sh_w_bad_permutation),
    E("split_heads", "wrong", "true_division_width",
      "Computes d_head with / instead of //, and numpy refuses a float in reshape.",
      sh_w_true_division),
    E("split_heads", "wrong", "forgot_transpose",
      "Returns the (B, N, H, d_head) reshape without moving the head axis forward.",
      sh_w_no_transpose),
    E("split_heads", "wrong", "heads_and_width_swapped",
      "Reshapes to (B, N, d_head, H) by putting -1 where num_heads belongs, so the head and "
      "width axes trade places.", sh_w_heads_width_swapped),
    E("split_heads", "right", "stack_of_slices", None, sh_r_stack_slices),
    E("split_heads", "right", "moveaxis", None, sh_r_moveaxis),
    E("merge_heads", "wrong", "reshape_without_transpose",
      "Reshapes (B, H, N, d_head) straight to (B, N, H*d_head) without transposing first.",
      mh_w_reshape_only),
    E("merge_heads", "wrong", "feature_major_order",
      "Transposes to (B, N, d_head, H) before reshaping, interleaving the heads' features.",
      mh_w_d_major),
    E("merge_heads", "wrong", "sums_heads",
      "Adds the heads together instead of concatenating them.", mh_w_sum_heads),
    E("merge_heads", "wrong", "torch_permute_on_ndarray",
      "Calls torch's .permute on a numpy array, which has no such method.", mh_w_torch_permute),
    E("merge_heads", "wrong", "shape_unpacked_in_wrong_order",
      "Unpacks x.shape as (B, N, H, d) though x is (B, H, N, d), so the reshape uses swapped "
      "sizes.", mh_w_unpack_order),
    E("merge_heads", "wrong", "concatenates_along_sequence",
      "Concatenates the heads along the token axis instead of the feature axis.",
      mh_w_concat_seq),
    E("merge_heads", "right", "concatenate_heads", None, mh_r_concat),
    E("merge_heads", "right", "moveaxis_reshape", None, mh_r_moveaxis),
    E("merge_heads", "right", "loop_fill", None, mh_r_loops),
    E("multi_head_attention", "wrong", "scale_by_d_model",
      "Scales each head's scores by 1/sqrt(d_model) instead of 1/sqrt(d_head).",
      mha_w_scale_d_model),
    E("multi_head_attention", "wrong", "split_without_transpose",
      "Splits heads with a bare reshape to (B, H, N, d_head), without the transpose.",
      mha_w_reshape_split),
    E("multi_head_attention", "wrong", "no_output_projection",
      "Forgets to apply w_o after merging the heads.", mha_w_no_output_projection),
    E("multi_head_attention", "wrong", "linear_layout_weights",
      "Applies the weights as x @ W.T (nn.Linear's layout) instead of x @ W.",
      mha_w_linear_layout),
    E("multi_head_attention", "wrong", "adds_causal_mask",
      "Adds a causal mask copied from a decoder example, though this exercise has no mask.",
      mha_w_causal),
    E("multi_head_attention", "wrong", "uneven_heads_no_error",
      "Splits with np.array_split, so a d_model that does not divide gives uneven heads "
      "instead of a ValueError.", mha_w_array_split),
    E("multi_head_attention", "wrong", "one_softmax_for_all_heads",
      "Averages the heads' scores and uses one set of weights for every head.",
      mha_w_shared_softmax),
    E("multi_head_attention", "right", "einsum_reshaped_weights", None, mha_r_einsum),
    E("multi_head_attention", "right", "per_head_output_projection", None, mha_r_head_loop),
    E("multi_head_attention", "right", "float32_internals", None, mha_r_float32),
]
