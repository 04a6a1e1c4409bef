"""MultiHeadAttention against the independent oracle torch.nn.MultiheadAttention."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from mhalib.nn import MultiHeadAttention, causal_mask, padding_mask

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def _torch_mha(d_model, heads, bias=True, dtype=torch.float64, seed=0):
    torch.manual_seed(seed)
    module = torch.nn.MultiheadAttention(d_model, heads, bias=bias, batch_first=True)
    if bias:  # random biases, so that a bias mix-up cannot hide behind zeros
        with torch.no_grad():
            module.in_proj_bias.normal_()
            module.out_proj.bias.normal_()
    return module.to(dtype).eval()


def _oracle(module, query, key=None, value=None, **kwargs):
    key = query if key is None else key
    value = key if value is None else value
    with torch.no_grad():
        return module(query, key, value, need_weights=False, **kwargs)[0]


@pytest.mark.parametrize("bias", [True, False])
def test_self_attention_matches_torch(bias):
    module = _torch_mha(32, 4, bias=bias)
    layer = MultiHeadAttention.from_torch(module)
    x = torch.randn(3, 7, 32, dtype=torch.float64)
    torch.testing.assert_close(layer(x), _oracle(module, x))


def test_cross_attention_matches_torch():
    module = _torch_mha(24, 3)
    layer = MultiHeadAttention.from_torch(module)
    query = torch.randn(2, 5, 24, dtype=torch.float64)
    key, value = (
        torch.randn(2, 9, 24, dtype=torch.float64),
        torch.randn(2, 9, 24, dtype=torch.float64),
    )
    torch.testing.assert_close(layer(query, key, value), _oracle(module, query, key, value))


def test_causal_matches_torch_mask_with_inverted_convention():
    module = _torch_mha(32, 8)
    layer = MultiHeadAttention.from_torch(module)
    x = torch.randn(2, 11, 32, dtype=torch.float64)
    blocked = torch.triu(torch.ones(11, 11, dtype=torch.bool), diagonal=1)  # torch: True = blocked
    expected = _oracle(module, x, attn_mask=blocked)
    torch.testing.assert_close(layer(x, causal=True), expected)
    torch.testing.assert_close(layer(x, attn_mask=causal_mask(11)), expected)


def test_padding_mask_matches_key_padding_mask():
    module = _torch_mha(16, 2)
    layer = MultiHeadAttention.from_torch(module)
    x = torch.randn(3, 6, 16, dtype=torch.float64)
    lengths = torch.tensor([6, 2, 4])
    ignore = torch.arange(6)[None, :] >= lengths[:, None]  # (B, N) torch: True = ignore
    expected = _oracle(module, x, key_padding_mask=ignore)
    torch.testing.assert_close(layer(x, attn_mask=padding_mask(lengths, 6)), expected)


@settings(max_examples=25, deadline=None)
@given(
    batch=st.integers(1, 3),
    n_q=st.integers(1, 9),
    n_k=st.integers(1, 9),
    heads=st.sampled_from([1, 2, 3, 4]),
    d_head=st.integers(1, 6),
    bias=st.booleans(),
)
def test_random_shapes_match_torch(batch, n_q, n_k, heads, d_head, bias):
    module = _torch_mha(heads * d_head, heads, bias=bias)
    layer = MultiHeadAttention.from_torch(module)
    query = torch.randn(batch, n_q, heads * d_head, dtype=torch.float64)
    memory = torch.randn(batch, n_k, heads * d_head, dtype=torch.float64)
    out = layer(query, memory, memory)
    assert out.shape == (batch, n_q, heads * d_head)
    torch.testing.assert_close(out, _oracle(module, query, memory, memory))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_low_precision_on_cpu_close_to_float64(dtype):
    module = _torch_mha(64, 4)
    layer = MultiHeadAttention.from_torch(module).to(dtype)
    x = torch.randn(2, 33, 64, dtype=torch.float64)
    out = layer(x.to(dtype), causal=True)
    assert out.dtype == dtype
    blocked = torch.triu(torch.ones(33, 33, dtype=torch.bool), diagonal=1)
    expected = _oracle(module, x, attn_mask=blocked)
    tol = {torch.float16: 2e-2, torch.bfloat16: 8e-2, torch.float32: 1e-5}[dtype]
    torch.testing.assert_close(out.double(), expected, atol=tol, rtol=tol)


def test_gradients_match_torch_in_training_mode():
    module = _torch_mha(16, 4).train()  # dropout=0, so training mode is deterministic
    layer = MultiHeadAttention.from_torch(module)
    x1 = torch.randn(2, 5, 16, dtype=torch.float64, requires_grad=True)
    x2 = x1.detach().clone().requires_grad_(True)
    layer(x1, causal=True).square().sum().backward()
    blocked = torch.triu(torch.ones(5, 5, dtype=torch.bool), diagonal=1)
    module(x2, x2, x2, need_weights=False, attn_mask=blocked)[0].square().sum().backward()
    torch.testing.assert_close(x1.grad, x2.grad)
    torch.testing.assert_close(layer.qkv_proj.weight.grad, module.in_proj_weight.grad)


def test_from_torch_copies_instead_of_sharing():
    module = _torch_mha(8, 2)
    layer = MultiHeadAttention.from_torch(module)
    with torch.no_grad():
        module.in_proj_weight.zero_()
    assert layer.qkv_proj.weight.abs().sum() > 0


def test_load_torch_weights_into_existing_layer():
    module = _torch_mha(12, 3)
    layer = MultiHeadAttention(12, 3, dtype=torch.float64)
    layer.load_torch_weights(module)
    x = torch.randn(1, 4, 12, dtype=torch.float64)
    torch.testing.assert_close(layer(x), _oracle(module, x))


def test_from_torch_rejects_other_modules():
    with pytest.raises(
        TypeError, match="module must be a torch.nn.MultiheadAttention, got type Linear"
    ):
        MultiHeadAttention.from_torch(torch.nn.Linear(4, 4))


def test_from_torch_rejects_different_kdim():
    module = torch.nn.MultiheadAttention(8, 2, kdim=4, vdim=4)
    with pytest.raises(ValueError, match="kdim=4, vdim=4, embed_dim=8"):
        MultiHeadAttention.from_torch(module)


def test_from_torch_rejects_bias_kv():
    module = torch.nn.MultiheadAttention(8, 2, add_bias_kv=True)
    with pytest.raises(ValueError, match="add_bias_kv=True or add_zero_attn=True"):
        MultiHeadAttention.from_torch(module)


def test_load_torch_weights_rejects_shape_and_bias_mismatch():
    with pytest.raises(ValueError, match="embed_dim=8, num_heads=2; this layer has d_model=12"):
        MultiHeadAttention(12, 2).load_torch_weights(torch.nn.MultiheadAttention(8, 2))
    with pytest.raises(ValueError, match="module has bias=False but this layer has bias=True"):
        MultiHeadAttention(8, 2).load_torch_weights(torch.nn.MultiheadAttention(8, 2, bias=False))


@cuda
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_cuda_matches_torch(dtype):
    module = _torch_mha(64, 4, dtype=dtype).cuda()
    layer = MultiHeadAttention.from_torch(module)
    assert layer.out_proj.weight.is_cuda
    x = torch.randn(2, 40, 64, device="cuda", dtype=dtype)
    blocked = torch.triu(torch.ones(40, 40, dtype=torch.bool, device="cuda"), diagonal=1)
    tol = 1e-5 if dtype == torch.float32 else 3e-2
    torch.testing.assert_close(
        layer(x, causal=True), _oracle(module, x, attn_mask=blocked), atol=tol, rtol=tol
    )
