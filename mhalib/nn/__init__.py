"""PyTorch attention modules: multi-head, grouped-query (MQA included), KV cache, masks.

Names are imported lazily so that importing the package does not pull in torch.
"""

from __future__ import annotations

from mhalib.lazy import lazy_module_attributes

_HOME = {
    "MultiHeadAttention": "mhalib.nn.mha",
    "GroupedQueryAttention": "mhalib.nn.gqa",
    "KVCache": "mhalib.nn.kv_cache",
    "attend": "mhalib.nn.functional",
    "causal_mask": "mhalib.nn.masks",
    "padding_mask": "mhalib.nn.masks",
    "combine_masks": "mhalib.nn.masks",
}

__getattr__, __dir__, __all__ = lazy_module_attributes("mhalib.nn", _HOME)
