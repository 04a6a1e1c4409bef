"""An attention-only transformer small enough to train on a laptop CPU in seconds.

Token and learned position embeddings, ``num_layers`` blocks of causal multi-head attention
added to the residual stream (pre-LayerNorm, no MLP), then a final LayerNorm and an
unembedding. Two-layer models of this kind learn the classic induction circuit: a
previous-token head in layer 0 and an induction head in layer 1 that reads it.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from mhalib import validate


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention that also returns its attention pattern."""

    def __init__(self, d_model: int, num_heads: int) -> None:
        super().__init__()
        validate.divisible("d_model", d_model, "num_heads", num_heads)
        self.num_heads = num_heads
        self.d_head = d_model // num_heads
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)
        self.out = nn.Linear(d_model, d_model, bias=False)

    def weights_as_matrices(self):
        """``(w_q, w_k, w_v, w_o)``, each ``(d_model, d_model)`` and applied as ``x @ W`` (the
        course's layout; ``nn.Linear`` stores ``(out, in)``). Head h owns columns
        ``h*d_head:(h+1)*d_head`` of ``w_q, w_k, w_v`` and the same rows of ``w_o``."""
        w_q, w_k, w_v = self.qkv.weight.detach().T.split(self.qkv.in_features, dim=1)
        return w_q, w_k, w_v, self.out.weight.detach().T

    def forward(self, x: torch.Tensor, head_mask: torch.Tensor | None = None, attention=None):
        """x (B, T, d_model), head_mask (H,) or None -> (out (B, T, d_model), weights (B, H, T, T)).

        ``head_mask[h] = 0`` removes head h's contribution (its pattern is still returned).
        ``attention``, when given, computes the layer instead of this module's own code:
        ``attention(x, w_q, w_k, w_v, w_o, num_heads) -> (out, weights)``, causal, with the
        weights of :meth:`weights_as_matrices` (no head mask then).
        """
        if attention is not None:
            if head_mask is not None:
                raise ValueError("head_mask cannot be combined with attention=...: the given "
                                 "attention function has no head mask")
            out, weights = attention(x, *self.weights_as_matrices(), self.num_heads)
            return out, weights
        batch, n, d_model = x.shape
        q, k, v = self.qkv(x).split(d_model, dim=-1)  # (B, T, d_model) each
        q, k, v = (t.view(batch, n, self.num_heads, self.d_head).transpose(1, 2)
                   for t in (q, k, v))  # (B, H, T, d_head)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)  # (B, H, T, T)
        future = torch.ones(n, n, dtype=torch.bool, device=x.device).triu(1)  # (T, T)
        weights = scores.masked_fill(future, float("-inf")).softmax(dim=-1)  # (B, H, T, T)
        heads = weights @ v  # (B, H, T, d_head)
        if head_mask is not None:
            heads = heads * head_mask.to(heads.dtype)[None, :, None, None]  # (B, H, T, d_head)
        merged = heads.transpose(1, 2).reshape(batch, n, d_model)  # (B, T, d_model)
        return self.out(merged), weights


class AttentionOnlyTransformer(nn.Module):
    """tokens (B, T) -> logits (B, T, vocab_size); see :meth:`forward` for patterns and masks."""

    def __init__(self, vocab_size: int, d_model: int = 64, num_layers: int = 2,
                 num_heads: int = 4, max_len: int = 64) -> None:
        super().__init__()
        self.vocab_size = validate.positive_int("vocab_size", vocab_size)
        self.num_layers = validate.positive_int("num_layers", num_layers)
        self.num_heads = validate.positive_int("num_heads", num_heads)
        self.max_len = validate.positive_int("max_len", max_len)
        d_model = validate.positive_int("d_model", d_model)
        self.embed = nn.Embedding(vocab_size, d_model)
        self.position = nn.Embedding(max_len, d_model)
        self.norms = nn.ModuleList(nn.LayerNorm(d_model) for _ in range(num_layers))
        self.layers = nn.ModuleList(CausalSelfAttention(d_model, num_heads)
                                    for _ in range(num_layers))
        self.final_norm = nn.LayerNorm(d_model)
        self.unembed = nn.Linear(d_model, vocab_size, bias=False)

    def forward(self, tokens: torch.Tensor, head_mask: torch.Tensor | None = None,
                return_weights: bool = False, attention=None):
        """Next-token logits ``(B, T, vocab_size)``.

        ``head_mask (num_layers, num_heads)`` of 0/1 switches heads off (None: all on).
        With ``return_weights=True`` also returns the patterns, ``(L, B, H, T, T)``.
        ``attention`` (see :meth:`CausalSelfAttention.forward`) replaces every layer's attention
        by another implementation of the same maths, for instance a learner's.
        """
        if tokens.dim() != 2:
            raise ValueError(f"tokens must be (B, T), got tokens.shape={tuple(tokens.shape)}")
        n = tokens.shape[1]
        if n > self.max_len:
            raise ValueError(f"tokens has T={n} positions, more than max_len={self.max_len}")
        if head_mask is not None and tuple(head_mask.shape) != (self.num_layers, self.num_heads):
            raise ValueError(f"head_mask.shape={tuple(head_mask.shape)} must be (num_layers, "
                             f"num_heads)=({self.num_layers}, {self.num_heads})")
        positions = torch.arange(n, device=tokens.device)  # (T,)
        resid = self.embed(tokens) + self.position(positions)  # (B, T, d_model)
        patterns = []
        for index, (norm, layer) in enumerate(zip(self.norms, self.layers)):
            mask = None if head_mask is None else head_mask[index]  # (H,)
            update, weights = layer(norm(resid), mask, attention)  # (B, T, d), (B, H, T, T)
            resid = resid + update
            patterns.append(weights)
        logits = self.unembed(self.final_norm(resid))  # (B, T, vocab_size)
        if return_weights:
            return logits, torch.stack(patterns)  # (L, B, H, T, T)
        return logits
