"""FLOP formulas against FlopCounterMode on real forward passes."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from mhalib.accounting.flop_counter import count_flops
from mhalib.accounting.flops import (
    crossover_seq_len,
    decode_flops,
    gqa_flops,
    mha_flops,
    recompute_decode_flops,
    visible_pairs,
)
from mhalib.nn import GroupedQueryAttention, MultiHeadAttention, causal_mask
from mhalib.reference import grouped_query_attention


@settings(max_examples=15, deadline=None)
@given(n=st.integers(1, 40), heads=st.sampled_from([1, 2, 4]), d_head=st.sampled_from([2, 8]))
def test_mha_flops_matches_flop_counter_on_explicit_forward(n, heads, d_head):
    d = heads * d_head
    x = torch.randn(1, n, d)
    w_q, w_k, w_v, w_o = (torch.randn(d, d) for _ in range(4))
    counted = count_flops(grouped_query_attention, x, w_q, w_k, w_v, w_o, heads, heads)
    expected = mha_flops(n, d)
    assert counted.total == expected["total"]
    assert counted.by_op["aten.mm"] == expected["qkv_projections"] + expected["output_projection"]
    assert counted.by_op["aten.bmm"] == expected["scores"] + expected["weighted_sum"]


@pytest.mark.parametrize("causal", [False, True])
def test_module_forward_counts_with_the_custom_sdpa_formula(causal):
    batch, n, d = 3, 20, 32
    layer = MultiHeadAttention(d, 4)
    x = torch.randn(batch, n, d)
    with torch.no_grad():
        counted = count_flops(layer, x, causal=causal)
    assert counted.total == batch * mha_flops(n, d)["total"]  # dense count, like torch's own


def test_nn_multihead_attention_train_and_eval_modes():
    batch, n, d = 2, 16, 24
    module = torch.nn.MultiheadAttention(d, 3, batch_first=True)
    x = torch.randn(batch, n, d)
    with torch.no_grad():
        for mode in (module.train, module.eval):
            mode()
            counted = count_flops(module, x, x, x, need_weights=False)
            assert counted.total == batch * mha_flops(n, d)["total"]


def test_gqa_flops_matches_flop_counter():
    batch, n, d, heads, kv_heads = 2, 12, 32, 8, 2
    layer = GroupedQueryAttention(d, heads, kv_heads)
    x = torch.randn(batch, n, d)
    with torch.no_grad():
        counted = count_flops(layer, x, attn_mask=causal_mask(n))
    assert counted.total == gqa_flops(n, d, heads, kv_heads, batch_size=batch)["total"]
    assert gqa_flops(n, d, heads, heads) == mha_flops(n, d)


def test_kv_cache_step_counts_only_new_token_projection():
    d, heads, kv_heads, past = 32, 4, 2, 9
    layer = GroupedQueryAttention(d, heads, kv_heads)
    cache = layer.new_kv_cache(1, past + 1)
    with torch.no_grad():
        layer(torch.randn(1, past, d), causal=True, kv_cache=cache)
        counted = count_flops(layer, torch.randn(1, 1, d), causal=True, kv_cache=cache)
    assert counted.total == gqa_flops(1, d, heads, kv_heads, kv_len=past + 1)["total"]


def test_formula_terms():
    f = mha_flops(10, 4)
    assert f == {
        "qkv_projections": 6 * 10 * 16,
        "scores": 2 * 100 * 4,
        "weighted_sum": 2 * 100 * 4,
        "output_projection": 2 * 10 * 16,
        "total": 8 * 10 * 16 + 4 * 100 * 4,
    }
    assert all(type(value) is int for value in f.values())


@pytest.mark.parametrize("d_model", [64, 768, 4096])
def test_crossover_is_where_quadratic_terms_equal_projections(d_model):
    n = crossover_seq_len(d_model)
    f = mha_flops(n, d_model)
    assert f["scores"] + f["weighted_sum"] == f["qkv_projections"] + f["output_projection"]
    below = mha_flops(n - 1, d_model)
    assert (
        below["scores"] + below["weighted_sum"]
        < below["qkv_projections"] + below["output_projection"]
    )


@settings(max_examples=40, deadline=None)
@given(n_q=st.integers(1, 30), n_k=st.integers(1, 30))
def test_visible_pairs_counts_causal_mask(n_q, n_k):
    assert visible_pairs(n_q, n_k) == int(causal_mask(n_q, n_k).sum())


def test_decode_is_linear_in_projections_and_recompute_is_not():
    cached, recomputed = decode_flops(64, 32, 4, 4), recompute_decode_flops(64, 32, 4, 4)
    one = mha_flops(1, 32)
    assert cached["qkv_projections"] == 64 * one["qkv_projections"]
    assert recomputed["qkv_projections"] == sum(t * one["qkv_projections"] for t in range(1, 65))
    assert cached["scores"] == 2 * 32 * 64 * 65 // 2  # step t attends t keys
    assert gqa_flops(64, 32, 4, 4, causal=True)["scores"] == cached["scores"]


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda: mha_flops(0, 8), ValueError, "seq_len must be positive, got seq_len=0"),
        (
            lambda: mha_flops(8, 2.0),
            TypeError,
            r"d_model must be an int, got d_model=2.0 \(float\)",
        ),
        (lambda: mha_flops(True, 8), TypeError, "seq_len must be an int, got seq_len=True"),
        (lambda: crossover_seq_len(-1), ValueError, "d_model must be positive, got d_model=-1"),
        (lambda: gqa_flops(4, 12, 5, 1), ValueError, "d_model=12 is not divisible by num_heads=5"),
        (
            lambda: gqa_flops(4, 12, 4, 3),
            ValueError,
            "num_heads=4 is not divisible by num_kv_heads=3",
        ),
        (
            lambda: gqa_flops(4, 12, 4, 2, kv_len=3),
            ValueError,
            "kv_len=3 must be at least seq_len=4",
        ),
        (
            lambda: gqa_flops(4, 12, 4, 2, causal=1),
            TypeError,
            "causal must be a bool, got causal=1",
        ),
        (lambda: visible_pairs(0, 3), ValueError, "n_q must be positive, got n_q=0"),
    ],
)
def test_errors_name_argument_and_value(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_numpy_integers_accepted_and_plain_ints_returned():
    np = pytest.importorskip("numpy")
    result = mha_flops(np.int64(16), np.int32(8))
    assert result == mha_flops(16, 8) and all(type(v) is int for v in result.values())
