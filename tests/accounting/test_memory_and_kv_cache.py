"""KV-cache and score-matrix sizes against the nbytes of real tensors."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from mhalib.accounting.kv_cache import kv_cache_bytes, kv_cache_bytes_per_token, max_cached_tokens
from mhalib.accounting.memory import (
    naive_attention_extra_bytes,
    score_matrix_bytes,
    tiled_block_bytes,
)
from mhalib.nn import GroupedQueryAttention


@settings(max_examples=30, deadline=None)
@given(
    layers=st.integers(1, 4),
    kv_heads=st.integers(1, 4),
    head_dim=st.integers(1, 16),
    n=st.integers(1, 32),
    batch=st.integers(1, 3),
    dtype=st.sampled_from([torch.float16, torch.bfloat16, torch.float32, torch.float64]),
)
def test_kv_cache_bytes_matches_tensor_nbytes(layers, kv_heads, head_dim, n, batch, dtype):
    one = torch.empty(batch, kv_heads, n, head_dim, dtype=dtype, device="meta")
    expected = 2 * layers * one.numel() * one.element_size()  # keys and values, every layer
    size = torch.empty((), dtype=dtype).element_size()
    assert kv_cache_bytes(layers, kv_heads, head_dim, n, batch, size) == expected


def test_kv_cache_bytes_matches_a_decoded_cache():
    layer = GroupedQueryAttention(64, 8, 2, dtype=torch.float16)
    cache = layer.new_kv_cache(batch_size=2, max_seq_len=10)
    with torch.no_grad():
        layer(torch.randn(2, 10, 64, dtype=torch.float16), causal=True, kv_cache=cache)
    stored = cache.keys[:, :, : cache.length].nbytes + cache.values[:, :, : cache.length].nbytes
    assert stored == kv_cache_bytes(1, 2, 8, 10, batch_size=2)


def test_per_token_and_capacity():
    per_token = kv_cache_bytes_per_token(32, 8, 128)  # Llama-3.1 8B in bf16: 128 KiB a token
    assert per_token == 128 * 1024
    assert max_cached_tokens(80 * 2**30, 32, 8, 128) == 80 * 2**30 // per_token


def test_score_matrix_matches_real_scores():
    q = torch.randn(2, 3, 7, 4)
    k = torch.randn(2, 3, 11, 4)
    scores = q @ k.transpose(-2, -1)
    assert score_matrix_bytes(7, 3, batch_size=2, kv_len=11) == scores.nbytes
    half = scores.half()
    assert score_matrix_bytes(7, 3, 2, bytes_per_element=2, kv_len=11) == half.nbytes


def test_naive_path_at_the_benchmark_size_is_4_gib():
    assert naive_attention_extra_bytes(8192, 8) == 4 * 2**30  # scores + weights in float32
    assert tiled_block_bytes(256, 512, 8) == 4 * 2**20


@pytest.mark.parametrize(
    "call, error, message",
    [
        (
            lambda: kv_cache_bytes(0, 1, 1, 1),
            ValueError,
            "num_layers must be positive, got num_layers=0",
        ),
        (
            lambda: kv_cache_bytes(1, 1, 1, 1.5),
            TypeError,
            "seq_len must be an int, got seq_len=1.5",
        ),
        (
            lambda: kv_cache_bytes(1, 1, 1, 1, bytes_per_element=0),
            ValueError,
            "bytes_per_element must be positive, got bytes_per_element=0",
        ),
        (
            lambda: score_matrix_bytes(4, 0),
            ValueError,
            "num_heads must be positive, got num_heads=0",
        ),
        (
            lambda: tiled_block_bytes(None, 4, 1),
            TypeError,
            "block_q must be an int, got block_q=None",
        ),
        (lambda: max_cached_tokens(-5, 1, 1, 1), ValueError, "memory_bytes must be positive"),
    ],
)
def test_errors_name_argument_and_value(call, error, message):
    with pytest.raises(error, match=message):
        call()
