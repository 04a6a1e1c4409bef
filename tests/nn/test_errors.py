"""Every argument error of the torch modules names the argument and its value."""

from __future__ import annotations

import pytest
import torch

from mhalib.nn import GroupedQueryAttention, MultiHeadAttention, attend


def test_d_model_not_divisible_by_num_heads():
    with pytest.raises(ValueError, match="^d_model=512 is not divisible by num_heads=7$"):
        MultiHeadAttention(512, 7)


def test_num_heads_not_divisible_by_num_kv_heads():
    with pytest.raises(ValueError, match="^num_heads=8 is not divisible by num_kv_heads=3$"):
        GroupedQueryAttention(64, 8, 3)


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"d_model": 64.0}, TypeError, "d_model must be an int, got d_model=64.0 \\(float\\)"),
        ({"num_heads": 0}, ValueError, "num_heads must be positive, got num_heads=0"),
        ({"num_kv_heads": True}, TypeError, "num_kv_heads must be an int, got num_kv_heads=True"),
        ({"bias": 1}, TypeError, "bias must be a bool, got bias=1 \\(int\\)"),
    ],
)
def test_constructor_argument_types(kwargs, error, message):
    args = {"d_model": 64, "num_heads": 8, "num_kv_heads": 2} | kwargs
    with pytest.raises(error, match=message):
        GroupedQueryAttention(**args)


def test_input_shape_dtype_and_device_errors():
    layer = MultiHeadAttention(16, 4)
    with pytest.raises(TypeError, match="query must be a torch.Tensor, got query of type list"):
        layer([[1.0]])
    with pytest.raises(
        ValueError,
        match=r"query must have 3 dimensions \(B, N, d_model\), got query.shape=\(4, 16\)",
    ):
        layer(torch.randn(4, 16))
    with pytest.raises(
        ValueError, match=r"query.shape=\(1, 4, 8\) has last dimension 8, expected d_model=16"
    ):
        layer(torch.randn(1, 4, 8))
    with pytest.raises(
        TypeError,
        match=r"query.dtype=torch.float64 does not match the layer's parameters \(torch.float32\)",
    ):
        layer(torch.randn(1, 4, 16, dtype=torch.float64))
    with pytest.raises(
        TypeError, match="query must be a floating-point tensor .* got query.dtype=torch.int64"
    ):
        layer(torch.ones(1, 4, 16, dtype=torch.long))
    with pytest.raises(
        ValueError, match=r"key.shape=\(1, 5, 16\) and value.shape=\(1, 6, 16\) must both be"
    ):
        layer(torch.randn(1, 4, 16), torch.randn(1, 5, 16), torch.randn(1, 6, 16))
    with pytest.raises(  # a wrong device is a TypeError, as mhalib.validate raises it
        TypeError, match=r"query.device=meta does not match the layer's parameters \(cpu\)"
    ):
        layer(torch.randn(1, 4, 16, device="meta"))


def test_mask_errors():
    layer = MultiHeadAttention(16, 4)
    x = torch.randn(2, 5, 16)
    with pytest.raises(
        TypeError,
        match=r"attn_mask must be a bool tensor \(True = may attend\), "
        r"got attn_mask.dtype=torch.float32",
    ):
        layer(x, attn_mask=torch.zeros(5, 5))
    with pytest.raises(
        ValueError,
        match=r"attn_mask.shape=\(5, 4\) does not broadcast to \(B, H, N_q, N_k\)=\(2, 4, 5, 5\)",
    ):
        layer(x, attn_mask=torch.ones(5, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"attn_mask.shape=\(3, 1, 5, 5\) does not broadcast"):
        layer(x, attn_mask=torch.ones(3, 1, 5, 5, dtype=torch.bool))
    with pytest.raises(TypeError, match="attn_mask must be a bool torch.Tensor, got type list"):
        layer(x, attn_mask=[[True]])
    with pytest.raises(TypeError, match="causal must be a bool, got causal=1"):
        layer(x, causal=1)
    with pytest.raises(TypeError, match="kv_cache must be a KVCache, got type dict"):
        layer(x, kv_cache={})


def test_attend_errors():
    q = torch.randn(1, 4, 3, 8)
    with pytest.raises(ValueError, match="num_heads=4 is not divisible by num_kv_heads=3"):
        attend(q, torch.randn(1, 3, 3, 8), torch.randn(1, 3, 3, 8))
    with pytest.raises(
        TypeError, match="k.dtype=torch.float64 does not match q.dtype=torch.float32"
    ):
        attend(q, q.double(), q.double())
    with pytest.raises(
        ValueError,
        match=r"k.shape=\(1, 4, 3, 4\) and v.shape=\(1, 4, 3, 4\) must both be "
        r"\(B=1, G, N_k, d_head=8\)",
    ):
        attend(q, q[..., :4], q[..., :4])
    with pytest.raises(
        ValueError, match=r"q must have 4 dimensions \(B, H, N_q, d_head\), got q.shape=\(4, 3, 8\)"
    ):
        attend(q[0], q, q)
