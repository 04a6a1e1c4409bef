"""Grouped-query attention as a ``torch.nn.Module`` (MHA and MQA are its two ends).

``num_heads`` query heads share ``num_kv_heads`` key/value heads: query head h reads K/V
group ``h // (num_heads // num_kv_heads)``. ``num_kv_heads == num_heads`` is plain
multi-head attention, ``num_kv_heads == 1`` is multi-query attention.

The Q, K and V projections are one fused ``nn.Linear`` (one GEMM for self-attention), laid
out like ``nn.MultiheadAttention.in_proj_weight``: rows [W_q; W_k; W_v].

Optional rotary position embeddings (``rope_base``, off by default): queries and keys are
rotated after the head split (the "rotate half" layout, :mod:`mhalib.nn.rope`), at positions
counted from the KV cache's length, and keys enter the cache already rotated, so decoding never
rotates a cached key again.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from mhalib import validate
from mhalib.nn.functional import attend
from mhalib.nn.kv_cache import KVCache
from mhalib.nn.rope import apply_rotary


class GroupedQueryAttention(nn.Module):
    """Attention layer with ``num_heads`` query heads and ``num_kv_heads`` K/V heads.

    Shapes: query (B, N_q, d_model), key/value (B, N_k, d_model) (default: the query,
    i.e. self-attention) -> (B, N_q, d_model). Device- and dtype-agnostic (float32,
    float16, bfloat16 on CPU and CUDA).
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        num_kv_heads: int,
        bias: bool = False,
        device=None,
        dtype: torch.dtype | None = None,
        rope_base: float | None = None,
    ) -> None:
        super().__init__()
        self.d_model = validate.positive_int("d_model", d_model)
        self.num_heads = validate.positive_int("num_heads", num_heads)
        self.num_kv_heads = validate.positive_int("num_kv_heads", num_kv_heads)
        validate.divisible("d_model", self.d_model, "num_heads", self.num_heads)
        validate.divisible("num_heads", self.num_heads, "num_kv_heads", self.num_kv_heads)
        validate.boolean("bias", bias)
        self.head_dim = self.d_model // self.num_heads
        self.rope_base = _check_rope_base(rope_base, self.head_dim)
        self.kv_dim = self.num_kv_heads * self.head_dim
        factory = {"device": device, "dtype": dtype}
        # rows: [W_q (d_model); W_k (kv_dim); W_v (kv_dim)], nn.Linear's (out, in) layout
        self.qkv_proj = nn.Linear(self.d_model, self.d_model + 2 * self.kv_dim, bias, **factory)
        self.out_proj = nn.Linear(self.d_model, self.d_model, bias, **factory)

    def new_kv_cache(self, batch_size: int, max_seq_len: int) -> KVCache:
        """An empty cache sized for this layer, on its device and in its dtype."""
        weight = self.out_proj.weight
        return KVCache(
            batch_size, self.num_kv_heads, self.head_dim, max_seq_len, weight.dtype, weight.device
        )

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor | None = None,
        value: torch.Tensor | None = None,
        *,
        attn_mask: torch.Tensor | None = None,
        causal: bool = False,
        kv_cache: KVCache | None = None,
    ) -> torch.Tensor:
        """(B, N_q, d_model) -> (B, N_q, d_model).

        attn_mask: bool, True = may attend, broadcastable to (B, H, N_q, N_k) where N_k
        counts cached keys too. causal: bottom-right aligned, so with a cache holding
        earlier tokens the new queries see all of them. kv_cache: new keys/values are
        appended and attention runs over everything stored. With ``rope_base`` set, the new
        queries sit at positions ``kv_cache.length + arange(N_q)`` (0 without a cache) and the
        new keys at ``kv_cache.length + arange(N_k)``.
        """
        q, k, v = self._project(query, key, value)  # (B, H, N_q, d), (B, G, N_k, d) x2
        if kv_cache is not None and not isinstance(kv_cache, KVCache):
            raise TypeError(f"kv_cache must be a KVCache, got type {type(kv_cache).__name__}")
        if self.rope_base is not None:  # new tokens sit after everything already cached
            start = kv_cache.length if kv_cache is not None else 0
            q = apply_rotary(q, _positions(start, q.shape[2], q.device), self.rope_base)
            k = apply_rotary(k, _positions(start, k.shape[2], k.device), self.rope_base)
        if kv_cache is not None:
            k, v = kv_cache.append(k, v)  # (B, G, length, d) each
        ctx = attend(q, k, v, attn_mask=attn_mask, causal=causal)  # (B, H, N_q, d)
        batch, n_q = query.shape[0], query.shape[1]
        ctx = ctx.transpose(1, 2).reshape(batch, n_q, self.d_model)  # (B, N_q, d_model)
        return self.out_proj(ctx)  # (B, N_q, d_model)

    def _project(self, query, key, value):
        """Project and split heads: q (B, H, N_q, d), k and v (B, G, N_k, d)."""
        self._check_input("query", query)
        batch, n_q, _ = query.shape
        d, kv = self.d_model, self.kv_dim
        if key is None and value is None:  # self-attention: one fused GEMM
            qkv = self.qkv_proj(query)  # (B, N_q, d + 2 kv)
            q, k, v = qkv.split([d, kv, kv], dim=-1)
            n_k = n_q
        else:
            key = query if key is None else key
            value = key if value is None else value
            self._check_input("key", key)
            self._check_input("value", value)
            if key.shape != value.shape or key.shape[0] != batch:
                raise ValueError(
                    f"key.shape={tuple(key.shape)} and value.shape={tuple(value.shape)} must "
                    f"both be (B={batch}, N_k, d_model={d})"
                )
            w, b = self.qkv_proj.weight, self.qkv_proj.bias
            w_q, w_k, w_v = w.split([d, kv, kv], dim=0)  # (out, in) each
            b_q, b_k, b_v = b.split([d, kv, kv]) if b is not None else (None, None, None)
            q = F.linear(query, w_q, b_q)  # (B, N_q, d)
            k = F.linear(key, w_k, b_k)  # (B, N_k, kv)
            v = F.linear(value, w_v, b_v)  # (B, N_k, kv)
            n_k = key.shape[1]
        q = q.view(batch, n_q, self.num_heads, self.head_dim).transpose(1, 2)  # (B, H, N_q, d)
        k = k.view(batch, n_k, self.num_kv_heads, self.head_dim).transpose(1, 2)  # (B, G, N_k, d)
        v = v.view(batch, n_k, self.num_kv_heads, self.head_dim).transpose(1, 2)  # (B, G, N_k, d)
        return q, k, v

    def _check_input(self, name: str, x) -> None:
        validate.tensor(name, x, 3, "(B, N, d_model)")
        if x.shape[-1] != self.d_model:
            raise ValueError(
                f"{name}.shape={tuple(x.shape)} has last dimension {x.shape[-1]}, "
                f"expected d_model={self.d_model}"
            )
        weight = self.out_proj.weight
        if x.dtype != weight.dtype:
            raise TypeError(
                f"{name}.dtype={x.dtype} does not match the layer's parameters ({weight.dtype})"
            )
        if x.device != weight.device:
            raise TypeError(
                f"{name}.device={x.device} does not match the layer's parameters ({weight.device})"
            )

    def extra_repr(self) -> str:
        text = (
            f"d_model={self.d_model}, num_heads={self.num_heads}, "
            f"num_kv_heads={self.num_kv_heads}, head_dim={self.head_dim}"
        )
        return text if self.rope_base is None else f"{text}, rope_base={self.rope_base:g}"


def _positions(start: int, n: int, device) -> torch.Tensor:
    """Positions start, ..., start + n - 1 as an int64 tensor."""
    return torch.arange(start, start + n, device=device)


def _check_rope_base(rope_base, head_dim: int) -> float | None:
    """None (no positions) or a float base > 1 for a layer with an even head_dim."""
    if rope_base is None:
        return None
    if isinstance(rope_base, bool) or not isinstance(rope_base, (int, float)) or not rope_base > 1:
        raise ValueError(f"rope_base must be None or a number > 1, got rope_base={rope_base!r}")
    if head_dim % 2:
        raise ValueError(f"rope_base={rope_base!r} needs an even head_dim, got head_dim={head_dim}")
    return float(rope_base)
