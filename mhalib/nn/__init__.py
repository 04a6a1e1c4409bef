"""PyTorch attention modules: multi-head, grouped-query (MQA included), KV cache, masks.

Names are imported lazily so that ``mhalib.nn._validate`` (used by plain-int accounting)
does not pull in torch.
"""

from __future__ import annotations

import importlib

_HOME = {
    "MultiHeadAttention": "mhalib.nn.mha",
    "GroupedQueryAttention": "mhalib.nn.gqa",
    "KVCache": "mhalib.nn.kv_cache",
    "attend": "mhalib.nn.functional",
    "causal_mask": "mhalib.nn.masks",
    "padding_mask": "mhalib.nn.masks",
    "combine_masks": "mhalib.nn.masks",
}

__all__ = sorted(_HOME)


def __getattr__(name: str):
    if name not in _HOME:
        raise AttributeError(f"module 'mhalib.nn' has no attribute {name!r}")
    return getattr(importlib.import_module(_HOME[name]), name)


def __dir__():
    return __all__
