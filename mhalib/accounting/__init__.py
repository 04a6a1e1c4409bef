"""Accounting for attention: FLOPs, parameters, KV-cache and score-matrix memory, real models.

Everything here takes and returns plain Python ints and imports no torch, except
:mod:`mhalib.accounting.flop_counter`, which measures real forward passes.
"""

from mhalib.accounting.flops import (
    crossover_seq_len,
    decode_flops,
    gqa_flops,
    mha_flops,
    recompute_decode_flops,
    visible_pairs,
)
from mhalib.accounting.kv_cache import kv_cache_bytes, kv_cache_bytes_per_token, max_cached_tokens
from mhalib.accounting.memory import (
    naive_attention_extra_bytes,
    score_matrix_bytes,
    tiled_block_bytes,
)
from mhalib.accounting.models import MODELS, ModelConfig, model_kv_cache_bytes, total_params
from mhalib.accounting.params import gqa_param_count, mha_param_count, mqa_param_count

__all__ = [
    "MODELS",
    "ModelConfig",
    "crossover_seq_len",
    "decode_flops",
    "gqa_flops",
    "gqa_param_count",
    "kv_cache_bytes",
    "kv_cache_bytes_per_token",
    "max_cached_tokens",
    "mha_flops",
    "mha_param_count",
    "model_kv_cache_bytes",
    "mqa_param_count",
    "naive_attention_extra_bytes",
    "recompute_decode_flops",
    "score_matrix_bytes",
    "tiled_block_bytes",
    "total_params",
    "visible_pairs",
]
