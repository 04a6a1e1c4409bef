"""Lesson 02 answer key: splitting d_model into heads and multi-head self-attention (numpy)."""

from __future__ import annotations

from mhalib.reference.single_head import attention
from mhalib.validate import as_float_array, positive_int


def split_heads(x, num_heads):
    """(B, N, d_model) -> (B, H, N, d_head); head h holds features h*d_head:(h+1)*d_head."""
    x = as_float_array("x", x)
    num_heads = positive_int("num_heads", num_heads)
    if x.ndim != 3:
        raise ValueError(f"x must have shape (B, N, d_model), got shape {x.shape}")
    batch, seq_len, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    return x.reshape(batch, seq_len, num_heads, d_head).transpose(0, 2, 1, 3)  # (B, H, N, d_head)


def merge_heads(x):
    """(B, H, N, d_head) -> (B, N, H * d_head), the exact inverse of :func:`split_heads`."""
    x = as_float_array("x", x)
    if x.ndim != 4:
        raise ValueError(f"x must have shape (B, H, N, d_head), got shape {x.shape}")
    batch, num_heads, seq_len, d_head = x.shape
    return x.transpose(0, 2, 1, 3).reshape(batch, seq_len, num_heads * d_head)  # (B, N, d_model)


def multi_head_attention(x, w_q, w_k, w_v, w_o, num_heads):
    """Multi-head self-attention without bias or mask.

    x: (B, N, d_model); w_q, w_k, w_v, w_o: (d_model, d_model), applied as ``x @ W``.
    Returns (B, N, d_model).
    """
    x = as_float_array("x", x)
    if x.ndim != 3:
        raise ValueError(f"x must have shape (B, N, d_model), got shape {x.shape}")
    d_model = x.shape[-1]
    weights = {"w_q": w_q, "w_k": w_k, "w_v": w_v, "w_o": w_o}
    for name, w in weights.items():
        w = as_float_array(name, w)
        if w.shape != (d_model, d_model):
            raise ValueError(
                f"{name} must have shape (d_model, d_model)=({d_model}, {d_model}), got {w.shape}"
            )
        weights[name] = w
    q = split_heads(x @ weights["w_q"], num_heads)  # (B, H, N, d_head)
    k = split_heads(x @ weights["w_k"], num_heads)  # (B, H, N, d_head)
    v = split_heads(x @ weights["w_v"], num_heads)  # (B, H, N, d_head)
    heads, _ = attention(q, k, v)  # (B, H, N, d_head)
    return merge_heads(heads) @ weights["w_o"]  # (B, N, d_model)
