"""Repeated-span data: the copies are real copies and the 'copyable' mask marks exactly them."""

import pytest
import torch

from mhalib.induction.data import repeated_sequence, repeated_span_batch


def test_batch_shapes_and_types():
    tokens, copyable = repeated_span_batch(16, 40, 50, 3, 12, torch.Generator().manual_seed(0))
    assert tokens.shape == (16, 40) and tokens.dtype == torch.int64
    assert copyable.shape == (16, 39) and copyable.dtype == torch.bool
    assert int(tokens.min()) >= 0 and int(tokens.max()) < 50


def test_every_copyable_target_repeats_an_earlier_token_at_the_period():
    tokens, copyable = repeated_span_batch(64, 48, 64, 4, 20, torch.Generator().manual_seed(1))
    for row, mask in zip(tokens, copyable):
        positions = torch.nonzero(mask).flatten() + 1  # target positions
        assert len(positions) > 0
        first = int(positions[0])  # first target of the repeats: start + period
        # the period is the smallest shift that explains every copyable target
        period = next(p for p in range(4, 21)
                      if all(row[t] == row[t - p] for t in positions.tolist()))
        assert first - period >= 0
        assert 4 <= period <= 20
        assert positions.tolist() == list(range(first, 48))  # repeats run to the end


def test_periods_and_starts_vary():
    tokens, copyable = repeated_span_batch(128, 48, 64, 4, 20, torch.Generator().manual_seed(2))
    firsts = {int(torch.nonzero(m).flatten()[0]) for m in copyable}
    assert len(firsts) > 10  # not one fixed position


def test_same_generator_seed_same_batch():
    a = repeated_span_batch(8, 30, 20, 2, 10, torch.Generator().manual_seed(5))
    b = repeated_span_batch(8, 30, 20, 2, 10, torch.Generator().manual_seed(5))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


def test_repeated_sequence_halves_match_and_span_tokens_are_distinct():
    seq = repeated_sequence(12, 64, batch_size=5, generator=torch.Generator().manual_seed(0))
    assert seq.shape == (5, 24)
    assert torch.equal(seq[:, :12], seq[:, 12:])
    assert all(len(set(row[:12].tolist())) == 12 for row in seq)


@pytest.mark.parametrize("kwargs,message", [
    ({"min_period": 10, "max_period": 5}, "min_period=10"),
    ({"seq_len": 20, "max_period": 12}, "seq_len=20"),
    ({"batch_size": 0}, "batch_size"),
])
def test_bad_arguments_name_the_argument(kwargs, message):
    args = {"batch_size": 2, "seq_len": 48, "vocab_size": 10, "min_period": 2, "max_period": 8}
    with pytest.raises(ValueError, match=message):
        repeated_span_batch(**{**args, **kwargs})
