"""Flash-attention forward pass in Triton: the kernel, then the wrapper that launches it.

Follows the structure of Triton's fused-attention tutorial: each program owns one block of
BLOCK_M queries of one (batch, head), streams the keys and values in blocks of BLOCK_N
with an online softmax (running max ``m_i`` and running sum ``l_i`` in float32, exp2 in
the log2 domain), and writes its output block once. The (N_q, N_k) scores never leave
on-chip memory.

Beyond the tutorial: any N (boundary blocks are masked), N_q != N_k with bottom-right
causal alignment, grouped K/V heads (GQA/MQA), and rows with no visible key give zeros.
Key blocks come in two stages, as in the tutorial: blocks every query of the program may
see in full (no mask), then the blocks that need the causal or boundary mask.

Register pressure: the key and value addresses are rebuilt in each loop step from a scalar
base pointer instead of being carried as (D, BLOCK_N) pointer tensors, and the running sum is
updated after the P @ V product. Launch parameters per architecture and head dim come from
:mod:`mhalib.kernels.triton_config`; with them ptxas reports no spills for sm_80 and sm_90
(tests/kernels/test_triton_compile.py, docs/benchmarks.md).

This module imports triton at the top; import it only through
:mod:`mhalib.kernels.dispatch`, which checks that triton is installed. With
``TRITON_INTERPRET=1`` set before this module is imported, the kernel runs on the CPU
through Triton's interpreter (slow, for tests at small sizes).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from mhalib import validate
from mhalib.kernels.tiled import check_qkv
from mhalib.kernels.triton_config import INTERPRETER_CONFIG, SUPPORTED_HEAD_DIMS, launch_config

SUPPORTED_DTYPES = (torch.float16, torch.bfloat16)


@triton.jit
def _attn_fwd_inner(
    acc, l_i, m_i, q,  # running state (BLOCK_M, D), (BLOCK_M,), (BLOCK_M,); q (BLOCK_M, D)
    k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd,
    offs_m, offs_n, offs_d, lo, hi, n_k, causal_offset, qk_scale,
    BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr, MASKED: tl.constexpr,
    UPCAST_DOT: tl.constexpr,
):
    """Fold key blocks [lo, hi) into the running softmax state of one query block.

    k_base, v_base: scalar pointers to this (batch, K/V head); the block's addresses are
    computed here, each step, so no pointer tensor stays live across the loop.
    """
    for start_n in range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        cols = start_n + offs_n  # (BLOCK_N,) key positions
        k_ptrs = k_base + cols[None, :] * stride_kn + offs_d[:, None] * stride_kd  # (D, BLOCK_N)
        v_ptrs = v_base + cols[:, None] * stride_vn + offs_d[None, :] * stride_vd  # (BLOCK_N, D)
        if MASKED:
            in_range = cols[None, :] < n_k  # (1, BLOCK_N)
            k = tl.load(k_ptrs, mask=in_range, other=0.0)  # (D, BLOCK_N): K^T
        else:
            k = tl.load(k_ptrs)
        if UPCAST_DOT:
            k = k.to(tl.float32)
        qk = tl.dot(q, k) * qk_scale  # (BLOCK_M, BLOCK_N), scores in the log2 domain
        if MASKED:
            allowed = in_range
            if CAUSAL:
                allowed = allowed & (cols[None, :] <= offs_m[:, None] + causal_offset)
            qk = tl.where(allowed, qk, float("-inf"))
        m_ij = tl.maximum(m_i, tl.max(qk, 1))  # (BLOCK_M,) new running max
        m_shift = tl.where(m_ij == float("-inf"), 0.0, m_ij)  # no -inf - -inf = NaN
        p = tl.math.exp2(qk - m_shift[:, None])  # (BLOCK_M, BLOCK_N) unnormalised weights
        alpha = tl.math.exp2(m_i - m_shift)  # (BLOCK_M,) rescales the old state
        l_ij = tl.sum(p, 1)
        if MASKED:
            v = tl.load(v_ptrs, mask=cols[:, None] < n_k, other=0.0)
        else:
            v = tl.load(v_ptrs)
        if UPCAST_DOT:
            v = v.to(tl.float32)
        acc = acc * alpha[:, None]
        acc = tl.dot(p.to(v.dtype), v, acc)  # (BLOCK_M, D) += p @ v
        l_i = l_i * alpha + l_ij  # updated last: alpha and l_ij are small, p is gone
        m_i = m_ij
    return acc, l_i, m_i


@triton.jit
def _attn_fwd(
    Q, K, V, Out, sm_scale,
    stride_qb, stride_qh, stride_qm, stride_qd,
    stride_kb, stride_kh, stride_kn, stride_kd,
    stride_vb, stride_vh, stride_vn, stride_vd,
    stride_ob, stride_oh, stride_om, stride_od,
    num_heads, group_size, n_q, n_k,
    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    CAUSAL: tl.constexpr, UPCAST_DOT: tl.constexpr,
):
    """One program: BLOCK_M queries of one (batch, head). Grid (cdiv(N_q, BLOCK_M), B * H)."""
    start_m = tl.program_id(0)
    off_bh = tl.program_id(1)
    off_b = off_bh // num_heads
    off_h = off_bh % num_heads
    off_kv = off_h // group_size  # K/V head shared by this query head

    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)  # (BLOCK_M,) query positions
    offs_n = tl.arange(0, BLOCK_N)  # (BLOCK_N,)
    offs_d = tl.arange(0, HEAD_DIM)  # (D,)
    q_ptrs = Q + off_b * stride_qb + off_h * stride_qh \
        + offs_m[:, None] * stride_qm + offs_d[None, :] * stride_qd  # (BLOCK_M, D)
    k_base = K + off_b * stride_kb + off_kv * stride_kh  # this (batch, K/V head)
    v_base = V + off_b * stride_vb + off_kv * stride_vh
    row_ok = offs_m[:, None] < n_q  # (BLOCK_M, 1)
    q = tl.load(q_ptrs, mask=row_ok, other=0.0)  # (BLOCK_M, D), stays on chip
    if UPCAST_DOT:  # the interpreter's tl.dot misreads bfloat16; never set on a GPU
        q = q.to(tl.float32)

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.4426950408889634  # fold log2(e) in: exp2 instead of exp

    causal_offset = n_k - n_q  # query i sits at key position i + causal_offset
    if CAUSAL:
        first_row = start_m * BLOCK_M
        # keys < full_hi are visible to every row of this block: no mask needed there
        full_hi = tl.maximum(tl.minimum(first_row + causal_offset + 1, n_k), 0)
        full_hi = (full_hi // BLOCK_N) * BLOCK_N
        # keys >= hi are hidden from every row of this block: skipped
        hi = tl.maximum(tl.minimum(first_row + BLOCK_M + causal_offset, n_k), 0)
    else:
        full_hi = (n_k // BLOCK_N) * BLOCK_N
        hi = n_k

    # stage 1: whole key blocks, no masking
    acc, l_i, m_i = _attn_fwd_inner(
        acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd,
        offs_m, offs_n, offs_d, 0, full_hi, n_k, causal_offset, qk_scale,
        BLOCK_N, CAUSAL, False, UPCAST_DOT,
    )
    # stage 2: the blocks on the causal diagonal and the ragged last block
    acc, l_i, m_i = _attn_fwd_inner(
        acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd,
        offs_m, offs_n, offs_d, full_hi, hi, n_k, causal_offset, qk_scale,
        BLOCK_N, CAUSAL, True, UPCAST_DOT,
    )
    l_i = tl.where(l_i == 0.0, 1.0, l_i)  # a row that saw no key: 0 / 1 = 0
    acc = acc / l_i[:, None]
    o_ptrs = Out + off_b * stride_ob + off_h * stride_oh \
        + offs_m[:, None] * stride_om + offs_d[None, :] * stride_od
    tl.store(o_ptrs, acc.to(Out.dtype.element_ty), mask=row_ok)


def is_interpreted() -> bool:
    """True when the kernel was built by Triton's CPU interpreter (TRITON_INTERPRET=1)."""
    return not isinstance(_attn_fwd, triton.runtime.JITFunction)


def triton_flash_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool = False,
    scale: float | None = None,
    block_m: int | None = None,
    block_n: int | None = None,
) -> torch.Tensor:
    """Launch the kernel. q: (B, H, N_q, d); k, v: (B, G, N_k, d), G divides H.

    float16/bfloat16, d in 16/32/64/128, a CUDA device (or the interpreter). Causal is
    bottom-right aligned. Returns (B, H, N_q, d) in q's dtype. block_m/block_n default to
    :func:`mhalib.kernels.triton_config.launch_config` for the device's architecture.
    """
    batch, heads, n_q, d, groups, n_k = check_qkv(q, k, v)
    validate.boolean("causal", causal)
    check_supported(q)
    if not q.is_cuda and not is_interpreted():
        raise ValueError(
            f"q.device={q.device}: the Triton kernel needs a CUDA device "
            "(or TRITON_INTERPRET=1 set before mhalib.kernels.triton_flash is imported)"
        )
    scale = d**-0.5 if scale is None else float(scale)
    config = INTERPRETER_CONFIG if is_interpreted() else launch_config(device_arch(q), d)
    block_m = config.block_m if block_m is None else block_m
    block_n = config.block_n if block_n is None else block_n
    out = torch.empty_like(q)  # (B, H, N_q, d)
    grid = (triton.cdiv(n_q, block_m), batch * heads)
    _attn_fwd[grid](
        *kernel_arguments(q, k, v, out, scale),
        HEAD_DIM=d, BLOCK_M=block_m, BLOCK_N=block_n, CAUSAL=causal,
        UPCAST_DOT=is_interpreted() and q.dtype == torch.bfloat16,
        num_warps=config.num_warps, num_stages=config.num_stages,
    )
    return out


def kernel_arguments(q, k, v, out, scale: float) -> tuple:
    """The kernel's runtime (non-constexpr) arguments, in order, for these tensors.

    Shared by the wrapper and :mod:`mhalib.kernels.flash_compile_check`, so the compile-time
    checks specialize the kernel exactly as a launch does (e.g. unit strides become constants).
    """
    heads, groups = q.shape[1], k.shape[1]
    return (
        q, k, v, out, scale,
        *q.stride(), *k.stride(), *v.stride(), *out.stride(),
        heads, heads // groups, q.shape[2], k.shape[2],
    )


def device_arch(q: torch.Tensor) -> int:
    """Compute capability of q's CUDA device as an int (8.0 -> 80, 9.0 -> 90)."""
    major, minor = torch.cuda.get_device_capability(q.device)
    return 10 * major + minor


def check_supported(q: torch.Tensor) -> None:
    """Raise unless q's dtype and head dim are ones the kernel is built for."""
    if q.dtype not in SUPPORTED_DTYPES:
        raise TypeError(
            f"q.dtype={q.dtype} is not supported by the Triton kernel (float16 or bfloat16)"
        )
    if q.shape[-1] not in SUPPORTED_HEAD_DIMS:
        raise ValueError(
            f"head dim d={q.shape[-1]} is not supported by the Triton kernel "
            f"(one of {SUPPORTED_HEAD_DIMS})"
        )
