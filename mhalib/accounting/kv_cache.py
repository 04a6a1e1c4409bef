"""Size of the key/value cache kept during generation (lesson 06 answer key). Plain ints."""

from __future__ import annotations

from mhalib.validate import positive_int


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
