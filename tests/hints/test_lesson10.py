"""Every hint of lesson 10 is true: its counts and shapes recomputed, its test of the absorbed
weights run, its last step followed."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from mhalib.accounting.kv_cache import mla_kv_cache_bytes as reference_cache_bytes
from mhalib.accounting.models import MODELS
from mhalib.reference import mla_attention as reference_mla
from mhalib.viz.lesson10 import random_mla_weights
from tests.hints.claims import passes, says


def test_deepseek_v3_per_token():
    says("mla_kv_cache_bytes", 2, "61 layers, 512 + 64", "70,272 bytes per token")
    v3 = MODELS["DeepSeek-V3"]
    assert (v3.num_layers, v3.kv_lora_rank, v3.qk_rope_head_dim) == (61, 512, 64)
    assert reference_cache_bytes(61, 512, 64, 1) == 70_272


def test_the_last_mla_cache_hint_passes():
    says("mla_kv_cache_bytes", -1, "return num_layers * (kv_lora_rank + rope_head_dim) * "
         "seq_len * batch_size * bytes_per_element")

    def mla_kv_cache_bytes(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                           bytes_per_element=2):
        return num_layers * (kv_lora_rank + rope_head_dim) * seq_len * batch_size * \
            bytes_per_element

    passes("mla_kv_cache_bytes", mla_kv_cache_bytes)


def mla_attention(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True, trace=None):
    """The last hint of mla_attention, followed (``trace`` collects the shapes on the way)."""
    batch, n, _ = x.shape
    d_head = w_q.shape[1] // num_heads

    def split(y):
        return y.reshape(batch, n, num_heads, d_head).transpose(1, 2)

    c = x @ w_dkv
    q, k, v = split(x @ w_q), split(c @ w_uk), split(c @ w_uv)
    context = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    merged = context.transpose(1, 2).reshape(batch, n, num_heads * d_head)
    if trace is not None:
        trace += [c.shape, q.shape, (q @ k.transpose(-2, -1)).shape, merged.shape]
    return merged @ w_o


def test_the_mla_shapes_are_as_listed():
    says("mla_attention", 3, "(2, 5, 6)", "(2, 3, 5, 4)", "(2, 3, 5, 5)", "(2, 5, 12)",
         "(2, 5, 8)")
    x = torch.randn(2, 5, 8)
    weights = random_mla_weights(8, 3, 4, 6, seed=0)  # d_model 8, 3 heads of 4, d_c 6
    trace = []
    out = mla_attention(x, *weights, num_heads=3, trace=trace)
    assert [tuple(s) for s in trace + [out.shape]] == [(2, 5, 6), (2, 3, 5, 4), (2, 3, 5, 5),
                                                       (2, 5, 12), (2, 5, 8)]


def test_sdpa_is_causal_hides_exactly_the_later_keys_when_n_q_equals_n_k():
    says("mla_attention", 3, "key j is hidden from query i when j > i", "is_causal=causal")
    q, k = torch.randn(1, 1, 4, 3), torch.randn(1, 1, 4, 3)
    weights = F.scaled_dot_product_attention(q, k, torch.eye(4)[None, None], is_causal=True)
    assert all(bool(weights[0, 0, i, j] > 0) == (j <= i) for i in range(4) for j in range(4))


def test_the_last_mla_hint_passes():
    says("mla_attention", -1, "c = x @ w_dkv",
         "q, k, v = split(x @ w_q), split(c @ w_uk), split(c @ w_uv)",
         "context = F.scaled_dot_product_attention(q, k, v, is_causal=causal)",
         "return context.transpose(1, 2).reshape(B, N, num_heads * d_head) @ w_o")
    passes("mla_attention", mla_attention)


def absorb_mla_weights(w_uk, w_uv, w_q, w_o, num_heads):
    """The last hint of absorb_mla_weights, followed."""
    d_head = w_q.shape[1] // num_heads
    heads = [slice(h * d_head, (h + 1) * d_head) for h in range(num_heads)]
    w_q_latent = torch.stack([w_q[:, cols] @ w_uk[:, cols].T for cols in heads])
    w_o_latent = torch.stack([w_uv[:, cols] @ w_o[cols] for cols in heads])
    return w_q_latent, w_o_latent


def test_the_whole_matrix_product_adds_the_heads_together():
    says("absorb_mla_weights", 1, "adds all the heads' scores into one")
    says("absorb_mla_weights", 2, "(d_model, d_c)", "(d_c, d_model)")
    w_dkv, w_uk, w_uv, w_q, w_o = random_mla_weights(8, 3, 4, 6, seed=1)
    w_q_latent, w_o_latent = absorb_mla_weights(w_uk, w_uv, w_q, w_o, 3)
    assert w_q_latent.shape == (3, 8, 6) and w_o_latent.shape == (3, 6, 8)
    assert torch.allclose(w_q @ w_uk.T, w_q_latent.sum(dim=0), atol=1e-5)


def test_the_test_in_the_third_hint_holds():
    says("absorb_mla_weights", 3, "(x @ w_q_latent[h]) @ c.T", "(x @ w_q_h) @ (c @ w_uk_h).T",
         "c @ w_o_latent[h]", "must equal `mla_attention`")
    torch.manual_seed(0)
    x = torch.randn(2, 5, 8, dtype=torch.float64)
    w_dkv, w_uk, w_uv, w_q, w_o = (w.double() for w in random_mla_weights(8, 3, 4, 6, seed=2))
    w_q_latent, w_o_latent = absorb_mla_weights(w_uk, w_uv, w_q, w_o, 3)
    c = x @ w_dkv
    hidden = torch.ones(5, 5, dtype=torch.bool).triu(1)
    total = 0
    for h in range(3):
        cols = slice(4 * h, 4 * h + 4)
        scores = (x @ w_q_latent[h]) @ c.transpose(-2, -1) / math.sqrt(4)
        assert torch.allclose(scores, (x @ w_q[:, cols]) @ (c @ w_uk[:, cols]).transpose(-2, -1)
                              / math.sqrt(4))
        weights = torch.softmax(scores.masked_fill(hidden, -math.inf), dim=-1)
        total = total + weights @ c @ w_o_latent[h]
    assert torch.allclose(total, reference_mla(x, w_dkv, w_uk, w_uv, w_q, w_o, 3))


def test_the_last_absorb_hint_passes():
    says("absorb_mla_weights", -1, "cols = slice(h * d_head, (h + 1) * d_head)",
         "w_q_latent = torch.stack([w_q[:, cols] @ w_uk[:, cols].T for each h])",
         "w_o_latent = torch.stack([w_uv[:, cols] @ w_o[cols] for each h])")
    passes("absorb_mla_weights", absorb_mla_weights)
