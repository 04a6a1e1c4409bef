"""Training is seeded and learns; pruning measures the loss with heads off."""

import pytest
import torch

from mhalib.induction.data import repeated_sequence, repeated_span_batch
from mhalib.induction.prune import head_ablation, head_mask, pruned_loss, pruning_curve
from mhalib.induction.train import TrainConfig, evaluate_loss, train
from mhalib.reference import induction_score, previous_token_score

SHORT = TrainConfig(steps=40, warmup_steps=5, batch_size=16, d_model=32, seq_len=24,
                    max_period=10, vocab_size=24)


def eval_batch(config, seed=9, batch=64):
    return repeated_span_batch(batch, config.seq_len, config.vocab_size, config.min_period,
                               config.max_period, torch.Generator().manual_seed(seed))


def test_same_seed_same_model_and_history():
    model_a, history_a = train(SHORT, progress=False)
    model_b, history_b = train(SHORT, progress=False)
    assert history_a["loss"] == history_b["loss"]
    for a, b in zip(model_a.parameters(), model_b.parameters()):
        assert torch.equal(a, b)
    assert history_a["config"]["steps"] == 40


def test_training_lowers_the_loss_and_restores_threads():
    threads = torch.get_num_threads()
    model, history = train(SHORT, progress=False)
    assert torch.get_num_threads() == threads
    assert history["loss"][-1] < history["loss"][0]
    assert history["step"][0] == 0 and history["step"][-1] == SHORT.steps - 1


def test_pruning_helpers_agree_with_each_other():
    model, _ = train(SHORT, progress=False)
    tokens, copyable = eval_batch(SHORT)
    base = evaluate_loss(model, tokens, copyable)
    assert pruned_loss(model, tokens, copyable) == base
    rise = head_ablation(model, tokens, copyable)
    assert rise.shape == (model.num_layers, model.num_heads)
    assert abs(float(rise[0, 1]) - (pruned_loss(model, tokens, copyable, [(0, 1)]) - base)) < 1e-6
    curve = pruning_curve(model, tokens, copyable, [(0, 0), (1, 3)])
    assert len(curve) == 3 and curve[0] == base
    assert curve[2] == pruned_loss(model, tokens, copyable, [(0, 0), (1, 3)])


def test_head_mask_validation():
    mask = head_mask(2, 3, [(1, 2)])
    assert mask.tolist() == [[1, 1, 1], [1, 1, 0]]
    with pytest.raises(ValueError, match="layer=2"):
        head_mask(2, 3, [(2, 0)])


@pytest.mark.slow
def test_default_training_forms_previous_token_and_induction_heads():
    config = TrainConfig()
    model, history = train(config, progress=False)
    assert history["copy_loss"][-1] < 1.5  # guessing costs log(64) = 4.16
    period = 12
    batch = repeated_sequence(period, config.vocab_size, 64, torch.Generator().manual_seed(3))
    with torch.no_grad():
        _, patterns = model(batch, return_weights=True)
    mean = patterns.mean(dim=1)  # (L, H, N, N)
    assert previous_token_score(mean[0]).max() > 0.8
    assert induction_score(mean[1], period).max() > 0.5
    tokens, copyable = eval_batch(config, batch=128)
    previous_heads = [(0, h) for h in range(4) if previous_token_score(mean[0])[h] > 0.5]
    assert pruned_loss(model, tokens, copyable, previous_heads) > 2 * pruned_loss(
        model, tokens, copyable)
