"""Lesson 08's measurements: another attention plugged into the model, sinks, heads by score."""

from __future__ import annotations

import math

import torch

from mhalib.induction.analysis import (
    held_out_ablation,
    repeated_patterns,
    sink_score,
    top_heads,
    uniform_sink_score,
)
from mhalib.induction.model import AttentionOnlyTransformer
from mhalib.induction.train import TrainConfig, trained_model


def loop_attention(x, w_q, w_k, w_v, w_o, num_heads):
    """Causal MHA written with explicit loops over heads and queries: (out, weights)."""
    batch, n, d_model = x.shape
    d_head = d_model // num_heads
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    weights = torch.zeros(batch, num_heads, n, n)
    heads = torch.zeros(batch, n, d_model)
    for h in range(num_heads):
        cols = slice(h * d_head, (h + 1) * d_head)
        for i in range(n):
            scores = torch.einsum("bd,bjd->bj", q[:, i, cols], k[:, : i + 1, cols])
            scores = scores / math.sqrt(d_head)
            row = scores.softmax(dim=-1)  # (B, i + 1)
            weights[:, h, i, : i + 1] = row
            heads[:, i, cols] = torch.einsum("bj,bjd->bd", row, v[:, : i + 1, cols])
    return heads @ w_o, weights


def small_model():
    torch.manual_seed(0)
    return AttentionOnlyTransformer(vocab_size=11, d_model=16, num_layers=2, num_heads=4,
                                    max_len=12).eval()


def test_another_attention_in_the_model_gives_the_same_logits_and_patterns():
    model = small_model()
    tokens = torch.randint(0, 11, (3, 10))
    with torch.no_grad():
        logits, patterns = model(tokens, return_weights=True)
        theirs, their_patterns = model(tokens, return_weights=True, attention=loop_attention)
    torch.testing.assert_close(theirs, logits, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(their_patterns, patterns, atol=1e-6, rtol=1e-5)


def test_a_wrong_attention_changes_the_logits():
    def no_scale(x, w_q, w_k, w_v, w_o, num_heads):
        return loop_attention(x, w_q * math.sqrt(x.shape[-1] // num_heads), w_k, w_v, w_o,
                              num_heads)

    model = small_model()
    tokens = torch.randint(0, 11, (2, 8))
    with torch.no_grad():
        assert not torch.allclose(model(tokens, attention=no_scale), model(tokens), atol=1e-4)


def test_head_mask_and_attention_cannot_be_combined():
    model = small_model()
    try:
        model(torch.zeros(1, 4, dtype=torch.long), head_mask=torch.ones(2, 4),
              attention=loop_attention)
    except ValueError as error:
        assert "head_mask" in str(error)
    else:
        raise AssertionError("no ValueError")


def test_sink_score_is_the_mean_weight_on_the_first_token():
    n = 6
    uniform = torch.tril(torch.ones(n, n))
    uniform = uniform / uniform.sum(dim=-1, keepdim=True)
    assert math.isclose(float(sink_score(uniform)), uniform_sink_score(n), rel_tol=1e-6)
    sink = torch.zeros(2, n, n)
    sink[:, :, 0] = 1.0
    assert torch.equal(sink_score(sink), torch.ones(2))


def test_top_heads_is_never_empty():
    scores = torch.tensor([[0.009, 0.02, 0.015], [0.0, 0.0, 0.0]])
    assert top_heads(scores, 0) == [(0, 1), (0, 2)]
    assert top_heads(scores, 1) == [(1, 0), (1, 1), (1, 2)]


def test_trained_model_and_ablation_are_computed_once():
    config = TrainConfig(steps=2, batch_size=4, warmup_steps=1)
    first = trained_model(config, progress=False)
    assert trained_model(config, progress=False) is first
    model = first[0]
    base, rise = held_out_ablation(model, config)
    again, rise_again = held_out_ablation(model, config)
    assert again == base and torch.equal(rise, rise_again) and rise.shape == (2, 4)
    tokens, patterns = repeated_patterns(model, period=5, batch_size=3, seed=1)
    assert tokens.shape == (3, 10) and patterns.shape == (2, 3, 4, 10, 10)
    assert torch.equal(tokens[:, :5], tokens[:, 5:])
