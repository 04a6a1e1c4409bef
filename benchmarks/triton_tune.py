"""Time the Triton flash kernel's launch configurations on this CUDA GPU against SDPA.

    python benchmarks/triton_tune.py [--head-dims 64 128] [--seconds 200]

For each head dim, every (BLOCK_M, BLOCK_N, num_warps, num_stages) of a small grid is compiled
and timed at B=4, H=16, N=4096, bf16, full and causal (CUDA events, median of interleaved calls
with SDPA), its output checked against SDPA. The table is sorted by the worse of the two masks'
throughput ratios; the entry of :data:`mhalib.kernels.triton_config.LAUNCH_CONFIGS` in use is
marked. A configuration that does not compile (shared memory, registers) is listed as such.
Stops starting new configurations after ``--seconds``.
"""

from __future__ import annotations

import argparse
import itertools
import time

import torch
import torch.nn.functional as F
from triton_vs_sdpa import median_ms  # (benchmarks/ is on sys.path when run as a script)

SHAPE = dict(batch=4, heads=16, seq_len=4096)
GRID = [(bm, bn, w, s) for bm, bn, w, s in itertools.product(
    (64, 128), (32, 64, 128), (4, 8), (2, 3, 4)) if not (bm == 64 and w == 8)]


def launch(q, k, v, causal: bool, config) -> torch.Tensor:
    import triton

    from mhalib.kernels.triton_flash import _attn_fwd, kernel_arguments

    block_m, block_n, warps, stages = config
    out = torch.empty_like(q)
    grid = (triton.cdiv(q.shape[2], block_m), q.shape[0] * q.shape[1])
    _attn_fwd[grid](*kernel_arguments(q, k, v, out, q.shape[-1] ** -0.5),
                    HEAD_DIM=q.shape[-1], BLOCK_M=block_m, BLOCK_N=block_n, CAUSAL=causal,
                    UPCAST_DOT=False, num_warps=warps, num_stages=stages)
    return out


def _pair(q, k, v, causal: bool, config) -> list:
    """The kernel under ``config`` and SDPA, as calls without arguments."""
    return [lambda: launch(q, k, v, causal, config),
            lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)]


def main(argv=None) -> int:
    from mhalib.kernels.triton_config import launch_config
    from mhalib.kernels.triton_flash import device_arch

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--head-dims", type=int, nargs="+", default=[128, 64])
    parser.add_argument("--seconds", type=float, default=200.0)
    options = parser.parse_args(argv)
    started = time.perf_counter()
    print(f"# {torch.cuda.get_device_name()}, B={SHAPE['batch']} H={SHAPE['heads']} "
          f"N={SHAPE['seq_len']} bf16; ratio = SDPA time / Triton time (>= 0.7 is the target)")
    for d in options.head_dims:
        torch.manual_seed(0)
        q, k, v = (torch.randn(SHAPE["batch"], SHAPE["heads"], SHAPE["seq_len"], d,
                               device="cuda", dtype=torch.bfloat16) for _ in range(3))
        used = launch_config(device_arch(q), d)
        used = (used.block_m, used.block_n, used.num_warps, used.num_stages)
        rows = []
        for config in GRID:
            if time.perf_counter() - started > options.seconds:
                print(f"# time is up: {len(rows)} of {len(GRID)} configurations for d={d}")
                break
            ratios, errors = [], []
            try:
                for causal in (False, True):
                    out = launch(q, k, v, causal, config)
                    ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                    errors.append((out.float() - ref.float()).abs().max().item())
                    t_ours, t_sdpa = median_ms(_pair(q, k, v, causal, config), repeats=20)
                    ratios.append(t_sdpa / t_ours)
            except Exception as error:  # out of resources: not a candidate
                rows.append((-1.0, config, f"does not run: {type(error).__name__}"))
                continue
            note = f"full {ratios[0]:.2f}x, causal {ratios[1]:.2f}x, max diff {max(errors):.1e}"
            rows.append((min(ratios), config, note))
        print(f"\n## d_head={d} (in use: BLOCK_M, BLOCK_N, warps, stages = {used})\n")
        print("| BLOCK_M | BLOCK_N | warps | stages | worse ratio | |")
        print("|---:|---:|---:|---:|---:|---|")
        for worst, config, note in sorted(rows, key=lambda r: -r[0]):
            mark = " (in use)" if config == used else ""
            print(f"| {' | '.join(str(c) for c in config)} | {worst:.2f} | {note}{mark} |",
                  flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
