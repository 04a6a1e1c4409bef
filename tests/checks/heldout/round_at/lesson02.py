"""Held-out catalogue, lesson 02 (split_heads, merge_heads, multi_head_attention)."""

import math

import numpy as np

from entry import Entry


# ============================================================================ split_heads, wrong
def split_reshape_only(x, num_heads):
    B, N, D = x.shape
    if D % num_heads != 0:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    return x.reshape(B, num_heads, N, D // num_heads)


def split_interleaved(x, num_heads):
    b, n, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    return x.reshape(b, n, d_head, num_heads).transpose(0, 3, 1, 2)


def split_wrong_transpose(x, num_heads):
    batch, seq, width = x.shape
    if width % num_heads:
        raise ValueError(f"d_model={width} is not divisible by num_heads={num_heads}")
    return x.reshape(batch, seq, num_heads, width // num_heads).transpose(0, 2, 3, 1)


def split_assert_guard(x, num_heads):
    b, n, d = x.shape
    assert d % num_heads == 0, f"d_model={d} is not divisible by num_heads={num_heads}"
    return np.transpose(x.reshape(b, n, num_heads, d // num_heads), (0, 2, 1, 3))


def split_true_division(x, num_heads):
    b, n, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model / num_heads
    return x.reshape(b, n, num_heads, d_head).swapaxes(1, 2)


def split_guard_on_seq(x, num_heads):
    b, n, d_model = x.shape
    if n % num_heads:
        raise ValueError(f"d_model={n} is not divisible by num_heads={num_heads}")
    return x.reshape(b, n, num_heads, d_model // num_heads).transpose(0, 2, 1, 3)


# ============================================================================ split_heads, right
def split_slices_stack(x, num_heads):
    d_model = x.shape[-1]
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    step = d_model // num_heads
    pieces = [x[:, :, h * step:(h + 1) * step] for h in range(num_heads)]
    return np.stack(pieces, axis=1)


def split_transpose_first(x, num_heads):
    b, n, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    feats_first = np.swapaxes(x, 1, 2)  # (B, d_model, N)
    grouped = feats_first.reshape(b, num_heads, d_model // num_heads, n)  # (B, H, d_head, N)
    return np.swapaxes(grouped, 2, 3)


# ============================================================================ merge_heads, wrong
def merge_reshape_only(x):
    b, h, n, d = x.shape
    return x.reshape(b, n, h * d)


def merge_feature_major(x):
    b, h, n, d = x.shape
    return x.transpose(0, 2, 3, 1).reshape(b, n, h * d)


def merge_concat_tokens(x):
    heads = [x[:, i] for i in range(x.shape[1])]
    return np.concatenate(heads, axis=1)


def merge_unpack_order(x):
    b, n, h, d = x.shape
    return x.transpose(0, 2, 1, 3).reshape(b, n, h * d)


def merge_squeezed(x):
    y = np.swapaxes(x, 1, 2)
    return y.reshape(y.shape[0], y.shape[1], -1).squeeze()


def merge_precedence(x):
    b, h, n, d = x.shape
    out = np.zeros((b, n, h * d), dtype=x.dtype)
    for i in range(h):
        out[:, :, i * d:i + 1 * d] = x[:, i]
    return out


# ============================================================================ merge_heads, right
def merge_dstack(x):
    return np.dstack([x[:, head] for head in range(x.shape[1])])


def merge_einsum_buffer(x):
    b, h, n, d = x.shape
    out = np.empty((b, n, h, d), dtype=x.dtype)
    np.copyto(out, np.einsum("bhnd->bnhd", x))
    return out.reshape(b, n, h * d)


# ============================================================================ MHA, wrong
def mha_scale_d_model(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads

    def split(t):
        return t.reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)

    q, k, v = split(x @ w_q), split(x @ w_k), split(x @ w_v)
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(D)
    s = s - s.max(-1, keepdims=True)
    p = np.exp(s)
    p /= p.sum(-1, keepdims=True)
    ctx = (p @ v).transpose(0, 2, 1, 3).reshape(B, N, D)
    return ctx @ w_o


def mha_no_output_proj(x, w_q, w_k, w_v, w_o, num_heads):
    b, n, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    heads = []
    for t in (x @ w_q, x @ w_k, x @ w_v):
        heads.append(t.reshape(b, n, num_heads, d_head).swapaxes(1, 2))
    q, k, v = heads
    sc = q @ k.swapaxes(-1, -2) / math.sqrt(d_head)
    weights = np.exp(sc - sc.max(-1, keepdims=True))
    weights = weights / weights.sum(-1, keepdims=True)
    return (weights @ v).swapaxes(1, 2).reshape(b, n, d_model)


def mha_values_from_wk(x, w_q, w_k, w_v, w_o, num_heads):
    b, n, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    hd = d_model // num_heads
    Q = (x @ w_q).reshape(b, n, num_heads, hd).transpose(0, 2, 1, 3)
    K = (x @ w_k).reshape(b, n, num_heads, hd).transpose(0, 2, 1, 3)
    V = (x @ w_k).reshape(b, n, num_heads, hd).transpose(0, 2, 1, 3)
    S = Q @ K.transpose(0, 1, 3, 2) / math.sqrt(hd)
    A = np.exp(S - S.max(axis=-1, keepdims=True))
    A /= A.sum(axis=-1, keepdims=True)
    return (A @ V).transpose(0, 2, 1, 3).reshape(b, n, d_model) @ w_o


def mha_softmax_heads_axis(x, w_q, w_k, w_v, w_o, num_heads):
    b, n, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    dh = d_model // num_heads
    q = np.einsum("bnd,de->bne", x, w_q).reshape(b, n, num_heads, dh).transpose(0, 2, 1, 3)
    k = np.einsum("bnd,de->bne", x, w_k).reshape(b, n, num_heads, dh).transpose(0, 2, 1, 3)
    v = np.einsum("bnd,de->bne", x, w_v).reshape(b, n, num_heads, dh).transpose(0, 2, 1, 3)
    scores = np.einsum("bhqd,bhkd->bhqk", q, k) / np.sqrt(dh)
    scores = scores - scores.max(axis=1, keepdims=True)
    w = np.exp(scores)
    w = w / w.sum(axis=1, keepdims=True)
    ctx = np.einsum("bhqk,bhkd->bqhd", w, v).reshape(b, n, d_model)
    return ctx @ w_o


def mha_merge_reshape(x, w_q, w_k, w_v, w_o, num_heads):
    b, n, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    dh = d_model // num_heads
    q = (x @ w_q).reshape(b, n, num_heads, dh).transpose(0, 2, 1, 3)
    k = (x @ w_k).reshape(b, n, num_heads, dh).transpose(0, 2, 1, 3)
    v = (x @ w_v).reshape(b, n, num_heads, dh).transpose(0, 2, 1, 3)
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(dh)
    e = np.exp(s - np.max(s, axis=-1, keepdims=True))
    out = (e / np.sum(e, axis=-1, keepdims=True)) @ v  # (B, H, N, dh)
    return out.reshape(b, n, d_model) @ w_o


def mha_array_split(x, w_q, w_k, w_v, w_o, num_heads):
    q_all, k_all, v_all = x @ w_q, x @ w_k, x @ w_v
    cols = np.array_split(np.arange(x.shape[-1]), num_heads)
    outs = []
    for idx in cols:
        q, k, v = q_all[..., idx], k_all[..., idx], v_all[..., idx]
        logits = q @ np.swapaxes(k, -1, -2) / math.sqrt(len(idx))
        p = np.exp(logits - logits.max(axis=-1, keepdims=True))
        p = p / p.sum(axis=-1, keepdims=True)
        outs.append(p @ v)
    return np.concatenate(outs, axis=-1) @ w_o


# ============================================================================ MHA, right
def mha_per_head_weights(x, w_q, w_k, w_v, w_o, num_heads):
    d_model = x.shape[-1]
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    total = np.zeros(x.shape, dtype=np.float64)
    for h in range(num_heads):
        cols = slice(h * d_head, (h + 1) * d_head)
        q = x @ w_q[:, cols]
        k = x @ w_k[:, cols]
        v = x @ w_v[:, cols]
        s = np.einsum("bid,bjd->bij", q, k) / math.sqrt(d_head)
        s -= s.max(axis=-1, keepdims=True)
        p = np.exp(s)
        p /= p.sum(axis=-1, keepdims=True)
        total += (p @ v) @ w_o[cols, :]  # each head's slice of the output projection
    return total.astype(x.dtype)


def mha_einsum_f64(x, w_q, w_k, w_v, w_o, num_heads):
    b, n, d_model = x.shape
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    dh = d_model // num_heads
    x64 = x.astype(np.float64)
    wq = w_q.astype(np.float64).reshape(d_model, num_heads, dh)
    wk = w_k.astype(np.float64).reshape(d_model, num_heads, dh)
    wv = w_v.astype(np.float64).reshape(d_model, num_heads, dh)
    wo = w_o.astype(np.float64).reshape(num_heads, dh, d_model)
    q = np.einsum("bnd,dhe->bhne", x64, wq)
    k = np.einsum("bnd,dhe->bhne", x64, wk)
    v = np.einsum("bnd,dhe->bhne", x64, wv)
    s = np.einsum("bhie,bhje->bhij", q, k) / np.sqrt(dh)
    lse = np.logaddexp.reduce(s, axis=-1, keepdims=True)
    p = np.exp(s - lse)
    ctx = np.einsum("bhij,bhje->bhie", p, v)
    return np.einsum("bhie,hef->bif", ctx, wo)


ENTRIES = [
    Entry("split_heads", "wrong", "reshape_without_transpose",
          "reshapes straight to (B, H, N, d_head) without the transpose, so each 'head' is a "
          "block of the flattened tokens-by-features array instead of one feature slice of "
          "every token", split_reshape_only),
    Entry("split_heads", "wrong", "interleaved_features",
          "reshapes to (B, N, d_head, H), so head h gets every H-th feature (h, h+H, ...) "
          "instead of the contiguous block h*d_head:(h+1)*d_head", split_interleaved),
    Entry("split_heads", "wrong", "wrong_transpose_axes",
          "transposes with (0, 2, 3, 1), giving (B, H, d_head, N) instead of (B, H, N, d_head)",
          split_wrong_transpose),
    Entry("split_heads", "wrong", "assert_instead_of_valueerror",
          "guards divisibility with assert, which raises AssertionError rather than the "
          "ValueError the contract asks for", split_assert_guard),
    Entry("split_heads", "wrong", "true_division_head_size",
          "computes d_head with / instead of //, a float that reshape rejects with a "
          "TypeError on every valid input", split_true_division),
    Entry("split_heads", "wrong", "guard_checks_seq_len",
          "the divisibility check tests the sequence length N (x.shape[1]) instead of d_model, "
          "so it raises on valid inputs", split_guard_on_seq),
    Entry("split_heads", "right", "slices_and_stack", None, split_slices_stack),
    Entry("split_heads", "right", "transpose_first", None, split_transpose_first),
    Entry("merge_heads", "wrong", "reshape_without_transpose",
          "reshapes (B, H, N, d_head) straight to (B, N, H*d_head) without moving the head "
          "axis next to d_head, which scrambles tokens and heads", merge_reshape_only),
    Entry("merge_heads", "wrong", "feature_major_merge",
          "transposes to (B, N, d_head, H) before flattening, so the heads' features come "
          "out interleaved instead of head 0's block first", merge_feature_major),
    Entry("merge_heads", "wrong", "concat_on_token_axis",
          "concatenates the heads along axis 1 (the tokens) instead of the feature axis, "
          "giving (B, H*N, d_head)", merge_concat_tokens),
    Entry("merge_heads", "wrong", "shape_unpacked_in_wrong_order",
          "unpacks x.shape as (B, N, H, d_head) although the input is (B, H, N, d_head), so "
          "the final reshape uses H for N and N for H", merge_unpack_order),
    Entry("merge_heads", "wrong", "squeeze_drops_axes",
          "calls .squeeze() on the result, which drops the batch or token axis when it has "
          "length 1", merge_squeezed),
    Entry("merge_heads", "wrong", "slice_end_precedence",
          "writes the slice end as i + 1 * d instead of (i + 1) * d, so every head after the "
          "first gets a slice of the wrong width (raises when d_head > 1)", merge_precedence),
    Entry("merge_heads", "right", "dstack_heads", None, merge_dstack),
    Entry("merge_heads", "right", "einsum_into_buffer", None, merge_einsum_buffer),
    Entry("multi_head_attention", "wrong", "scale_by_d_model",
          "scales the scores by 1/sqrt(d_model) instead of 1/sqrt(d_head)",
          mha_scale_d_model),
    Entry("multi_head_attention", "wrong", "no_output_projection",
          "returns the merged heads without multiplying by w_o", mha_no_output_proj),
    Entry("multi_head_attention", "wrong", "values_from_w_k",
          "projects the values with w_k instead of w_v (copy-paste of the key line)",
          mha_values_from_wk),
    Entry("multi_head_attention", "wrong", "softmax_over_heads",
          "normalises the scores over the head axis (axis 1) instead of over the keys",
          mha_softmax_heads_axis),
    Entry("multi_head_attention", "wrong", "merge_by_reshape",
          "merges the heads by reshaping (B, H, N, d_head) to (B, N, d_model) without the "
          "transpose, scrambling heads and tokens", mha_merge_reshape),
    Entry("multi_head_attention", "wrong", "array_split_no_guard",
          "splits the features with np.array_split, which silently accepts a d_model that "
          "num_heads does not divide, so no ValueError is raised", mha_array_split),
    Entry("multi_head_attention", "right", "per_head_weight_slices", None,
          mha_per_head_weights),
    Entry("multi_head_attention", "right", "einsum_logaddexp_float64", None, mha_einsum_f64),
]
