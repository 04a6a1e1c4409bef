"""The Triton kernel itself, run on the CPU by Triton's interpreter, against SDPA.

triton reads TRITON_INTERPRET when ``@triton.jit`` decorates the kernel (at import of
mhalib.kernels.triton_flash), so the interpreted run happens in a subprocess started with
the variable set; this process only compares its outputs with the oracle.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

pytest.importorskip("triton", reason="triton is not installed (the kernel needs it)")

WORKER = Path(__file__).with_name("triton_interpret_worker.py")
ROOT = Path(__file__).resolve().parents[2]
cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.fixture(scope="module")
def interpreted_runs(tmp_path_factory):
    out = tmp_path_factory.mktemp("triton") / "runs.pt"
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(ROOT))
    env.pop("CUDA_VISIBLE_DEVICES", None)
    done = subprocess.run(
        [sys.executable, str(WORKER), str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return torch.load(out)


def _oracle(q, k, v, causal, scale):
    n_q, n_k = q.shape[2], k.shape[2]
    q, k, v = q.double(), k.double(), v.double()  # the same rounded inputs, exact arithmetic
    mask = torch.ones(n_q, n_k, dtype=torch.bool).tril(diagonal=n_k - n_q) if causal else None
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale, enable_gqa=True)
    return out if mask is None else out.masked_fill(~mask.any(-1, keepdim=True), 0.0)


def test_all_configurations_ran(interpreted_runs):
    configs = {run["config"][:3] for run in interpreted_runs}
    for dtype in ("float16", "bfloat16"):
        for d in (64, 128):
            for causal in (False, True):
                assert (dtype, d, causal) in configs


def test_every_gpu_block_shape_ran(interpreted_runs):
    from mhalib.kernels.triton_config import LAUNCH_CONFIGS

    ran = {(run["config"][1], run["blocks"]) for run in interpreted_runs}
    for (_, d), config in LAUNCH_CONFIGS.items():
        assert (d, (config.block_m, config.block_n)) in ran


def test_kernel_matches_sdpa(interpreted_runs):
    for run in interpreted_runs:
        dtype, d, causal, heads, kv_heads, n_q, n_k, scale = run["config"]
        out = run["out"]
        assert out.dtype == getattr(torch, dtype) and out.shape == (1, heads, n_q, d)
        assert not torch.isnan(out).any(), run["config"]
        tol = 1e-2 if dtype == "float16" else 3e-2  # output rounding of the half type
        torch.testing.assert_close(
            out.double(),
            _oracle(run["q"], run["k"], run["v"], causal, scale),
            atol=tol,
            rtol=tol,
            msg=lambda m, c=run["config"]: f"{c}: {m}",
        )


def test_queries_before_every_key_get_zeros(interpreted_runs):
    run = next(r for r in interpreted_runs if r["config"][5:7] == (100, 77))
    assert torch.equal(run["out"][:, :, :23], torch.zeros_like(run["out"][:, :, :23]))


def test_wrapper_errors_name_argument_and_value():
    from mhalib.kernels.triton_flash import is_interpreted, triton_flash_attention

    q = torch.randn(1, 1, 8, 64)
    with pytest.raises(
        TypeError, match="q.dtype=torch.float32 is not supported by the Triton kernel"
    ):
        triton_flash_attention(q, q, q)
    q48 = torch.randn(1, 1, 8, 48, dtype=torch.float16)
    with pytest.raises(ValueError, match="head dim d=48 is not supported by the Triton kernel"):
        triton_flash_attention(q48, q48, q48)
    if not is_interpreted():
        half = q.half()
        with pytest.raises(ValueError, match="q.device=cpu: the Triton kernel needs a CUDA device"):
            triton_flash_attention(half, half, half)


@cuda
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_cuda_kernel_matches_sdpa(dtype, d, causal):
    from mhalib.kernels.triton_flash import triton_flash_attention

    for n in (128, 1000):
        q, k, v = (torch.randn(2, 4, n, d, device="cuda", dtype=dtype) for _ in range(3))
        expected = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        out = triton_flash_attention(q, k, v, causal=causal)
        torch.testing.assert_close(out, expected, atol=2e-2, rtol=2e-2)
