"""Held-out catalogue, lesson 02 (split_heads, merge_heads, multi_head_attention)."""

import math

import numpy as np

from entry import Entry


# ============================================================================ split_heads
def split_heads_reshape_only(x, num_heads):
    x = np.asarray(x)
    B, N, D = x.shape
    if D % num_heads != 0:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    return x.reshape(B, num_heads, N, D // num_heads)


def split_heads_interleaved(x, num_heads):
    x = np.asarray(x)
    batch, seq, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    y = x.reshape(batch, seq, d_head, num_heads)
    return y.transpose(0, 3, 1, 2)


def split_heads_loop_no_check(x, num_heads):
    x = np.asarray(x)
    d_head = x.shape[-1] // num_heads
    heads = []
    for h in range(num_heads):
        heads.append(x[:, :, h * d_head:(h + 1) * d_head])
    return np.stack(heads, axis=1)


def split_heads_modulo_reversed(x, num_heads):
    x = np.asarray(x)
    b, n, d = x.shape
    if num_heads % d:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    return x.reshape(b, n, num_heads, d // num_heads).swapaxes(1, 2)


def split_heads_split_tokens(x, num_heads):
    x = np.asarray(x)
    d_model = x.shape[2]
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    chunks = np.split(x, num_heads, axis=1)
    return np.stack(chunks, axis=1)


def split_heads_dhead_from_n(x, num_heads):
    x = np.asarray(x)
    B, N, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = x.shape[1] // num_heads
    return np.transpose(x.reshape(B, N, num_heads, d_head), (0, 2, 1, 3))


def split_heads_stack_split(x, num_heads):
    x = np.asarray(x)
    if x.shape[-1] % num_heads != 0:
        raise ValueError(f"d_model={x.shape[-1]} is not divisible by num_heads={num_heads}")
    return np.stack(np.split(x, num_heads, axis=-1), axis=1)


def split_heads_prealloc(x, num_heads):
    x = np.asarray(x)
    bsz, length, width = x.shape
    q, r = divmod(width, num_heads)
    if r:
        raise ValueError(f"d_model={width} is not divisible by num_heads={num_heads}")
    out = np.empty((bsz, num_heads, length, q), dtype=x.dtype)
    for h in range(num_heads):
        for t in range(length):
            out[:, h, t, :] = x[:, t, h * q:(h + 1) * q]
    return out


# ============================================================================ merge_heads
def merge_heads_reshape_only(x):
    x = np.asarray(x)
    B, H, N, dh = x.shape
    return x.reshape(B, N, H * dh)


def merge_heads_head_fastest(x):
    x = np.asarray(x)
    b, h, n, d = x.shape
    return x.transpose(0, 2, 3, 1).reshape(b, n, h * d)


def merge_heads_concat_tokens(x):
    x = np.asarray(x)
    return np.concatenate([x[:, h] for h in range(x.shape[1])], axis=1)


def merge_heads_unpack_order(x):
    x = np.asarray(x)
    B, N, H, d_head = x.shape
    return x.transpose(0, 2, 1, 3).reshape(B, N, H * d_head)


def merge_heads_offset_h(x):
    x = np.asarray(x)
    batch, heads, seq, d_head = x.shape
    out = np.zeros((batch, seq, heads * d_head), dtype=x.dtype)
    for h in range(heads):
        out[:, :, h:h + d_head] = x[:, h]
    return out


def merge_heads_iterates_batch(x):
    x = np.asarray(x)
    return np.concatenate([head for head in x], axis=-1)


def merge_heads_concat_heads(x):
    x = np.asarray(x)
    return np.concatenate([x[:, h, :, :] for h in range(x.shape[1])], axis=-1)


def merge_heads_einsum(x):
    x = np.asarray(x)
    b, h, n, d = x.shape
    return np.ascontiguousarray(np.einsum("bhnd->bnhd", x)).reshape(b, n, h * d)


# ============================================================================ multi_head_attention
def mha_scale_d_model(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads

    def split(t):
        return t.reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)

    q, k, v = split(x @ w_q), split(x @ w_k), split(x @ w_v)
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(D)
    s = np.exp(s - s.max(-1, keepdims=True))
    a = s / s.sum(-1, keepdims=True)
    ctx = (a @ v).transpose(0, 2, 1, 3).reshape(B, N, D)
    return ctx @ w_o


def mha_no_output_projection(x, w_q, w_k, w_v, w_o, num_heads):
    batch, seq, d_model = x.shape
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    q = (x @ w_q).reshape(batch, seq, num_heads, d_head).swapaxes(1, 2)
    k = (x @ w_k).reshape(batch, seq, num_heads, d_head).swapaxes(1, 2)
    v = (x @ w_v).reshape(batch, seq, num_heads, d_head).swapaxes(1, 2)
    scores = q @ k.swapaxes(-1, -2) / math.sqrt(d_head)
    scores = scores - scores.max(axis=-1, keepdims=True)
    w = np.exp(scores)
    w /= w.sum(axis=-1, keepdims=True)
    heads = w @ v
    return heads.swapaxes(1, 2).reshape(batch, seq, d_model)


def mha_keys_from_w_q(x, w_q, w_k, w_v, w_o, num_heads):
    b, n, d = x.shape
    if d % num_heads:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    hd = d // num_heads
    Q = x @ w_q
    K = x @ w_q
    V = x @ w_v
    Q, K, V = (t.reshape(b, n, num_heads, hd).transpose(0, 2, 1, 3) for t in (Q, K, V))
    logits = np.einsum("bhid,bhjd->bhij", Q, K) / np.sqrt(hd)
    logits -= logits.max(axis=-1, keepdims=True)
    p = np.exp(logits)
    p /= p.sum(axis=-1, keepdims=True)
    o = np.einsum("bhij,bhjd->bhid", p, V)
    return o.transpose(0, 2, 1, 3).reshape(b, n, d) @ w_o


def mha_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    H, dh = num_heads, D // num_heads
    q = (x @ w_q).reshape(B, N, H, dh).transpose(0, 2, 1, 3)
    k = (x @ w_k).reshape(B, N, H, dh).transpose(0, 2, 1, 3)
    v = (x @ w_v).reshape(B, N, H, dh).transpose(0, 2, 1, 3)
    sc = q @ np.swapaxes(k, -1, -2) / math.sqrt(dh)
    sc = np.exp(sc - sc.max(axis=-1, keepdims=True))
    sc = sc / sc.sum(axis=-1, keepdims=True)
    ctx = sc @ v  # (B, H, N, dh)
    return ctx.reshape(B, N, D) @ w_o


def mha_weights_transposed(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, D = x.shape
    if D % num_heads != 0:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads
    q = (x @ w_q.T).reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)
    k = (x @ w_k.T).reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)
    v = (x @ w_v.T).reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)
    att = q @ k.transpose(0, 1, 3, 2) / math.sqrt(dh)
    att = np.exp(att - att.max(-1, keepdims=True))
    att /= att.sum(-1, keepdims=True)
    y = (att @ v).transpose(0, 2, 1, 3).reshape(B, N, D)
    return y @ w_o.T


def mha_max_over_queries(x, w_q, w_k, w_v, w_o, num_heads):
    d_model = x.shape[-1]
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    q_all, k_all, v_all = x @ w_q, x @ w_k, x @ w_v
    outs = []
    for h in range(num_heads):
        cols = slice(h * d_head, (h + 1) * d_head)
        s = q_all[..., cols] @ np.swapaxes(k_all[..., cols], -1, -2) / math.sqrt(d_head)
        s = np.exp(s - s.max(axis=-2, keepdims=True))
        s = s / s.sum(axis=-1, keepdims=True)
        outs.append(s @ v_all[..., cols])
    return np.concatenate(outs, axis=-1) @ w_o


def mha_sum_over_heads(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x, dtype=np.float64)
    d_model = x.shape[-1]
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    total = np.zeros_like(x)
    for h in range(num_heads):
        sl = slice(h * d_head, (h + 1) * d_head)
        qh, kh, vh = x @ w_q[:, sl], x @ w_k[:, sl], x @ w_v[:, sl]
        s = np.einsum("bid,bjd->bij", qh, kh) / math.sqrt(d_head)
        p = np.exp(s - s.max(axis=-1, keepdims=True))
        p /= p.sum(axis=-1, keepdims=True)
        total += (p @ vh) @ w_o[sl, :]  # each head's share of the output projection
    return total


def mha_einsum_4d(x, w_q, w_k, w_v, w_o, num_heads):
    d_model = x.shape[-1]
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    dh = d_model // num_heads
    wq = w_q.reshape(d_model, num_heads, dh)
    wk = w_k.reshape(d_model, num_heads, dh)
    wv = w_v.reshape(d_model, num_heads, dh)
    wo = w_o.reshape(num_heads, dh, d_model)
    q = np.einsum("bnm,mhd->bhnd", x, wq)
    k = np.einsum("bnm,mhd->bhnd", x, wk)
    v = np.einsum("bnm,mhd->bhnd", x, wv)
    s = np.einsum("bhid,bhjd->bhij", q, k) / np.sqrt(dh)
    s = s - s.max(axis=-1, keepdims=True)
    p = np.exp(s)
    p = p / p.sum(axis=-1, keepdims=True)
    o = np.einsum("bhij,bhjd->bhid", p, v)
    return np.einsum("bhid,hdm->bim", o, wo)


ENTRIES = [
    Entry("split_heads", "wrong", "reshape_without_transpose",
          "reshapes straight to (B, H, N, d_head) without the transpose, so each 'head' holds "
          "a run of consecutive tokens' features instead of one feature block of every token",
          split_heads_reshape_only),
    Entry("split_heads", "wrong", "interleaved_features",
          "reshapes to (B, N, d_head, H) and moves the last axis, so head h gets the strided "
          "features h, h+H, h+2H, ... instead of the block h*d_head:(h+1)*d_head",
          split_heads_interleaved),
    Entry("split_heads", "wrong", "loop_without_divisibility_check",
          "slices with d_head = d_model // num_heads and never checks divisibility, so a "
          "num_heads that does not divide d_model silently drops features instead of raising "
          "ValueError", split_heads_loop_no_check),
    Entry("split_heads", "wrong", "modulo_operands_swapped",
          "the divisibility test computes num_heads % d_model instead of d_model % num_heads, "
          "so valid head counts raise ValueError", split_heads_modulo_reversed),
    Entry("split_heads", "wrong", "split_along_tokens",
          "np.split cuts along axis 1 (the tokens) instead of the feature axis, giving heads of "
          "token chunks (or an error when N is not a multiple of num_heads)",
          split_heads_split_tokens),
    Entry("split_heads", "wrong", "d_head_from_seq_len",
          "computes d_head from x.shape[1] (the sequence length) instead of d_model, so the "
          "reshape fails or builds the wrong head width", split_heads_dhead_from_n),
    Entry("split_heads", "right", "stack_of_split", None, split_heads_stack_split),
    Entry("split_heads", "right", "preallocated_loops", None, split_heads_prealloc),

    Entry("merge_heads", "wrong", "reshape_without_transpose",
          "reshapes (B, H, N, d_head) straight to (B, N, H*d_head) without moving the head axis "
          "back, which mixes tokens and heads", merge_heads_reshape_only),
    Entry("merge_heads", "wrong", "head_index_fastest",
          "transposes to (B, N, d_head, H) before reshaping, so the features come out "
          "interleaved by head instead of head 0's block first", merge_heads_head_fastest),
    Entry("merge_heads", "wrong", "concatenate_along_tokens",
          "concatenates the heads along axis 1 (the token axis of each head) instead of the "
          "feature axis, giving shape (B, H*N, d_head)", merge_heads_concat_tokens),
    Entry("merge_heads", "wrong", "shape_unpacked_as_split_input",
          "unpacks x.shape as (B, N, H, d_head) although the input is (B, H, N, d_head), so the "
          "final reshape uses the head count as the sequence length", merge_heads_unpack_order),
    Entry("merge_heads", "wrong", "slice_offset_h",
          "writes head h at columns h:h+d_head instead of h*d_head:(h+1)*d_head, so heads "
          "overwrite each other and the last columns stay zero", merge_heads_offset_h),
    Entry("merge_heads", "wrong", "iterates_batch_not_heads",
          "iterating over x walks the batch axis, not the heads, so the concatenation glues "
          "batch elements side by side and returns (H, N, B*d_head)", merge_heads_iterates_batch),
    Entry("merge_heads", "right", "concatenate_heads", None, merge_heads_concat_heads),
    Entry("merge_heads", "right", "einsum_permute", None, merge_heads_einsum),

    Entry("multi_head_attention", "wrong", "scale_by_d_model",
          "divides the scores by sqrt(d_model) instead of sqrt(d_head), the width each head's "
          "dot product actually has", mha_scale_d_model),
    Entry("multi_head_attention", "wrong", "no_output_projection",
          "returns the merged heads without multiplying by w_o", mha_no_output_projection),
    Entry("multi_head_attention", "wrong", "keys_projected_with_w_q",
          "projects the keys with w_q (copy-paste) instead of w_k", mha_keys_from_w_q),
    Entry("multi_head_attention", "wrong", "merge_without_transpose",
          "merges the heads with a plain reshape of (B, H, N, d_head) to (B, N, d_model), "
          "without moving the head axis back next to the features", mha_merge_without_transpose),
    Entry("multi_head_attention", "wrong", "weights_transposed",
          "applies the weights as x @ W.T (nn.Linear's layout) instead of the course's x @ W",
          mha_weights_transposed),
    Entry("multi_head_attention", "wrong", "stabiliser_max_over_queries",
          "the max subtracted before exp is taken over axis -2 (the queries), so it is not a "
          "constant of each row of scores and the softmax over the keys changes",
          mha_max_over_queries),
    Entry("multi_head_attention", "right", "sum_over_heads_float64", None, mha_sum_over_heads),
    Entry("multi_head_attention", "right", "einsum_weight_tensors", None, mha_einsum_4d),
]
