"""Runs the Triton kernel under TRITON_INTERPRET=1 and saves inputs and outputs.

Started by test_triton_interpret.py in a fresh process, because triton decides between
compiling and interpreting when ``@triton.jit`` runs, i.e. when the kernel module is
imported. Usage: python triton_interpret_worker.py OUT_FILE
"""

from __future__ import annotations

import os
import sys

assert os.environ.get("TRITON_INTERPRET") == "1", "set TRITON_INTERPRET=1 before starting"

import torch  # noqa: E402

from mhalib.kernels.triton_config import LAUNCH_CONFIGS  # noqa: E402
from mhalib.kernels.triton_flash import is_interpreted, triton_flash_attention  # noqa: E402

# (dtype, head_dim, causal, heads, kv_heads, n_q, n_k, scale)
CONFIGS = [
    (dtype, d, causal, 1, 1, 128, 128, None)
    for dtype in ("float16", "bfloat16")
    for d in (64, 128)
    for causal in (False, True)
] + [
    ("float16", 64, True, 2, 1, 100, 77, None),  # ragged blocks, MQA, N_q > N_k
    ("bfloat16", 64, True, 2, 2, 30, 90, None),  # decoding-style: few queries, more keys
    ("float16", 64, False, 2, 1, 70, 70, 0.05),  # custom scale
]


# The block sizes the wrapper launches on GPUs (mhalib/kernels/triton_config.py), each with
# the head dim it is used for: (dtype, head_dim, causal, heads, kv_heads, n_q, n_k, scale)
# plus (BLOCK_M, BLOCK_N). Ragged, GQA, N_q < N_k: both key stages and every mask run.
GPU_BLOCK_CONFIGS = sorted(
    {
        ("float16", d, True, 2, 1, 150, 200, None, (config.block_m, config.block_n))
        for (_, d), config in LAUNCH_CONFIGS.items()
    }
) + [("bfloat16", 64, False, 2, 2, 130, 130, None, (128, 128))]


def main(path: str) -> None:
    assert is_interpreted()
    generator = torch.Generator().manual_seed(0)
    results = []
    runs = [config + (None,) for config in CONFIGS] + GPU_BLOCK_CONFIGS
    for dtype, d, causal, heads, kv_heads, n_q, n_k, scale, blocks in runs:
        dt = getattr(torch, dtype)
        q = torch.randn(1, heads, n_q, d, generator=generator).to(dt)
        k = torch.randn(1, kv_heads, n_k, d, generator=generator).to(dt)
        v = torch.randn(1, kv_heads, n_k, d, generator=generator).to(dt)
        block_m, block_n = blocks or (None, None)
        out = triton_flash_attention(
            q, k, v, causal=causal, scale=scale, block_m=block_m, block_n=block_n
        )
        results.append(
            {
                "config": (dtype, d, causal, heads, kv_heads, n_q, n_k, scale),
                "q": q,
                "k": k,
                "v": v,
                "out": out,
                "blocks": blocks,
            }
        )
    torch.save(results, path)


if __name__ == "__main__":
    main(sys.argv[1])
