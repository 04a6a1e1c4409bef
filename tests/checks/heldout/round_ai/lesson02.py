"""Held-out catalogue, lesson 02 (multi-head): split_heads, merge_heads, multi_head_attention."""

import math

import numpy as np

from entry import Entry


# ============================================================================ split_heads
def split_no_transpose(x, num_heads):
    x = np.asarray(x)
    b, n, d = x.shape
    if d % num_heads != 0:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    return x.reshape(b, num_heads, n, d // num_heads)


def split_dhead_then_heads(x, num_heads):
    x = np.asarray(x)
    batch, seq, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    return x.reshape(batch, seq, d_head, num_heads).transpose(0, 3, 1, 2)


def split_assert_guard(x, num_heads):
    x = np.asarray(x)
    B, N, D = x.shape
    assert D % num_heads == 0, f"d_model={D} is not divisible by num_heads={num_heads}"
    return np.swapaxes(x.reshape(B, N, num_heads, D // num_heads), 1, 2)


def split_stack_heads_first(x, num_heads):
    x = np.asarray(x)
    d_model = x.shape[-1]
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    size = d_model // num_heads
    pieces = [x[:, :, h * size:(h + 1) * size] for h in range(num_heads)]
    return np.stack(pieces)


def split_true_division(x, num_heads):
    x = np.asarray(x)
    b, n, d_model = x.shape
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model / num_heads
    return x.reshape(b, n, num_heads, d_head).transpose(0, 2, 1, 3)


def split_loop_no_guard(x, num_heads):
    x = np.asarray(x)
    d_head = x.shape[2] // num_heads
    heads = []
    for h in range(num_heads):
        heads.append(x[..., h * d_head:(h + 1) * d_head])
    return np.stack(heads, axis=1)


def split_fill_loops(x, num_heads):
    x = np.asarray(x)
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads
    out = np.empty((B, num_heads, N, dh), dtype=x.dtype)
    for h in range(num_heads):
        for f in range(dh):
            out[:, h, :, f] = x[:, :, h * dh + f]
    return out


def split_moveaxis(x, num_heads):
    arr = np.asarray(x)
    d_model = arr.shape[-1]
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    parts = np.split(arr, num_heads, axis=-1)  # list of (B, N, d_head)
    return np.moveaxis(np.array(parts), 0, 1)


# ============================================================================ merge_heads
def merge_transpose_discarded(x):
    x = np.asarray(x)
    b, h, n, dh = x.shape
    x.transpose(0, 2, 1, 3)
    return x.reshape(b, n, h * dh)


def merge_dhead_major(x):
    x = np.asarray(x)
    B, H, N, D = x.shape
    return x.transpose(0, 2, 3, 1).reshape(B, N, H * D)


def merge_concat_axis1(x):
    x = np.asarray(x)
    return np.concatenate([x[:, h] for h in range(x.shape[1])], axis=1)


def merge_unpack_bnhd(x):
    x = np.asarray(x)
    batch, seq_len, heads, d_head = x.shape
    return x.transpose(0, 2, 1, 3).reshape(batch, seq_len, heads * d_head)


def merge_slice_precedence(x):
    x = np.asarray(x)
    B, H, N, dh = x.shape
    out = np.zeros((B, N, H * dh), dtype=x.dtype)
    for h in range(H):
        out[:, :, h * dh:h + 1 * dh] = x[:, h]
    return out


def merge_forgets_flatten(x):
    x = np.asarray(x)
    return np.swapaxes(x, 1, 2)


def merge_dstack(x):
    x = np.asarray(x)
    return np.dstack([x[:, h, :, :] for h in range(x.shape[1])])


def merge_python_loops(x):
    arr = np.asarray(x)
    B, H, N, dh = arr.shape
    res = np.empty((B, N, H * dh), dtype=arr.dtype)
    for b in range(B):
        for t in range(N):
            res[b, t] = np.concatenate([arr[b, h, t] for h in range(H)])
    return res


# ============================================================================ multi_head_attention
def mha_scale_dmodel(x, w_q, w_k, w_v, w_o, num_heads):
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


def mha_no_output_projection(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x)
    batch, seq, d_model = x.shape
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    Q = (x @ w_q).reshape(batch, seq, num_heads, d_head).swapaxes(1, 2)
    K = (x @ w_k).reshape(batch, seq, num_heads, d_head).swapaxes(1, 2)
    V = (x @ w_v).reshape(batch, seq, num_heads, d_head).swapaxes(1, 2)
    scores = Q @ K.swapaxes(-1, -2) / math.sqrt(d_head)
    scores -= scores.max(axis=-1, keepdims=True)
    p = np.exp(scores)
    p /= p.sum(axis=-1, keepdims=True)
    return (p @ V).swapaxes(1, 2).reshape(batch, seq, d_model)


def mha_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x)
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    hd = D // num_heads
    q = (x @ w_q).reshape(B, N, num_heads, hd).transpose(0, 2, 1, 3)
    k = (x @ w_k).reshape(B, N, num_heads, hd).transpose(0, 2, 1, 3)
    v = (x @ w_v).reshape(B, N, num_heads, hd).transpose(0, 2, 1, 3)
    logits = np.einsum("bhqd,bhkd->bhqk", q, k) / np.sqrt(hd)
    logits = logits - logits.max(axis=-1, keepdims=True)
    w = np.exp(logits)
    w = w / w.sum(axis=-1, keepdims=True)
    ctx = np.einsum("bhqk,bhkd->bhqd", w, v)
    return ctx.reshape(B, N, D) @ w_o


def mha_keys_from_w_q(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x)
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads
    proj_q = x @ w_q
    proj_k = x @ w_q
    proj_v = x @ w_v
    out = np.zeros((B, N, D))
    for h in range(num_heads):
        sl = slice(h * dh, (h + 1) * dh)
        s = proj_q[..., sl] @ np.swapaxes(proj_k[..., sl], 1, 2) / math.sqrt(dh)
        s = np.exp(s - s.max(axis=-1, keepdims=True))
        s = s / s.sum(axis=-1, keepdims=True)
        out[..., sl] = s @ proj_v[..., sl]
    return out @ w_o


def mha_linear_layout(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x)
    b, n, d = x.shape
    if d % num_heads:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    dh = d // num_heads
    q = (x @ w_q.T).reshape(b, n, num_heads, dh).transpose(0, 2, 1, 3)
    k = (x @ w_k.T).reshape(b, n, num_heads, dh).transpose(0, 2, 1, 3)
    v = (x @ w_v.T).reshape(b, n, num_heads, dh).transpose(0, 2, 1, 3)
    sc = q @ k.transpose(0, 1, 3, 2) / dh ** 0.5
    sc = np.exp(sc - sc.max(axis=-1, keepdims=True))
    sc /= sc.sum(axis=-1, keepdims=True)
    merged = (sc @ v).transpose(0, 2, 1, 3).reshape(b, n, d)
    return merged @ w_o.T


def mha_batch_flattened(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x)
    B, N, D = x.shape
    if D % num_heads != 0:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads
    tokens = x.reshape(B * N, D)
    q_all, k_all, v_all = tokens @ w_q, tokens @ w_k, tokens @ w_v
    head_outs = []
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        s = q_all[:, cols] @ k_all[:, cols].T / np.sqrt(dh)
        s = np.exp(s - s.max(axis=1, keepdims=True))
        s /= s.sum(axis=1, keepdims=True)
        head_outs.append(s @ v_all[:, cols])
    return (np.concatenate(head_outs, axis=1) @ w_o).reshape(B, N, D)


def mha_einsum_weights(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x, dtype=np.float64)
    d_model = x.shape[-1]
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    dh = d_model // num_heads
    wq = np.asarray(w_q, dtype=np.float64).reshape(d_model, num_heads, dh)
    wk = np.asarray(w_k, dtype=np.float64).reshape(d_model, num_heads, dh)
    wv = np.asarray(w_v, dtype=np.float64).reshape(d_model, num_heads, dh)
    wo = np.asarray(w_o, dtype=np.float64).reshape(num_heads, dh, d_model)
    q = np.einsum("bnd,dhe->bhne", x, wq)
    k = np.einsum("bnd,dhe->bhne", x, wk)
    v = np.einsum("bnd,dhe->bhne", x, wv)
    s = np.einsum("bhqe,bhke->bhqk", q, k) / math.sqrt(dh)
    s -= s.max(axis=-1, keepdims=True)
    p = np.exp(s)
    p /= p.sum(axis=-1, keepdims=True)
    ctx = np.einsum("bhqk,bhke->bhqe", p, v)
    return np.einsum("bhqe,hef->bqf", ctx, wo)


def mha_per_sequence_loops(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x)
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads
    result = np.empty((B, N, D))
    for b in range(B):
        qs, ks, vs = x[b] @ w_q, x[b] @ w_k, x[b] @ w_v
        concat = []
        for h in range(num_heads):
            qh = qs[:, h * dh:(h + 1) * dh]
            kh = ks[:, h * dh:(h + 1) * dh]
            vh = vs[:, h * dh:(h + 1) * dh]
            rows = []
            for i in range(N):
                sc = [float(qh[i] @ kh[j]) / math.sqrt(dh) for j in range(N)]
                top = max(sc)
                ex = [math.exp(s - top) for s in sc]
                tot = sum(ex)
                rows.append(sum((e / tot) * vh[j] for j, e in enumerate(ex)))
            concat.append(np.array(rows))
        result[b] = np.hstack(concat) @ w_o
    return result


ENTRIES = [
    Entry("split_heads", "wrong", "reshape_without_transpose",
          "It reshapes straight to (B, H, N, d_head) without going through (B, N, H, d_head) "
          "and transposing, so each 'head' is a block of consecutive numbers mixing tokens and "
          "features.", split_no_transpose),
    Entry("split_heads", "wrong", "dhead_before_heads",
          "The last axis is reshaped as (d_head, H) instead of (H, d_head), so head h gets the "
          "strided features h, h+H, h+2H, ... instead of the block h*d_head:(h+1)*d_head.",
          split_dhead_then_heads),
    Entry("split_heads", "wrong", "assert_instead_of_valueerror",
          "The divisibility guard is an assert, so a d_model not divisible by num_heads raises "
          "AssertionError instead of the ValueError the contract requires.",
          split_assert_guard),
    Entry("split_heads", "wrong", "heads_stacked_first",
          "np.stack puts the new heads axis first, so the result is (H, B, N, d_head) instead "
          "of (B, H, N, d_head).", split_stack_heads_first),
    Entry("split_heads", "wrong", "true_division_head_size",
          "d_head = d_model / num_heads is a float (true division), and reshape raises "
          "TypeError on a float size; // was needed.", split_true_division),
    Entry("split_heads", "wrong", "no_divisibility_guard",
          "There is no divisibility check: with d_model % num_heads != 0 the slices of width "
          "d_model // num_heads silently drop the last features instead of raising ValueError.",
          split_loop_no_guard),
    Entry("split_heads", "right", "explicit_fill_loops", None, split_fill_loops),
    Entry("split_heads", "right", "np_split_moveaxis", None, split_moveaxis),
    Entry("merge_heads", "wrong", "transpose_result_discarded",
          "x.transpose(...) returns a new array that is thrown away (it is not in place), so "
          "the original (B, H, N, d_head) layout is reshaped directly and heads and tokens get "
          "mixed.", merge_transpose_discarded),
    Entry("merge_heads", "wrong", "dhead_major_order",
          "It transposes to (B, N, d_head, H) before flattening, so the features of the heads "
          "are interleaved instead of head 0's block first.", merge_dhead_major),
    Entry("merge_heads", "wrong", "concatenate_on_tokens_axis",
          "The heads are concatenated along axis=1 (the tokens axis of each (B, N, d_head) "
          "head) instead of the last axis, giving (B, H*N, d_head).", merge_concat_axis1),
    Entry("merge_heads", "wrong", "unpacks_as_B_N_H_d",
          "The shape is unpacked as (B, N, H, d_head) although the input is (B, H, N, d_head), "
          "so the reshape uses the wrong sizes and returns (B, H, N*d_head).",
          merge_unpack_bnhd),
    Entry("merge_heads", "wrong", "slice_end_precedence",
          "The slice end h + 1 * dh is h + dh, not (h + 1) * dh, so from head 1 on the target "
          "slice has the wrong width (a broadcasting error unless d_head is 1).",
          merge_slice_precedence),
    Entry("merge_heads", "wrong", "forgets_flatten",
          "It swaps the heads and tokens axes but never reshapes, so it returns the 4-D "
          "(B, N, H, d_head) array instead of (B, N, H*d_head).", merge_forgets_flatten),
    Entry("merge_heads", "right", "dstack_heads", None, merge_dstack),
    Entry("merge_heads", "right", "per_token_concatenate", None, merge_python_loops),
    Entry("multi_head_attention", "wrong", "scale_sqrt_d_model",
          "The scores are divided by sqrt(d_model) instead of sqrt(d_head), the size of each "
          "head's dot product.", mha_scale_dmodel),
    Entry("multi_head_attention", "wrong", "no_output_projection",
          "The merged heads are returned without the final @ w_o output projection.",
          mha_no_output_projection),
    Entry("multi_head_attention", "wrong", "merge_without_transpose",
          "The (B, H, N, d_head) context is reshaped straight to (B, N, d_model) without moving "
          "the heads axis back next to d_head, so tokens and heads are scrambled before w_o.",
          mha_merge_without_transpose),
    Entry("multi_head_attention", "wrong", "keys_projected_with_w_q",
          "Copy-paste slip: the keys are computed as x @ w_q instead of x @ w_k.",
          mha_keys_from_w_q),
    Entry("multi_head_attention", "wrong", "nn_linear_layout",
          "The weights are applied as x @ W.T (nn.Linear's (out, in) layout) although the "
          "course applies them as x @ W.", mha_linear_layout),
    Entry("multi_head_attention", "wrong", "batch_flattened_into_tokens",
          "Batch and tokens are flattened into one (B*N, d) sequence before attention, so "
          "tokens attend to the tokens of the other sequences of the batch.",
          mha_batch_flattened),
    Entry("multi_head_attention", "right", "einsum_per_head_weights", None, mha_einsum_weights),
    Entry("multi_head_attention", "right", "per_sequence_python_loops", None,
          mha_per_sequence_loops),
]
