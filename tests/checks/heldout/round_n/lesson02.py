"""Held-out catalogue, lesson 02 (multi-head attention, numpy): split_heads, merge_heads,
multi_head_attention."""

import math

import numpy as np

from entry import Entry


def _check_divisible(d_model, num_heads):
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")


# ============================================================================ split_heads
def split_reshape_no_transpose(x, num_heads):
    b, n, d_model = x.shape
    _check_divisible(d_model, num_heads)
    return x.reshape(b, num_heads, n, d_model // num_heads)


def split_strided_heads(x, num_heads):
    b, n, d_model = x.shape
    _check_divisible(d_model, num_heads)
    d_head = d_model // num_heads
    return x.reshape(b, n, d_head, num_heads).transpose(0, 3, 1, 2)


def split_assert_guard(x, num_heads):
    batch, seq, d_model = x.shape
    assert d_model % num_heads == 0, f"d_model={d_model} not divisible by num_heads={num_heads}"
    d_head = d_model // num_heads
    return x.reshape(batch, seq, num_heads, d_head).transpose(0, 2, 1, 3)


def split_stack_axis0(x, num_heads):
    _check_divisible(x.shape[-1], num_heads)
    return np.stack(np.split(x, num_heads, axis=-1), axis=0)


def split_true_division(x, num_heads):
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    d_head = D / num_heads
    return x.reshape(B, N, num_heads, d_head).transpose(0, 2, 1, 3)


def split_guard_on_seq_len(x, num_heads):
    if x.shape[1] % num_heads != 0:
        raise ValueError(f"d_model={x.shape[-1]} is not divisible by num_heads={num_heads}")
    b, n, d = x.shape
    return np.swapaxes(x.reshape(b, n, num_heads, d // num_heads), 1, 2)


def split_np_split_stack(x, num_heads):
    x = np.asarray(x)
    if x.shape[-1] % num_heads:
        raise ValueError(f"d_model={x.shape[-1]} is not divisible by num_heads={num_heads}")
    return np.stack(np.split(x, num_heads, axis=-1), axis=1)


def split_loop_fill(x, num_heads):
    x = np.asarray(x)
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads
    out = np.empty((B, num_heads, N, dh), dtype=x.dtype)
    for h in range(num_heads):
        out[:, h, :, :] = x[:, :, h * dh:(h + 1) * dh]
    return out


# ============================================================================ merge_heads
def merge_reshape_no_transpose(x):
    b, h, n, d = x.shape
    return x.reshape(b, n, h * d)


def merge_head_minor(x):
    b, h, n, d = x.shape
    return x.transpose(0, 2, 3, 1).reshape(b, n, h * d)


def merge_concat_axis1(x):
    return np.concatenate([x[:, h] for h in range(x.shape[1])], axis=1)


def merge_shape_unpacked_wrong(x):
    B, N, H, d_head = x.shape  # layout misremembered as (B, N, H, d_head)
    return x.transpose(0, 2, 1, 3).reshape(B, N, H * d_head)


def merge_sum_heads(x):
    return x.sum(axis=1)


def merge_transpose_default(x):
    b, h, n, d = x.shape
    return np.transpose(x).reshape(b, n, h * d)


def merge_concat_last(x):
    return np.concatenate([x[:, h] for h in range(x.shape[1])], axis=-1)


def merge_loop(x):
    B, H, N, d = x.shape
    out = np.zeros((B, N, H * d), dtype=x.dtype)
    for b in range(B):
        for n in range(N):
            for h in range(H):
                out[b, n, h * d:(h + 1) * d] = x[b, h, n]
    return out


# ============================================================================ multi_head_attention
def _split(x, h):
    b, n, d = x.shape
    _check_divisible(d, h)
    return x.reshape(b, n, h, d // h).transpose(0, 2, 1, 3)


def _merge(x):
    b, h, n, d = x.shape
    return x.transpose(0, 2, 1, 3).reshape(b, n, h * d)


def _attend(q, k, v, scale):
    s = q @ np.swapaxes(k, -1, -2) * scale
    s = s - s.max(axis=-1, keepdims=True)
    w = np.exp(s)
    w = w / w.sum(axis=-1, keepdims=True)
    return w @ v


def mha_no_output_projection(x, w_q, w_k, w_v, w_o, num_heads):
    q, k, v = _split(x @ w_q, num_heads), _split(x @ w_k, num_heads), _split(x @ w_v, num_heads)
    ctx = _attend(q, k, v, 1.0 / math.sqrt(q.shape[-1]))
    return _merge(ctx)


def mha_scale_d_model(x, w_q, w_k, w_v, w_o, num_heads):
    d_model = x.shape[-1]
    q, k, v = _split(x @ w_q, num_heads), _split(x @ w_k, num_heads), _split(x @ w_v, num_heads)
    ctx = _attend(q, k, v, 1.0 / math.sqrt(d_model))
    return _merge(ctx) @ w_o


def mha_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, D = x.shape
    q, k, v = _split(x @ w_q, num_heads), _split(x @ w_k, num_heads), _split(x @ w_v, num_heads)
    ctx = _attend(q, k, v, 1.0 / math.sqrt(D // num_heads))
    return ctx.reshape(B, N, D) @ w_o


def mha_keys_from_w_q(x, w_q, w_k, w_v, w_o, num_heads):
    Q = x @ w_q
    K = x @ w_q
    V = x @ w_v
    q, k, v = _split(Q, num_heads), _split(K, num_heads), _split(V, num_heads)
    ctx = _attend(q, k, v, 1.0 / math.sqrt(q.shape[-1]))
    return _merge(ctx) @ w_o


def mha_linear_layout(x, w_q, w_k, w_v, w_o, num_heads):
    # nn.Linear habit: y = x @ W.T
    q, k, v = (_split(x @ w.T, num_heads) for w in (w_q, w_k, w_v))
    ctx = _attend(q, k, v, 1.0 / math.sqrt(q.shape[-1]))
    return _merge(ctx) @ w_o.T


def mha_strided_heads(x, w_q, w_k, w_v, w_o, num_heads):
    b, n, d = x.shape
    _check_divisible(d, num_heads)
    dh = d // num_heads

    def split(t):
        return t.reshape(b, n, dh, num_heads).transpose(0, 3, 1, 2)

    def merge(t):
        return t.transpose(0, 2, 3, 1).reshape(b, n, d)

    ctx = _attend(split(x @ w_q), split(x @ w_k), split(x @ w_v), 1.0 / math.sqrt(dh))
    return merge(ctx) @ w_o


def mha_per_head_columns(x, w_q, w_k, w_v, w_o, num_heads):
    d_model = x.shape[-1]
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    dh = d_model // num_heads
    out = np.zeros(x.shape[:-1] + (w_o.shape[1],))
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        qh, kh, vh = x @ w_q[:, cols], x @ w_k[:, cols], x @ w_v[:, cols]
        s = np.einsum("bid,bjd->bij", qh, kh) / math.sqrt(dh)
        s -= s.max(axis=-1, keepdims=True)
        p = np.exp(s)
        p /= p.sum(axis=-1, keepdims=True)
        out += (p @ vh) @ w_o[cols, :]  # concat then w_o == sum of per-head row blocks
    return out


def mha_einsum_weights(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x, dtype=np.float64)
    d = x.shape[-1]
    if d % num_heads:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    dh = d // num_heads
    wq = np.asarray(w_q, np.float64).reshape(d, num_heads, dh)
    wk = np.asarray(w_k, np.float64).reshape(d, num_heads, dh)
    wv = np.asarray(w_v, np.float64).reshape(d, num_heads, dh)
    wo = np.asarray(w_o, np.float64).reshape(num_heads, dh, d)
    q = np.einsum("bnd,dhe->bhne", x, wq)
    k = np.einsum("bnd,dhe->bhne", x, wk)
    v = np.einsum("bnd,dhe->bhne", x, wv)
    s = np.einsum("bhie,bhje->bhij", q, k) / np.sqrt(dh)
    p = np.exp(s - np.logaddexp.reduce(s, axis=-1, keepdims=True))
    ctx = np.einsum("bhij,bhje->bhie", p, v)
    return np.einsum("bhie,hef->bif", ctx, wo)


ENTRIES = [
    Entry("split_heads", "wrong", "reshape_without_transpose",
          "It reshapes straight to (B, H, N, d_head) without the transpose, so each 'head' is "
          "a block of the flat token-major data rather than features h*d_head:(h+1)*d_head of "
          "every token (only right when H=1 or N=1).",
          split_reshape_no_transpose),
    Entry("split_heads", "wrong", "strided_features",
          "Reshaping to (B, N, d_head, H) and moving H forward gives head h every H-th feature "
          "(h, h+H, ...) instead of the contiguous block h*d_head:(h+1)*d_head.",
          split_strided_heads),
    Entry("split_heads", "wrong", "assert_instead_of_valueerror",
          "The divisibility check is an assert, so a bad num_heads raises AssertionError "
          "instead of the ValueError the contract requires.",
          split_assert_guard),
    Entry("split_heads", "wrong", "heads_stacked_first",
          "np.stack(..., axis=0) puts the head axis first, returning (H, B, N, d_head) instead "
          "of (B, H, N, d_head).",
          split_stack_axis0),
    Entry("split_heads", "wrong", "float_head_size",
          "d_head is computed with / instead of //, so reshape receives a float and raises "
          "TypeError even for valid inputs.",
          split_true_division),
    Entry("split_heads", "wrong", "guard_checks_seq_len",
          "The guard tests x.shape[1] (the sequence length N) for divisibility instead of "
          "d_model, so valid inputs whose N is not a multiple of num_heads raise ValueError.",
          split_guard_on_seq_len),
    Entry("split_heads", "right", "np_split_stack_axis1", None, split_np_split_stack),
    Entry("split_heads", "right", "loop_fill_slices", None, split_loop_fill),

    Entry("merge_heads", "wrong", "reshape_without_transpose",
          "It reshapes (B, H, N, d_head) straight to (B, N, H*d_head) without first moving "
          "the head axis behind N, which scrambles tokens and heads unless H=1 or N=1.",
          merge_reshape_no_transpose),
    Entry("merge_heads", "wrong", "head_minor_order",
          "transpose(0, 2, 3, 1) puts the head index last, so the merged features are "
          "interleaved (feature j*H + h) instead of head 0's block first.",
          merge_head_minor),
    Entry("merge_heads", "wrong", "concatenate_on_seq_axis",
          "The heads are concatenated along axis 1 (the token axis), giving (B, H*N, d_head) "
          "instead of joining them along the feature axis.",
          merge_concat_axis1),
    Entry("merge_heads", "wrong", "shape_unpacked_as_bnhd",
          "The shape is unpacked as (B, N, H, d_head) although the input is (B, H, N, d_head), "
          "so the reshape uses the head count as the sequence length and returns the wrong "
          "shape whenever H != N.",
          merge_shape_unpacked_wrong),
    Entry("merge_heads", "wrong", "sums_heads",
          "It sums the heads (x.sum(axis=1)) instead of concatenating them, returning "
          "(B, N, d_head).",
          merge_sum_heads),
    Entry("merge_heads", "wrong", "transpose_without_axes",
          "np.transpose without an axes argument reverses all four axes instead of swapping "
          "H and N, so the reshape scrambles the values.",
          merge_transpose_default),
    Entry("merge_heads", "right", "concatenate_last_axis", None, merge_concat_last),
    Entry("merge_heads", "right", "triple_loop", None, merge_loop),

    Entry("multi_head_attention", "wrong", "forgets_output_projection",
          "The merged heads are returned without the final @ w_o projection.",
          mha_no_output_projection),
    Entry("multi_head_attention", "wrong", "scale_by_d_model",
          "Scores are scaled by 1/sqrt(d_model) instead of 1/sqrt(d_head), which is only right "
          "with a single head.",
          mha_scale_d_model),
    Entry("multi_head_attention", "wrong", "merge_without_transpose",
          "The heads' outputs (B, H, N, d_head) are reshaped to (B, N, d_model) without moving "
          "the head axis behind N, mixing tokens and heads unless H=1 or N=1.",
          mha_merge_without_transpose),
    Entry("multi_head_attention", "wrong", "keys_from_w_q",
          "The keys are computed with w_q (K = x @ w_q), so w_k is never used.",
          mha_keys_from_w_q),
    Entry("multi_head_attention", "wrong", "nn_linear_layout",
          "All four weights are applied as x @ W.T (nn.Linear's layout) although the contract "
          "applies them as x @ W.",
          mha_linear_layout),
    Entry("multi_head_attention", "wrong", "strided_head_features",
          "Heads are split by reshaping to (B, N, d_head, H), so each head gets every H-th "
          "feature instead of a contiguous block of d_head features (the merge inverts it, "
          "but the heads attend over the wrong feature groups).",
          mha_strided_heads),
    Entry("multi_head_attention", "right", "per_head_weight_columns", None, mha_per_head_columns),
    Entry("multi_head_attention", "right", "einsum_reshaped_weights", None, mha_einsum_weights),
]
