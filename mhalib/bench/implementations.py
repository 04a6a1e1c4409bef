"""The implementations being compared, built on shared inputs.

Each builder takes a case and its inputs and returns either a zero-argument callable that
computes the output, or a string saying why it does not run here (e.g. Triton without
CUDA). Every callable computes the same function, so outputs can be checked against the
``torch SDPA`` row before anything is timed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from mhalib.bench.cases import CoreCase, LayerCase
from mhalib.kernels.dispatch import backend_for
from mhalib.kernels.tiled import tiled_attention
from mhalib.nn.masks import causal_mask
from mhalib.nn.mha import MultiHeadAttention

BASELINE = "torch SDPA"  # the torch built-in every row is compared with
TORCH_MODULE = "nn.MultiheadAttention"


@dataclass
class LayerInputs:
    """x (B, N, d) and one set of weights in the layouts each implementation wants."""

    x: torch.Tensor  # (B, N, d_model)
    torch_module: torch.nn.MultiheadAttention  # eval mode, zero biases
    ours: MultiHeadAttention  # same weights
    w_q: torch.Tensor  # (d_model, d_model), applied as x @ w_q
    w_k: torch.Tensor
    w_v: torch.Tensor
    w_o: torch.Tensor


def make_layer_inputs(case: LayerCase, device, dtype, seed: int = 0) -> LayerInputs:
    torch.manual_seed(seed)
    module = torch.nn.MultiheadAttention(case.d_model, case.num_heads, batch_first=True)
    with torch.no_grad():  # zero biases: every implementation computes the same function
        module.in_proj_bias.zero_()
        module.out_proj.bias.zero_()
    module = module.to(device=device, dtype=dtype).eval()
    x = torch.randn(case.batch, case.seq_len, case.d_model, device=device, dtype=dtype)
    w_q, w_k, w_v = module.in_proj_weight.detach().chunk(3, dim=0)  # (d, d) each, (out, in)
    return LayerInputs(
        x=x,
        torch_module=module,
        ours=MultiHeadAttention.from_torch(module),
        w_q=w_q.T.contiguous(),
        w_k=w_k.T.contiguous(),
        w_v=w_v.T.contiguous(),
        w_o=module.out_proj.weight.detach().T.contiguous(),
    )


def layer_implementations(case: LayerCase, inputs: LayerInputs) -> dict[str, object]:
    """name -> callable, or name -> reason it is skipped."""
    x, causal, heads = inputs.x, case.causal, case.num_heads
    module = inputs.torch_module
    blocked = ~causal_mask(case.seq_len, device=x.device) if causal else None  # True = blocked

    def sdpa_layer():
        return _projected_layer(
            x,
            module,
            heads,
            lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal),
        )

    def torch_module_layer():
        return module(x, x, x, need_weights=False, attn_mask=blocked, is_causal=causal)[0]

    def tiled_layer():
        return _projected_layer(
            x, module, heads, lambda q, k, v: tiled_attention(q, k, v, causal=causal)
        )

    def triton_layer():
        from mhalib.kernels.triton_flash import triton_flash_attention

        return _projected_layer(
            x, module, heads, lambda q, k, v: triton_flash_attention(q, k, v, causal=causal)
        )

    from mhalib.reference.gqa import grouped_query_attention

    def explicit_layer():
        w = inputs
        return grouped_query_attention(x, w.w_q, w.w_k, w.w_v, w.w_o, heads, heads, causal)

    return {
        "numpy": _numpy_layer(case, inputs),
        "torch explicit": explicit_layer,
        BASELINE: sdpa_layer,
        TORCH_MODULE: torch_module_layer,
        "mhalib MultiHeadAttention": lambda: inputs.ours(x, causal=causal),
        "mhalib tiled": tiled_layer,
        "mhalib triton": _if_triton(triton_layer, x, case.d_model // heads),
    }


def core_implementations(case: CoreCase, q, k, v) -> dict[str, object]:
    """name -> callable (q, k, v all (B, H, N, d_head)), or name -> reason it is skipped."""
    causal = case.causal
    from mhalib.reference.flash import online_softmax_attention

    def triton_core():
        from mhalib.kernels.triton_flash import triton_flash_attention

        return triton_flash_attention(q, k, v, causal=causal)

    return {
        "torch explicit": lambda: _explicit_attention(q, k, v, causal),
        BASELINE: lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal),
        "reference online softmax": lambda: online_softmax_attention(q, k, v, 64, causal),
        "mhalib tiled": lambda: tiled_attention(q, k, v, causal=causal),
        "mhalib triton": _if_triton(triton_core, q, case.head_dim),
    }


def _projected_layer(x, module, heads, core):
    """Fused QKV projection, split heads, ``core`` attention, merge heads, output projection."""
    batch, n, d = x.shape
    qkv = F.linear(x, module.in_proj_weight, module.in_proj_bias)  # (B, N, 3 d)
    qkv = qkv.view(batch, n, 3, heads, d // heads).permute(2, 0, 3, 1, 4)  # (3, B, H, N, dh)
    ctx = core(qkv[0], qkv[1], qkv[2])  # (B, H, N, d_head)
    ctx = ctx.transpose(1, 2).reshape(batch, n, d)  # (B, N, d)
    return F.linear(ctx, module.out_proj.weight, module.out_proj.bias)  # (B, N, d)


def _explicit_attention(q, k, v, causal):
    """The textbook formula: builds the (B, H, N, N) scores and weights."""
    scores = (q * (1.0 / math.sqrt(q.shape[-1]))) @ k.transpose(-2, -1)  # (B, H, N, N)
    if causal:
        scores = scores.masked_fill(~causal_mask(q.shape[2], device=q.device), -math.inf)
    return torch.softmax(scores, dim=-1) @ v  # (B, H, N, d)


def _numpy_layer(case: LayerCase, inputs: LayerInputs):
    """The numpy answer key of lessons 02 and 04 (float32/float64 on a CPU only)."""
    x = inputs.x
    if x.device.type != "cpu" or x.dtype not in (torch.float32, torch.float64):
        return f"numpy runs on the CPU in float32/float64, not {x.device.type} {x.dtype}"
    try:
        from mhalib.reference.masks import causal_mask as np_causal_mask
        from mhalib.reference.masks import masked_attention
        from mhalib.reference.multi_head import merge_heads, multi_head_attention, split_heads
    except ImportError as error:  # the numpy lessons are not installed
        return f"numpy answer key unavailable ({error})"
    x_np = x.numpy()
    w_q, w_k, w_v, w_o = (w.numpy() for w in (inputs.w_q, inputs.w_k, inputs.w_v, inputs.w_o))
    heads = case.num_heads

    def run():
        if not case.causal:
            out = multi_head_attention(x_np, w_q, w_k, w_v, w_o, heads)  # (B, N, d)
        else:
            q, k, v = (split_heads(x_np @ w, heads) for w in (w_q, w_k, w_v))  # (B, H, N, dh)
            ctx, _ = masked_attention(q, k, v, np_causal_mask(case.seq_len))  # (B, H, N, dh)
            out = merge_heads(ctx) @ w_o  # (B, N, d)
        return torch.from_numpy(out)

    return run


def _if_triton(fn, t: torch.Tensor, head_dim: int):
    """``fn`` where the Triton kernel can run on tensors like ``t``, else the reason why not."""
    backend, reason = backend_for(t.device, t.dtype, head_dim)
    return fn if backend == "triton" else reason
