"""The roofline model for lesson 11: published peaks of an H100 and the intensity of decoding.

A kernel that does F FLOPs while moving M bytes has arithmetic intensity I = F / M. On a
machine with peak compute P (FLOP/s) and memory bandwidth W (bytes/s) it runs at most at
min(P, I * W) FLOP/s: below the ridge point I = P / W it is limited by memory, above it by
compute. Plain Python numbers; no torch.

H100 SXM figures are NVIDIA's datasheet values (H100 Tensor Core GPU datasheet, SXM5 column):
BF16 Tensor Core 1,979 TFLOP/s *with 2:4 sparsity*, so 989 TFLOP/s dense, and 3.35 TB/s of
HBM3 bandwidth.
"""

from __future__ import annotations

from dataclasses import dataclass

from mhalib.validate import positive_int


@dataclass(frozen=True)
class Machine:
    """Peak compute (FLOP/s) and memory bandwidth (bytes/s) of one processor."""

    name: str
    peak_flops: float
    bandwidth: float
    source: str = ""

    @property
    def ridge_point(self) -> float:
        """FLOPs per byte at which the memory roof meets the compute roof."""
        return self.peak_flops / self.bandwidth

    def attainable_flops(self, intensity: float) -> float:
        """The roofline: min(peak, intensity * bandwidth), in FLOP/s."""
        return min(self.peak_flops, intensity * self.bandwidth)


H100_SXM = Machine(
    "H100 SXM (BF16 dense, HBM3)", peak_flops=989e12, bandwidth=3.35e12,
    source="NVIDIA H100 Tensor Core GPU datasheet, SXM5: BF16 Tensor Core 1,979 TFLOP/s with "
           "sparsity (989 TFLOP/s dense), GPU memory bandwidth 3.35 TB/s")


def mla_decode_intensity(num_heads: int, kv_lora_rank: int, rope_head_dim: int,
                         bytes_per_element: int = 2) -> float:
    """FLOPs per byte of one decode step of absorbed multi-head latent attention (DeepSeek).

    Per cached token the step reads one latent of ``kv_lora_rank`` values and one shared RoPE
    key of ``rope_head_dim`` values. Each of the ``num_heads`` heads scores its absorbed query
    against both (``2 * (kv_lora_rank + rope_head_dim)`` FLOPs) and sums the latents with its
    weights (``2 * kv_lora_rank``): every head reads the same bytes, like MQA with wide heads.
    """
    heads = positive_int("num_heads", num_heads)
    rank = positive_int("kv_lora_rank", kv_lora_rank)
    rope = positive_int("rope_head_dim", rope_head_dim)
    size = positive_int("bytes_per_element", bytes_per_element)
    flops_per_token = heads * (2 * (rank + rope) + 2 * rank)
    bytes_per_token = (rank + rope) * size
    return flops_per_token / bytes_per_token


def prefill_attention_intensity(num_heads: int, num_kv_heads: int, head_dim: int,
                                seq_len: int, bytes_per_element: int = 2) -> float:
    """FLOPs per byte of causal prefill attention of ``seq_len`` tokens by a fused kernel that
    reads Q, K, V once and writes the output once (dense count, no causal saving: an upper
    bound of the work, a lower bound of the traffic)."""
    heads = positive_int("num_heads", num_heads)
    kv_heads = positive_int("num_kv_heads", num_kv_heads)
    dim = positive_int("head_dim", head_dim)
    n = positive_int("seq_len", seq_len)
    size = positive_int("bytes_per_element", bytes_per_element)
    flops = 4 * heads * n * n * dim
    bytes_moved = (2 * heads + 2 * kv_heads) * n * dim * size  # Q and O, K and V
    return flops / bytes_moved
