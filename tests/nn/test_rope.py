"""Rotary position embeddings in the attention modules, against an oracle written from the
definition (a loop over feature pairs, explicit softmax attention), and KV-cache decoding that
matches the full forward pass."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from mhalib.nn import GroupedQueryAttention, KVCache, MultiHeadAttention
from mhalib.nn.rope import apply_rotary


def _rotate_by_loop(x, positions, base):
    """Pair (i, i + d/2) turned by positions[n] * base ** (-2 i / d), one pair at a time."""
    d = x.shape[-1]
    out = x.clone()
    for n, pos in enumerate(positions.tolist()):
        for i in range(d // 2):
            angle = pos * base ** (-2 * i / d)
            c, s = math.cos(angle), math.sin(angle)
            a, b = x[..., n, i], x[..., n, i + d // 2]
            out[..., n, i] = a * c - b * s
            out[..., n, i + d // 2] = a * s + b * c
    return out


def _oracle(layer, x, base, start=0, causal=True):
    """The layer's projections read from its weights, RoPE by the loop above, softmax by hand."""
    batch, n, d_model = x.shape
    h, g, dh = layer.num_heads, layer.num_kv_heads, layer.head_dim
    w, b = layer.qkv_proj.weight, layer.qkv_proj.bias
    qkv = x @ w.T + (b if b is not None else 0)
    q = qkv[..., :d_model].reshape(batch, n, h, dh).transpose(1, 2)
    k = qkv[..., d_model:d_model + g * dh].reshape(batch, n, g, dh).transpose(1, 2)
    v = qkv[..., d_model + g * dh:].reshape(batch, n, g, dh).transpose(1, 2)
    positions = torch.arange(start, start + n)
    q, k = _rotate_by_loop(q, positions, base), _rotate_by_loop(k, positions, base)
    k, v = k.repeat_interleave(h // g, dim=1), v.repeat_interleave(h // g, dim=1)
    scores = q @ k.transpose(-2, -1) / math.sqrt(dh)
    if causal:
        scores = scores.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), -math.inf)
    ctx = scores.softmax(-1) @ v
    return layer.out_proj(ctx.transpose(1, 2).reshape(batch, n, d_model))


def _layer(heads, kv_heads, d_head, base=10000.0, bias=False, seed=0):
    torch.manual_seed(seed)
    layer = GroupedQueryAttention(heads * d_head, heads, kv_heads, bias=bias,
                                  dtype=torch.float64, rope_base=base)
    if bias:
        with torch.no_grad():
            layer.qkv_proj.bias.normal_()
    return layer


@settings(max_examples=15, deadline=None)
@given(n=st.integers(1, 7), kv_heads=st.sampled_from([1, 2]), rep=st.sampled_from([1, 2]),
       half=st.integers(1, 3), base=st.sampled_from([10.0, 10000.0, 500000.0]),
       bias=st.booleans(), causal=st.booleans())
def test_forward_matches_the_loop_oracle(n, kv_heads, rep, half, base, bias, causal):
    layer = _layer(kv_heads * rep, kv_heads, 2 * half, base, bias)
    x = torch.randn(2, n, layer.d_model, dtype=torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(layer(x, causal=causal), _oracle(layer, x, base, causal=causal))


def test_apply_rotary_matches_the_loop_at_large_positions():
    x = torch.randn(2, 5, 16, dtype=torch.float64)
    positions = torch.tensor([0, 7, 4096, 100_000, 131_071])
    torch.testing.assert_close(apply_rotary(x, positions, 500000.0),
                               _rotate_by_loop(x, positions, 500000.0))


@pytest.mark.parametrize("heads,kv_heads", [(4, 4), (4, 2), (4, 1)])
def test_token_by_token_decode_matches_the_full_forward(heads, kv_heads):
    layer = _layer(heads, kv_heads, 8)
    x = torch.randn(2, 9, layer.d_model, dtype=torch.float64)
    with torch.no_grad():
        full = layer(x, causal=True)
        cache = layer.new_kv_cache(2, 16)
        steps = [layer(x[:, t:t + 1], kv_cache=cache) for t in range(9)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full)
    torch.testing.assert_close(full, _oracle(layer, x, 10000.0))


def test_prefill_then_decode_matches_and_cached_keys_are_rotated_once():
    layer = _layer(4, 2, 8, base=100.0)
    x = torch.randn(1, 10, layer.d_model, dtype=torch.float64)
    with torch.no_grad():
        full = layer(x, causal=True)
        cache = layer.new_kv_cache(1, 10)
        prefill = layer(x[:, :6], causal=True, kv_cache=cache)
        keys_after_prefill = cache.keys[:, :, :6].clone()
        decoded = [layer(x[:, t:t + 1], kv_cache=cache) for t in range(6, 10)]
        # the cached keys are exactly the rotated keys of the full pass, never touched again
        _, k, _ = layer._project(x, None, None)
    torch.testing.assert_close(torch.cat([prefill, *decoded], dim=1), full)
    assert torch.equal(cache.keys[:, :, :6], keys_after_prefill)
    torch.testing.assert_close(cache.keys, apply_rotary(k, torch.arange(10), 100.0))


def test_relative_positions_only():
    """Shifting every position by the same amount (a cache of junk length) changes nothing in
    the scores: q_m . k_n depends on m - n."""
    layer = _layer(2, 2, 8)
    x = torch.randn(1, 5, layer.d_model, dtype=torch.float64)
    with torch.no_grad():
        plain = layer(x, causal=True)
        cache = KVCache(1, 2, 8, 40, torch.float64)
        cache.length = 33  # pretend 33 tokens are cached, then hide them with a mask
        mask = torch.arange(38) >= 33
        shifted = layer(x, causal=True, kv_cache=cache, attn_mask=mask)
    torch.testing.assert_close(shifted, plain)


def test_without_rope_base_nothing_changes_and_positions_are_ignored():
    torch.manual_seed(3)
    plain = MultiHeadAttention(16, 2, dtype=torch.float64)
    torch.manual_seed(3)
    rotary = MultiHeadAttention(16, 2, dtype=torch.float64, rope_base=10000.0)
    x = torch.randn(1, 6, 16, dtype=torch.float64)
    perm = torch.randperm(6)
    with torch.no_grad():
        assert plain.rope_base is None and "rope_base" not in repr(plain)
        assert "rope_base=10000" in repr(rotary)
        torch.testing.assert_close(plain(x)[:, perm], plain(x[:, perm]))  # equivariant
        assert not torch.allclose(rotary(x)[:, perm], rotary(x[:, perm]))  # not any more
        torch.testing.assert_close(rotary(x[:, :1]), plain(x[:, :1]))  # position 0: no turn


def test_half_precision_keeps_the_dtype():
    layer = GroupedQueryAttention(32, 4, 2, dtype=torch.bfloat16, rope_base=10000.0)
    x = torch.randn(1, 5, 32, dtype=torch.bfloat16)
    with torch.no_grad():
        assert layer(x, causal=True).dtype == torch.bfloat16


@pytest.mark.parametrize("rope_base,error", [(1.0, "rope_base"), (-5, "rope_base"),
                                             (True, "rope_base"), ("big", "rope_base")])
def test_bad_rope_base_is_refused(rope_base, error):
    with pytest.raises(ValueError, match=error):
        GroupedQueryAttention(16, 2, 2, rope_base=rope_base)


def test_odd_head_dim_is_refused():
    with pytest.raises(ValueError, match="even head_dim"):
        MultiHeadAttention(15, 5, rope_base=10000.0)
    MultiHeadAttention(15, 5)  # without RoPE an odd head_dim is fine


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_cuda_decode_matches_the_full_forward(dtype):
    torch.manual_seed(0)
    layer = GroupedQueryAttention(64, 8, 2, device="cuda", dtype=dtype, rope_base=500000.0)
    x = torch.randn(2, 10, 64, device="cuda", dtype=dtype)
    with torch.no_grad():
        full = layer(x, causal=True)
        cache = layer.new_kv_cache(2, 10)
        steps = torch.cat([layer(x[:, t:t + 1], kv_cache=cache) for t in range(10)], dim=1)
    assert full.dtype == dtype and full.device.type == "cuda"
    tolerance = 2e-2 if dtype == torch.bfloat16 else 1e-5
    torch.testing.assert_close(steps, full, rtol=tolerance, atol=tolerance)
