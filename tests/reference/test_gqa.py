"""Lesson 06 answer key (torch): repeat_kv, grouped_query_attention, decode_with_cache."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from mhalib.accounting.flop_counter import count_flops
from mhalib.accounting.flops import decode_flops, gqa_flops
from mhalib.reference import decode_with_cache, grouped_query_attention, repeat_kv

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def _weights(d_model, heads, kv_heads, dtype=torch.float64, device="cpu", seed=0):
    generator = torch.Generator().manual_seed(seed)
    kv_width = kv_heads * (d_model // heads)
    shapes = [(d_model, d_model), (d_model, kv_width), (d_model, kv_width), (d_model, d_model)]
    return [
        (torch.randn(s, generator=generator, dtype=torch.float64) / d_model**0.5).to(device, dtype)
        for s in shapes
    ]


def _sdpa_oracle(x, w_q, w_k, w_v, w_o, heads, kv_heads, causal):
    batch, n, d = x.shape
    dh = d // heads
    q = (x @ w_q).view(batch, n, heads, dh).transpose(1, 2)
    k = (x @ w_k).view(batch, n, kv_heads, dh).transpose(1, 2)
    v = (x @ w_v).view(batch, n, kv_heads, dh).transpose(1, 2)
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
    return ctx.transpose(1, 2).reshape(batch, n, d) @ w_o


@settings(max_examples=30, deadline=None)
@given(groups=st.integers(1, 4), n_rep=st.integers(1, 4), n=st.integers(1, 5))
def test_repeat_kv_matches_repeat_interleave(groups, n_rep, n):
    x = torch.randn(2, groups, n, 3)
    out = repeat_kv(x, n_rep)
    assert out.shape == (2, groups * n_rep, n, 3)
    torch.testing.assert_close(out, x.repeat_interleave(n_rep, dim=1))
    for h in range(groups * n_rep):  # query head h reads group h // n_rep
        assert torch.equal(out[:, h], x[:, h // n_rep])


@settings(max_examples=30, deadline=None)
@given(
    batch=st.integers(1, 3),
    n=st.integers(1, 9),
    kv_heads=st.sampled_from([1, 2, 3]),
    rep=st.sampled_from([1, 2, 4]),
    d_head=st.integers(1, 6),
    causal=st.booleans(),
)
def test_gqa_matches_sdpa_enable_gqa(batch, n, kv_heads, rep, d_head, causal):
    heads = kv_heads * rep
    x = torch.randn(batch, n, heads * d_head, dtype=torch.float64)
    weights = _weights(heads * d_head, heads, kv_heads)
    out = grouped_query_attention(x, *weights, heads, kv_heads, causal=causal)
    expected = _sdpa_oracle(x, *weights, heads, kv_heads, causal)
    torch.testing.assert_close(out, expected)


def test_mha_end_matches_nn_multihead_attention():
    torch.manual_seed(0)
    module = torch.nn.MultiheadAttention(24, 4, bias=False, batch_first=True).double().eval()
    w_q, w_k, w_v = (w.T for w in module.in_proj_weight.detach().chunk(3))
    w_o = module.out_proj.weight.detach().T
    x = torch.randn(2, 7, 24, dtype=torch.float64)
    with torch.no_grad():
        expected = module(x, x, x, need_weights=False)[0]
    torch.testing.assert_close(grouped_query_attention(x, w_q, w_k, w_v, w_o, 4, 4), expected)


@settings(max_examples=15, deadline=None)
@given(n=st.integers(1, 8), kv_heads=st.sampled_from([1, 2, 4]), batch=st.integers(1, 2))
def test_decode_with_cache_equals_causal_gqa(n, kv_heads, batch):
    x = torch.randn(batch, n, 16, dtype=torch.float64)
    weights = _weights(16, 4, kv_heads)
    torch.testing.assert_close(
        decode_with_cache(x, *weights, 4, kv_heads),
        grouped_query_attention(x, *weights, 4, kv_heads, causal=True),
    )


def test_decode_projection_work_is_linear_in_n():
    """FlopCounterMode on the real calls: the total matches one projection per token."""
    d, heads, kv_heads = 32, 4, 2
    weights = _weights(d, heads, kv_heads)
    counted = {}
    for n in (4, 8, 16):
        x = torch.randn(1, n, d, dtype=torch.float64)
        counted[n] = count_flops(decode_with_cache, x, *weights, heads, kv_heads).total
        assert counted[n] == decode_flops(n, d, heads, kv_heads)["total"]
    per_token = gqa_flops(1, d, heads, kv_heads)
    projections = per_token["qkv_projections"] + per_token["output_projection"]
    attention_part = {n: counted[n] - n * projections for n in counted}
    assert attention_part[8] == 2 * 2 * d * sum(range(1, 9))  # scores + weighted sum
    # doubling N doubles the projection work (linear), while a recompute would quadruple it
    assert counted[16] - attention_part[16] == 2 * (counted[8] - attention_part[8])


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_low_precision_inputs_keep_dtype(dtype):
    x = torch.randn(2, 10, 32, dtype=torch.float64)
    weights = _weights(32, 4, 2)
    expected = grouped_query_attention(x, *weights, 4, 2, causal=True)
    low = [w.to(dtype) for w in weights]
    for fn in (
        lambda: grouped_query_attention(x.to(dtype), *low, 4, 2, causal=True),
        lambda: decode_with_cache(x.to(dtype), *low, 4, 2),
    ):
        out = fn()
        assert out.dtype == dtype
        tol = {torch.float16: 1e-2, torch.bfloat16: 5e-2, torch.float32: 1e-5}[dtype]
        torch.testing.assert_close(out.double(), expected, atol=tol, rtol=tol)


def test_fp16_huge_logits_do_not_overflow():
    d, heads = 64, 1
    x = torch.zeros(1, 3, d, dtype=torch.float64)
    x[0, :, 0] = torch.tensor([1.0, -1.0, 1.0])
    eye = torch.eye(d, dtype=torch.float64)
    w_q = eye * 320.0  # q.k = 320^2 = 102400 > float16 max; scaled logit 12800
    w_k = eye * 320.0
    expected = grouped_query_attention(x, w_q, w_k, eye, eye, heads, heads)
    out = grouped_query_attention(
        x.half(), w_q.half(), w_k.half(), eye.half(), eye.half(), heads, heads
    )
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out.double(), expected, atol=1e-3, rtol=1e-3)


def test_errors_name_argument_and_value():
    x = torch.randn(1, 3, 12)
    w = _weights(12, 4, 2, dtype=torch.float32)
    with pytest.raises(ValueError, match="^d_model=12 is not divisible by num_heads=5$"):
        grouped_query_attention(x, *w, 5, 1)
    with pytest.raises(ValueError, match="^num_heads=4 is not divisible by num_kv_heads=3$"):
        grouped_query_attention(x, *w, 4, 3)
    with pytest.raises(
        ValueError, match=r"w_k.shape=\(12, 6\) does not match the expected shape \(12, 12\)"
    ):
        grouped_query_attention(x, *w, 4, 4)
    with pytest.raises(
        TypeError, match="w_q.dtype=torch.float64 does not match x.dtype=torch.float32"
    ):
        grouped_query_attention(x, w[0].double(), *w[1:], 4, 2)
    with pytest.raises(
        ValueError, match=r"x must have 3 dimensions \(B, N, d_model\), got x.shape=\(3, 12\)"
    ):
        decode_with_cache(x[0], *w, 4, 2)
    with pytest.raises(TypeError, match="num_kv_heads must be an int, got num_kv_heads=2.0"):
        decode_with_cache(x, *w, 4, 2.0)
    with pytest.raises(TypeError, match="causal must be a bool, got causal='yes'"):
        grouped_query_attention(x, *w, 4, 2, causal="yes")
    with pytest.raises(ValueError, match="n_rep must be positive, got n_rep=0"):
        repeat_kv(torch.randn(1, 2, 3, 4), 0)
    with pytest.raises(
        ValueError, match=r"x must have 4 dimensions \(B, G, N, d\), got x.shape=\(2, 3, 4\)"
    ):
        repeat_kv(torch.randn(2, 3, 4), 2)


@cuda
def test_cuda_matches_cpu():
    x = torch.randn(2, 9, 32, dtype=torch.float64)
    weights = _weights(32, 8, 2)
    expected = grouped_query_attention(x, *weights, 8, 2, causal=True)
    cuda_w = [w.cuda().float() for w in weights]
    out = decode_with_cache(x.cuda().float(), *cuda_w, 8, 2)
    assert out.is_cuda
    torch.testing.assert_close(out.cpu().double(), expected, atol=1e-4, rtol=1e-4)
