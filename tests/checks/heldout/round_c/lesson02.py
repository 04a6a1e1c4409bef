"""Round c, lesson 02: split_heads, merge_heads, multi_head_attention (numpy)."""

import numpy as np

from entry import Entry


# ------------------------------------------------------------------ split_heads
def _check(d_model, num_heads):
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")


def split_reshape_no_transpose(x, num_heads):
    b, n, d = x.shape
    _check(d, num_heads)
    return x.reshape(b, num_heads, n, d // num_heads)


def split_interleaved(x, num_heads):
    b, n, d = x.shape
    _check(d, num_heads)
    return x.reshape(b, n, d // num_heads, num_heads).transpose(0, 3, 1, 2)


def split_torch_transpose(x, num_heads):
    b, n, d = x.shape
    _check(d, num_heads)
    return x.reshape(b, n, num_heads, d // num_heads).transpose(1, 2)


def split_slices_no_check(x, num_heads):
    d_head = x.shape[-1] // num_heads
    return np.stack([x[..., h * d_head:(h + 1) * d_head] for h in range(num_heads)], axis=1)


def split_assert(x, num_heads):
    b, n, d = x.shape
    assert d % num_heads == 0, "d_model must be divisible by num_heads"
    return x.reshape(b, n, num_heads, d // num_heads).transpose(0, 2, 1, 3)


def split_forgets_transpose(x, num_heads):
    b, n, d = x.shape
    _check(d, num_heads)
    return x.reshape(b, n, num_heads, d // num_heads)


def split_np_split(x, num_heads):
    _check(x.shape[-1], num_heads)
    return np.stack(np.split(x, num_heads, axis=-1), axis=1)


def split_moveaxis(x, num_heads):
    b, n, d = x.shape
    if d % num_heads != 0:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    return np.moveaxis(x.reshape(b, n, num_heads, -1), 2, 1).copy()


# ------------------------------------------------------------------ merge_heads
def merge_reshape_only(x):
    b, h, n, d = x.shape
    return x.reshape(b, n, h * d)


def merge_wrong_permutation(x):
    b, h, n, d = x.shape
    return x.transpose(0, 2, 3, 1).reshape(b, n, h * d)


def merge_concat_along_sequence(x):
    return np.concatenate([x[:, h] for h in range(x.shape[1])], axis=1)


def merge_misread_layout(x):
    b, n, h, d = x.shape
    return x.transpose(0, 2, 1, 3).reshape(b, n, h * d)


def merge_torch_permute(x):
    b, h, n, d = x.shape
    return x.permute(0, 2, 1, 3).reshape(b, n, h * d)


def merge_concat_heads(x):
    return np.concatenate([x[:, h] for h in range(x.shape[1])], axis=-1)


def merge_fill_loop(x):
    b, h, n, d = x.shape
    out = np.empty((b, n, h * d), dtype=x.dtype)
    for i in range(h):
        out[:, :, i * d:(i + 1) * d] = x[:, i]
    return out


# ------------------------------------------------------------------ multi_head_attention
def _sm(s):
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _split(x, h):
    b, n, d = x.shape
    if d % h:
        raise ValueError(f"d_model={d} is not divisible by num_heads={h}")
    return x.reshape(b, n, h, d // h).transpose(0, 2, 1, 3)


def _merge(x):
    b, h, n, d = x.shape
    return x.transpose(0, 2, 1, 3).reshape(b, n, h * d)


def _mha(x, w_q, w_k, w_v, w_o, num_heads, scale_width=None, use_wo=True, merge=_merge,
         v_weight=None, transpose_w=False):
    if transpose_w:
        w_q, w_k, w_v, w_o = w_q.T, w_k.T, w_v.T, w_o.T
    q = _split(x @ w_q, num_heads)
    k = _split(x @ w_k, num_heads)
    v = _split(x @ (w_v if v_weight is None else v_weight), num_heads)
    width = q.shape[-1] if scale_width is None else scale_width
    w = _sm(q @ np.swapaxes(k, -1, -2) / np.sqrt(width))
    out = merge(w @ v)
    return out @ w_o if use_wo else out


def mha_scale_d_model(x, w_q, w_k, w_v, w_o, num_heads):
    return _mha(x, w_q, w_k, w_v, w_o, num_heads, scale_width=x.shape[-1])


def mha_forgets_w_o(x, w_q, w_k, w_v, w_o, num_heads):
    return _mha(x, w_q, w_k, w_v, w_o, num_heads, use_wo=False)


def mha_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads):
    return _mha(x, w_q, w_k, w_v, w_o, num_heads,
                merge=lambda t: t.reshape(t.shape[0], t.shape[2], -1))


def mha_values_from_w_k(x, w_q, w_k, w_v, w_o, num_heads):
    return _mha(x, w_q, w_k, w_v, w_o, num_heads, v_weight=w_k)


def mha_linear_layout(x, w_q, w_k, w_v, w_o, num_heads):
    return _mha(x, w_q, w_k, w_v, w_o, num_heads, transpose_w=True)


def mha_no_divisibility_check(x, w_q, w_k, w_v, w_o, num_heads):
    d_model = x.shape[-1]
    d_head = d_model // num_heads
    heads = []
    for h in range(num_heads):
        cols = slice(h * d_head, (h + 1) * d_head)
        q, k, v = x @ w_q[:, cols], x @ w_k[:, cols], x @ w_v[:, cols]
        w = _sm(q @ np.swapaxes(k, -1, -2) / np.sqrt(d_head))
        heads.append(w @ v)
    cat = np.concatenate(heads, axis=-1)
    return cat @ w_o[:cat.shape[-1]]


def mha_head_loop(x, w_q, w_k, w_v, w_o, num_heads):
    d_model = x.shape[-1]
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    out = np.zeros(x.shape[:2] + (d_model,), dtype=np.float64)
    for h in range(num_heads):
        cols = slice(h * d_head, (h + 1) * d_head)
        q, k, v = x @ w_q[:, cols], x @ w_k[:, cols], x @ w_v[:, cols]
        w = _sm(q @ np.swapaxes(k, -1, -2) / np.sqrt(d_head))
        out += (w @ v) @ w_o[cols, :]  # each head's slice of the output projection
    return out.astype(x.dtype)


def mha_einsum(x, w_q, w_k, w_v, w_o, num_heads):
    b, n, d = x.shape
    if d % num_heads:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    dh = d // num_heads
    q = np.einsum("bnd,dhe->bhne", x, w_q.reshape(d, num_heads, dh))
    k = np.einsum("bnd,dhe->bhne", x, w_k.reshape(d, num_heads, dh))
    v = np.einsum("bnd,dhe->bhne", x, w_v.reshape(d, num_heads, dh))
    w = _sm(np.einsum("bhqe,bhke->bhqk", q, k) / np.sqrt(dh))
    ctx = np.einsum("bhqk,bhke->bhqe", w, v)
    return np.einsum("bhqe,hed->bqd", ctx, w_o.reshape(num_heads, dh, d))


ENTRIES = [
    Entry("split_heads", "wrong", "reshape_no_transpose", "Reshapes straight to (B, H, N, d_head), which scrambles tokens and features instead of reshaping to (B, N, H, d_head) and swapping axes.", split_reshape_no_transpose),
    Entry("split_heads", "wrong", "interleaved_heads", "Reshapes the feature axis as (d_head, H), so head h gets every H-th feature instead of the contiguous block h*d_head:(h+1)*d_head.", split_interleaved),
    Entry("split_heads", "wrong", "torch_style_transpose", "Calls x.transpose(1, 2) as in PyTorch; numpy's transpose takes a full permutation of the axes.", split_torch_transpose),
    Entry("split_heads", "wrong", "drops_leftover_features", "Slices d_model // num_heads features per head without checking divisibility, silently dropping the leftover features instead of raising ValueError.", split_slices_no_check),
    Entry("split_heads", "wrong", "assert_not_valueerror", "Checks divisibility with assert, which raises AssertionError instead of the ValueError the contract asks for.", split_assert),
    Entry("split_heads", "wrong", "forgets_transpose", "Returns (B, N, H, d_head), forgetting to move the head axis in front of the sequence axis.", split_forgets_transpose),
    Entry("split_heads", "right", "np_split_stack", None, split_np_split),
    Entry("split_heads", "right", "moveaxis", None, split_moveaxis),
    Entry("merge_heads", "wrong", "reshape_only", "Reshapes (B, H, N, d_head) straight to (B, N, H*d_head) without first swapping the head and sequence axes.", merge_reshape_only),
    Entry("merge_heads", "wrong", "wrong_permutation", "Permutes to (B, N, d_head, H) before reshaping, so the features of the heads are interleaved rather than concatenated.", merge_wrong_permutation),
    Entry("merge_heads", "wrong", "concat_along_sequence", "Concatenates the heads along the sequence axis instead of the feature axis.", merge_concat_along_sequence),
    Entry("merge_heads", "wrong", "misread_layout", "Unpacks x.shape as (B, N, H, d_head) although the input is (B, H, N, d_head), so the output has the wrong shape.", merge_misread_layout),
    Entry("merge_heads", "wrong", "torch_permute", "Calls the PyTorch method .permute on a numpy array, which has no such method.", merge_torch_permute),
    Entry("merge_heads", "right", "concat_heads", None, merge_concat_heads),
    Entry("merge_heads", "right", "fill_loop", None, merge_fill_loop),
    Entry("multi_head_attention", "wrong", "scale_by_d_model", "Scales the scores by 1/sqrt(d_model) instead of 1/sqrt(d_head) of each head.", mha_scale_d_model),
    Entry("multi_head_attention", "wrong", "forgets_output_projection", "Forgets to apply the output projection w_o after merging the heads.", mha_forgets_w_o),
    Entry("multi_head_attention", "wrong", "merge_without_transpose", "Merges the heads by reshaping (B, H, N, d_head) to (B, N, d_model) without swapping the head and sequence axes.", mha_merge_without_transpose),
    Entry("multi_head_attention", "wrong", "values_from_w_k", "Computes the values with w_k instead of w_v (a copy-paste slip).", mha_values_from_w_k),
    Entry("multi_head_attention", "wrong", "linear_layout", "Applies the weights as x @ W.T (nn.Linear's layout) instead of x @ W.", mha_linear_layout),
    Entry("multi_head_attention", "wrong", "no_divisibility_check", "Slices heads of width d_model // num_heads without checking divisibility, so a bad num_heads gives a result instead of a ValueError.", mha_no_divisibility_check),
    Entry("multi_head_attention", "right", "head_loop_sliced_w_o", None, mha_head_loop),
    Entry("multi_head_attention", "right", "einsum", None, mha_einsum),
]
