"""Held-out catalogue, lesson 02 (multi-head attention, numpy):
split_heads, merge_heads, multi_head_attention."""

import math

import numpy as np
import torch
import torch.nn.functional as F

from entry import Entry


# ============================================================================ split_heads
def split_reshape_no_transpose(x, num_heads):
    x = np.asarray(x)
    b, n, d_model = x.shape
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    return x.reshape(b, num_heads, n, d_model // num_heads)


def split_interleaved_features(x, num_heads):
    x = np.asarray(x)
    batch, seq, width = x.shape
    if width % num_heads:
        raise ValueError(f"d_model={width} is not divisible by num_heads={num_heads}")
    d_head = width // num_heads
    y = x.reshape(batch, seq, d_head, num_heads)  # (B, N, d_head, H)
    return y.transpose(0, 3, 1, 2)  # (B, H, N, d_head)


def split_assert_guard(x, num_heads):
    x = np.asarray(x)
    B, N, D = x.shape
    assert D % num_heads == 0, f"d_model={D} is not divisible by num_heads={num_heads}"
    return x.reshape(B, N, num_heads, D // num_heads).transpose(0, 2, 1, 3)


def split_slice_missing_stride(x, num_heads):
    x = np.asarray(x)
    d_model = x.shape[-1]
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    heads = []
    for h in range(num_heads):
        heads.append(x[:, :, h:h + d_head])
    return np.stack(heads, axis=1)


def split_np_split_tokens(x, num_heads):
    x = np.asarray(x)
    d_model = x.shape[2]
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    chunks = np.split(x, num_heads, axis=1)
    return np.stack(chunks, axis=1)


def split_stack_default_axis(x, num_heads):
    x = np.asarray(x)
    d_model = x.shape[-1]
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    pieces = np.split(x, num_heads, axis=-1)  # H arrays of (B, N, d_head)
    return np.stack(pieces)


def split_right_loop(x, num_heads):
    x = np.asarray(x)
    batch, n_tok, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    dh = d_model // num_heads
    out = np.empty((batch, num_heads, n_tok, dh), dtype=x.dtype)
    for h in range(num_heads):
        out[:, h] = x[:, :, h * dh:(h + 1) * dh]
    return out


def split_right_einsum(x, num_heads):
    x = np.asarray(x)
    if x.shape[-1] % num_heads != 0:
        raise ValueError(f"d_model={x.shape[-1]} is not divisible by num_heads={num_heads}")
    four = x.reshape(x.shape[0], x.shape[1], num_heads, -1)
    return np.ascontiguousarray(np.einsum("bnhd->bhnd", four))


# ============================================================================ merge_heads
def merge_reshape_no_transpose(x):
    x = np.asarray(x)
    b, h, n, d = x.shape
    return x.reshape(b, n, h * d)


def merge_feature_major(x):
    x = np.asarray(x)
    B, H, N, dh = x.shape
    return x.transpose(0, 2, 3, 1).reshape(B, N, H * dh)


def merge_concat_list_of_x(x):
    x = np.asarray(x)
    return np.concatenate(list(x), axis=-1)


def merge_concat_token_axis(x):
    x = np.asarray(x)
    n_heads = x.shape[1]
    return np.concatenate([x[:, i] for i in range(n_heads)], axis=1)


def merge_loop_off_by_one(x):
    x = np.asarray(x)
    batch, heads, seq, dh = x.shape
    out = np.zeros((batch, seq, heads * dh), dtype=x.dtype)
    for i in range(heads - 1):
        out[:, :, i * dh:(i + 1) * dh] = x[:, i]
    return out


def merge_reshape_heads_for_tokens(x):
    x = np.asarray(x)
    batch, heads, n, d = x.shape
    return np.swapaxes(x, 1, 2).reshape(batch, heads, n * d)


def merge_right_dstack(x):
    x = np.asarray(x)
    return np.dstack([x[:, h] for h in range(x.shape[1])])


def merge_right_einsum(x):
    x = np.asarray(x)
    B, H, N, D = x.shape
    return np.einsum("bhnd->bnhd", x).reshape(B, N, H * D)


# ============================================================================ multi_head_attention
def mha_scale_by_d_model(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x)
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads

    def heads(t):
        return t.reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)

    q, k, v = heads(x @ w_q), heads(x @ w_k), heads(x @ w_v)
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(D)
    s = s - s.max(-1, keepdims=True)
    a = np.exp(s)
    a /= a.sum(-1, keepdims=True)
    ctx = (a @ v).transpose(0, 2, 1, 3).reshape(B, N, D)
    return ctx @ w_o


def mha_forgets_w_o(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x)
    batch, n_tok, d_model = x.shape
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    q = (x @ w_q).reshape(batch, n_tok, num_heads, d_head).swapaxes(1, 2)
    k = (x @ w_k).reshape(batch, n_tok, num_heads, d_head).swapaxes(1, 2)
    v = (x @ w_v).reshape(batch, n_tok, num_heads, d_head).swapaxes(1, 2)
    scores = np.einsum("bhid,bhjd->bhij", q, k) / math.sqrt(d_head)
    scores -= scores.max(axis=-1, keepdims=True)
    p = np.exp(scores)
    p /= p.sum(axis=-1, keepdims=True)
    out = np.einsum("bhij,bhjd->bhid", p, v)
    return out.swapaxes(1, 2).reshape(batch, n_tok, d_model)


def mha_values_from_w_k(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x)
    B, N, d = x.shape
    if d % num_heads:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    hd = d // num_heads
    Q = (x @ w_q).reshape(B, N, num_heads, hd).transpose(0, 2, 1, 3)
    K = (x @ w_k).reshape(B, N, num_heads, hd).transpose(0, 2, 1, 3)
    V = (x @ w_k).reshape(B, N, num_heads, hd).transpose(0, 2, 1, 3)
    S = Q @ np.swapaxes(K, -1, -2) / np.sqrt(hd)
    S = np.exp(S - S.max(axis=-1, keepdims=True))
    S = S / S.sum(axis=-1, keepdims=True)
    merged = (S @ V).transpose(0, 2, 1, 3).reshape(B, N, d)
    return merged @ w_o


def mha_attends_across_heads(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x)
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads
    q = (x @ w_q).reshape(B, N, num_heads, dh)
    k = (x @ w_k).reshape(B, N, num_heads, dh)
    v = (x @ w_v).reshape(B, N, num_heads, dh)
    sc = q @ np.swapaxes(k, -1, -2) / np.sqrt(dh)
    sc = sc - sc.max(axis=-1, keepdims=True)
    w = np.exp(sc)
    w = w / w.sum(axis=-1, keepdims=True)
    return (w @ v).reshape(B, N, D) @ w_o


def mha_w_o_transposed(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x)
    b, n, dm = x.shape
    if dm % num_heads != 0:
        raise ValueError(f"d_model={dm} is not divisible by num_heads={num_heads}")
    dh = dm // num_heads
    split = lambda t: t.reshape(b, n, num_heads, dh).transpose(0, 2, 1, 3)  # noqa: E731
    q, k, v = split(x @ w_q), split(x @ w_k), split(x @ w_v)
    logits = q @ k.transpose(0, 1, 3, 2) * (1.0 / math.sqrt(dh))
    logits -= logits.max(axis=-1, keepdims=True)
    probs = np.exp(logits)
    probs /= probs.sum(axis=-1, keepdims=True)
    concat = (probs @ v).transpose(0, 2, 1, 3).reshape(b, n, dm)
    return concat @ w_o.T  # output projection, (out, in) like nn.Linear


def mha_merge_feature_major(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x)
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads

    def to_heads(t):
        return t.reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)

    q, k, v = to_heads(x @ w_q), to_heads(x @ w_k), to_heads(x @ w_v)
    s = q @ k.swapaxes(-1, -2) / math.sqrt(dh)
    s = s - s.max(axis=-1, keepdims=True)
    p = np.exp(s)
    p = p / p.sum(axis=-1, keepdims=True)
    o = p @ v  # (B, H, N, dh)
    concat = o.transpose(0, 2, 3, 1).reshape(B, N, D)
    return concat @ w_o


def mha_right_weight_columns(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x, dtype=np.float64)
    d_model = x.shape[-1]
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    dh = d_model // num_heads
    result = np.zeros_like(x)
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        qh = x @ np.asarray(w_q)[:, cols]
        kh = x @ np.asarray(w_k)[:, cols]
        vh = x @ np.asarray(w_v)[:, cols]
        s = qh @ kh.transpose(0, 2, 1) / math.sqrt(dh)
        s = np.exp(s - s.max(axis=-1, keepdims=True))
        s /= s.sum(axis=-1, keepdims=True)
        result += (s @ vh) @ np.asarray(w_o)[cols, :]  # head h's rows of w_o
    return result


def mha_right_torch_sdpa(x, w_q, w_k, w_v, w_o, num_heads):
    t = {n: torch.from_numpy(np.asarray(a, dtype=np.float64))
         for n, a in zip("xqkvo", (x, w_q, w_k, w_v, w_o))}
    B, N, D = t["x"].shape
    if D % num_heads != 0:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")

    def heads(z):
        return z.view(B, N, num_heads, D // num_heads).transpose(1, 2)

    q, k, v = heads(t["x"] @ t["q"]), heads(t["x"] @ t["k"]), heads(t["x"] @ t["v"])
    ctx = F.scaled_dot_product_attention(q, k, v)
    return (ctx.transpose(1, 2).reshape(B, N, D) @ t["o"]).numpy()


ENTRIES = [
    Entry("split_heads", "wrong", "reshape-without-transpose",
          "it reshapes straight to (B, H, N, d_head), which chops the flat token-major data "
          "into heads of consecutive tokens instead of giving each head its feature block; "
          "reshape to (B, N, H, d_head) then transpose", split_reshape_no_transpose),
    Entry("split_heads", "wrong", "feature-interleaved",
          "it reshapes to (B, N, d_head, H), so head h gets the strided features h, h+H, "
          "h+2H, ... instead of the contiguous block h*d_head:(h+1)*d_head",
          split_interleaved_features),
    Entry("split_heads", "wrong", "assert-instead-of-valueerror",
          "the divisibility guard is an assert, so a bad num_heads raises AssertionError "
          "instead of the ValueError the contract requires", split_assert_guard),
    Entry("split_heads", "wrong", "slice-start-h-not-h-times-d_head",
          "the slice for head h starts at h instead of h*d_head (`h:h + d_head`), so the heads "
          "overlap and take the wrong features", split_slice_missing_stride),
    Entry("split_heads", "wrong", "np-split-token-axis",
          "np.split cuts along axis 1 (the tokens) instead of the feature axis, so each head "
          "gets a group of tokens with all features (and it fails when N % H != 0)",
          split_np_split_tokens),
    Entry("split_heads", "wrong", "np-stack-default-axis-0",
          "np.stack is called without axis=1, so the heads are stacked on axis 0 and the "
          "result is (H, B, N, d_head) instead of (B, H, N, d_head)",
          split_stack_default_axis),
    Entry("split_heads", "right", "loop-into-empty", None, split_right_loop),
    Entry("split_heads", "right", "einsum-transpose", None, split_right_einsum),

    Entry("merge_heads", "wrong", "reshape-without-transpose",
          "it reshapes (B, H, N, d_head) straight to (B, N, H*d_head) without first moving the "
          "head axis next to d_head, which mixes tokens of one head into each row",
          merge_reshape_no_transpose),
    Entry("merge_heads", "wrong", "feature-major-transpose",
          "it transposes to (B, N, d_head, H) before reshaping, so the features come out "
          "interleaved across heads instead of head 0's block first",
          merge_feature_major),
    Entry("merge_heads", "wrong", "concatenate-list-iterates-batch",
          "list(x) iterates over the batch axis, not the heads, so it concatenates the batch "
          "elements side by side instead of the heads", merge_concat_list_of_x),
    Entry("merge_heads", "wrong", "concatenate-token-axis",
          "the heads are concatenated along axis 1 (tokens) instead of the last (feature) "
          "axis, giving (B, H*N, d_head)", merge_concat_token_axis),
    Entry("merge_heads", "wrong", "loop-skips-last-head",
          "the copy loop runs over range(H - 1), so the last head's block is left as zeros",
          merge_loop_off_by_one),
    Entry("merge_heads", "wrong", "reshape-heads-where-tokens-belong",
          "the final reshape uses (B, H, N*d_head) from the unpacked names instead of "
          "(B, N, H*d_head): the head count is used where the token count belongs",
          merge_reshape_heads_for_tokens),
    Entry("merge_heads", "right", "dstack", None, merge_right_dstack),
    Entry("merge_heads", "right", "einsum-reshape", None, merge_right_einsum),

    Entry("multi_head_attention", "wrong", "scale-sqrt-d_model",
          "scores are divided by sqrt(d_model) instead of sqrt(d_head), the size of the "
          "vectors actually dotted in each head", mha_scale_by_d_model),
    Entry("multi_head_attention", "wrong", "no-output-projection",
          "it returns the merged heads without the final output projection @ w_o",
          mha_forgets_w_o),
    Entry("multi_head_attention", "wrong", "values-projected-with-w_k",
          "the values are projected with w_k (copy-paste) instead of w_v",
          mha_values_from_w_k),
    Entry("multi_head_attention", "wrong", "attends-across-heads",
          "after the reshape to (B, N, H, d_head) it never moves the head axis forward, so the "
          "softmax runs over the heads of one token instead of over the tokens",
          mha_attends_across_heads),
    Entry("multi_head_attention", "wrong", "w_o-transposed",
          "the output projection is applied as @ w_o.T (nn.Linear's (out, in) layout), but the "
          "contract's weights are (d_in, d_out), applied as x @ W", mha_w_o_transposed),
    Entry("multi_head_attention", "wrong", "merge-feature-major",
          "the heads are merged with transpose(0, 2, 3, 1), which interleaves the heads' "
          "features instead of concatenating head blocks before w_o",
          mha_merge_feature_major),
    Entry("multi_head_attention", "right", "per-head-weight-columns", None,
          mha_right_weight_columns),
    Entry("multi_head_attention", "right", "torch-sdpa", None, mha_right_torch_sdpa),
]
