"""Every hint of lesson 11 is true: its intensities, gathers and masks checked on examples, its
last step followed."""

from __future__ import annotations

import math

import torch

from mhalib.nn.masks import causal_mask
from mhalib.reference import decode_attention_intensity as reference_intensity
from tests.hints.claims import passes, says


def test_the_intensities_do_not_depend_on_length_width_or_batch():
    says("decode_attention_intensity", 3, "64 query heads sharing 8 K/V heads", "8.0",
         "MHA in bf16 gives 1.0")
    for seq_len, head_dim, batch in ((1, 64, 1), (4096, 128, 8), (77, 96, 3)):
        assert reference_intensity(64, 8, head_dim, seq_len, batch) == 8.0
        assert reference_intensity(32, 32, head_dim, seq_len, batch) == 1.0


def test_the_counts_of_the_second_hint():
    says("decode_attention_intensity", 2, "2 * head_dim FLOPs", "`num_kv_heads` of each")
    heads, kv_heads, d, n, batch = 16, 4, 32, 50, 3
    flops = batch * heads * n * (2 * d) * 2  # scores, then as much again for the weighted sum
    read = batch * n * kv_heads * d * 2 * 2  # keys and values, bf16
    assert reference_intensity(heads, kv_heads, d, n, batch) == flops / read


def test_the_last_intensity_hint_passes():
    says("decode_attention_intensity", -1,
         "flops = 4 * batch_size * num_heads * seq_len * head_dim",
         "cache_bytes = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element",
         "return flops / cache_bytes")

    def decode_attention_intensity(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                                   bytes_per_element=2):
        flops = 4 * batch_size * num_heads * seq_len * head_dim
        cache_bytes = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
        return flops / cache_bytes

    passes("decode_attention_intensity", decode_attention_intensity)


def test_gathering_with_two_index_tensors_gives_n_g_d():
    says("paged_attention", 2, "block_table[b, t // page_size]", "t % page_size", "(n, G, d)")
    pool = torch.randn(10, 2, 4, 3)  # (num_pages, G, page_size, d)
    table = torch.tensor([7, 2, 5])
    t = torch.arange(6)
    pages, slots = table[t // 4], t % 4
    gathered = pool[pages, :, slots]
    assert gathered.shape == (6, 2, 3)
    assert torch.equal(gathered[5], pool[2, :, 1])  # token 5: second page (2), slot 1


def paged_attention(q, k_pages, v_pages, block_table, seq_lens):
    """The last hint of paged_attention, followed."""
    batch, heads, d = q.shape
    groups, page_size = k_pages.shape[1], k_pages.shape[2]
    out = torch.zeros_like(q)
    for b in range(batch):
        n = int(seq_lens[b])
        if n == 0:
            continue
        t = torch.arange(n)
        pages = block_table[b, t // page_size].long()
        k = k_pages[pages, :, t % page_size].transpose(0, 1)
        v = v_pages[pages, :, t % page_size].transpose(0, 1)
        k, v = k.repeat_interleave(heads // groups, dim=0), v.repeat_interleave(heads // groups,
                                                                                dim=0)
        scores = (k @ q[b][:, :, None])[..., 0] / math.sqrt(d)
        out[b] = (torch.softmax(scores, dim=-1)[:, None] @ v)[:, 0]
    return out


def test_the_last_paged_hint_passes():
    says("paged_attention", -1, "out = torch.zeros_like(q)",
         "pages = block_table[b, t // page_size].long()",
         "k = k_pages[pages, :, t % page_size].transpose(0, 1)",
         "scores = (k @ q[b][:, :, None])[..., 0] / math.sqrt(d)",
         "out[b] = (torch.softmax(scores, dim=-1)[:, None] @ v)[:, 0]")
    passes("paged_attention", paged_attention)


def test_the_last_chunk_of_five_sees_every_key():
    says("chunked_prefill", 2, "chunk_size = 2 and N = 5", "1 query and 5 keys, and sees all 5")
    starts = list(range(0, 5, 2))
    last_start, last_stop = starts[-1], min(starts[-1] + 2, 5)
    assert (last_stop - last_start, last_stop) == (1, 5)
    assert causal_mask(last_stop - last_start, last_stop).all()
    inner = causal_mask(2, 4)  # the middle chunk: queries 2, 3 over keys 0 .. 3
    assert inner.tolist() == [[True, True, True, False], [True, True, True, True]]


def test_the_last_chunked_hint_passes():
    says("chunked_prefill", -1,
         "torch.zeros(B, num_heads, N, d_head, dtype=x.dtype, device=x.device)",
         "k_cache[:, :, start:stop] = split(x_c @ w_k)",
         "scores = q @ k_cache[:, :, :stop].transpose(-2, -1) / math.sqrt(d_head)",
         "scores = scores.masked_fill(~causal_mask(stop - start, stop, device=x.device), "
         'float("-inf"))',
         "return out @ w_o")

    def chunked_prefill(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
        batch, n, d_model = x.shape
        d_head = d_model // num_heads

        def split(y):
            return y.reshape(batch, -1, num_heads, d_head).transpose(1, 2)

        k_cache = torch.zeros(batch, num_heads, n, d_head, dtype=x.dtype, device=x.device)
        v_cache = torch.zeros(batch, num_heads, n, d_head, dtype=x.dtype, device=x.device)
        out = torch.zeros(batch, n, d_model, dtype=x.dtype, device=x.device)
        for start in range(0, n, chunk_size):
            stop = min(start + chunk_size, n)
            x_c = x[:, start:stop]
            q = split(x_c @ w_q)
            k_cache[:, :, start:stop] = split(x_c @ w_k)
            v_cache[:, :, start:stop] = split(x_c @ w_v)
            scores = q @ k_cache[:, :, :stop].transpose(-2, -1) / math.sqrt(d_head)
            hidden = ~causal_mask(stop - start, stop, device=x.device)
            scores = scores.masked_fill(hidden, float("-inf"))
            out[:, start:stop] = (torch.softmax(scores, dim=-1) @ v_cache[:, :, :stop]) \
                .transpose(1, 2).reshape(batch, stop - start, d_model)
        return out @ w_o

    passes("chunked_prefill", chunked_prefill)
