"""Round m catalogue, lesson 02 (multi-head attention, numpy):
split_heads, merge_heads, multi_head_attention."""

import math

import numpy as np
from scipy.special import softmax as sp_softmax

from entry import Entry


# ============================================================================ split_heads
def split_reshape_only(x, num_heads):
    b, n, d_model = x.shape
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    return x.reshape(b, num_heads, n, d_model // num_heads)


def split_interleaved(x, num_heads):
    b, n, d_model = x.shape
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    return x.reshape(b, n, d_head, num_heads).transpose(0, 3, 1, 2)


def split_torch_style_transpose(x, num_heads):
    b, n, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    return x.reshape(b, n, num_heads, d_model // num_heads).transpose(1, 2)


def split_swapped_modulo(x, num_heads):
    b, n, d_model = x.shape
    if num_heads % d_model != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    return x.reshape(b, n, num_heads, d_head).transpose(0, 2, 1, 3)


def split_assert_guard(x, num_heads):
    b, n, d_model = x.shape
    assert d_model % num_heads == 0, f"d_model={d_model} is not divisible by num_heads={num_heads}"
    d_head = d_model // num_heads
    return np.swapaxes(x.reshape(b, n, num_heads, d_head), 1, 2)


def split_true_division(x, num_heads):
    b, n, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model / num_heads
    return x.reshape(b, n, num_heads, d_head).transpose(0, 2, 1, 3)


def split_stack_slices(x, num_heads):
    x = np.asarray(x)
    d_model = x.shape[-1]
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    return np.stack([x[:, :, h * d_head:(h + 1) * d_head] for h in range(num_heads)], axis=1)


def split_np_split(x, num_heads):
    if x.shape[-1] % num_heads:
        raise ValueError(f"d_model={x.shape[-1]} is not divisible by num_heads={num_heads}")
    parts = np.split(x, num_heads, axis=2)  # H arrays of (B, N, d_head)
    return np.array(parts).transpose(1, 0, 2, 3)


# ============================================================================ merge_heads
def merge_reshape_only(x):
    b, h, n, d = x.shape
    return x.reshape(b, n, h * d)


def merge_interleaved(x):
    b, h, n, d = x.shape
    return x.transpose(0, 2, 3, 1).reshape(b, n, h * d)


def merge_stale_shape(x):
    y = x.transpose(0, 2, 1, 3)
    return y.reshape(x.shape[0], x.shape[1], -1)


def merge_drop_last_head(x):
    num_heads = x.shape[1]
    return np.concatenate([x[:, h] for h in range(num_heads - 1)], axis=-1)


def merge_hstack(x):
    return np.hstack([x[:, h] for h in range(x.shape[1])])


def merge_slice_stride(x):
    b, h, n, d = x.shape
    out = np.zeros((b, n, h * d), dtype=x.dtype)
    for head in range(h):
        out[:, :, head:head + d] = x[:, head]
    return out


def merge_concatenate(x):
    return np.concatenate([x[:, h, :, :] for h in range(x.shape[1])], axis=-1)


def merge_element_loops(x):
    b, h, n, d = x.shape
    out = np.empty((b, n, h * d), dtype=x.dtype)
    for bi in range(b):
        for head in range(h):
            for t in range(n):
                for j in range(d):
                    out[bi, t, head * d + j] = x[bi, head, t, j]
    return out


# ============================================================================ multi_head_attention
def _split(x, h):
    b, n, d = x.shape
    if d % h:
        raise ValueError(f"d_model={d} is not divisible by num_heads={h}")
    return x.reshape(b, n, h, d // h).transpose(0, 2, 1, 3)


def _merge(x):
    b, h, n, d = x.shape
    return x.transpose(0, 2, 1, 3).reshape(b, n, h * d)


def _softmax(s):
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def mha_scale_d_model(x, w_q, w_k, w_v, w_o, num_heads):
    d_model = x.shape[-1]
    q, k, v = _split(x @ w_q, num_heads), _split(x @ w_k, num_heads), _split(x @ w_v, num_heads)
    scores = q @ k.swapaxes(-1, -2) / math.sqrt(d_model)
    return _merge(_softmax(scores) @ v) @ w_o


def mha_v_from_w_k(x, w_q, w_k, w_v, w_o, num_heads):
    q = _split(x @ w_q, num_heads)
    k = _split(x @ w_k, num_heads)
    v = _split(x @ w_k, num_heads)
    scores = q @ k.swapaxes(-1, -2) / math.sqrt(q.shape[-1])
    return _merge(_softmax(scores) @ v) @ w_o


def mha_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads):
    b, n, d_model = x.shape
    q, k, v = (_split(x @ w, num_heads) for w in (w_q, w_k, w_v))
    heads = _softmax(q @ k.swapaxes(-1, -2) / math.sqrt(q.shape[-1])) @ v
    return heads.reshape(b, n, d_model) @ w_o


def mha_causal_by_default(x, w_q, w_k, w_v, w_o, num_heads):
    n = x.shape[1]
    q, k, v = (_split(x @ w, num_heads) for w in (w_q, w_k, w_v))
    scores = q @ k.swapaxes(-1, -2) / math.sqrt(q.shape[-1])
    allowed = np.tril(np.ones((n, n), dtype=bool))
    scores = np.where(allowed, scores, -np.inf)
    return _merge(_softmax(scores) @ v) @ w_o


def mha_w_o_transposed(x, w_q, w_k, w_v, w_o, num_heads):
    q, k, v = (_split(x @ w, num_heads) for w in (w_q, w_k, w_v))
    scores = np.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(q.shape[-1])
    return _merge(_softmax(scores) @ v) @ w_o.T


def mha_assert_guard(x, w_q, w_k, w_v, w_o, num_heads):
    b, n, d_model = x.shape
    assert d_model % num_heads == 0, f"d_model={d_model} is not divisible by num_heads={num_heads}"
    d_head = d_model // num_heads

    def split(t):
        return t.reshape(b, n, num_heads, d_head).transpose(0, 2, 1, 3)

    q, k, v = split(x @ w_q), split(x @ w_k), split(x @ w_v)
    out = _softmax(q @ k.swapaxes(-1, -2) / math.sqrt(d_head)) @ v
    return out.transpose(0, 2, 1, 3).reshape(b, n, d_model) @ w_o


def mha_per_head_columns(x, w_q, w_k, w_v, w_o, num_heads):
    d_model = x.shape[-1]
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    dh = d_model // num_heads
    total = np.zeros(x.shape[:-1] + (d_model,), dtype=np.float64)
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        qh, kh, vh = x @ w_q[:, cols], x @ w_k[:, cols], x @ w_v[:, cols]  # (B, N, dh)
        wts = sp_softmax(qh @ kh.transpose(0, 2, 1) / math.sqrt(dh), axis=-1)
        total += (wts @ vh) @ w_o[cols, :]  # each head's rows of w_o
    return total


def mha_einsum(x, w_q, w_k, w_v, w_o, num_heads):
    b, n, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    dh = d_model // num_heads
    wq = w_q.reshape(d_model, num_heads, dh)
    wk = w_k.reshape(d_model, num_heads, dh)
    wv = w_v.reshape(d_model, num_heads, dh)
    wo = w_o.reshape(num_heads, dh, d_model)
    q = np.einsum("bnm,mhe->bhne", x, wq)
    k = np.einsum("bnm,mhe->bhne", x, wk)
    v = np.einsum("bnm,mhe->bhne", x, wv)
    p = sp_softmax(np.einsum("bhie,bhje->bhij", q, k) / np.sqrt(dh), axis=-1)
    ctx = np.einsum("bhij,bhje->bhie", p, v)
    return np.einsum("bhie,hem->bim", ctx, wo)


ENTRIES = [
    # split_heads --------------------------------------------------------------
    Entry("split_heads", "wrong", "reshape_without_transpose",
          "It reshapes (B, N, d_model) straight to (B, H, N, d_head), which cuts the flat "
          "token-by-token memory into blocks instead of moving each token's feature slice to "
          "its head, so heads mix features of different tokens.",
          split_reshape_only),
    Entry("split_heads", "wrong", "interleaved_features",
          "It reshapes to (B, N, d_head, H) before transposing, so head h gets features h, "
          "h+H, h+2H, ... (a strided pick) instead of the contiguous block "
          "h*d_head:(h+1)*d_head.",
          split_interleaved),
    Entry("split_heads", "wrong", "torch_style_transpose",
          "It calls numpy's transpose(1, 2) as if it were torch's swap of two dims, but numpy "
          "expects a full permutation of the four axes, so every valid call raises ValueError.",
          split_torch_style_transpose),
    Entry("split_heads", "wrong", "swapped_modulo_guard",
          "The guard tests num_heads % d_model instead of d_model % num_heads, so it raises on "
          "valid inputs such as d_model=12, num_heads=3.",
          split_swapped_modulo),
    Entry("split_heads", "wrong", "assert_instead_of_valueerror",
          "It checks divisibility with assert, which raises AssertionError instead of the "
          "ValueError the contract requires.",
          split_assert_guard),
    Entry("split_heads", "wrong", "true_division_d_head",
          "d_head = d_model / num_heads is a float, and reshape refuses a float dimension, so "
          "every valid call raises TypeError.",
          split_true_division),
    Entry("split_heads", "right", "stack_column_slices", None, split_stack_slices),
    Entry("split_heads", "right", "np_split_then_transpose", None, split_np_split),
    # merge_heads --------------------------------------------------------------
    Entry("merge_heads", "wrong", "reshape_without_transpose",
          "It reshapes (B, H, N, d_head) straight to (B, N, H*d_head) without first moving the "
          "head axis after the token axis, so each output token gets a block of a head's "
          "memory instead of its own features from every head.",
          merge_reshape_only),
    Entry("merge_heads", "wrong", "interleaved_permutation",
          "It permutes to (B, N, d_head, H) before the reshape, so the heads' features are "
          "interleaved feature by feature instead of placed side by side, head 0's block first.",
          merge_interleaved),
    Entry("merge_heads", "wrong", "stale_shape_after_transpose",
          "After transposing it reshapes with x.shape[1] of the original array (H) instead of "
          "N, so the result has shape (B, H, N*d_head) rather than (B, N, H*d_head).",
          merge_stale_shape),
    Entry("merge_heads", "wrong", "drops_last_head",
          "The loop runs over range(num_heads - 1), so the last head's features are left out "
          "of the concatenation (with a single head the list is empty and np.concatenate raises).",
          merge_drop_last_head),
    Entry("merge_heads", "wrong", "hstack_wrong_axis",
          "np.hstack concatenates along axis 1 for arrays of 2 or more dimensions, so the "
          "heads are stacked along the token axis, giving (B, H*N, d_head).",
          merge_hstack),
    Entry("merge_heads", "wrong", "slice_stride_not_scaled",
          "Head h is written to columns h:h+d_head instead of h*d_head:(h+1)*d_head, so the "
          "heads' slices overlap and later heads overwrite earlier ones.",
          merge_slice_stride),
    Entry("merge_heads", "right", "concatenate_last_axis", None, merge_concatenate),
    Entry("merge_heads", "right", "element_loops", None, merge_element_loops),
    # multi_head_attention -------------------------------------------------------
    Entry("multi_head_attention", "wrong", "scale_by_d_model",
          "The scores are divided by sqrt(d_model) instead of sqrt(d_head), so with more than "
          "one head the softmax is too flat.",
          mha_scale_d_model),
    Entry("multi_head_attention", "wrong", "values_from_w_k",
          "A copy-paste slip projects the values with w_k instead of w_v.",
          mha_v_from_w_k),
    Entry("multi_head_attention", "wrong", "merge_by_plain_reshape",
          "The heads are split correctly but merged with a bare reshape to (B, N, d_model) "
          "without transposing the head axis back, so the tokens' outputs are scrambled "
          "across heads.",
          mha_merge_without_transpose),
    Entry("multi_head_attention", "wrong", "causal_mask_by_default",
          "It applies a causal mask although the exercise asks for unmasked self-attention, "
          "so each token ignores the later tokens.",
          mha_causal_by_default),
    Entry("multi_head_attention", "wrong", "w_o_transposed",
          "It applies the output projection as merged @ w_o.T (nn.Linear's layout) instead "
          "of merged @ w_o as the course convention requires.",
          mha_w_o_transposed),
    Entry("multi_head_attention", "wrong", "assert_guard",
          "It checks divisibility with assert, so an indivisible num_heads raises "
          "AssertionError instead of ValueError.",
          mha_assert_guard),
    Entry("multi_head_attention", "right", "per_head_weight_columns", None,
          mha_per_head_columns),
    Entry("multi_head_attention", "right", "einsum_reshaped_weights", None, mha_einsum),
]
