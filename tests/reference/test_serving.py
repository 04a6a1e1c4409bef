"""Lesson 11 answer key against independent oracles: SDPA with explicit masks, straightforward
loops over tokens, the closed form of the decode intensity and published H100 figures."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from mhalib.accounting.roofline import (
    H100_SXM,
    mla_decode_intensity,
    prefill_attention_intensity,
)
from mhalib.reference.serving import chunked_prefill, decode_attention_intensity, paged_attention

# -- decode_attention_intensity ----------------------------------------------------------------

@pytest.mark.parametrize("heads,kv_heads,dim,n,batch,size", [
    (32, 32, 128, 4096, 1, 2), (32, 8, 128, 4096, 1, 2), (32, 1, 128, 100, 4, 2),
    (64, 8, 128, 7, 3, 1), (12, 4, 64, 1, 1, 4)])
def test_intensity_is_flops_over_bytes_counted_term_by_term(heads, kv_heads, dim, n, batch, size):
    scores = batch * heads * n * dim * 2  # one multiply-add per (query head, key, feature)
    weighted_sum = batch * heads * n * dim * 2
    k_and_v = 2 * batch * kv_heads * n * dim * size
    got = decode_attention_intensity(heads, kv_heads, dim, n, batch, size)
    assert isinstance(got, float)
    assert math.isclose(got, (scores + weighted_sum) / k_and_v)
    assert math.isclose(got, 2 * heads / (kv_heads * size))  # N, B and d cancel


def test_intensity_rejects_heads_that_do_not_group():
    with pytest.raises(ValueError, match="num_heads"):
        decode_attention_intensity(6, 4, 64, 10)
    with pytest.raises(ValueError, match="seq_len"):
        decode_attention_intensity(8, 2, 64, 0)


def test_h100_ridge_and_mla_intensity():
    # NVIDIA datasheet, H100 SXM: 989 TFLOP/s dense BF16, 3.35 TB/s
    assert math.isclose(H100_SXM.ridge_point, 989 / 3.35)
    assert H100_SXM.attainable_flops(1.0) == 3.35e12
    assert H100_SXM.attainable_flops(1e4) == 989e12
    # DeepSeek-V3: 128 heads, latent 512, RoPE key 64, bf16 -> 128 * 2176 / 1152
    assert math.isclose(mla_decode_intensity(128, 512, 64), 128 * 2176 / 1152)
    assert mla_decode_intensity(128, 512, 64) < H100_SXM.ridge_point
    assert prefill_attention_intensity(32, 8, 128, 4096) > H100_SXM.ridge_point


# -- paged_attention ----------------------------------------------------------------------------

def _pool(seq_lens, heads, groups, d, page_size, seed=0, dtype=torch.float32):
    """A shuffled pool with stale garbage; returns the inputs and each sequence's dense K, V."""
    gen = torch.Generator().manual_seed(seed)
    owned = [math.ceil(n / page_size) for n in seq_lens]
    num_pages = sum(owned) + 2
    k_pages = torch.randn(num_pages, groups, page_size, d, generator=gen) * 50
    v_pages = torch.randn(num_pages, groups, page_size, d, generator=gen) * 50
    perm = torch.randperm(num_pages, generator=gen)
    max_pages = max(owned) + 1
    table = torch.randint(0, num_pages, (len(seq_lens), max_pages), generator=gen)
    dense, used = [], 0
    for b, n in enumerate(seq_lens):
        pages = perm[used:used + owned[b]]
        used += owned[b]
        table[b, :owned[b]] = pages
        k = torch.randn(groups, n, d, generator=gen)
        v = torch.randn(groups, n, d, generator=gen)
        for t in range(n):  # write token t where the contract says it lives
            k_pages[pages[t // page_size], :, t % page_size] = k[:, t]
            v_pages[pages[t // page_size], :, t % page_size] = v[:, t]
        dense.append((k, v))
    q = torch.randn(len(seq_lens), heads, d, generator=gen)
    args = (q.to(dtype), k_pages.to(dtype), v_pages.to(dtype), table,
            torch.tensor(seq_lens))
    return args, dense


@pytest.mark.parametrize("seq_lens,heads,groups,page_size", [
    ([13, 6, 16], 4, 2, 4), ([40, 1, 33], 8, 1, 16), ([7, 5], 2, 2, 1), ([0, 9], 4, 2, 4)])
def test_paged_attention_matches_dense_sdpa_per_sequence(seq_lens, heads, groups, page_size):
    d = 8
    args, dense = _pool(seq_lens, heads, groups, d, page_size)
    out = paged_attention(*args)
    assert out.shape == (len(seq_lens), heads, d)
    for b, (k, v) in enumerate(dense):
        if seq_lens[b] == 0:
            assert torch.equal(out[b], torch.zeros(heads, d))
            continue
        k_h = k.repeat_interleave(heads // groups, dim=0)  # (H, n, d)
        v_h = v.repeat_interleave(heads // groups, dim=0)
        expected = F.scaled_dot_product_attention(args[0][b][:, None], k_h, v_h)[:, 0]
        torch.testing.assert_close(out[b], expected, rtol=1e-5, atol=1e-5)


def test_paged_attention_ignores_table_entries_and_slots_it_does_not_own():
    args, _ = _pool([6, 9], 2, 1, 4, 4, seed=3)
    q, k_pages, v_pages, table, lens = args
    before = paged_attention(*args)
    table2 = table.clone()
    table2[:, -1] = 0  # entries past each length are arbitrary
    k2, v2 = k_pages.clone(), v_pages.clone()
    k2[table[0, 1], :, 2:] = 1e4  # sequence 0 owns slots 0, 1 of its second page only
    assert torch.equal(paged_attention(q, k2, v2, table2, lens), before)


def test_paged_attention_keeps_half_precision():
    args, _ = _pool([5, 12], 4, 2, 8, 4, dtype=torch.bfloat16)
    assert paged_attention(*args).dtype == torch.bfloat16


# -- chunked_prefill ----------------------------------------------------------------------------

def _weights(d_model, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(d_model, d_model, generator=gen) / math.sqrt(d_model) for _ in range(4)]


def _causal_mha_sdpa(x, w_q, w_k, w_v, w_o, heads):
    batch, n, d_model = x.shape

    def split(t):
        return t.reshape(batch, n, heads, d_model // heads).transpose(1, 2)

    ctx = F.scaled_dot_product_attention(split(x @ w_q), split(x @ w_k), split(x @ w_v),
                                         is_causal=True)
    return ctx.transpose(1, 2).reshape(batch, n, d_model) @ w_o


@pytest.mark.parametrize("n,chunk", [(50, 12), (64, 16), (7, 1), (10, 32), (33, 33)])
def test_chunked_prefill_equals_causal_attention(n, chunk):
    x = torch.randn(2, n, 16, generator=torch.Generator().manual_seed(n))
    weights = _weights(16)
    torch.testing.assert_close(chunked_prefill(x, *weights, 4, chunk),
                               _causal_mha_sdpa(x, *weights, 4), rtol=1e-5, atol=1e-5)


def test_chunked_prefill_never_allocates_n_by_n():
    from mhalib.checks.work import largest_new_tensor

    x = torch.randn(1, 256, 16)
    _, numel, shape = largest_new_tensor(chunked_prefill, x, *_weights(16), 2, 16)
    assert numel < 256 * 256 and numel <= 2 * 16 * 256, shape


def test_chunked_prefill_float16_and_float64():
    for dtype in (torch.float16, torch.float64):
        x = torch.randn(1, 20, 16).to(dtype)
        weights = [w.to(dtype) for w in _weights(16)]
        out = chunked_prefill(x, *weights, 2, 8)
        assert out.dtype == dtype
        expected = _causal_mha_sdpa(x.double(), *[w.double() for w in weights], 2)
        assert np.allclose(out.double().numpy(), expected.numpy(), rtol=3e-2, atol=3e-2)
