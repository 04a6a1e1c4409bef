"""Every hint of lesson 06 is true: its orders, shapes and counts recomputed, its last step
followed."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from mhalib.accounting import kv_cache_bytes as reference_cache_bytes
from mhalib.accounting.models import MODELS
from mhalib.reference import repeat_kv as reference_repeat
from tests.hints.claims import passes, says


def groups_read(repeated: torch.Tensor) -> list[int]:
    return repeated[0, :, 0, 0].long().tolist()


def test_the_group_orders_are_as_stated():
    says("repeat_kv", 1, "0, 0, 0, 1, 1, 1", "not 0, 1, 0, 1, 0, 1")
    says("repeat_kv", 2, "x.repeat(1, n_rep, 1, 1)", "in front of the group axis",
         "tiles again")
    x = torch.arange(2.0).reshape(1, 2, 1, 1)  # group g holds the number g
    in_front = x[:, None].expand(1, 3, 2, 1, 1).reshape(1, 6, 1, 1)
    assert groups_read(in_front) == [0, 1, 0, 1, 0, 1]
    assert groups_read(reference_repeat(x, 3)) == [0, 0, 0, 1, 1, 1]
    assert groups_read(x.repeat(1, 3, 1, 1)) == [0, 1, 0, 1, 0, 1]
    assert [h // 3 for h in range(6)] == [0, 0, 0, 1, 1, 1]


def test_both_last_repeat_hints_pass():
    says("repeat_kv", -1, "torch.repeat_interleave(x, n_rep, dim=1)",
         "x[:, :, None].expand(B, G, n_rep, N, d).reshape(B, G * n_rep, N, d)")

    def expanded(x, n_rep):
        batch, groups, n, d = x.shape
        return x[:, :, None].expand(batch, groups, n_rep, n, d).reshape(batch, groups * n_rep,
                                                                        n, d)

    passes("repeat_kv", lambda x, n_rep: torch.repeat_interleave(x, n_rep, dim=1))
    passes("repeat_kv", expanded)


def split(y, batch, n, heads, d_head):
    return y.reshape(batch, n, heads, d_head).transpose(1, 2)


def grouped_query_attention(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    """The last hint of grouped_query_attention, followed."""
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    batch, n, d_model = x.shape
    d_head = d_model // num_heads
    n_rep = num_heads // num_kv_heads
    q = split(x @ w_q, batch, n, num_heads, d_head)
    k = torch.repeat_interleave(split(x @ w_k, batch, n, num_kv_heads, d_head), n_rep, dim=1)
    v = torch.repeat_interleave(split(x @ w_v, batch, n, num_kv_heads, d_head), n_rep, dim=1)
    scores = (q @ k.transpose(-2, -1)).float() / d_head ** 0.5
    if causal:
        future = torch.ones(n, n, dtype=torch.bool, device=x.device).triu(1)
        scores = scores.masked_fill(future, float("-inf"))
    weights = torch.softmax(scores, dim=-1).to(x.dtype)
    return (weights @ v).transpose(1, 2).reshape(batch, n, d_model) @ w_o


def test_the_gqa_shapes_are_as_listed():
    says("grouped_query_attention", 2, "(2, 5, 16)", "(2, 5, 8)", "(2, 4, 5, 4)", "(2, 2, 5, 4)",
         "(2, 4, 5, 5)")
    x = torch.randn(2, 5, 16)
    w_q, w_k = torch.randn(16, 16), torch.randn(16, 8)
    q, k = split(x @ w_q, 2, 5, 4, 4), split(x @ w_k, 2, 5, 2, 4)
    k_rep = reference_repeat(k, 2)
    shapes = [(x @ w_q).shape, (x @ w_k).shape, q.shape, k.shape, k_rep.shape,
              (q @ k_rep.transpose(-2, -1)).shape]
    assert [tuple(s) for s in shapes] == [(2, 5, 16), (2, 5, 8), (2, 4, 5, 4), (2, 2, 5, 4),
                                          (2, 4, 5, 4), (2, 4, 5, 5)]


def test_the_causal_matrix_is_true_above_the_diagonal():
    says("grouped_query_attention", 3, "True above the diagonal")
    says("grouped_query_attention", -1, "torch.ones(N, N, dtype=torch.bool, device=x.device)"
         ".triu(1)")
    hidden = torch.ones(4, 4, dtype=torch.bool).triu(1)
    assert all(bool(hidden[i, j]) == (j > i) for i in range(4) for j in range(4))


def test_the_last_gqa_hint_passes():
    says("grouped_query_attention", -1, "k = repeat_kv(split(x @ w_k, num_kv_heads), n_rep)",
         "scores = (q @ k.transpose(-2, -1)).float() / d_head ** 0.5",
         "weights = torch.softmax(scores, dim=-1).to(x.dtype)",
         "return (weights @ v).transpose(1, 2).reshape(B, N, d_model) @ w_o")
    passes("grouped_query_attention", grouped_query_attention)


def test_llama_8b_cache_per_token():
    says("kv_cache_bytes", 2, "32 layers, 8 K/V heads of 128", "131,072 bytes per token")
    llama = MODELS["Llama-3.1 8B"]
    assert (llama.num_layers, llama.num_kv_heads, llama.head_dim) == (32, 8, 128)
    assert reference_cache_bytes(32, 8, 128, 1) == 131_072


def test_the_last_cache_hint_passes():
    says("kv_cache_bytes", -1, "return 2 * num_layers * num_kv_heads * head_dim * seq_len * "
         "batch_size * bytes_per_element")

    def kv_cache_bytes(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
        return 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size * \
            bytes_per_element

    passes("kv_cache_bytes", kv_cache_bytes)


def test_one_query_with_is_causal_sees_key_0_only():
    says("decode_with_cache", 2, "is_causal=True", "key 0 only")
    q, k = torch.randn(1, 1, 1, 4), torch.randn(1, 1, 3, 4)
    values = torch.eye(3).reshape(1, 1, 3, 3)  # the output is the weights
    out = F.scaled_dot_product_attention(q, k, values, is_causal=True)
    assert out.flatten().tolist() == [1.0, 0.0, 0.0]


def test_the_last_decode_hint_passes():
    says("decode_with_cache", -1, "x_t = x[:, t:t + 1]", "q_t = split(x_t @ w_q, num_heads)",
         "k_cache.append(split(x_t @ w_k, num_kv_heads))",
         "k = repeat_kv(torch.cat(k_cache, dim=2), n_rep)",
         "outputs.append((weights @ v).transpose(1, 2).reshape(B, 1, d_model) @ w_o)",
         "return torch.cat(outputs, dim=1)")

    def decode_with_cache(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
        batch, n, d_model = x.shape
        d_head = d_model // num_heads
        n_rep = num_heads // num_kv_heads
        k_cache, v_cache, outputs = [], [], []
        for t in range(n):
            x_t = x[:, t:t + 1]
            q_t = split(x_t @ w_q, batch, 1, num_heads, d_head)
            k_cache.append(split(x_t @ w_k, batch, 1, num_kv_heads, d_head))
            v_cache.append(split(x_t @ w_v, batch, 1, num_kv_heads, d_head))
            k = torch.repeat_interleave(torch.cat(k_cache, dim=2), n_rep, dim=1)
            v = torch.repeat_interleave(torch.cat(v_cache, dim=2), n_rep, dim=1)
            weights = torch.softmax((q_t @ k.transpose(-2, -1)).float() / d_head ** 0.5,
                                    dim=-1).to(x.dtype)
            outputs.append((weights @ v).transpose(1, 2).reshape(batch, 1, d_model) @ w_o)
        return torch.cat(outputs, dim=1)

    passes("decode_with_cache", decode_with_cache)
