"""The attention core shared by the torch modules: SDPA plus the course's mask conventions.

``F.scaled_dot_product_attention`` already does the heavy lifting (on CPU it runs a flash
kernel that never builds the N x N scores). This wrapper adds what the course promises on
top of it: bottom-right causal alignment when N_q != N_k (SDPA's ``is_causal`` is
top-left), grouped K/V heads, and zeros (never NaN) for a query with no allowed key.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from mhalib import validate
from mhalib.nn.masks import causal_mask, combine_masks


def attend(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    causal: bool = False,
    scale: float | None = None,
) -> torch.Tensor:
    """Scaled dot-product attention over split heads.

    q: (B, H, N_q, d), k and v: (B, G, N_k, d) with H a multiple of G (G == H is MHA,
    G == 1 is MQA). ``attn_mask`` is bool, True = may attend, broadcastable to
    (B, H, N_q, N_k). Returns (B, H, N_q, d) in q's dtype; rows with no allowed key are 0.
    """
    validate.tensor("q", q, 4, "(B, H, N_q, d_head)")
    validate.tensor("k", k, 4, "(B, G, N_k, d_head)")
    validate.tensor("v", v, 4, "(B, G, N_k, d_head)")
    validate.same_dtype_and_device(q=q, k=k, v=v)
    batch, num_heads, n_q, d_head = q.shape
    num_kv_heads, n_k = k.shape[1], k.shape[2]
    if tuple(k.shape) != (batch, num_kv_heads, n_k, d_head) or k.shape != v.shape:
        raise ValueError(
            f"k.shape={tuple(k.shape)} and v.shape={tuple(v.shape)} must both be "
            f"(B={batch}, G, N_k, d_head={d_head})"
        )
    validate.divisible("num_heads", num_heads, "num_kv_heads", num_kv_heads)
    validate.boolean("causal", causal)
    validate.attention_mask("attn_mask", attn_mask, batch, num_heads, n_q, n_k)
    gqa = num_kv_heads != num_heads

    if attn_mask is None and (not causal or n_q == n_k):
        # Fast path: no explicit mask, SDPA's own causal flag (exact when N_q == N_k).
        return F.scaled_dot_product_attention(
            q, k, v, is_causal=causal, scale=scale, enable_gqa=gqa
        )  # (B, H, N_q, d)

    causal_part = causal_mask(n_q, n_k, device=q.device) if causal else None  # (N_q, N_k)
    mask = combine_masks(attn_mask, causal_part)  # broadcastable to (B, H, N_q, N_k)
    out = F.scaled_dot_product_attention(
        q, k, v, attn_mask=mask, scale=scale, enable_gqa=gqa
    )  # (B, H, N_q, d)
    has_key = mask.any(dim=-1, keepdim=True)  # (..., N_q, 1)
    return out.masked_fill(~has_key, 0.0)  # (B, H, N_q, d)
