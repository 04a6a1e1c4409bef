"""GroupedQueryAttention against SDPA with enable_gqa=True, and KV-cache decoding."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from mhalib.nn import GroupedQueryAttention, MultiHeadAttention, padding_mask

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def _layer(d_model, heads, kv_heads, bias=False, dtype=torch.float64, seed=0):
    torch.manual_seed(seed)
    layer = GroupedQueryAttention(d_model, heads, kv_heads, bias=bias, dtype=dtype)
    if bias:
        with torch.no_grad():
            layer.qkv_proj.bias.normal_()
            layer.out_proj.bias.normal_()
    return layer


def _oracle(layer, x, causal=False, attn_mask=None):
    """Projections written out from the weights, attention by SDPA's own GQA support."""
    batch, n, d = x.shape
    h, g, dh = layer.num_heads, layer.num_kv_heads, layer.head_dim
    w, b = layer.qkv_proj.weight, layer.qkv_proj.bias
    qkv = F.linear(x, w, b)
    q = qkv[..., :d].reshape(batch, n, h, dh).transpose(1, 2)
    k = qkv[..., d : d + g * dh].reshape(batch, n, g, dh).transpose(1, 2)
    v = qkv[..., d + g * dh :].reshape(batch, n, g, dh).transpose(1, 2)
    ctx = F.scaled_dot_product_attention(
        q, k, v, attn_mask=attn_mask, is_causal=causal, enable_gqa=True
    )
    return layer.out_proj(ctx.transpose(1, 2).reshape(batch, n, d))


@settings(max_examples=25, deadline=None)
@given(
    batch=st.integers(1, 3),
    n=st.integers(1, 10),
    kv_heads=st.sampled_from([1, 2, 3]),
    rep=st.sampled_from([1, 2, 4]),
    d_head=st.integers(1, 5),
    causal=st.booleans(),
    bias=st.booleans(),
)
def test_matches_sdpa_enable_gqa(batch, n, kv_heads, rep, d_head, causal, bias):
    heads = kv_heads * rep
    layer = _layer(heads * d_head, heads, kv_heads, bias=bias)
    x = torch.randn(batch, n, heads * d_head, dtype=torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(layer(x, causal=causal), _oracle(layer, x, causal=causal))


def test_mqa_and_mha_ends():
    mqa = _layer(32, 8, 1)
    assert mqa.qkv_proj.weight.shape == (32 + 2 * 4, 32)  # one K/V head of size 4
    torch.manual_seed(1)
    module = torch.nn.MultiheadAttention(32, 8, bias=False, batch_first=True).double().eval()
    mha = MultiHeadAttention.from_torch(module)
    as_gqa = GroupedQueryAttention(32, 8, 8, dtype=torch.float64)
    as_gqa.load_state_dict(mha.state_dict())
    x = torch.randn(2, 6, 32, dtype=torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(as_gqa(x), module(x, x, x, need_weights=False)[0])


@settings(max_examples=20, deadline=None)
@given(
    chunks=st.lists(st.integers(1, 4), min_size=1, max_size=5),
    kv_heads=st.sampled_from([1, 2, 4]),
)
def test_kv_cache_decoding_equals_causal_forward(chunks, kv_heads):
    layer = _layer(16, 4, kv_heads, bias=True)
    n = sum(chunks)
    x = torch.randn(2, n, 16, dtype=torch.float64)
    cache = layer.new_kv_cache(batch_size=2, max_seq_len=n)
    pieces, start = [], 0
    with torch.no_grad():
        for size in chunks:  # prefill and decode in chunks of any size
            pieces.append(layer(x[:, start : start + size], causal=True, kv_cache=cache))
            start += size
        full = layer(x, causal=True)
    assert cache.length == n
    torch.testing.assert_close(torch.cat(pieces, dim=1), full)


def test_fully_masked_rows_are_zero_not_nan():
    layer = _layer(16, 4, 2, bias=True)
    x = torch.randn(3, 5, 16, dtype=torch.float64)
    mask = padding_mask(torch.tensor([5, 0, 2]), 5)  # sequence 1 has no key at all
    with torch.no_grad():
        out = layer(x, attn_mask=mask)
        bias_only = layer.out_proj.bias.expand(5, 16)  # zero context -> output is the bias
        assert not torch.isnan(out).any()
        torch.testing.assert_close(out[1], bias_only)
        torch.testing.assert_close(out[:1], _oracle(layer, x[:1]))


def test_causal_with_more_queries_than_keys_gives_zero_rows():
    from mhalib.nn import attend

    q = torch.randn(1, 2, 6, 4, dtype=torch.float64)
    k = torch.randn(1, 1, 4, 4, dtype=torch.float64)
    out = attend(q, k, k, causal=True)  # bottom-right: the first 2 queries see nothing
    assert torch.equal(out[:, :, :2], torch.zeros_like(out[:, :, :2]))
    blocked_free = torch.ones(6, 4, dtype=torch.bool).tril(diagonal=-2)
    expected = F.scaled_dot_product_attention(
        q[:, :, 2:], k, k, attn_mask=blocked_free[2:], enable_gqa=True
    )
    torch.testing.assert_close(out[:, :, 2:], expected)


def test_fp16_logits_of_1e4_do_not_overflow():
    from mhalib.nn import attend

    d = 64
    q = torch.full((1, 1, 2, d), 40.0)  # q.k = 64 * 1600 = 102400 > float16 max (65504)
    k = torch.full((1, 1, 3, d), 40.0)
    k[..., 1, :] = -40.0
    v = torch.randn(1, 1, 3, d)
    expected = F.scaled_dot_product_attention(q.double(), k.double(), v.double())
    out = attend(q.half(), k.half(), v.half())  # logits 102400 / 8 = 12800
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out.double(), expected, atol=1e-2, rtol=1e-2)


@cuda
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_cuda_kv_cache_decoding(dtype):
    layer = _layer(64, 8, 2, dtype=dtype).cuda()
    x = torch.randn(2, 12, 64, device="cuda", dtype=dtype)
    cache = layer.new_kv_cache(2, 12)
    with torch.no_grad():
        steps = [layer(x[:, t : t + 1], causal=True, kv_cache=cache) for t in range(12)]
        torch.testing.assert_close(torch.cat(steps, 1), layer(x, causal=True), atol=3e-2, rtol=3e-2)
