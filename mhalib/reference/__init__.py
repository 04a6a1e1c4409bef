"""The answer key: every exercise function of the course contract, same name and signature.

Lessons 01-05 are numpy (float64-exact ground truth that keeps the input dtype);
lessons 06-08 are PyTorch. Import as ``from mhalib.reference import attention``.
Modules are imported lazily so that ``import mhalib.reference`` stays cheap and
numpy-only lessons never pay for importing torch.
"""

from __future__ import annotations

import importlib

# exercise function -> module that defines it
_HOME = {
    "softmax": "mhalib.reference.single_head",
    "attention": "mhalib.reference.single_head",
    "split_heads": "mhalib.reference.multi_head",
    "merge_heads": "mhalib.reference.multi_head",
    "multi_head_attention": "mhalib.reference.multi_head",
    "dot_product_variance": "mhalib.reference.scaling",
    "softmax_entropy": "mhalib.reference.scaling",
    "softmax_jacobian": "mhalib.reference.scaling",
    "causal_mask": "mhalib.reference.masks",
    "padding_mask": "mhalib.reference.masks",
    "masked_attention": "mhalib.reference.masks",
    "mha_flops": "mhalib.accounting.flops",
    "crossover_seq_len": "mhalib.accounting.flops",
    "mha_param_count": "mhalib.accounting.params",
    "repeat_kv": "mhalib.reference.gqa",
    "grouped_query_attention": "mhalib.reference.gqa",
    "kv_cache_bytes": "mhalib.accounting.kv_cache",
    "decode_with_cache": "mhalib.reference.gqa",
    "online_softmax_attention": "mhalib.reference.flash",
    "previous_token_score": "mhalib.reference.heads",
    "induction_score": "mhalib.reference.heads",
}

__all__ = sorted(_HOME)


def __getattr__(name: str):
    if name not in _HOME:
        raise AttributeError(f"mhalib.reference has no exercise function {name!r}")
    return getattr(importlib.import_module(_HOME[name]), name)


def __dir__():
    return __all__
