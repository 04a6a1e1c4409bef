"""Size of the key/value cache kept during generation (lesson 06 and 10 answer keys). Plain ints."""

from __future__ import annotations

from mhalib.validate import non_negative_int, positive_int


def kv_cache_bytes(
    num_layers: int,
    num_kv_heads: int,
    head_dim: int,
    seq_len: int,
    batch_size: int = 1,
    bytes_per_element: int = 2,
) -> int:
    """Bytes of the K and V caches: 2 * layers * kv_heads * head_dim * N * B * bytes.

    The factor 2 is one tensor for keys and one for values; ``bytes_per_element`` is 2
    for float16/bfloat16, 4 for float32, 1 for an 8-bit cache. The number of query heads
    does not appear: that is why GQA and MQA shrink the cache.
    """
    layers = positive_int("num_layers", num_layers)
    kv_heads = positive_int("num_kv_heads", num_kv_heads)
    dim = positive_int("head_dim", head_dim)
    n = positive_int("seq_len", seq_len)
    b = positive_int("batch_size", batch_size)
    size = positive_int("bytes_per_element", bytes_per_element)
    return 2 * layers * kv_heads * dim * n * b * size


def kv_cache_bytes_per_token(
    num_layers: int, num_kv_heads: int, head_dim: int, bytes_per_element: int = 2
) -> int:
    """Bytes one more token adds to the cache (all layers, keys and values)."""
    return kv_cache_bytes(num_layers, num_kv_heads, head_dim, 1, 1, bytes_per_element)


def max_cached_tokens(
    memory_bytes: int,
    num_layers: int,
    num_kv_heads: int,
    head_dim: int,
    bytes_per_element: int = 2,
) -> int:
    """How many tokens (summed over the batch) fit in ``memory_bytes`` of cache."""
    budget = positive_int("memory_bytes", memory_bytes)
    per_token = kv_cache_bytes_per_token(num_layers, num_kv_heads, head_dim, bytes_per_element)
    return budget // per_token


def mla_kv_cache_bytes(
    num_layers: int,
    kv_lora_rank: int,
    rope_head_dim: int,
    seq_len: int,
    batch_size: int = 1,
    bytes_per_element: int = 2,
) -> int:
    """Bytes of a multi-head latent attention cache (lesson 10 answer key):
    layers * (kv_lora_rank + rope_head_dim) * N * B * bytes.

    Per token and layer MLA keeps one latent vector of ``kv_lora_rank`` numbers, from which
    every head's key AND value are recomputed (so no factor 2, and no head count), plus one
    rotated key of ``rope_head_dim`` numbers shared by all heads (DeepSeek's decoupled RoPE).
    DeepSeek-V3: 61 * (512 + 64) * 2 = 70,272 bytes per token in bf16.
    """
    layers = positive_int("num_layers", num_layers)
    rank = positive_int("kv_lora_rank", kv_lora_rank)
    rope = non_negative_int("rope_head_dim", rope_head_dim)
    n = positive_int("seq_len", seq_len)
    b = positive_int("batch_size", batch_size)
    size = positive_int("bytes_per_element", bytes_per_element)
    return layers * (rank + rope) * n * b * size
