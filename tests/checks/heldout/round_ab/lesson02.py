"""Held-out learners' answers, lesson 02 (split_heads, merge_heads, multi_head_attention)."""

import math

import numpy as np

from entry import Entry


# ============================================================================ split_heads
def split_reshape_only(x, num_heads):
    B, N, D = x.shape
    if D % num_heads != 0:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    return x.reshape(B, num_heads, N, D // num_heads)


def split_strided(x, num_heads):
    batch, seq, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    return x.reshape(batch, seq, d_head, num_heads).transpose(0, 3, 1, 2)


def split_stack_axis0(x, num_heads):
    d_model = x.shape[-1]
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    pieces = np.split(x, num_heads, axis=-1)
    return np.stack(pieces, axis=0)


def split_assert(x, num_heads):
    b, n, d = x.shape
    assert d % num_heads == 0, f"d_model={d} is not divisible by num_heads={num_heads}"
    dh = d // num_heads
    return np.transpose(x.reshape(b, n, num_heads, dh), (0, 2, 1, 3))


def split_slices_num_heads_wide(x, num_heads):
    d_model = x.shape[2]
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    heads = []
    for h in range(num_heads):
        heads.append(x[:, :, h * num_heads:(h + 1) * num_heads])
    return np.stack(heads, axis=1)


def split_modulo_swapped(x, num_heads):
    B, N, d_model = x.shape
    if num_heads % d_model:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    return x.reshape(B, N, num_heads, d_head).swapaxes(1, 2)


def split_slice_loop(x, num_heads):
    x = np.asarray(x)
    width = x.shape[-1]
    if width % num_heads != 0:
        raise ValueError(f"d_model={width} is not divisible by num_heads={num_heads}")
    size = width // num_heads
    return np.stack([x[..., i * size:(i + 1) * size] for i in range(num_heads)], axis=1)


def split_einsum(x, num_heads):
    x = np.asarray(x)
    batch, tokens, width = x.shape
    quotient, remainder = divmod(width, num_heads)
    if remainder:
        raise ValueError(f"d_model={width} is not divisible by num_heads={num_heads}")
    return np.einsum("bnhd->bhnd", x.reshape(batch, tokens, num_heads, quotient))


# ============================================================================ merge_heads
def merge_reshape_only(x):
    B, H, N, d = x.shape
    return x.reshape(B, N, H * d)


def merge_wrong_transpose(x):
    b, h, n, dh = x.shape
    return x.transpose(0, 2, 3, 1).reshape(b, n, h * dh)


def merge_concat_tokens(x):
    return np.concatenate([x[:, h] for h in range(x.shape[1])], axis=1)


def merge_shape_misread(x):
    B, N, H, d = x.shape  # (batch, tokens, heads, head dim)
    return x.transpose(0, 2, 1, 3).reshape(B, N, H * d)


def merge_fortran_order(x):
    batch, heads, n, d_head = x.shape
    return np.reshape(x.transpose(0, 2, 1, 3), (batch, n, heads * d_head), order="F")


def merge_loop_from_one(x):
    num_heads = x.shape[1]
    parts = []
    for h in range(1, num_heads):
        parts.append(x[:, h, :, :])
    return np.concatenate(parts, axis=-1)


def merge_concat_heads(x):
    return np.concatenate(list(np.moveaxis(x, 1, 0)), axis=-1)


def merge_index_loops(x):
    B, H, N, d = x.shape
    out = np.empty((B, N, H * d), dtype=x.dtype)
    for h in range(H):
        for j in range(d):
            out[:, :, h * d + j] = x[:, h, :, j]
    return out


# ============================================================================ multi_head_attention
def mha_scale_d_model(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads

    def heads(t):
        return t.reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)

    q, k, v = heads(x @ w_q), heads(x @ w_k), heads(x @ w_v)
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(D)
    s = np.exp(s - s.max(-1, keepdims=True))
    a = s / s.sum(-1, keepdims=True)
    ctx = (a @ v).transpose(0, 2, 1, 3).reshape(B, N, D)
    return ctx @ w_o


def mha_wo_transposed(x, w_q, w_k, w_v, w_o, num_heads):
    batch, n, d_model = x.shape
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    q = (x @ w_q).reshape(batch, n, num_heads, d_head).transpose(0, 2, 1, 3)
    k = (x @ w_k).reshape(batch, n, num_heads, d_head).transpose(0, 2, 1, 3)
    v = (x @ w_v).reshape(batch, n, num_heads, d_head).transpose(0, 2, 1, 3)
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(d_head)
    scores -= scores.max(axis=-1, keepdims=True)
    p = np.exp(scores)
    p /= p.sum(axis=-1, keepdims=True)
    merged = (p @ v).transpose(0, 2, 1, 3).reshape(batch, n, d_model)
    return merged @ w_o.T


def mha_values_unprojected(x, w_q, w_k, w_v, w_o, num_heads):
    b, n, d = x.shape
    if d % num_heads:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    hd = d // num_heads
    split = lambda t: np.moveaxis(t.reshape(b, n, num_heads, hd), 2, 1)  # noqa: E731
    Q = split(x @ w_q)
    K = split(x @ w_k)
    V = split(x)
    S = np.einsum("bhid,bhjd->bhij", Q, K) / math.sqrt(hd)
    S = S - S.max(axis=-1, keepdims=True)
    W = np.exp(S)
    W = W / W.sum(axis=-1, keepdims=True)
    O = np.einsum("bhij,bhjd->bhid", W, V)
    return np.moveaxis(O, 1, 2).reshape(b, n, d) @ w_o


def mha_adds_residual(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, D = x.shape
    if D % num_heads != 0:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    d_head = D // num_heads
    q = (x @ w_q).reshape(B, N, num_heads, d_head).transpose(0, 2, 1, 3)
    k = (x @ w_k).reshape(B, N, num_heads, d_head).transpose(0, 2, 1, 3)
    v = (x @ w_v).reshape(B, N, num_heads, d_head).transpose(0, 2, 1, 3)
    att = q @ k.transpose(0, 1, 3, 2) * (1.0 / math.sqrt(d_head))
    att = np.exp(att - att.max(axis=-1, keepdims=True))
    att = att / att.sum(axis=-1, keepdims=True)
    y = (att @ v).transpose(0, 2, 1, 3).reshape(B, N, D)
    return x + y @ w_o


def mha_sum_no_keepdims(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads
    q = (x @ w_q).reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)
    k = (x @ w_k).reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)
    v = (x @ w_v).reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)
    s = q @ k.swapaxes(-1, -2) / np.sqrt(dh)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    w = e / e.sum(axis=-1)
    return (w @ v).transpose(0, 2, 1, 3).reshape(B, N, D) @ w_o


def mha_softmax_head_axis(x, w_q, w_k, w_v, w_o, num_heads):
    batch, n, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    q = np.swapaxes((x @ w_q).reshape(batch, n, num_heads, d_head), 1, 2)
    k = np.swapaxes((x @ w_k).reshape(batch, n, num_heads, d_head), 1, 2)
    v = np.swapaxes((x @ w_v).reshape(batch, n, num_heads, d_head), 1, 2)
    logits = q @ np.swapaxes(k, 2, 3) / math.sqrt(d_head)
    logits = logits - logits.max(axis=1, keepdims=True)
    probs = np.exp(logits)
    probs = probs / probs.sum(axis=1, keepdims=True)
    out = np.swapaxes(probs @ v, 1, 2).reshape(batch, n, d_model)
    return out @ w_o


def mha_head_loop(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x, dtype=np.float64)
    d_model = x.shape[-1]
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    q_all, k_all, v_all = x @ w_q, x @ w_k, x @ w_v
    outputs = []
    for h in range(num_heads):
        cols = slice(h * d_head, (h + 1) * d_head)
        qh, kh, vh = q_all[..., cols], k_all[..., cols], v_all[..., cols]
        scores = np.matmul(qh, np.swapaxes(kh, 1, 2)) / math.sqrt(d_head)
        scores -= scores.max(axis=2, keepdims=True)
        weights = np.exp(scores)
        weights /= weights.sum(axis=2, keepdims=True)
        outputs.append(np.matmul(weights, vh))
    return np.concatenate(outputs, axis=-1) @ w_o


def mha_einsum_weights(x, w_q, w_k, w_v, w_o, num_heads):
    d = x.shape[-1]
    if d % num_heads:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    e = d // num_heads
    q = np.einsum("bnd,dhe->bhne", x, w_q.reshape(d, num_heads, e))
    k = np.einsum("bnd,dhe->bhne", x, w_k.reshape(d, num_heads, e))
    v = np.einsum("bnd,dhe->bhne", x, w_v.reshape(d, num_heads, e))
    s = np.einsum("bhie,bhje->bhij", q, k) / np.sqrt(e)
    s = np.exp(s - s.max(axis=-1, keepdims=True))
    p = s / s.sum(axis=-1, keepdims=True)
    ctx = np.einsum("bhij,bhje->bhie", p, v)
    return np.einsum("bhie,hef->bif", ctx, w_o.reshape(num_heads, e, d))


ENTRIES = [
    Entry("split_heads", "wrong", "reshape_without_transpose",
          "reshapes straight to (B, H, N, d_head); a reshape is not a transpose, so each "
          "'head' gets a block of consecutive numbers that mixes tokens and features",
          split_reshape_only),
    Entry("split_heads", "wrong", "strided_features",
          "reshapes to (B, N, d_head, H) before moving H forward, so head h gets the "
          "strided features h, h+H, h+2H, ... instead of the block h*d_head:(h+1)*d_head",
          split_strided),
    Entry("split_heads", "wrong", "heads_stacked_first",
          "stacks the head pieces on axis 0, giving (H, B, N, d_head) instead of "
          "(B, H, N, d_head)",
          split_stack_axis0),
    Entry("split_heads", "wrong", "assert_guard",
          "checks divisibility with assert, which raises AssertionError instead of the "
          "ValueError the contract asks for",
          split_assert),
    Entry("split_heads", "wrong", "slice_width_num_heads",
          "slices each head with num_heads as its width, h*num_heads:(h+1)*num_heads, "
          "where d_head belongs",
          split_slices_num_heads_wide),
    Entry("split_heads", "wrong", "modulo_operands_swapped",
          "writes the divisibility test as num_heads % d_model, so valid splits such as "
          "d_model=12, num_heads=3 raise ValueError",
          split_modulo_swapped),
    Entry("split_heads", "right", "slice_loop_stack", None, split_slice_loop),
    Entry("split_heads", "right", "einsum_divmod", None, split_einsum),

    Entry("merge_heads", "wrong", "reshape_without_transpose",
          "reshapes (B, H, N, d_head) straight to (B, N, H*d_head) without moving the head "
          "axis behind the token axis, so tokens and heads get mixed",
          merge_reshape_only),
    Entry("merge_heads", "wrong", "feature_major_transpose",
          "transposes to (B, N, d_head, H) before the reshape, so the features come out "
          "interleaved across heads instead of head 0's block first",
          merge_wrong_transpose),
    Entry("merge_heads", "wrong", "concat_on_token_axis",
          "concatenates the heads along axis 1, which after x[:, h] is the token axis, "
          "giving (B, H*N, d_head)",
          merge_concat_tokens),
    Entry("merge_heads", "wrong", "shape_unpacked_wrong",
          "unpacks x.shape as (B, N, H, d) although the input is (B, H, N, d_head), so the "
          "result has H tokens of N*d_head features",
          merge_shape_misread),
    Entry("merge_heads", "wrong", "fortran_order",
          "reshapes with order='F', which fills the merged feature axis column-major and "
          "scrambles tokens and features",
          merge_fortran_order),
    Entry("merge_heads", "wrong", "loop_from_head_1",
          "loops over range(1, num_heads) and so drops head 0 from the concatenation",
          merge_loop_from_one),
    Entry("merge_heads", "right", "concat_moved_heads", None, merge_concat_heads),
    Entry("merge_heads", "right", "index_loops", None, merge_index_loops),

    Entry("multi_head_attention", "wrong", "scale_sqrt_d_model",
          "scales each head's scores by 1/sqrt(d_model) instead of 1/sqrt(d_head)",
          mha_scale_d_model),
    Entry("multi_head_attention", "wrong", "w_o_transposed",
          "applies the output projection as merged @ w_o.T (nn.Linear's layout) instead of "
          "merged @ w_o",
          mha_wo_transposed),
    Entry("multi_head_attention", "wrong", "values_not_projected",
          "splits x itself into the value heads instead of x @ w_v: the value projection "
          "is skipped",
          mha_values_unprojected),
    Entry("multi_head_attention", "wrong", "adds_residual",
          "adds the residual x to the layer's output; the residual connection belongs to "
          "the transformer block, not to the attention layer",
          mha_adds_residual),
    Entry("multi_head_attention", "wrong", "sum_without_keepdims",
          "sums the exponentials without keepdims, so (B, H, N, N) / (B, H, N) lines up "
          "the totals with the wrong axes: a broadcasting error, or where the shapes happen "
          "to broadcast (one head) column j divided by row j's total",
          mha_sum_no_keepdims),
    Entry("multi_head_attention", "wrong", "softmax_over_heads",
          "runs the max and the softmax over axis 1, the head axis, instead of the key "
          "axis -1",
          mha_softmax_head_axis),
    Entry("multi_head_attention", "right", "per_head_loop", None, mha_head_loop),
    Entry("multi_head_attention", "right", "einsum_reshaped_weights", None, mha_einsum_weights),
]
