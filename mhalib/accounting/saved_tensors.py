"""Measuring what autograd keeps for the backward pass, with ``saved_tensors_hooks``.

Every tensor an op saves for its backward goes through the pack hook of
``torch.autograd.graph.saved_tensors_hooks``; :func:`saved_for_backward` records each distinct
storage once (q, k and v are often views of one projection's output, and a softmax's output is
saved by the softmax and by the product after it), and leaves out the parameters, which exist
whether or not anyone trains.

:func:`layer_saved_tensors` runs one real attention layer of a model's shapes under
the meta device: the layer's own code runs and autograd saves what it saves on a CPU, but no
memory is allocated and nothing is computed, so GPT-2 small or Llama-3.1 8B at thousands of
tokens are measured in milliseconds. On the meta device ``F.scaled_dot_product_attention``
would fall back to its math path, so the flash layer calls the kernel SDPA runs on a CPU,
``aten._scaled_dot_product_flash_attention_for_cpu``, itself (tests/accounting/
test_saved_tensors.py checks that the real :class:`~mhalib.nn.GroupedQueryAttention` saves the
same tensors on CPU tensors).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch import nn

from mhalib.accounting.models import ModelConfig
from mhalib.nn.gqa import GroupedQueryAttention

CORES = ("flash", "naive")


@dataclass
class SavedTensors:
    """The distinct storages autograd saved: ``(shape, dtype name, bytes)`` each."""

    tensors: list[tuple[tuple[int, ...], str, int]] = field(default_factory=list)

    @property
    def total_bytes(self) -> int:
        return sum(size for _, _, size in self.tensors)


def _storage_key(tensor) -> int:
    return tensor.untyped_storage()._cdata


def saved_for_backward(fn, *args, exclude=(), **kwargs):
    """Run ``fn(*args, **kwargs)`` and return ``(result, SavedTensors)``: every storage an op
    saved for backward, once, except those of the tensors in ``exclude`` (parameters)."""
    skip = {_storage_key(t) for t in exclude}
    found: dict[int, tuple[tuple[int, ...], str, int]] = {}

    def pack(tensor):
        key = _storage_key(tensor)
        if key not in skip and key not in found:
            storage = tensor.untyped_storage()
            found[key] = (tuple(tensor.shape), str(tensor.dtype).replace("torch.", ""),
                          int(storage.nbytes()))
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        result = fn(*args, **kwargs)
    return result, SavedTensors(list(found.values()))


class FlashCoreAttention(GroupedQueryAttention):
    """:class:`~mhalib.nn.GroupedQueryAttention` calling SDPA's CPU flash kernel directly (what
    ``F.scaled_dot_product_attention`` picks on a CPU, and cannot pick on the meta device).
    Self-attention only; K/V groups are read without copies."""

    def forward(self, query, *, causal: bool = False):
        q, k, v = self._project(query, None, None)  # (B, H, N, d), (B, G, N, d) x2
        batch, n = query.shape[0], query.shape[1]
        ctx = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
            q, k, v, is_causal=causal)[0]  # (B, H, N, d); it also keeps the lse (B, H, N)
        ctx = ctx.transpose(1, 2).reshape(batch, n, self.d_model)  # (B, N, d_model)
        return self.out_proj(ctx)


class NaiveCoreAttention(GroupedQueryAttention):
    """:class:`~mhalib.nn.GroupedQueryAttention` with the textbook core: the scores and the
    probabilities are built as tensors, softmax(q k^T / sqrt(d)) v. The R = H / G query heads
    of a K/V group are stacked along the rows, so K and V are not repeated per head (with
    R > 1 the reshapes copy q, k and v once, and autograd keeps the copies instead of the
    projection's output: the same bytes); the causal mask is added as -inf, which autograd
    need not keep."""

    def forward(self, query, *, causal: bool = False):
        q, k, v = self._project(query, None, None)  # (B, H, N, d), (B, G, N, d) x2
        batch, heads, n, d = q.shape
        groups = k.shape[1]
        rows = q.reshape(batch, groups, (heads // groups) * n, d)  # (B, G, R N, d)
        scores = rows @ k.transpose(-2, -1) / math.sqrt(d)  # (B, G, R N, N)
        if causal:
            future = torch.full((n, n), -math.inf, dtype=q.dtype, device=q.device).triu(1)
            scores = scores + future.repeat(heads // groups, 1)  # (B, G, R N, N)
        weights = torch.softmax(scores, dim=-1)  # (B, G, R N, N): kept for backward
        ctx = (weights @ v).reshape(batch, heads, n, d)  # (B, H, N, d)
        ctx = ctx.transpose(1, 2).reshape(batch, n, self.d_model)  # (B, N, d_model)
        return self.out_proj(ctx)


def attention_layer(config: ModelConfig, core: str = "flash", dtype=torch.bfloat16,
                    device=None) -> nn.Module:
    """One attention layer of ``config``'s shapes (projections as in
    :class:`~mhalib.nn.GroupedQueryAttention`): ``core="flash"`` runs SDPA's CPU flash kernel,
    ``"naive"`` the textbook core."""
    if core not in CORES:
        raise ValueError(f"core={core!r} must be one of {CORES}")
    if config.num_heads * config.head_dim != config.d_model:
        raise ValueError(f"config {config.name!r}: num_heads * head_dim = "
                         f"{config.num_heads * config.head_dim} != d_model={config.d_model}")
    cls = FlashCoreAttention if core == "flash" else NaiveCoreAttention
    return cls(config.d_model, config.num_heads, config.num_kv_heads,
               bias=config.attention_bias != "none", device=device, dtype=dtype)


def layer_saved_tensors(config: ModelConfig, seq_len: int, batch_size: int = 1,
                        core: str = "flash", dtype=torch.bfloat16,
                        causal: bool = True) -> SavedTensors:
    """What one attention layer of ``config`` saves for backward on ``batch_size`` sequences
    of ``seq_len`` tokens, measured on the meta device (no memory is allocated)."""
    layer = attention_layer(config, core, dtype, device="meta")
    x = torch.empty(batch_size, seq_len, config.d_model, dtype=dtype, device="meta",
                    requires_grad=True)
    _, saved = saved_for_backward(layer, x, causal=causal, exclude=tuple(layer.parameters()))
    return saved
