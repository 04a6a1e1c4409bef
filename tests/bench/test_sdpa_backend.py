"""The benchmark names the SDPA backend that ran, seen from below SDPA's entry point."""

import torch
import torch.nn.functional as F

from mhalib.bench.sdpa_backend import call_recording_sdpa_backend


def test_cpu_flash_kernel_is_named():
    q = torch.randn(1, 2, 16, 8)
    out, backends = call_recording_sdpa_backend(
        lambda: F.scaled_dot_product_attention(q, q, q, is_causal=True))
    assert backends == ["flash (CPU) (aten._scaled_dot_product_flash_attention_for_cpu)"]
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, q, q, is_causal=True))


def test_explicit_formula_is_reported_as_math():
    q = torch.randn(1, 2, 16, 8)
    _, backends = call_recording_sdpa_backend(lambda: torch.softmax(q @ q.mT, -1) @ q)
    assert backends == ["math (no fused kernel)"]


def test_backend_is_seen_inside_inference_mode_too():
    q = torch.randn(1, 2, 16, 8)  # made outside: inference tensors hide the backend
    with torch.inference_mode():
        _, backends = call_recording_sdpa_backend(
            lambda: F.scaled_dot_product_attention(q, q, q))
    assert backends[0].startswith("flash (CPU)")
