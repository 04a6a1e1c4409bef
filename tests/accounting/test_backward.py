"""Lesson 12's numbers against measurements: FLOPs of real autograd runs counted by
FlopCounterMode (and torch's own formula for FlashAttention's backward), and the bytes autograd
saves for backward, measured with saved_tensors_hooks on real layers."""

from __future__ import annotations

import math

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from mhalib.accounting.backward import (
    LSE_BYTES,
    attention_backward_flops,
    attention_forward_flops,
    flash_core_saved_bytes,
    naive_core_saved_bytes,
)
from mhalib.accounting.models import MODELS, ModelConfig
from mhalib.accounting.saved_tensors import (
    attention_layer,
    layer_saved_tensors,
    saved_for_backward,
)
from mhalib.nn import GroupedQueryAttention

aten = torch.ops.aten


def _naive(q, k, v):
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), -1) @ v


def _count(fn) -> int:
    counter = FlopCounterMode(display=False)
    with counter:
        fn()
    return counter.get_total_flops()


@pytest.mark.parametrize("n,d", [(64, 16), (200, 64), (37, 8)])
def test_forward_and_backward_flops_are_what_autograd_runs(n, d):
    """One head, one sequence: the forward's products and autograd's backward of the
    textbook formula, counted by FlopCounterMode."""
    q, k, v = (torch.randn(1, 1, n, d, requires_grad=True) for _ in range(3))
    forward = _count(lambda: _naive(q, k, v))
    out = _naive(q, k, v)
    backward = _count(lambda: out.backward(torch.randn_like(out)))
    assert forward == attention_forward_flops(n, d)
    assert backward == attention_backward_flops(n, d, recompute=False)  # p was kept


@pytest.mark.parametrize("n,d", [(256, 64), (1024, 128)])
def test_recompute_is_torchs_count_for_flash_attentions_backward(n, d):
    """The CUDA flash kernels' ops, run on the meta device: FlopCounterMode applies torch's own
    formulas, 4 N^2 d forward and 10 N^2 d backward per head."""
    q = torch.empty(1, 1, n, d, device="meta", dtype=torch.float16)
    counter = FlopCounterMode(display=False)
    with counter:
        r = aten._scaled_dot_product_flash_attention(q, q, q, 0.0, False, False)
        aten._scaled_dot_product_flash_attention_backward(q, q, q, q, r[0], r[1], r[2], r[3],
                                                           r[4], r[5], 0.0, False, r[6], r[7])
    by_op = {str(op): count for op, count in counter.get_flop_counts()["Global"].items()}
    assert by_op["aten._scaled_dot_product_flash_attention"] == attention_forward_flops(n, d)
    assert by_op["aten._scaled_dot_product_flash_attention_backward"] == \
        attention_backward_flops(n, d, recompute=True)


def test_ratios_are_flashattention_2s():
    """FlashAttention-2 (Dao, 2023, section 4.1) counts the backward at 2.5 times the forward's
    FLOPs because of the recomputation; without recomputation it is 2 times."""
    for n, d in [(1024, 64), (4096, 128), (3, 5)]:
        forward = attention_forward_flops(n, d)
        assert attention_backward_flops(n, d) / forward == 2.5
        assert attention_backward_flops(n, d, recompute=False) / forward == 2.0


def test_flop_arguments_are_named():
    with pytest.raises(TypeError, match="recompute must be a bool"):
        attention_backward_flops(8, 8, recompute=1)
    with pytest.raises(ValueError, match="seq_len must be positive, got seq_len=0"):
        attention_backward_flops(0, 8)


# -- saved bytes -------------------------------------------------------------------------------
SMALL_MHA = ModelConfig("small MHA", 1, 64, 4, 4, 16, 128, 100, "gelu", "layernorm", 2, True,
                        "all", True, 0, 0, 1, "test")
SMALL_GQA = ModelConfig("small GQA", 1, 64, 8, 2, 8, 128, 100, "swiglu", "rmsnorm", 2, True,
                        "none", False, 0, 0, 1, "test")


def _shapes(saved):
    return sorted((shape, dtype, size) for shape, dtype, size in saved.tensors)


@pytest.mark.parametrize("config", [SMALL_MHA, SMALL_GQA], ids=lambda c: c.name)
@pytest.mark.parametrize("causal", [False, True])
def test_meta_flash_layer_saves_what_the_real_layer_saves_on_cpu(config, causal):
    """The measurement runs on the meta device, where SDPA cannot pick its flash kernel; the
    layer calls that kernel itself. The real GroupedQueryAttention, on CPU tensors, saves the
    same tensors (shape, dtype, bytes)."""
    real = GroupedQueryAttention(config.d_model, config.num_heads, config.num_kv_heads,
                                 bias=config.attention_bias != "none", dtype=torch.bfloat16)
    x = torch.randn(2, 24, config.d_model, dtype=torch.bfloat16, requires_grad=True)
    _, on_cpu = saved_for_backward(real, x, causal=causal, exclude=tuple(real.parameters()))
    on_meta = layer_saved_tensors(config, 24, batch_size=2, core="flash", causal=causal)
    assert _shapes(on_cpu) == _shapes(on_meta)


@pytest.mark.parametrize("config", [SMALL_MHA, SMALL_GQA], ids=lambda c: c.name)
def test_naive_layer_computes_the_same_function(config):
    torch.manual_seed(0)
    flash = attention_layer(config, "flash", torch.float64)
    naive = attention_layer(config, "naive", torch.float64)
    naive.load_state_dict(flash.state_dict())
    x = torch.randn(2, 9, config.d_model, dtype=torch.float64)
    for causal in (False, True):
        torch.testing.assert_close(naive(x, causal=causal), flash(x, causal=causal))


@pytest.mark.parametrize("name,tokens", [("GPT-2 small", 1024), ("GPT-2 small", 4096),
                                         ("Mistral 7B", 2048)])
def test_naive_layer_keeps_p_where_flash_keeps_the_lse(name, tokens):
    """Per layer, the naive core keeps p (B H N^2 values) where the flash one keeps the float32
    lse; everything else (x, q, k, v, the output) is the same size. (With grouped K/V heads
    the naive core's reshapes copy q, k and v, and autograd keeps the copies instead of the
    projection's output: the same bytes.)"""
    config = MODELS[name]
    flash = layer_saved_tensors(config, tokens, batch_size=2)
    naive = layer_saved_tensors(config, tokens, batch_size=2, core="naive")
    p = naive_core_saved_bytes(tokens, config.num_heads, 2, bytes_per_element=2)
    lse = 2 * config.num_heads * tokens * LSE_BYTES
    assert naive.total_bytes - flash.total_bytes == p - lse


@pytest.mark.parametrize("name", ["GPT-2 small", "Llama-3.1 8B"])
def test_flash_core_keeps_out_and_a_float32_lse(name):
    """What the flash kernel saves beyond q, k and v, at a model's sizes: out and the lse."""
    config = MODELS[name]
    n, batch = 2048, 3
    q = torch.empty(batch, config.num_heads, n, config.head_dim, device="meta",
                    dtype=torch.bfloat16, requires_grad=True)
    k, v = (torch.empty(batch, config.num_kv_heads, n, config.head_dim, device="meta",
                        dtype=torch.bfloat16, requires_grad=True) for _ in range(2))
    _, saved = saved_for_backward(aten._scaled_dot_product_flash_attention_for_cpu, q, k, v,
                                  exclude=(q, k, v))
    assert sorted(dtype for _, dtype, _ in saved.tensors) == ["bfloat16", "float32"]
    assert saved.total_bytes == flash_core_saved_bytes(n, config.num_heads, config.head_dim,
                                                       batch, bytes_per_element=2)


def test_naive_core_keeps_p():
    q, k, v = (torch.empty(2, 12, 1024, 64, device="meta", dtype=torch.bfloat16,
                           requires_grad=True) for _ in range(3))
    _, saved = saved_for_backward(_naive, q, k, v, exclude=(q, k, v))
    assert saved.total_bytes == naive_core_saved_bytes(1024, 12, 2, bytes_per_element=2)
