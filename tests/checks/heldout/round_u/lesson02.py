"""Held-out catalogue, lesson 02 (multi-head, numpy): split_heads, merge_heads,
multi_head_attention."""

import math

import numpy as np
import torch
import torch.nn.functional as F

from entry import Entry


# ------------------------------------------------------------------------- split_heads, wrong
def split_heads_reshape_only(x, num_heads):
    batch, n, d_model = x.shape
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    return x.reshape(batch, num_heads, n, d_model // num_heads)


def split_heads_strided(x, num_heads):
    b, n, d = x.shape
    if d % num_heads:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    d_head = d // num_heads
    return x.reshape(b, n, d_head, num_heads).transpose(0, 3, 1, 2)


def split_heads_swapped_modulo(x, num_heads):
    B, N, D = x.shape
    if num_heads % D != 0:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads
    return x.reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)


def split_heads_torch_transpose(x, num_heads):
    b, n, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    return x.reshape(b, n, num_heads, d_model // num_heads).transpose(1, 2)


def split_heads_true_division(x, num_heads):
    b, n, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model / num_heads
    return x.reshape(b, n, num_heads, d_head).transpose(0, 2, 1, 3)


def split_heads_split_tokens(x, num_heads):
    if x.shape[-1] % num_heads:
        raise ValueError(f"d_model={x.shape[-1]} is not divisible by num_heads={num_heads}")
    chunks = np.split(x, num_heads, axis=1)
    return np.stack(chunks, axis=1)


# ------------------------------------------------------------------------- split_heads, right
def split_heads_slices(x, num_heads):
    d_model = x.shape[2]
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    w = d_model // num_heads
    return np.stack([x[:, :, h * w:(h + 1) * w] for h in range(num_heads)], axis=1)


def split_heads_einsum(x, num_heads):
    b, n, d_model = np.shape(x)
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    grouped = np.reshape(x, (b, n, num_heads, d_model // num_heads))
    return np.einsum("bnhd->bhnd", grouped).copy()


# ------------------------------------------------------------------------- merge_heads, wrong
def merge_heads_reshape_only(x):
    b, h, n, d = x.shape
    return x.reshape(b, n, h * d)


def merge_heads_wrong_permutation(x):
    b, h, n, d = x.shape
    return x.transpose(0, 2, 3, 1).reshape(b, n, h * d)


def merge_heads_hstack(x):
    return np.hstack([x[:, i] for i in range(x.shape[1])])


def merge_heads_width_from_n(x):
    b, h, n, d = x.shape
    return np.swapaxes(x, 1, 2).reshape(b, n, h * n)


def merge_heads_concat_batch(x):
    return np.concatenate(x, axis=-1)


def merge_heads_offset_by_index(x):
    b, h, n, d = x.shape
    out = np.zeros((b, n, h * d), dtype=x.dtype)
    for i in range(h):
        out[:, :, i:i + d] = x[:, i]
    return out


# ------------------------------------------------------------------------- merge_heads, right
def merge_heads_slices(x):
    b, h, n, d = x.shape
    out = np.empty((b, n, h * d), dtype=x.dtype)
    for i in range(h):
        out[..., i * d:(i + 1) * d] = x[:, i, :, :]
    return out


def merge_heads_moveaxis(x):
    arr = np.moveaxis(np.asarray(x), 1, 2)
    return arr.reshape(arr.shape[0], arr.shape[1], -1)


# ---------------------------------------------------------------- multi_head_attention, wrong
def mha_scale_d_model(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads

    def heads(t):
        return t.reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)

    q, k, v = heads(x @ w_q), heads(x @ w_k), heads(x @ w_v)
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(D)
    s = s - s.max(axis=-1, keepdims=True)
    p = np.exp(s)
    p = p / p.sum(axis=-1, keepdims=True)
    ctx = (p @ v).transpose(0, 2, 1, 3).reshape(B, N, D)
    return ctx @ w_o


def mha_no_output_projection(x, w_q, w_k, w_v, w_o, num_heads):
    b, n, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    split = lambda t: t.reshape(b, n, num_heads, d_head).transpose(0, 2, 1, 3)  # noqa: E731
    q, k, v = split(x @ w_q), split(x @ w_k), split(x @ w_v)
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(d_head)
    scores -= scores.max(-1, keepdims=True)
    weights = np.exp(scores)
    weights /= weights.sum(-1, keepdims=True)
    return (weights @ v).transpose(0, 2, 1, 3).reshape(b, n, d_model)


def mha_values_from_w_k(x, w_q, w_k, w_v, w_o, num_heads):
    b, n, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    hd = d_model // num_heads
    q = (x @ w_q).reshape(b, n, num_heads, hd).transpose(0, 2, 1, 3)
    k = (x @ w_k).reshape(b, n, num_heads, hd).transpose(0, 2, 1, 3)
    v = (x @ w_k).reshape(b, n, num_heads, hd).transpose(0, 2, 1, 3)
    att = q @ k.swapaxes(-1, -2) / np.sqrt(hd)
    att = np.exp(att - att.max(axis=-1, keepdims=True))
    att = att / att.sum(axis=-1, keepdims=True)
    out = (att @ v).transpose(0, 2, 1, 3).reshape(b, n, d_model)
    return out @ w_o


def mha_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, D = x.shape
    if D % num_heads != 0:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    d_head = D // num_heads
    qh = (x @ w_q).reshape(B, N, num_heads, d_head).transpose(0, 2, 1, 3)
    kh = (x @ w_k).reshape(B, N, num_heads, d_head).transpose(0, 2, 1, 3)
    vh = (x @ w_v).reshape(B, N, num_heads, d_head).transpose(0, 2, 1, 3)
    s = np.einsum("bhid,bhjd->bhij", qh, kh) / np.sqrt(d_head)
    s = np.exp(s - s.max(axis=-1, keepdims=True))
    s = s / s.sum(axis=-1, keepdims=True)
    ctx = np.einsum("bhij,bhjd->bhid", s, vh)
    return ctx.reshape(B, N, D) @ w_o


def mha_linear_layout(x, w_q, w_k, w_v, w_o, num_heads):
    b, n, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads

    def proj(w):
        return (x @ w.T).reshape(b, n, num_heads, d_head).transpose(0, 2, 1, 3)

    q, k, v = proj(w_q), proj(w_k), proj(w_v)
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d_head)
    scores = scores - scores.max(axis=-1, keepdims=True)
    w = np.exp(scores)
    w = w / w.sum(axis=-1, keepdims=True)
    merged = (w @ v).transpose(0, 2, 1, 3).reshape(b, n, d_model)
    return merged @ w_o.T


def mha_rowmax_no_keepdims(x, w_q, w_k, w_v, w_o, num_heads):
    b, n, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    q = (x @ w_q).reshape(b, n, num_heads, d_head).swapaxes(1, 2)
    k = (x @ w_k).reshape(b, n, num_heads, d_head).swapaxes(1, 2)
    v = (x @ w_v).reshape(b, n, num_heads, d_head).swapaxes(1, 2)
    s = q @ k.swapaxes(-1, -2) / np.sqrt(d_head)
    e = np.exp(s - s.max(axis=-1))
    p = e / e.sum(axis=-1, keepdims=True)
    return (p @ v).swapaxes(1, 2).reshape(b, n, d_model) @ w_o


# ---------------------------------------------------------------- multi_head_attention, right
def mha_per_head_blocks(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x, dtype=np.float64)
    d_model = x.shape[-1]
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    dh = d_model // num_heads
    total = np.zeros(x.shape)
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        q = np.einsum("bnd,de->bne", x, w_q[:, cols])
        k = np.einsum("bnd,de->bne", x, w_k[:, cols])
        v = np.einsum("bnd,de->bne", x, w_v[:, cols])
        s = np.einsum("bie,bje->bij", q, k) / math.sqrt(dh)
        s = s - s.max(axis=2, keepdims=True)
        p = np.exp(s)
        p /= p.sum(axis=2, keepdims=True)
        head = np.einsum("bij,bje->bie", p, v)
        total += head @ w_o[cols, :]  # each head's block of rows of w_o
    return total


def mha_torch_sdpa(x, w_q, w_k, w_v, w_o, num_heads):
    xt = torch.as_tensor(np.asarray(x), dtype=torch.float64)
    b, n, d_model = xt.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    wq, wk, wv, wo = (torch.as_tensor(np.asarray(w), dtype=torch.float64)
                      for w in (w_q, w_k, w_v, w_o))

    def heads(t):
        return t.view(b, n, num_heads, d_model // num_heads).transpose(1, 2)

    ctx = F.scaled_dot_product_attention(heads(xt @ wq), heads(xt @ wk), heads(xt @ wv))
    out = ctx.transpose(1, 2).reshape(b, n, d_model) @ wo
    return out.numpy()


E = Entry
ENTRIES = [
    E(exercise="split_heads", kind="wrong", label="reshape_without_transpose",
      mistake="Reshapes straight to (B, H, N, d_head) without going through (B, N, H, d_head) "
              "and transposing, so each 'head' is a block of consecutive memory that mixes "
              "tokens instead of one feature slice of every token.",
      func=split_heads_reshape_only),
    E(exercise="split_heads", kind="wrong", label="reshape_d_head_then_heads",
      mistake="Reshapes the features as (d_head, H) instead of (H, d_head), so head h gets "
              "the strided features h, h+H, h+2H, ... rather than the block "
              "h*d_head:(h+1)*d_head.",
      func=split_heads_strided),
    E(exercise="split_heads", kind="wrong", label="guard_operands_swapped",
      mistake="The divisibility guard tests `num_heads % d_model` (operands swapped), so valid "
              "head counts smaller than d_model raise ValueError.",
      func=split_heads_swapped_modulo),
    E(exercise="split_heads", kind="wrong", label="torch_style_transpose",
      mistake="Calls `.transpose(1, 2)` as in PyTorch; numpy's transpose wants the full "
              "permutation of the four axes, so it raises on every valid input.",
      func=split_heads_torch_transpose),
    E(exercise="split_heads", kind="wrong", label="true_division_d_head",
      mistake="Computes d_head with `/`, a float, and numpy's reshape refuses a float "
              "dimension (TypeError) on every valid input.",
      func=split_heads_true_division),
    E(exercise="split_heads", kind="wrong", label="np_split_token_axis",
      mistake="Splits along axis 1 (the tokens) instead of the feature axis, so the heads hold "
              "groups of tokens with all features, and it raises when N is not a multiple of "
              "num_heads.",
      func=split_heads_split_tokens),
    E(exercise="split_heads", kind="right", label="stack_feature_slices", mistake=None,
      func=split_heads_slices),
    E(exercise="split_heads", kind="right", label="einsum_permute", mistake=None,
      func=split_heads_einsum),

    E(exercise="merge_heads", kind="wrong", label="reshape_without_transpose",
      mistake="Reshapes (B, H, N, d_head) straight to (B, N, H*d_head) without moving the head "
              "axis next to d_head first, so token rows are filled with other tokens' and "
              "heads' features.",
      func=merge_heads_reshape_only),
    E(exercise="merge_heads", kind="wrong", label="permutation_0_2_3_1",
      mistake="Transposes with (0, 2, 3, 1), putting d_head before the head axis, so the merged "
              "features are interleaved across heads instead of head 0's block first.",
      func=merge_heads_wrong_permutation),
    E(exercise="merge_heads", kind="wrong", label="hstack_heads",
      mistake="Uses `np.hstack` on the per-head (B, N, d_head) arrays, which concatenates along "
              "axis 1 (the tokens) rather than the last axis, giving shape (B, H*N, d_head).",
      func=merge_heads_hstack),
    E(exercise="merge_heads", kind="wrong", label="width_uses_n",
      mistake="Reshapes to (B, N, H*N), reusing N where d_head belongs, so it raises unless "
              "N happens to equal d_head.",
      func=merge_heads_width_from_n),
    E(exercise="merge_heads", kind="wrong", label="concatenate_iterates_batch",
      mistake="`np.concatenate(x, axis=-1)` iterates over the first axis of x, the batch, not "
              "the heads, giving (H, N, B*d_head).",
      func=merge_heads_concat_batch),
    E(exercise="merge_heads", kind="wrong", label="slice_start_head_index",
      mistake="Writes head i into columns i:i+d_head instead of i*d_head:(i+1)*d_head, so the "
              "heads overlap and overwrite each other (unless d_head is 1).",
      func=merge_heads_offset_by_index),
    E(exercise="merge_heads", kind="right", label="loop_fill_blocks", mistake=None,
      func=merge_heads_slices),
    E(exercise="merge_heads", kind="right", label="moveaxis_reshape", mistake=None,
      func=merge_heads_moveaxis),

    E(exercise="multi_head_attention", kind="wrong", label="scale_sqrt_d_model",
      mistake="Scales the scores by 1/sqrt(d_model) instead of 1/sqrt(d_head): each head's "
              "dot products have d_head terms.",
      func=mha_scale_d_model),
    E(exercise="multi_head_attention", kind="wrong", label="forgets_w_o",
      mistake="Returns the merged heads without the output projection `@ w_o`.",
      func=mha_no_output_projection),
    E(exercise="multi_head_attention", kind="wrong", label="values_from_w_k",
      mistake="Copy-paste slip: the values are projected with `w_k` instead of `w_v`.",
      func=mha_values_from_w_k),
    E(exercise="multi_head_attention", kind="wrong", label="merge_without_transpose",
      mistake="Merges the heads by reshaping (B, H, N, d_head) straight to (B, N, d_model) "
              "without transposing heads and tokens back, scrambling tokens and heads.",
      func=mha_merge_without_transpose),
    E(exercise="multi_head_attention", kind="wrong", label="nn_linear_layout",
      mistake="Applies every weight as `x @ W.T` (nn.Linear's (out, in) layout) although the "
              "contract applies them as `x @ W`.",
      func=mha_linear_layout),
    E(exercise="multi_head_attention", kind="wrong", label="row_max_no_keepdims",
      mistake="Subtracts the row maximum without `keepdims=True`: the (B, H, N) maxima do "
              "not line up with the (B, H, N, N) scores, so it raises (or, when the sizes "
              "happen to match, shifts each key column by another query's maximum).",
      func=mha_rowmax_no_keepdims),
    E(exercise="multi_head_attention", kind="right", label="per_head_weight_blocks_einsum",
      mistake=None, func=mha_per_head_blocks),
    E(exercise="multi_head_attention", kind="right", label="torch_sdpa_float64",
      mistake=None, func=mha_torch_sdpa),
]
