"""Training the tiny model on repeated spans: seeded, CPU-only, with a tqdm progress bar."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F

from mhalib.induction.data import repeated_span_batch
from mhalib.induction.model import AttentionOnlyTransformer


@dataclass(frozen=True)
class TrainConfig:
    """Everything that decides the trained model (same config and seed: same model)."""

    vocab_size: int = 64
    d_model: int = 64
    num_layers: int = 2
    num_heads: int = 4
    seq_len: int = 48
    min_period: int = 4
    max_period: int = 20
    batch_size: int = 64
    steps: int = 500
    learning_rate: float = 1e-2
    warmup_steps: int = 50
    weight_decay: float = 0.01
    seed: int = 0


def build_model(config: TrainConfig) -> AttentionOnlyTransformer:
    return AttentionOnlyTransformer(config.vocab_size, config.d_model, config.num_layers,
                                    config.num_heads, max_len=config.seq_len)


def next_token_losses(model, tokens: torch.Tensor, head_mask=None) -> torch.Tensor:
    """Per-position cross-entropy of predicting ``tokens[:, t + 1]``: ``(B, T - 1)``."""
    logits = model(tokens[:, :-1], head_mask=head_mask)  # (B, T - 1, V)
    return F.cross_entropy(logits.transpose(1, 2), tokens[:, 1:], reduction="none")  # (B, T-1)


def evaluate_loss(model, tokens: torch.Tensor, copyable: torch.Tensor, head_mask=None) -> float:
    """Mean loss on the targets that the earlier copy determines (``copyable`` True)."""
    with torch.no_grad():
        losses = next_token_losses(model, tokens, head_mask)  # (B, T - 1)
    return float(losses[copyable].mean())


def _learning_rate(step: int, config: TrainConfig) -> float:
    """Linear warm-up, then cosine decay to a tenth of the peak."""
    if step < config.warmup_steps:
        return config.learning_rate * (step + 1) / config.warmup_steps
    progress = (step - config.warmup_steps) / max(1, config.steps - config.warmup_steps)
    return config.learning_rate * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


def train(config: TrainConfig = TrainConfig(), progress: bool = True, num_threads: int = 1):
    """Train from scratch; returns ``(model, history)``.

    The model is tiny, so one CPU thread is usually fastest (threads mostly wait on each
    other); ``num_threads`` applies during training only.

    ``history`` is a dict of lists sampled every 25 steps: ``step``, ``loss`` (all targets)
    and ``copy_loss`` (targets inside the copy, the ones an induction head can predict).
    """
    previous_threads = torch.get_num_threads()
    torch.set_num_threads(num_threads)
    try:
        return _train(config, progress)
    finally:
        torch.set_num_threads(previous_threads)


def _train(config: TrainConfig, progress: bool):
    from tqdm.auto import tqdm

    generator = torch.Generator().manual_seed(config.seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        model = build_model(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.learning_rate,
                                  weight_decay=config.weight_decay)
    history = {"step": [], "loss": [], "copy_loss": [], "config": asdict(config)}
    bar = tqdm(range(config.steps), desc="training", disable=not progress, mininterval=0.5)
    model.train()
    for step in bar:
        for group in optimizer.param_groups:
            group["lr"] = _learning_rate(step, config)
        tokens, copyable = repeated_span_batch(config.batch_size, config.seq_len,
                                               config.vocab_size, config.min_period,
                                               config.max_period, generator)
        losses = next_token_losses(model, tokens)  # (B, T - 1)
        loss = losses.mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        if step % 25 == 0 or step == config.steps - 1:
            copy_loss = float(losses.detach()[copyable].mean())
            history["step"].append(step)
            history["loss"].append(float(loss.detach()))
            history["copy_loss"].append(copy_loss)
            bar.set_postfix(loss=f"{float(loss.detach()):.3f}", copy_loss=f"{copy_loss:.3f}")
    model.eval()
    return model, history


_TRAINED: dict = {}  # TrainConfig -> (model, history), for trained_model


def trained_model(config: TrainConfig = TrainConfig(), progress: bool = True):
    """``train(config)``, once per config in this process: later calls return the same
    ``(model, history)`` at once. Lets every notebook cell ask for the trained model itself
    (in any order) while the training runs only once. A model trained before on this machine
    with the same config and code is loaded from disk instead (:mod:`mhalib.induction.stored`;
    ``MHALIB_CACHE_DIR=off`` trains every time). Do not modify the returned model."""
    from mhalib.induction import stored

    if config not in _TRAINED:
        found = stored.load(config, build_model)
        if found is None:
            found = train(config, progress=progress)
            stored.store(config, *found)
        elif progress:
            print(f"training: loaded the model this machine trained before with the same "
                  f"settings ({stored.stored_path(config)}; delete it to train again)")
        _TRAINED[config] = found
    return _TRAINED[config]
