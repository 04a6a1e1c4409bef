"""Learner-style answers to lesson 02 (see answers/lesson01.py for the layout)."""

import numpy as np
import torch

from tests.checks.answers.lesson01 import attention_matmul as attention


# -- split_heads: wrong ------------------------------------------------------------------------
def split_plain_reshape(x, num_heads):
    B, N, D = x.shape
    return x.reshape(B, num_heads, N, D // num_heads)


def split_forgot_transpose(x, num_heads):
    B, N, D = x.shape
    return x.reshape(B, N, num_heads, D // num_heads)


def split_transpose_2013(x, num_heads):
    B, N, D = x.shape
    return np.transpose(x.reshape(B, N, num_heads, D // num_heads), (2, 0, 1, 3))


def split_moved_tokens_last(x, num_heads):
    B, N, D = x.shape
    return np.moveaxis(x.reshape(B, N, num_heads, D // num_heads), 1, -1)


def split_strided(x, num_heads):
    B, N, D = x.shape
    return x.reshape(B, N, D // num_heads, num_heads).transpose(0, 3, 1, 2)


def split_into_batch(x, num_heads):
    B, N, D = x.shape
    d = D // num_heads
    return x.reshape(B, N, num_heads, d).swapaxes(1, 2).reshape(-1, N, d)


def split_reshape_swapped_sizes(x, num_heads):
    B, N, D = x.shape
    return x.reshape(B, N, -1, num_heads).swapaxes(1, 2)


# -- split_heads: right ------------------------------------------------------------------------
def split_reshape_transpose(x, num_heads):
    if x.shape[-1] % num_heads:
        raise ValueError(f"d_model={x.shape[-1]} is not divisible by num_heads={num_heads}")
    B, N, D = x.shape
    return x.reshape(B, N, num_heads, D // num_heads).transpose(0, 2, 1, 3)


def split_stack_slices(x, num_heads):
    if x.shape[-1] % num_heads:
        raise ValueError(f"d_model={x.shape[-1]} is not divisible by num_heads={num_heads}")
    d_head = x.shape[-1] // num_heads
    return np.stack([x[..., h * d_head:(h + 1) * d_head] for h in range(num_heads)], axis=1)


def split_array_split(x, num_heads):
    if x.shape[-1] % num_heads:
        raise ValueError(f"d_model={x.shape[-1]} is not divisible by num_heads={num_heads}")
    return np.stack(np.split(x, num_heads, axis=-1), axis=1)


def split_torch(x, num_heads):
    if x.shape[-1] % num_heads:
        raise ValueError(f"d_model={x.shape[-1]} is not divisible by num_heads={num_heads}")
    t = torch.from_numpy(x)
    B, N, D = t.shape
    return t.view(B, N, num_heads, D // num_heads).transpose(1, 2).numpy()


def split_einops_style(x, num_heads):
    if x.shape[-1] % num_heads:
        raise ValueError(f"d_model={x.shape[-1]} is not divisible by num_heads={num_heads}")
    B, N, D = x.shape
    heads = x.reshape(B, N, num_heads, -1)
    return np.einsum("bnhd->bhnd", heads)


# -- merge_heads: wrong ------------------------------------------------------------------------
def merge_plain_reshape(x):
    B, H, N, d = x.shape
    return x.reshape(B, N, H * d)


def merge_strided(x):
    B, H, N, d = x.shape
    return x.transpose(0, 2, 3, 1).reshape(B, N, d * H)


def merge_no_reshape(x):
    return x.transpose(0, 2, 1, 3)


def merge_heads_first(x):
    B, H, N, d = x.shape
    return np.swapaxes(x, 0, 1).reshape(B, N, H * d)


def merge_add_heads(x):
    out = np.zeros_like(x[:, 0])
    for h in range(x.shape[1]):
        out = out + x[:, h]
    return out


def merge_concat_axis1(x):
    return np.concatenate(np.split(x, x.shape[1], axis=1), axis=2)[:, 0]


def merge_features_first(x):
    B, H, N, d = x.shape
    return np.transpose(x, (0, 1, 3, 2)).reshape(B, H * d, N)


# -- merge_heads: right ------------------------------------------------------------------------
def merge_transpose_reshape(x):
    B, H, N, d = x.shape
    return x.transpose(0, 2, 1, 3).reshape(B, N, H * d)


def merge_concatenate(x):
    return np.concatenate([x[:, h] for h in range(x.shape[1])], axis=-1)


def merge_loops(x):
    B, H, N, d = x.shape
    out = np.empty((B, N, H * d), dtype=x.dtype)
    for b in range(B):
        for h in range(H):
            for n in range(N):
                out[b, n, h * d:(h + 1) * d] = x[b, h, n]
    return out


def merge_torch(x):
    t = torch.from_numpy(x)
    return t.transpose(1, 2).flatten(2).numpy()


# -- multi_head_attention ----------------------------------------------------------------------
def _mha(x, w_q, w_k, w_v, w_o, num_heads, split, merge, scale=None):
    q, k, v = (split(x @ w, num_heads) for w in (w_q, w_k, w_v))
    d_head = q.shape[-1]
    scale = 1 / np.sqrt(d_head) if scale is None else scale
    scores = q @ np.swapaxes(k, -1, -2) * scale
    scores = scores - scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores) / np.exp(scores).sum(axis=-1, keepdims=True)
    return merge(weights @ v) @ w_o


def mha_split_plain(x, w_q, w_k, w_v, w_o, num_heads):
    return _mha(x, w_q, w_k, w_v, w_o, num_heads, split_plain_reshape, merge_plain_reshape)


def mha_merge_plain(x, w_q, w_k, w_v, w_o, num_heads):
    return _mha(x, w_q, w_k, w_v, w_o, num_heads, split_reshape_transpose, merge_plain_reshape)


def mha_strided(x, w_q, w_k, w_v, w_o, num_heads):
    return _mha(x, w_q, w_k, w_v, w_o, num_heads, split_strided, merge_strided)


def mha_no_w_o(x, w_q, w_k, w_v, w_o, num_heads):
    eye = np.eye(x.shape[-1])
    return _mha(x, w_q, w_k, w_v, eye, num_heads, split_reshape_transpose,
                merge_transpose_reshape)


def mha_scale_d_model(x, w_q, w_k, w_v, w_o, num_heads):
    return _mha(x, w_q, w_k, w_v, w_o, num_heads, split_reshape_transpose,
                merge_transpose_reshape, scale=1 / np.sqrt(x.shape[-1]))


def mha_no_scale(x, w_q, w_k, w_v, w_o, num_heads):
    return _mha(x, w_q, w_k, w_v, w_o, num_heads, split_reshape_transpose,
                merge_transpose_reshape, scale=1.0)


def mha_no_split(x, w_q, w_k, w_v, w_o, num_heads):
    out, _ = attention(x @ w_q, x @ w_k, x @ w_v)
    return out @ w_o


def mha_linear_layout(x, w_q, w_k, w_v, w_o, num_heads):
    return _mha(x, w_q.T, w_k.T, w_v.T, w_o.T, num_heads, split_reshape_transpose,
                merge_transpose_reshape)


def mha_wide_head_scaled_per_head(x, w_q, w_k, w_v, w_o, num_heads):
    d_head = x.shape[-1] // num_heads
    scores = (x @ w_q) @ np.swapaxes(x @ w_k, -1, -2) / np.sqrt(d_head)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    return weights @ (x @ w_v) @ w_o


def _mha_attn(q, k, v, axis=-1, causal=False):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if causal:
        n = scores.shape[-1]
        scores = scores + np.triu(np.full((n, n), -np.inf), 1)
    weights = np.exp(scores - scores.max(axis, keepdims=True))
    return weights / weights.sum(axis, keepdims=True) @ v


def mha_normalised_over_queries(x, w_q, w_k, w_v, w_o, num_heads):
    q, k, v = (split_reshape_transpose(x @ w, num_heads) for w in (w_q, w_k, w_v))
    return merge_transpose_reshape(_mha_attn(q, k, v, axis=-2)) @ w_o


def mha_keys_as_queries(x, w_q, w_k, w_v, w_o, num_heads):
    q, k, v = (split_reshape_transpose(x @ w, num_heads) for w in (w_q, w_k, w_v))
    heads, _ = attention(k, q, v)
    return merge_transpose_reshape(heads) @ w_o


def mha_values_as_keys(x, w_q, w_k, w_v, w_o, num_heads):
    q, k, v = (split_reshape_transpose(x @ w, num_heads) for w in (w_q, w_v, w_k))
    heads, _ = attention(q, k, v)
    return merge_transpose_reshape(heads) @ w_o


def mha_gpt_style_causal(x, w_q, w_k, w_v, w_o, num_heads):
    q, k, v = (split_reshape_transpose(x @ w, num_heads) for w in (w_q, w_k, w_v))
    return merge_transpose_reshape(_mha_attn(q, k, v, causal=True)) @ w_o


def mha_with_weights(x, w_q, w_k, w_v, w_o, num_heads):
    q, k, v = (split_reshape_transpose(x @ w, num_heads) for w in (w_q, w_k, w_v))
    heads, weights = attention(q, k, v)
    return merge_transpose_reshape(heads) @ w_o, weights


def mha_softmax_axis_1(x, w_q, w_k, w_v, w_o, num_heads):
    q, k, v = (split_reshape_transpose(x @ w, num_heads) for w in (w_q, w_k, w_v))
    return merge_transpose_reshape(_mha_attn(q, k, v, axis=1)) @ w_o


def mha_plus_residual(x, w_q, w_k, w_v, w_o, num_heads):
    return x + mha_composed(x, w_q, w_k, w_v, w_o, num_heads)


def mha_batch_as_one_sequence(x, w_q, w_k, w_v, w_o, num_heads):
    batch, n, d_model = x.shape
    rows = x.reshape(batch * n, d_model)[None]  # (1, B * N, d_model): one long sequence
    return mha_composed(rows, w_q, w_k, w_v, w_o, num_heads).reshape(batch, n, d_model)


def mha_scale_d_head_no_sqrt(x, w_q, w_k, w_v, w_o, num_heads):
    return _mha(x, w_q, w_k, w_v, w_o, num_heads, split_reshape_transpose,
                merge_transpose_reshape, scale=num_heads / x.shape[-1])


def mha_width_as_heads(x, w_q, w_k, w_v, w_o, num_heads):
    heads = x.shape[-1] // num_heads  # mixed up: this is d_head
    return mha_composed(x, w_q, w_k, w_v, w_o, heads)


def mha_copy_paste(x, w_q, w_k, w_v, w_o, num_heads):
    q = split_reshape_transpose(x @ w_q, num_heads)
    k = split_reshape_transpose(x @ w_k, num_heads)
    v = split_reshape_transpose(x @ w_k, num_heads)
    heads, _ = attention(q, k, v)
    return merge_transpose_reshape(heads) @ w_o


def mha_values_not_projected(x, w_q, w_k, w_v, w_o, num_heads):
    q = split_reshape_transpose(x @ w_q, num_heads)
    k = split_reshape_transpose(x @ w_k, num_heads)
    heads, _ = attention(q, k, split_reshape_transpose(x, num_heads))
    return merge_transpose_reshape(heads) @ w_o


def mha_composed(x, w_q, w_k, w_v, w_o, num_heads):
    q = split_reshape_transpose(x @ w_q, num_heads)
    k = split_reshape_transpose(x @ w_k, num_heads)
    v = split_reshape_transpose(x @ w_v, num_heads)
    heads, _ = attention(q, k, v)
    return merge_transpose_reshape(heads) @ w_o


def _check_heads(x, num_heads):
    if x.shape[-1] % num_heads:
        raise ValueError(f"d_model={x.shape[-1]} is not divisible by num_heads={num_heads}")


def mha_head_loop(x, w_q, w_k, w_v, w_o, num_heads):
    _check_heads(x, num_heads)
    d_head = x.shape[-1] // num_heads
    outputs = []
    for h in range(num_heads):
        cols = slice(h * d_head, (h + 1) * d_head)
        out, _ = attention(x @ w_q[:, cols], x @ w_k[:, cols], x @ w_v[:, cols])
        outputs.append(out)
    return np.concatenate(outputs, axis=-1) @ w_o


def mha_einsum(x, w_q, w_k, w_v, w_o, num_heads):
    _check_heads(x, num_heads)
    B, N, D = x.shape
    q, k, v = (np.einsum("bnd,de->bne", x, w).reshape(B, N, num_heads, -1) for w in
               (w_q, w_k, w_v))
    scores = np.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(q.shape[-1])
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    heads = np.einsum("bhqk,bkhd->bqhd", weights, v).reshape(B, N, D)
    return heads @ w_o


def mha_torch_module(x, w_q, w_k, w_v, w_o, num_heads):
    _check_heads(x, num_heads)  # (nn.MultiheadAttention refuses with an AssertionError)
    d_model = x.shape[-1]
    layer = torch.nn.MultiheadAttention(d_model, num_heads, bias=False, batch_first=True,
                                        dtype=torch.float64)
    with torch.no_grad():
        layer.in_proj_weight.copy_(torch.from_numpy(np.concatenate([w_q, w_k, w_v], 1).T))
        layer.out_proj.weight.copy_(torch.from_numpy(w_o.T))
        t = torch.from_numpy(x.astype(np.float64))
        out, _ = layer(t, t, t, need_weights=False)
    return out.numpy()


def mha_float32(x, w_q, w_k, w_v, w_o, num_heads):
    args = [np.asarray(a, dtype=np.float32) for a in (x, w_q, w_k, w_v, w_o)]
    return mha_composed(*args, num_heads)


# -- answers that reach mhalib's own answer ----------------------------------------------------
def split_from_reference(x, num_heads):
    from mhalib.reference import split_heads

    return split_heads(x, num_heads)


def merge_from_reference(x):
    from mhalib import reference

    return reference.merge_heads(x)


def mha_from_reference(x, w_q, w_k, w_v, w_o, num_heads):
    from mhalib.reference import multi_head_attention

    return multi_head_attention(x, w_q, w_k, w_v, w_o, num_heads)


def mha_from_torch_gqa_reference(x, w_q, w_k, w_v, w_o, num_heads):
    from mhalib.reference import grouped_query_attention

    t = [torch.from_numpy(a) for a in (x, w_q, w_k, w_v, w_o)]
    return grouped_query_attention(*t, num_heads, num_heads).numpy()


WRONG = {
    "split_heads": {
        "no_transpose": split_plain_reshape,
        "heads_last": split_forgot_transpose,
        "heads_before_batch": split_transpose_2013,
        "features_before_tokens": split_moved_tokens_last,
        "strided_heads": split_strided,
        "heads_folded_into_batch": split_into_batch,
        "sizes_swapped": split_reshape_swapped_sizes,
    },
    "merge_heads": {
        "no_transpose": merge_plain_reshape,
        "strided_heads": merge_strided,
        "no_reshape": merge_no_reshape,
        "batch_and_heads_swapped": merge_heads_first,
        "heads_summed": merge_add_heads,
        "concatenated_along_tokens": merge_concat_axis1,
        "tokens_last": merge_features_first,
    },
    "multi_head_attention": {
        "split_without_transpose": mha_split_plain,
        "merge_without_transpose": mha_merge_plain,
        "strided_heads": mha_strided,
        "no_output_projection": mha_no_w_o,
        "scale_by_d_model": mha_scale_d_model,
        "no_scale": mha_no_scale,
        "single_head": mha_no_split,
        "transposed_weights": mha_linear_layout,
        "single_head_d_head_scale": mha_wide_head_scaled_per_head,
        "softmax_over_queries": mha_normalised_over_queries,
        "swapped_q_k": mha_keys_as_queries,
        "swapped_k_v": mha_values_as_keys,
        "causal_mask_applied": mha_gpt_style_causal,
        "returns_weights_too": mha_with_weights,
        "softmax_over_heads": mha_softmax_axis_1,
        "residual_added": mha_plus_residual,
        "batch_flattened": mha_batch_as_one_sequence,
        "scale_by_d_head": mha_scale_d_head_no_sqrt,
        "heads_and_width_swapped": mha_width_as_heads,
        "projection_weight_reused": mha_copy_paste,
        "projection_missing": mha_values_not_projected,
    },
}

def mha_scores_summed_over_heads(x, w_q, w_k, w_v, w_o, num_heads):
    """Heads split, but the score einsum drops h: every head's dot products summed."""
    b, n, d_model = x.shape
    d_head = d_model // num_heads
    q, k, v = ((x @ w).reshape(b, n, num_heads, d_head) for w in (w_q, w_k, w_v))
    s = np.einsum("bqhd,bkhd->bqk", q, k) / np.sqrt(d_head)  # (B, N, N): h summed away
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return np.einsum("bqk,bkhd->bqhd", p, v).reshape(b, n, d_model) @ w_o


ALSO_WRONG = {
    "multi_head_attention": {"single_head_d_head_scale": mha_scores_summed_over_heads},
}

RIGHT = {
    "split_heads": [split_reshape_transpose, split_stack_slices, split_array_split, split_torch,
                    split_einops_style],
    "merge_heads": [merge_transpose_reshape, merge_concatenate, merge_loops, merge_torch],
    "multi_head_attention": [mha_composed, mha_head_loop, mha_einsum, mha_torch_module,
                             mha_float32],
}

ANSWER_KEY = {
    "split_heads": [split_from_reference],
    "merge_heads": [merge_from_reference],
    "multi_head_attention": [mha_from_reference, mha_from_torch_gqa_reference],
}


def split_slices_unchecked(x, num_heads):
    """Right when num_heads divides d_model; otherwise drops the last features silently."""
    d_head = x.shape[-1] // num_heads
    return np.stack([x[..., h * d_head:(h + 1) * d_head] for h in range(num_heads)], axis=1)


def split_reshape_unchecked(x, num_heads):
    """Right when num_heads divides d_model; otherwise numpy's reshape error."""
    batch, n, d_model = x.shape
    return x.reshape(batch, n, num_heads, d_model // num_heads).transpose(0, 2, 1, 3)


WRONG["split_heads"]["no_argument_check"] = split_slices_unchecked
WRONG["split_heads"]["refusal_without_values"] = split_reshape_unchecked


def split_asserted(x, num_heads):
    """Checks divisibility with an assert (an AssertionError, not the contract's ValueError)."""
    batch, n, d_model = x.shape
    assert d_model % num_heads == 0, "d_model must divide into heads"
    return x.reshape(batch, n, num_heads, d_model // num_heads).transpose(0, 2, 1, 3)


WRONG["split_heads"]["refusal_by_assert"] = split_asserted


def mha_asserted(x, w_q, w_k, w_v, w_o, num_heads):
    """The layer with an assert for the head count (round L's slip: an AssertionError)."""
    assert x.shape[-1] % num_heads == 0, "num_heads must divide d_model"
    return mha_head_loop(x, w_q, w_k, w_v, w_o, num_heads)


def mha_heads_sliced_unchecked(x, w_q, w_k, w_v, w_o, num_heads):
    """Head slices of d_model // num_heads features, no check: the last features are dropped
    silently when num_heads does not divide d_model."""
    d_head = x.shape[-1] // num_heads
    heads = []
    for h in range(num_heads):
        cols = slice(h * d_head, (h + 1) * d_head)
        heads.append(attention(x @ w_q[:, cols], x @ w_k[:, cols], x @ w_v[:, cols])[0])
    return np.concatenate(heads, axis=-1) @ w_o[:num_heads * d_head]


WRONG["multi_head_attention"]["refusal_by_assert"] = mha_asserted
WRONG["multi_head_attention"]["no_argument_check"] = mha_heads_sliced_unchecked


def mha_einsum_unchecked(x, w_q, w_k, w_v, w_o, num_heads):
    """The einsum layer with no check: numpy's reshape error names neither number."""
    B, N, D = x.shape
    q, k, v = (np.einsum("bnd,de->bne", x, w).reshape(B, N, num_heads, D // num_heads)
               for w in (w_q, w_k, w_v))
    scores = np.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(q.shape[-1])
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    return np.einsum("bhqk,bkhd->bqhd", weights, v).reshape(B, N, D) @ w_o


WRONG["multi_head_attention"]["refusal_without_values"] = mha_einsum_unchecked
