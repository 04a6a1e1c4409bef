"""A preallocated key/value cache for incremental (token by token) decoding.

During generation every new token needs the keys and values of all earlier tokens. The
cache keeps them so that each step projects only the new token: projection work stays
linear in the sequence length instead of quadratic.
"""

from __future__ import annotations

import torch

from mhalib import validate


class KVCache:
    """Keys and values of one attention layer, (B, G, max_seq_len, d_head) each.

    ``append(k_new, v_new)`` writes (B, G, n_new, d_head) at the end of what is stored
    and returns views of everything stored so far, (B, G, length, d_head).
    """

    def __init__(
        self,
        batch_size: int,
        num_kv_heads: int,
        head_dim: int,
        max_seq_len: int,
        dtype: torch.dtype = torch.float32,
        device=None,
    ) -> None:
        self.batch_size = validate.positive_int("batch_size", batch_size)
        self.num_kv_heads = validate.positive_int("num_kv_heads", num_kv_heads)
        self.head_dim = validate.positive_int("head_dim", head_dim)
        self.max_seq_len = validate.positive_int("max_seq_len", max_seq_len)
        if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
            raise TypeError(f"dtype must be a floating torch.dtype, got dtype={dtype!r}")
        shape = (self.batch_size, self.num_kv_heads, self.max_seq_len, self.head_dim)
        self.keys = torch.zeros(shape, dtype=dtype, device=device)  # (B, G, max_len, d_head)
        self.values = torch.zeros(shape, dtype=dtype, device=device)  # (B, G, max_len, d_head)
        self.length = 0

    @property
    def nbytes(self) -> int:
        """Bytes held by the key and value buffers (the whole preallocation)."""
        return self.keys.nbytes + self.values.nbytes

    def reset(self) -> None:
        """Forget what is stored (the buffers are reused)."""
        self.length = 0

    def append(self, k_new: torch.Tensor, v_new: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Store (B, G, n_new, d_head) keys and values; return all stored, (B, G, length, d)."""
        validate.tensor("k_new", k_new, 4, "(B, G, n_new, d_head)")
        validate.tensor("v_new", v_new, 4, "(B, G, n_new, d_head)")
        n_new = k_new.shape[2]
        expected = (self.batch_size, self.num_kv_heads, n_new, self.head_dim)
        validate.shape_equals("k_new", k_new, expected, "(B, G, n_new, d_head)")
        validate.shape_equals("v_new", v_new, expected, "(B, G, n_new, d_head)")
        if k_new.dtype != self.keys.dtype or v_new.dtype != self.keys.dtype:
            raise TypeError(
                f"k_new.dtype={k_new.dtype} and v_new.dtype={v_new.dtype} must match the "
                f"cache dtype={self.keys.dtype}"
            )
        end = self.length + n_new
        if end > self.max_seq_len:
            raise ValueError(
                f"cannot append n_new={n_new} positions: the cache holds length={self.length} "
                f"of max_seq_len={self.max_seq_len}"
            )
        self.keys[:, :, self.length : end] = k_new
        self.values[:, :, self.length : end] = v_new
        self.length = end
        return self.keys[:, :, :end], self.values[:, :, :end]  # (B, G, length, d_head) each
