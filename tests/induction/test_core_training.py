"""Lesson 12's training runs: the data and its floor, the swappable core, and what the lesson
says about them (same curve for the same gradients, a leaky mask below the floor that
generates worse, a causal model the future cannot move)."""

import math
from dataclasses import replace

import pytest
import torch

from mhalib.induction.core_training import (
    CoreConfig,
    CoreTransformer,
    continuation_accuracy,
    future_influence,
    leaky_core,
    loss_floor,
    noisy_periodic_batch,
    sdpa_core,
    train_with_core,
    trained,
)


def test_the_config_is_the_one_the_lesson_describes():
    """Section 6's prose: one layer of two heads of width 16, 24 tokens from 16, period 6,
    copies kept with probability 0.6, 150 batches of 32."""
    config = CoreConfig()
    assert (config.num_layers, config.num_heads, config.d_model // config.num_heads) == (1, 2, 16)
    assert (config.seq_len, config.vocab_size, config.period, config.keep) == (24, 16, 6, 0.6)
    assert (config.steps, config.batch_size) == (150, 32)


def test_noisy_periodic_batch_copies_with_the_given_probability():
    generator = torch.Generator().manual_seed(0)
    tokens, copyable = noisy_periodic_batch(2000, 24, 16, 6, 0.6, generator)
    back = torch.zeros(2000, 23, dtype=torch.bool)  # target t + 1 equals token t + 1 - 6
    back[:, 5:] = tokens[:, 6:] == tokens[:, :-6]
    assert abs(back[copyable].float().mean().item() - (0.6 + 0.4 / 16)) < 0.01
    fresh = ~copyable & (torch.arange(23) >= 5)  # random tokens match by chance only
    assert abs(back[fresh].float().mean().item() - 1 / 16) < 0.01
    exact, copyable = noisy_periodic_batch(50, 24, 16, 6, 1.0, generator)
    back = torch.zeros(50, 23, dtype=torch.bool)
    back[:, 5:] = exact[:, 6:] == exact[:, :-6]
    assert back[copyable].all() and copyable.any()
    with pytest.raises(ValueError, match="keep=1.5"):
        noisy_periodic_batch(2, 24, 16, 6, 1.5)


def test_the_floor_is_the_cross_entropy_of_the_true_distribution():
    copyable = torch.tensor([[True, False, True, True]])
    keep, vocab = 0.6, 16
    top, rest = keep + (1 - keep) / vocab, (1 - keep) / vocab
    copy = -(top * math.log(top) + (vocab - 1) * rest * math.log(rest))
    want = (3 * copy + math.log(vocab)) / 4
    assert math.isclose(loss_floor(copyable, vocab, keep), want)
    assert math.isclose(loss_floor(copyable, vocab, 1.0), math.log(vocab) / 4)


def test_core_transformer_with_sdpa_is_lesson_08s_causal_model():
    """With PyTorch's causal core the model computes what AttentionOnlyTransformer computes
    with the same weights."""
    from mhalib.induction.model import AttentionOnlyTransformer

    config = CoreConfig()
    torch.manual_seed(0)
    mine = CoreTransformer(config, sdpa_core)
    theirs = AttentionOnlyTransformer(config.vocab_size, config.d_model, config.num_layers,
                                      config.num_heads, max_len=config.seq_len)
    theirs.load_state_dict(mine.state_dict(), strict=False)
    tokens = torch.randint(16, (3, 20))
    with torch.no_grad():
        torch.testing.assert_close(mine(tokens), theirs(tokens))
    with pytest.raises(ValueError, match="core only"):
        mine(tokens, return_weights=True)


@pytest.fixture(scope="module")
def runs():
    return {name: trained(name) for name in ("sdpa", "leaky")}


def test_a_hand_written_backward_gives_the_same_curve(runs):
    from mhalib.reference import flash_attention_backward
    from mhalib.viz.lesson12 import attention_with_lse

    class Core(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v):
            out, lse = attention_with_lse(q, k, v, causal=True)
            ctx.save_for_backward(q, k, v, out, lse)
            return out

        @staticmethod
        def backward(ctx, grad_out):
            return flash_attention_backward(*ctx.saved_tensors[:3], *ctx.saved_tensors[3:],
                                            grad_out, block_size=8, causal=True)

    _, history = train_with_core(Core.apply)
    gap = max(abs(a - b) for a, b in zip(history["loss"], runs["sdpa"][1]["loss"]))
    assert gap < 1e-4


def test_the_leak_goes_below_the_floor_and_generates_worse(runs):
    (honest, good), (leaky, bad) = runs["sdpa"], runs["leaky"]
    assert bad["loss"][-1] < 0.2 * good["floor"][-1] < good["floor"][-1] < good["loss"][-1] + 0.3
    assert min(good["fresh_loss"][-3:]) > 0.9 * math.log(16)  # no honest model beats log V
    assert bad["fresh_loss"][-1] < 0.1
    right_honest = continuation_accuracy(honest)[0]
    right_leaky = continuation_accuracy(leaky)[0]
    assert right_honest > 0.9 and right_leaky < 0.6


def test_with_perfect_copies_the_leaky_model_still_generates_well():
    """The lesson's aside: with keep = 1 the leaky model also learns the period."""
    config = replace(CoreConfig(), keep=1.0)
    model, history = train_with_core(leaky_core, config)
    assert history["fresh_loss"][-1] < 0.1
    assert continuation_accuracy(model, config)[0] > 0.9


def test_future_influence_separates_causal_from_leaky(runs):
    tokens, _ = noisy_periodic_batch(8, 24, 16, 6, 0.6, torch.Generator().manual_seed(3))
    assert future_influence(runs["sdpa"][0], tokens, 10) == 0.0
    assert future_influence(runs["leaky"][0], tokens, 10) > 1.0
    with pytest.raises(ValueError, match="position=23"):
        future_influence(runs["sdpa"][0], tokens, 23)
