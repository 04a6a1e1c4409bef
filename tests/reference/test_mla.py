"""Lesson 10 answer key (torch): MLA naive and absorbed, decoupled RoPE, and the cache size,
against independent oracles (SDPA on explicit per-head weights, a loop over heads, the nbytes
of real cache tensors)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from mhalib.accounting.kv_cache import kv_cache_bytes
from mhalib.reference import absorb_mla_weights, mla_attention, mla_kv_cache_bytes
from mhalib.reference.mla import absorbed_mla_attention
from mhalib.viz.lesson10 import rotation_matrix


def _weights(d_model, heads, d_head, d_c, dtype=torch.float64, seed=0):
    g = torch.Generator().manual_seed(seed)
    width = heads * d_head

    def rand(*shape):
        return (torch.randn(*shape, generator=g, dtype=torch.float64) / shape[0] ** 0.5).to(dtype)

    return [rand(d_model, d_c), rand(d_c, width), rand(d_c, width), rand(d_model, width),
            rand(width, d_model)]


def _oracle(x, w_dkv, w_uk, w_uv, w_q, w_o, heads, causal):
    """MHA with key and value weights w_dkv @ w_uk and w_dkv @ w_uv, through SDPA."""
    b, n, _ = x.shape

    def split(t):
        return t.view(b, n, heads, -1).transpose(1, 2)

    ctx = F.scaled_dot_product_attention(split(x @ w_q), split(x @ (w_dkv @ w_uk)),
                                         split(x @ (w_dkv @ w_uv)), is_causal=causal)
    return ctx.transpose(1, 2).reshape(b, n, -1) @ w_o


@settings(max_examples=30, deadline=None)
@given(batch=st.integers(1, 2), n=st.integers(1, 7), heads=st.integers(1, 4),
       d_head=st.integers(1, 6), d_c=st.integers(1, 9), d_model=st.integers(2, 12),
       causal=st.booleans())
def test_mla_matches_sdpa_on_the_product_weights(batch, n, heads, d_head, d_c, d_model, causal):
    x = torch.randn(batch, n, d_model, dtype=torch.float64)
    w = _weights(d_model, heads, d_head, d_c)
    out = mla_attention(x, *w, heads, causal=causal)
    assert out.shape == (batch, n, d_model)
    torch.testing.assert_close(out, _oracle(x, *w, heads, causal))


def test_head_h_owns_contiguous_columns():
    """Zeroing head 1's columns of w_q, w_uk, w_uv and rows of w_o removes exactly head 1's
    share, which a loop over contiguous slices computes."""
    x = torch.randn(2, 5, 12, dtype=torch.float64)
    w_dkv, w_uk, w_uv, w_q, w_o = _weights(12, 3, 4, 6)
    full = mla_attention(x, w_dkv, w_uk, w_uv, w_q, w_o, 3)
    cols = slice(4, 8)
    c = x @ w_dkv
    s = (x @ w_q[:, cols]) @ (c @ w_uk[:, cols]).transpose(1, 2) / 2.0
    s = s.masked_fill(torch.ones(5, 5, dtype=torch.bool).triu(1), -math.inf)
    head1 = torch.softmax(s, -1) @ (c @ w_uv[:, cols]) @ w_o[cols]
    w_o_without = w_o.clone()
    w_o_without[cols] = 0
    torch.testing.assert_close(full - mla_attention(x, w_dkv, w_uk, w_uv, w_q, w_o_without, 3),
                               head1)


@pytest.mark.parametrize("causal", [True, False])
def test_absorbed_attention_from_latents_equals_naive(causal):
    x = torch.randn(2, 9, 16, dtype=torch.float64)
    w_dkv, w_uk, w_uv, w_q, w_o = _weights(16, 4, 8, 6)
    w_q_latent, w_o_latent = absorb_mla_weights(w_uk, w_uv, w_q, w_o, 4)
    assert w_q_latent.shape == (4, 16, 6) and w_o_latent.shape == (4, 6, 16)
    for h in range(4):
        cols = slice(8 * h, 8 * h + 8)
        torch.testing.assert_close(w_q_latent[h], w_q[:, cols] @ w_uk[:, cols].T)
        torch.testing.assert_close(w_o_latent[h], w_uv[:, cols] @ w_o[cols])
    absorbed = absorbed_mla_attention(x, x @ w_dkv, w_q_latent, w_o_latent, 8, causal)
    torch.testing.assert_close(absorbed, mla_attention(x, w_dkv, w_uk, w_uv, w_q, w_o, 4, causal))


def test_absorbed_decoding_of_the_last_token_uses_the_bottom_right_mask():
    x = torch.randn(1, 6, 16, dtype=torch.float64)
    w_dkv, w_uk, w_uv, w_q, w_o = _weights(16, 2, 8, 5)
    lat = absorb_mla_weights(w_uk, w_uv, w_q, w_o, 2)
    last = absorbed_mla_attention(x[:, -1:], x @ w_dkv, *lat, 8, causal=True)
    torch.testing.assert_close(last, mla_attention(x, w_dkv, w_uk, w_uv, w_q, w_o, 2)[:, -1:])


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_half_precision_stays_close_and_keeps_dtype(dtype):
    x = torch.randn(1, 6, 16, dtype=torch.float64)
    w = _weights(16, 2, 8, 8)
    out = mla_attention(x.to(dtype), *(t.to(dtype) for t in w), 2)
    assert out.dtype == dtype
    torch.testing.assert_close(out.double(), mla_attention(x, *w, 2), rtol=0.05, atol=0.05)


def test_bad_arguments_name_the_argument():
    x = torch.randn(1, 4, 8)
    w_dkv, w_uk, w_uv, w_q, w_o = _weights(8, 2, 4, 3, dtype=torch.float32)
    with pytest.raises(ValueError, match="w_uk.shape"):
        mla_attention(x, w_dkv, w_uk[:, :6], w_uv, w_q, w_o, 2)
    with pytest.raises(ValueError, match="num_heads=3"):
        mla_attention(x, w_dkv, w_uk, w_uv, w_q, w_o, 3)
    with pytest.raises(TypeError, match="w_o.dtype"):
        mla_attention(x, w_dkv, w_uk, w_uv, w_q, w_o.double(), 2)
    with pytest.raises(ValueError, match="w_o.shape"):
        absorb_mla_weights(w_uk, w_uv, w_q, w_o[:, :5], 2)


def test_rope_on_the_latent_keys_breaks_absorption():
    """Rotating the full per-head keys by position makes absorbed scores wrong away from
    position 0: the reason DeepSeek decouples RoPE."""
    x = torch.randn(1, 6, 16, dtype=torch.float64)
    w_dkv, w_uk, w_uv, w_q, w_o = _weights(16, 1, 8, 6)

    def rope(t):  # rows of (1, N, 8) rotated by their positions
        return torch.stack([t[0, i] @ rotation_matrix(8, i, dtype=t.dtype).T
                            for i in range(t.shape[1])])[None]

    rotated_scores = rope(x @ w_q) @ rope((x @ w_dkv) @ w_uk).transpose(1, 2)
    w_q_latent, _ = absorb_mla_weights(w_uk, w_uv, w_q, w_o, 1)
    absorbed_scores = (x @ w_q_latent[0]) @ (x @ w_dkv).transpose(1, 2)
    diagonal = torch.arange(6)
    torch.testing.assert_close(rotated_scores[0, diagonal, diagonal],
                               absorbed_scores[0, diagonal, diagonal])  # offset 0 agrees
    assert not torch.allclose(rotated_scores, absorbed_scores, atol=1e-3)


@settings(max_examples=30, deadline=None)
@given(layers=st.integers(1, 4), rank=st.integers(1, 32), rope=st.integers(0, 16),
       n=st.integers(1, 20), batch=st.integers(1, 3),
       dtype=st.sampled_from([torch.float16, torch.bfloat16, torch.float32]))
def test_mla_cache_bytes_match_real_cache_tensors(layers, rank, rope, n, batch, dtype):
    latents = torch.empty(batch, n, rank, dtype=dtype, device="meta")
    rope_keys = torch.empty(batch, n, rope, dtype=dtype, device="meta")
    size = torch.empty((), dtype=dtype).element_size()
    expected = layers * (latents.numel() + rope_keys.numel()) * size
    assert mla_kv_cache_bytes(layers, rank, rope, n, batch, size) == expected


def test_published_cache_figures():
    assert mla_kv_cache_bytes(61, 512, 64, 1) == 70_272  # DeepSeek-V3, bf16, per token
    # DeepSeek-V2 (arXiv:2405.04434 Table 1): d_c = 4 d_h, d_R = d_h / 2 -> GQA with 2.25 groups
    d_h = 128
    assert 4 * mla_kv_cache_bytes(60, 4 * d_h, d_h // 2, 1) == kv_cache_bytes(60, 9, d_h, 1)
    with pytest.raises(ValueError, match="rope_head_dim"):
        mla_kv_cache_bytes(2, 8, -1, 4)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_mla_and_absorption_run_on_cuda():
    x = torch.randn(2, 9, 16, dtype=torch.float64)
    w = _weights(16, 4, 8, 6)
    on_gpu = [t.cuda() for t in w]
    out = mla_attention(x.cuda(), *on_gpu, 4)
    assert out.device.type == "cuda"
    torch.testing.assert_close(out.cpu(), mla_attention(x, *w, 4))
    latent = absorb_mla_weights(*on_gpu[1:], 4)
    absorbed = absorbed_mla_attention(x.cuda(), x.cuda() @ on_gpu[0], *latent, 8)
    torch.testing.assert_close(absorbed.cpu(), mla_attention(x, *w, 4))
