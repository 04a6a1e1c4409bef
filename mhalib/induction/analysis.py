"""What lesson 08 measures on the trained model: patterns on repeated sequences, the weight each
head puts on the first token (attention sinks), a held-out batch, and heads picked by score.
Each helper is self-contained (seeded), so every notebook cell can call it on its own."""

from __future__ import annotations

import torch

from mhalib.induction.data import repeated_sequence, repeated_span_batch


def repeated_patterns(model, period: int = 12, batch_size: int = 64, seed: int = 1):
    """``(tokens (B, 2 period), patterns (L, B, H, 2 period, 2 period))`` of ``model`` on
    ``batch_size`` seeded sequences whose second half repeats the first."""
    generator = torch.Generator().manual_seed(seed)
    tokens = repeated_sequence(period, model.vocab_size, batch_size=batch_size,
                               generator=generator)
    with torch.no_grad():
        _, patterns = model(tokens, return_weights=True)  # (L, B, H, N, N)
    return tokens, patterns


def sink_score(weights: torch.Tensor) -> torch.Tensor:
    """``(..., N, N)`` causal weights -> ``(...)``: the mean weight on key 0 (the first token)
    over the queries ``i >= 1`` (query 0 can only look at key 0, so it is left out)."""
    return weights[..., 1:, 0].float().mean(dim=-1)


def uniform_sink_score(n: int) -> float:
    """The sink score of a head that spreads each query's weight evenly over its keys:
    query i puts 1 / (i + 1) on key 0."""
    return sum(1.0 / (i + 1) for i in range(1, n)) / (n - 1)


def held_out_batch(config, batch_size: int = 256, seed: int = 123):
    """``(tokens, copyable)``: a seeded batch like the training data, never trained on."""
    return repeated_span_batch(batch_size, config.seq_len, config.vocab_size, config.min_period,
                               config.max_period, torch.Generator().manual_seed(seed))


def top_heads(scores: torch.Tensor, layer: int, share: float = 0.5) -> list[tuple[int, int]]:
    """The heads of ``layer`` whose score is at least ``share`` of that layer's best: never
    empty (the best head always qualifies), whatever the scores came out as."""
    row = scores[layer]
    best = float(row.max())
    return [(layer, h) for h in range(row.shape[0]) if float(row[h]) >= share * best]


_ABLATIONS: dict = {}  # id(model) -> (model, config, base, rise)


def held_out_ablation(model, config):
    """``(base, rise)`` on :func:`held_out_batch`: the copy loss with every head on, and
    ``(L, H)`` how much it rises with each head alone switched off. Measured once per model and
    config in this process (later calls return the same numbers at once)."""
    from mhalib.induction.prune import head_ablation, pruned_loss

    cached = _ABLATIONS.get(id(model))
    if cached is None or cached[0] is not model or cached[1] != config:
        tokens, copyable = held_out_batch(config)
        base = pruned_loss(model, tokens, copyable)
        rise = head_ablation(model, tokens, copyable)
        _ABLATIONS[id(model)] = cached = (model, config, base, rise)
    return cached[2], cached[3].clone()
