"""The tiled PyTorch path (CPU fallback of flash_attention) against SDPA."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from mhalib.kernels import backend_for, choose_backend, flash_attention, tiled_attention
from tests.largest_tensor import LargestTensor

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def _oracle(q, k, v, causal, scale=None):
    n_q, n_k = q.shape[2], k.shape[2]
    mask = torch.ones(n_q, n_k, dtype=torch.bool).tril(diagonal=n_k - n_q) if causal else None
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale, enable_gqa=True)
    return out if mask is None else out.masked_fill(~mask.any(-1, keepdim=True), 0.0)


@settings(max_examples=40, deadline=None)
@given(
    n_q=st.integers(1, 24),
    n_k=st.integers(1, 24),
    kv_heads=st.sampled_from([1, 2]),
    rep=st.sampled_from([1, 2, 3]),
    block_q=st.sampled_from([None, 1, 5, 16]),
    block_k=st.sampled_from([None, 1, 7, 32]),
    causal=st.booleans(),
)
def test_matches_sdpa(n_q, n_k, kv_heads, rep, block_q, block_k, causal):
    q = torch.randn(2, kv_heads * rep, n_q, 8, dtype=torch.float64)
    k = torch.randn(2, kv_heads, n_k, 8, dtype=torch.float64)
    v = torch.randn(2, kv_heads, n_k, 8, dtype=torch.float64)
    out = tiled_attention(q, k, v, causal=causal, block_q=block_q, block_k=block_k)
    assert out.shape == q.shape and not torch.isnan(out).any()
    torch.testing.assert_close(out, _oracle(q, k, v, causal))


def test_custom_scale_and_non_contiguous_inputs():
    qkv = torch.randn(2, 10, 3, 4, 8, dtype=torch.float64).permute(2, 0, 3, 1, 4)  # (3, B, H, N, d)
    q, k, v = qkv[0], qkv[1], qkv[2]
    assert not q.is_contiguous()
    out = flash_attention(q, k, v, causal=True, scale=0.3)
    torch.testing.assert_close(out, _oracle(q, k, v, True, scale=0.3))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision(dtype):
    q, k, v = (torch.randn(1, 4, 130, 64).to(dtype) for _ in range(3))
    q = q * 30  # large logits
    out = tiled_attention(q, k, v, causal=True)
    assert out.dtype == dtype and torch.isfinite(out).all()
    expected = _oracle(q.double(), k.double(), v.double(), True)  # same rounded inputs
    torch.testing.assert_close(out.double(), expected, atol=3e-2, rtol=3e-2)


def test_memory_is_blocks_not_n_squared():
    n = 512
    q, k, v = (torch.randn(1, 4, n, 64) for _ in range(3))
    with LargestTensor() as probe:
        tiled_attention(q, k, v, block_q=128, block_k=128)
    assert probe.largest == q.numel()  # the output; a block of scores is half of that
    with LargestTensor() as probe:
        tiled_attention(q, k, v, causal=True, block_q=64, block_k=256)
    assert probe.largest == q.numel()
    with LargestTensor() as probe:
        torch.softmax(q @ k.transpose(-2, -1), dim=-1)
    assert probe.largest == 4 * n * n  # the probe does see a score matrix when there is one


def test_default_blocks_respect_budget():
    from mhalib.kernels.tiled import SCORE_BLOCK_BYTES, _block_sizes

    for batch_heads, n in [(8, 8192), (96, 2048), (1, 100), (1000, 4096)]:
        block_q, block_k = _block_sizes(batch_heads, n, n, None, None)
        assert 1 <= block_q <= n and 1 <= block_k <= n
        assert batch_heads * block_q * block_k * 4 <= max(
            SCORE_BLOCK_BYTES, batch_heads * 16 * block_k * 4
        )


def test_dispatch_uses_tiled_on_cpu():
    q = torch.randn(1, 2, 5, 64, dtype=torch.float16)
    assert choose_backend(q) == ("tiled", "tensors on cpu: the Triton kernel needs CUDA")
    assert backend_for("cuda", torch.float32, 64)[0] == "tiled"
    assert "float16 or bfloat16" in backend_for("cuda", torch.float32, 64)[1]
    torch.testing.assert_close(flash_attention(q, q, q), tiled_attention(q, q, q))


def test_errors_name_argument_and_value():
    q = torch.randn(1, 4, 5, 8)
    with pytest.raises(ValueError, match="num_heads=4 is not divisible by num_kv_heads=3"):
        tiled_attention(q, torch.randn(1, 3, 5, 8), torch.randn(1, 3, 5, 8))
    with pytest.raises(
        ValueError, match=r"k.shape=\(1, 4, 5, 7\) does not match the expected shape \(1, 4, 5, 8\)"
    ):
        flash_attention(q, torch.randn(1, 4, 5, 7), torch.randn(1, 4, 5, 7))
    with pytest.raises(ValueError, match="block_k must be positive, got block_k=0"):
        tiled_attention(q, q, q, block_k=0)
    with pytest.raises(
        TypeError, match="v.dtype=torch.float16 does not match q.dtype=torch.float32"
    ):
        tiled_attention(q, q, q.half())


@cuda
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_cuda_dispatch_matches_sdpa(dtype):
    q, k, v = (torch.randn(2, 8, 300, 64, device="cuda", dtype=dtype) for _ in range(3))
    for causal in (False, True):
        expected = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        torch.testing.assert_close(
            flash_attention(q, k, v, causal=causal), expected, atol=2e-2, rtol=2e-2
        )


def test_importing_kernels_does_not_import_triton():
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ, PYTHONPATH=root)
    code = (
        "import sys, torch, mhalib.kernels as k; q = torch.randn(1, 1, 4, 8); "
        "k.flash_attention(q, q, q); print('triton' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert done.stdout.strip() == "False"


def test_backend_without_triton(monkeypatch):
    from mhalib.kernels import dispatch

    monkeypatch.setattr(dispatch, "triton_installed", lambda: False)
    assert dispatch.backend_for("cuda", torch.float16, 64) == ("tiled", "triton is not installed")
    assert dispatch.backend_for("cuda", torch.float16, 48)[0] == "tiled"
