"""Token sequences with repeated spans: the task on which induction heads appear.

After a random prefix, a span of random tokens is repeated until the sequence ends. Once
the first repeat has started, every next token can be read off an earlier occurrence: find
the earlier copy of the current token and predict the token that followed it. The span
length (the period) and the prefix length vary from sequence to sequence, so no fixed
positional offset solves the task; a model has to match content, which is what an induction
head does.
"""

from __future__ import annotations

import torch

from mhalib import validate


def repeated_span_batch(
    batch_size: int,
    seq_len: int,
    vocab_size: int,
    min_period: int,
    max_period: int,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """A batch of token sequences: a random prefix, then one random span repeated to the end.

    Each sequence draws its own period (span length) in ``[min_period, max_period]`` and its
    own prefix length, and the span occurs at least twice. Returns ``tokens (B, T)`` (int64)
    and ``copyable (B, T - 1)`` (bool): True where the next-token target ``tokens[:, t + 1]``
    can be read off an earlier occurrence (the first token of each repeat included, since the
    span before it is already complete).
    """
    batch_size = validate.positive_int("batch_size", batch_size)
    seq_len = validate.positive_int("seq_len", seq_len)
    vocab_size = validate.positive_int("vocab_size", vocab_size)
    min_period = validate.positive_int("min_period", min_period)
    max_period = validate.positive_int("max_period", max_period)
    if min_period > max_period:
        raise ValueError(f"min_period={min_period} is larger than max_period={max_period}")
    if 2 * max_period > seq_len:
        raise ValueError(f"seq_len={seq_len} is too short for two copies of max_period="
                         f"{max_period}")
    tokens = torch.randint(vocab_size, (batch_size, seq_len), generator=generator)  # (B, T)
    period = torch.randint(min_period, max_period + 1, (batch_size, 1), generator=generator)
    room = seq_len - 2 * period + 1  # (B, 1): possible prefix lengths
    start = (torch.rand((batch_size, 1), generator=generator) * room).long()  # (B, 1)
    position = torch.arange(seq_len)[None, :]  # (1, T)
    repeating = position >= start + period  # (B, T): inside the second or a later copy
    source = torch.where(repeating, start + (position - start) % period, position)  # (B, T)
    tokens = torch.gather(tokens, 1, source)  # (B, T): every repeat reads the first copy
    copyable = repeating[:, 1:]  # (B, T - 1): target t + 1 lies in a repeat
    return tokens, copyable


def repeated_sequence(
    period: int,
    vocab_size: int,
    batch_size: int = 1,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """``(B, 2 * period)`` int64: ``period`` random tokens followed by the same tokens again.

    The layout the lesson's ``induction_score`` expects (N = 2 * period). Tokens inside one
    span are distinct (when ``vocab_size >= period``), so "the earlier copy of this token" is
    unambiguous.
    """
    period = validate.positive_int("period", period)
    vocab_size = validate.positive_int("vocab_size", vocab_size)
    batch_size = validate.positive_int("batch_size", batch_size)
    if vocab_size >= period:
        keys = torch.rand((batch_size, vocab_size), generator=generator)  # (B, V)
        span = keys.argsort(dim=-1)[:, :period]  # (B, period): distinct tokens
    else:
        span = torch.randint(vocab_size, (batch_size, period), generator=generator)
    return torch.cat([span, span], dim=1)  # (B, 2 * period)
