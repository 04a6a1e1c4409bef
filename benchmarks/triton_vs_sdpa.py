"""The Triton flash-attention kernel against torch's SDPA on a CUDA GPU: forward TFLOP/s and
the ratio, at the course's target shape (B=4, H=16, N=4096, d_head=128, bf16) and around it.

    python benchmarks/triton_vs_sdpa.py            # the target rows, a few seconds
    python benchmarks/triton_vs_sdpa.py --sweep    # more lengths, head dims, fp16, GQA

Every row first checks the kernel's output against SDPA's (max |difference|), then times both
with CUDA events: ``--repeats`` timed calls after ``--warmup`` calls, median, the two
implementations interleaved call by call so that clocks and other load hit both alike. FLOPs
are the forward's two matrix products, 4 B H N_q N_k d (halved for a causal mask, as
FlashAttention's benchmarks count). Which SDPA backend ran is read by
:func:`mhalib.bench.sdpa_backend.call_recording_sdpa_backend`.
"""

from __future__ import annotations

import argparse
import statistics
import sys

import torch
import torch.nn.functional as F

TARGET = dict(batch=4, heads=16, kv_heads=16, seq_len=4096, head_dim=128)
DEVICE = "cuda"


def forward_flops(b: int, h: int, n_q: int, n_k: int, d: int, causal: bool) -> int:
    flops = 4 * b * h * n_q * n_k * d  # q k^T and p v, 2 FLOPs per multiply-add
    return flops // 2 if causal else flops


def sdpa(q, k, v, causal: bool):
    groups = q.shape[1] != k.shape[1]
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=groups)


def median_ms(fns, repeats: int, warmup: int = 1) -> list[float]:
    """Median milliseconds of each call in ``fns`` (CUDA events), the calls interleaved one
    by one after ``warmup`` rounds, so that clocks and other load hit them alike."""
    for _ in range(warmup):
        for fn in fns:
            fn()
    torch.cuda.synchronize()
    times = [[] for _ in fns]
    for _ in range(repeats):
        for fn, out in zip(fns, times):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            out.append(start.elapsed_time(end))
    return [statistics.median(t) for t in times]


def sdpa_backend(q, k, v, causal: bool) -> str:
    from mhalib.bench.sdpa_backend import call_recording_sdpa_backend

    try:
        return ", ".join(call_recording_sdpa_backend(lambda: sdpa(q, k, v, causal))[1])
    except Exception:  # the note is optional; the timing is not
        return "?"


def row(batch, heads, kv_heads, seq_len, head_dim, dtype, causal, repeats, warmup) -> dict:
    from mhalib.kernels.triton_flash import triton_flash_attention

    torch.manual_seed(0)
    q = torch.randn(batch, heads, seq_len, head_dim, device=DEVICE, dtype=dtype)
    k = torch.randn(batch, kv_heads, seq_len, head_dim, device=DEVICE, dtype=dtype)
    v = torch.randn(batch, kv_heads, seq_len, head_dim, device=DEVICE, dtype=dtype)
    ours = triton_flash_attention(q, k, v, causal=causal)
    theirs = sdpa(q, k, v, causal)
    error = (ours.float() - theirs.float()).abs().max().item()
    t_triton, t_sdpa = median_ms([lambda: triton_flash_attention(q, k, v, causal=causal),
                                  lambda: sdpa(q, k, v, causal)], repeats, warmup)
    flops = forward_flops(batch, heads, seq_len, seq_len, head_dim, causal)
    return {"shape": f"B={batch} H={heads} G={kv_heads} N={seq_len} d={head_dim}",
            "dtype": str(dtype).replace("torch.", ""), "causal": causal,
            "max_diff": error, "triton_ms": t_triton, "sdpa_ms": t_sdpa,
            "triton_tflops": flops / t_triton / 1e9, "sdpa_tflops": flops / t_sdpa / 1e9,
            "ratio": t_sdpa / t_triton, "backend": sdpa_backend(q, k, v, causal)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sweep", action="store_true", help="more shapes than the target")
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    options = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("error: needs a CUDA GPU (torch.cuda.is_available() is False)", file=sys.stderr)
        return 2
    import triton

    shapes = [dict(TARGET, dtype=torch.bfloat16, causal=c) for c in (False, True)]
    if options.sweep:
        for n in (1024, 2048, 8192, 16384):
            shapes += [dict(TARGET, seq_len=n, dtype=torch.bfloat16, causal=c)
                       for c in (False, True)]
        shapes += [dict(TARGET, head_dim=64, dtype=torch.bfloat16, causal=c)
                   for c in (False, True)]
        shapes += [dict(TARGET, dtype=torch.float16, causal=c) for c in (False, True)]
        shapes += [dict(TARGET, kv_heads=4, dtype=torch.bfloat16, causal=c)
                   for c in (False, True)]
    name = torch.cuda.get_device_name()
    print(f"# {name}, torch {torch.__version__}, triton {triton.__version__}, "
          f"median of {options.repeats} interleaved calls (CUDA events)")
    print("| shape | dtype | mask | max abs diff | Triton ms | SDPA ms | Triton TFLOP/s | "
          "SDPA TFLOP/s | Triton / SDPA throughput | SDPA backend |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---|")
    worst = None
    for spec in shapes:
        r = row(spec["batch"], spec["heads"], spec["kv_heads"], spec["seq_len"],
                spec["head_dim"], spec["dtype"], spec["causal"], options.repeats,
                options.warmup)
        print(f"| {r['shape']} | {r['dtype']} | {'causal' if r['causal'] else 'full'} | "
              f"{r['max_diff']:.2e} | {r['triton_ms']:.3f} | {r['sdpa_ms']:.3f} | "
              f"{r['triton_tflops']:.0f} | {r['sdpa_tflops']:.0f} | {r['ratio']:.2f}x | "
              f"{r['backend']} |", flush=True)
        if spec in shapes[:2]:
            worst = r["ratio"] if worst is None else min(worst, r["ratio"])
    print(f"\ntarget (B=4 H=16 N=4096 d=128 bf16, both masks): Triton >= 0.7x SDPA throughput: "
          f"worst {worst:.2f}x -> {'met' if worst >= 0.7 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
