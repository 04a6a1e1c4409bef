"""What the benchmark measures: problem sizes for the two suites and the presets.

- layer suite: a whole self-attention layer, x (B, N, d_model) -> (B, N, d_model), with
  QKV and output projections, the same weights for every implementation;
- core suite: attention alone, q, k, v (B, H, N, d_head) -> (B, H, N, d_head), where the
  memory of the N x N scores shows.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LayerCase:
    batch: int
    seq_len: int
    d_model: int
    num_heads: int
    causal: bool

    def describe(self) -> str:
        mask = "causal" if self.causal else "full"
        return f"B={self.batch} N={self.seq_len} d_model={self.d_model} H={self.num_heads} {mask}"


@dataclass(frozen=True)
class CoreCase:
    batch: int
    num_heads: int
    seq_len: int
    head_dim: int
    causal: bool

    def describe(self) -> str:
        mask = "causal" if self.causal else "full"
        return f"B={self.batch} H={self.num_heads} N={self.seq_len} d_head={self.head_dim} {mask}"


def layer_cases(
    batch: int, seq_lens: tuple[int, ...], d_model: int, num_heads: int, causal_modes
) -> tuple[LayerCase, ...]:
    return tuple(
        LayerCase(batch, n, d_model, num_heads, causal) for n in seq_lens for causal in causal_modes
    )


def core_cases(
    batch: int, num_heads: int, seq_lens: tuple[int, ...], head_dim: int, causal_modes
) -> tuple[CoreCase, ...]:
    return tuple(
        CoreCase(batch, num_heads, n, head_dim, causal) for n in seq_lens for causal in causal_modes
    )


# The sizes of the course's performance targets (about 10 minutes on 2 CPU cores).
FULL = {
    "layer": {"batch": 8, "seq_lens": (1024, 2048), "d_model": 768, "num_heads": 12},
    "core": {"batch": 1, "num_heads": 8, "seq_lens": (8192,), "head_dim": 64},
    "repeats": 5,
}
# Tiny sizes for a smoke test (a few seconds).
QUICK = {
    "layer": {"batch": 2, "seq_lens": (32,), "d_model": 32, "num_heads": 4},
    "core": {"batch": 1, "num_heads": 2, "seq_lens": (64,), "head_dim": 16},
    "repeats": 2,
}
