"""Masks (against their definitions and the numpy answer key) and the KV cache."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from mhalib.accounting.kv_cache import kv_cache_bytes
from mhalib.nn import KVCache, causal_mask, combine_masks, padding_mask


@settings(max_examples=40, deadline=None)
@given(n_q=st.integers(1, 12), n_k=st.integers(1, 12))
def test_causal_mask_definition(n_q, n_k):
    mask = causal_mask(n_q, n_k)
    assert mask.dtype == torch.bool and mask.shape == (n_q, n_k)
    for i in range(n_q):
        for j in range(n_k):
            assert bool(mask[i, j]) == (j <= i + n_k - n_q)


def test_causal_mask_square_is_lower_triangular_and_matches_numpy_key():
    from mhalib.reference.masks import causal_mask as numpy_causal_mask

    assert torch.equal(causal_mask(5), torch.ones(5, 5, dtype=torch.bool).tril())
    np.testing.assert_array_equal(causal_mask(3, 7).numpy(), numpy_causal_mask(3, 7))


@settings(max_examples=30, deadline=None)
@given(lengths=st.lists(st.integers(0, 8), min_size=1, max_size=4))
def test_padding_mask_properties(lengths):
    mask = padding_mask(lengths, 8)
    assert mask.shape == (len(lengths), 1, 1, 8)
    assert mask.sum(dim=-1).flatten().tolist() == lengths  # length b keeps b keys
    for b, length in enumerate(lengths):  # and they are the first ones
        assert bool(mask[b, 0, 0, :length].all()) and not bool(mask[b, 0, 0, length:].any())


def test_combine_masks_is_logical_and():
    a, b = causal_mask(4), padding_mask([3, 4], 4)
    combined = combine_masks(a, None, b)
    assert combined.shape == (2, 1, 4, 4)
    assert torch.equal(combined, a[None, None] & b)
    assert combine_masks(None, None) is None


def test_mask_errors_name_argument_and_value():
    with pytest.raises(ValueError, match="n_q must be positive, got n_q=0"):
        causal_mask(0)
    with pytest.raises(TypeError, match="n_k must be an int, got n_k=2.5"):
        causal_mask(2, 2.5)
    with pytest.raises(ValueError, match=r"lengths must lie in \[0, n=4\], got lengths=\[5\]"):
        padding_mask([5], 4)
    with pytest.raises(
        TypeError, match="lengths must be a 1-D tensor of ints, got lengths.dtype=torch.float32"
    ):
        padding_mask(torch.tensor([1.0]), 4)


def test_kv_cache_appends_and_returns_views():
    cache = KVCache(2, 3, 4, max_seq_len=5, dtype=torch.float64)
    k1, v1 = (
        torch.randn(2, 3, 2, 4, dtype=torch.float64),
        torch.randn(2, 3, 2, 4, dtype=torch.float64),
    )
    k2, v2 = (
        torch.randn(2, 3, 3, 4, dtype=torch.float64),
        torch.randn(2, 3, 3, 4, dtype=torch.float64),
    )
    cache.append(k1, v1)
    keys, values = cache.append(k2, v2)
    assert cache.length == 5
    torch.testing.assert_close(keys, torch.cat([k1, k2], dim=2))
    torch.testing.assert_close(values, torch.cat([v1, v2], dim=2))
    cache.reset()
    assert cache.length == 0


def test_kv_cache_nbytes_matches_accounting():
    cache = KVCache(batch_size=3, num_kv_heads=2, head_dim=8, max_seq_len=10, dtype=torch.float16)
    assert cache.nbytes == kv_cache_bytes(1, 2, 8, 10, batch_size=3, bytes_per_element=2)


def test_kv_cache_errors():
    cache = KVCache(1, 2, 4, max_seq_len=3)
    k = torch.randn(1, 2, 2, 4)
    cache.append(k, k)
    with pytest.raises(
        ValueError,
        match="cannot append n_new=2 positions: the cache holds length=2 of max_seq_len=3",
    ):
        cache.append(k, k)
    with pytest.raises(
        ValueError,
        match=r"k_new.shape=\(1, 3, 1, 4\) does not match the expected shape \(1, 2, 1, 4\)",
    ):
        cache.append(torch.randn(1, 3, 1, 4), torch.randn(1, 3, 1, 4))
    with pytest.raises(
        TypeError,
        match="k_new.dtype=torch.float64 and v_new.dtype=torch.float64 "
        "must match the cache dtype=torch.float32",
    ):
        cache.append(k[:, :, :1].double(), k[:, :, :1].double())
    with pytest.raises(ValueError, match="max_seq_len must be positive, got max_seq_len=0"):
        KVCache(1, 1, 1, 0)
    with pytest.raises(
        TypeError, match="dtype must be a floating torch.dtype, got dtype=torch.int64"
    ):
        KVCache(1, 1, 1, 1, dtype=torch.int64)
