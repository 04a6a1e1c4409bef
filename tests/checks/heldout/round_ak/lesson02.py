"""Held-out catalogue, lesson 02 (split_heads, merge_heads, multi_head_attention)."""

import math

import numpy as np

from entry import Entry


# ============================================================================ split_heads
def split_heads_reshape_only(x, num_heads):
    B, N, D = x.shape
    if D % num_heads != 0:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    return x.reshape(B, num_heads, N, D // num_heads)


def split_heads_strided(x, num_heads):
    batch, seq, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    return x.reshape(batch, seq, d_head, num_heads).transpose(0, 3, 1, 2)


def split_heads_heads_first(x, num_heads):
    b, n, d = x.shape
    if d % num_heads != 0:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    return x.reshape(b, n, num_heads, d // num_heads).transpose(2, 0, 1, 3)


def split_heads_assert(x, num_heads):
    B, N, d_model = x.shape
    assert d_model % num_heads == 0, f"d_model={d_model} not divisible by num_heads={num_heads}"
    d_head = d_model // num_heads
    return x.reshape(B, N, num_heads, d_head).transpose(0, 2, 1, 3)


def split_heads_true_division(x, num_heads):
    B, N, d_model = x.shape
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model / num_heads
    return np.swapaxes(x.reshape(B, N, num_heads, d_head), 1, 2)


def split_heads_modulo_swapped(x, num_heads):
    B, N, d_model = x.shape
    if num_heads % d_model != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    return x.reshape(B, N, num_heads, d_head).transpose(0, 2, 1, 3)


def split_heads_np_split(x, num_heads):
    width = x.shape[-1]
    if width % num_heads:
        raise ValueError(f"d_model={width} is not divisible by num_heads={num_heads}")
    return np.stack(np.split(x, num_heads, axis=-1), axis=1)


def split_heads_slice_loop(x, num_heads):
    B, N, d_model = x.shape
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    size = d_model // num_heads
    out = np.empty((B, num_heads, N, size), dtype=x.dtype)
    for h in range(num_heads):
        out[:, h, :, :] = x[:, :, h * size:(h + 1) * size]
    return out


# ============================================================================ merge_heads
def merge_heads_reshape_only(x):
    B, H, N, d = x.shape
    return x.reshape(B, N, H * d)


def merge_heads_np_transpose_default(x):
    B, H, N, d = x.shape
    return np.transpose(x).reshape(B, N, H * d)


def merge_heads_hstack(x):
    heads = [x[:, h] for h in range(x.shape[1])]
    return np.hstack(heads)


def merge_heads_strided_columns(x):
    B, H, N, d = x.shape
    out = np.zeros((B, N, H * d), dtype=x.dtype)
    for h in range(H):
        out[:, :, h::H] = x[:, h]
    return out


def merge_heads_shape_misread(x):
    B, N, H, d = x.shape
    return x.transpose(0, 2, 1, 3).reshape(B, N, H * d)


def merge_heads_wrong_size_name(x):
    B, H, N, d = x.shape
    return x.transpose(0, 2, 1, 3).reshape(B, N, H * N)


def merge_heads_concat(x):
    return np.concatenate([x[:, h, :, :] for h in range(x.shape[1])], axis=-1)


def merge_heads_einsum_identity(x):
    B, H, N, d = x.shape
    eye = np.eye(H * d, dtype=x.dtype).reshape(H, d, H * d)
    return np.einsum("bhnd,hdf->bnf", x, eye)


# ============================================================================ multi_head_attention
def mha_scale_by_d_model(x, w_q, w_k, w_v, w_o, num_heads):
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
    p = p / p.sum(-1, keepdims=True)
    ctx = (p @ v).transpose(0, 2, 1, 3).reshape(B, N, D)
    return ctx @ w_o


def mha_linear_convention(x, w_q, w_k, w_v, w_o, num_heads):
    batch, seq, d_model = x.shape
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    q = (x @ w_q.T).reshape(batch, seq, num_heads, d_head).transpose(0, 2, 1, 3)
    k = (x @ w_k.T).reshape(batch, seq, num_heads, d_head).transpose(0, 2, 1, 3)
    v = (x @ w_v.T).reshape(batch, seq, num_heads, d_head).transpose(0, 2, 1, 3)
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(d_head)
    scores -= scores.max(axis=-1, keepdims=True)
    w = np.exp(scores)
    w /= w.sum(axis=-1, keepdims=True)
    merged = (w @ v).transpose(0, 2, 1, 3).reshape(batch, seq, d_model)
    return merged @ w_o.T


def mha_v_not_split(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, d_model = x.shape
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    q = (x @ w_q).reshape(B, N, num_heads, d_head).transpose(0, 2, 1, 3)
    k = (x @ w_k).reshape(B, N, num_heads, d_head).transpose(0, 2, 1, 3)
    v = x @ w_v
    att = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d_head)
    att = np.exp(att - att.max(axis=-1, keepdims=True))
    att = att / att.sum(axis=-1, keepdims=True)
    heads = att @ v
    return heads.transpose(0, 2, 1, 3).reshape(B, N, d_model) @ w_o


def mha_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    hd = d_model // num_heads
    qh = np.swapaxes((x @ w_q).reshape(B, N, num_heads, hd), 1, 2)
    kh = np.swapaxes((x @ w_k).reshape(B, N, num_heads, hd), 1, 2)
    vh = np.swapaxes((x @ w_v).reshape(B, N, num_heads, hd), 1, 2)
    logits = qh @ np.swapaxes(kh, 2, 3) / math.sqrt(hd)
    logits = logits - logits.max(axis=3, keepdims=True)
    probs = np.exp(logits)
    probs /= probs.sum(axis=3, keepdims=True)
    ctx = probs @ vh  # (B, H, N, hd)
    return ctx.reshape(B, N, d_model) @ w_o


def mha_keys_from_w_q(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, d_model = x.shape
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads

    def heads(t):
        return t.reshape(B, N, num_heads, d_head).transpose(0, 2, 1, 3)

    Q = heads(x @ w_q)
    K = heads(x @ w_q)
    V = heads(x @ w_v)
    S = Q @ K.transpose(0, 1, 3, 2) / math.sqrt(d_head)
    S = np.exp(S - S.max(axis=-1, keepdims=True))
    A = S / S.sum(axis=-1, keepdims=True)
    O = (A @ V).transpose(0, 2, 1, 3).reshape(B, N, d_model)
    return O @ w_o


def mha_with_residual(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, d_model = x.shape
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    q = (x @ w_q).reshape(B, N, num_heads, d_head).transpose(0, 2, 1, 3)
    k = (x @ w_k).reshape(B, N, num_heads, d_head).transpose(0, 2, 1, 3)
    v = (x @ w_v).reshape(B, N, num_heads, d_head).transpose(0, 2, 1, 3)
    s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d_head)
    s -= s.max(axis=-1, keepdims=True)
    w = np.exp(s)
    w /= w.sum(axis=-1, keepdims=True)
    out = (w @ v).transpose(0, 2, 1, 3).reshape(B, N, d_model) @ w_o
    return x + out


def mha_per_head_weight_slices(x, w_q, w_k, w_v, w_o, num_heads):
    d_model = x.shape[-1]
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d = d_model // num_heads
    total = np.zeros(x.shape[:-1] + (w_o.shape[1],), dtype=np.result_type(x, w_o))
    for h in range(num_heads):
        cols = slice(h * d, (h + 1) * d)
        qh, kh, vh = x @ w_q[:, cols], x @ w_k[:, cols], x @ w_v[:, cols]
        sc = qh @ np.swapaxes(kh, -1, -2) / math.sqrt(d)
        sc = sc - sc.max(axis=-1, keepdims=True)
        pr = np.exp(sc)
        pr = pr / pr.sum(axis=-1, keepdims=True)
        total += (pr @ vh) @ w_o[cols, :]  # block h of Concat(...) @ W_o
    return total


def mha_einsum_float64(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, D = np.shape(x)
    if D % num_heads != 0:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads
    x64 = np.asarray(x, dtype=np.float64)
    wq, wk, wv = (np.asarray(w, dtype=np.float64).reshape(D, num_heads, dh)
                  for w in (w_q, w_k, w_v))
    wo = np.asarray(w_o, dtype=np.float64).reshape(num_heads, dh, D)
    q = np.einsum("bnd,dhe->bhne", x64, wq)
    k = np.einsum("bnd,dhe->bhne", x64, wk)
    v = np.einsum("bnd,dhe->bhne", x64, wv)
    s = np.einsum("bhqe,bhke->bhqk", q, k) / np.sqrt(dh)
    s = np.exp(s - s.max(axis=-1, keepdims=True))
    s /= s.sum(axis=-1, keepdims=True)
    ctx = np.einsum("bhqk,bhke->bhqe", s, v)
    return np.einsum("bhqe,hef->bqf", ctx, wo).astype(np.result_type(x, w_q))


ENTRIES = [
    Entry("split_heads", "wrong", "reshape_without_transpose",
          "reshapes straight to (B, H, N, d_head) without the transpose, so each 'head' is a "
          "run of consecutive numbers of the flat array that mixes tokens, not a block of "
          "features of every token", split_heads_reshape_only),
    Entry("split_heads", "wrong", "strided_features",
          "reshapes to (B, N, d_head, H), so head h takes every H-th feature (h::H) instead of "
          "the contiguous block h*d_head:(h+1)*d_head", split_heads_strided),
    Entry("split_heads", "wrong", "heads_axis_first",
          "transposes with (2, 0, 1, 3), putting the head axis before the batch axis: the result "
          "is (H, B, N, d_head) instead of (B, H, N, d_head)", split_heads_heads_first),
    Entry("split_heads", "wrong", "assert_instead_of_valueerror",
          "guards divisibility with `assert`, which raises AssertionError instead of the "
          "ValueError the contract requires", split_heads_assert),
    Entry("split_heads", "wrong", "true_division_d_head",
          "computes d_head with `/`, so it is a float and reshape raises TypeError even when "
          "num_heads divides d_model", split_heads_true_division),
    Entry("split_heads", "wrong", "modulo_operands_swapped",
          "tests `num_heads % d_model` instead of `d_model % num_heads`, so valid head counts "
          "smaller than d_model raise ValueError", split_heads_modulo_swapped),
    Entry("split_heads", "right", "np_split_stack", None, split_heads_np_split),
    Entry("split_heads", "right", "slice_loop", None, split_heads_slice_loop),

    Entry("merge_heads", "wrong", "reshape_without_transpose",
          "reshapes (B, H, N, d_head) straight to (B, N, H*d_head) without moving the head axis "
          "next to d_head first, so tokens and heads get scrambled", merge_heads_reshape_only),
    Entry("merge_heads", "wrong", "np_transpose_no_axes",
          "calls np.transpose(x) without axes, which reverses all four axes, then reshapes the "
          "scrambled array to (B, N, H*d_head)", merge_heads_np_transpose_default),
    Entry("merge_heads", "wrong", "hstack_joins_sequence_axis",
          "joins the heads with np.hstack, which concatenates along axis 1 (the sequence axis of "
          "each (B, N, d_head) head), giving (B, H*N, d_head)", merge_heads_hstack),
    Entry("merge_heads", "wrong", "strided_columns",
          "writes head h into every H-th column (h::H) instead of the contiguous block "
          "h*d_head:(h+1)*d_head", merge_heads_strided_columns),
    Entry("merge_heads", "wrong", "shape_unpacked_as_BNHd",
          "unpacks x.shape as (B, N, H, d_head) although the input is (B, H, N, d_head), so the "
          "output size uses the wrong numbers (wrong shape, or reshape raises)",
          merge_heads_shape_misread),
    Entry("merge_heads", "wrong", "H_times_N",
          "reshapes to (B, N, H * N) instead of (B, N, H * d_head): the wrong size variable, so "
          "reshape raises unless N == d_head", merge_heads_wrong_size_name),
    Entry("merge_heads", "right", "concatenate_heads", None, merge_heads_concat),
    Entry("merge_heads", "right", "einsum_with_identity", None, merge_heads_einsum_identity),

    Entry("multi_head_attention", "wrong", "scale_by_sqrt_d_model",
          "scales the scores by 1/sqrt(d_model) instead of 1/sqrt(d_head)", mha_scale_by_d_model),
    Entry("multi_head_attention", "wrong", "nn_linear_convention",
          "applies the weights as x @ W.T (nn.Linear's layout) instead of x @ W",
          mha_linear_convention),
    Entry("multi_head_attention", "wrong", "v_not_split",
          "forgets to split v into heads, so the weighted sum broadcasts the (B, N, d_model) "
          "values against the (B, H, N, N) weights and the shapes break (raises, or is wrong "
          "when B and H happen to broadcast)", mha_v_not_split),
    Entry("multi_head_attention", "wrong", "merge_without_transpose",
          "merges the heads by reshaping (B, H, N, d_head) straight to (B, N, d_model) without "
          "transposing H and N back", mha_merge_without_transpose),
    Entry("multi_head_attention", "wrong", "keys_projected_with_w_q",
          "copy-paste slip: the keys are projected with w_q instead of w_k",
          mha_keys_from_w_q),
    Entry("multi_head_attention", "wrong", "adds_residual",
          "adds the residual connection x + ..., which belongs to the transformer block, not "
          "to the attention layer", mha_with_residual),
    Entry("multi_head_attention", "right", "per_head_weight_slices", None,
          mha_per_head_weight_slices),
    Entry("multi_head_attention", "right", "einsum_float64", None, mha_einsum_float64),
]
