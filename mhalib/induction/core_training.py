"""Lesson 08's attention-only transformer trained with its attention core swapped (lesson 12).

:class:`CoreTransformer` is :class:`~mhalib.induction.model.AttentionOnlyTransformer` whose
layers call a function ``core(q, k, v) -> out`` on split heads (B, H, T, d) instead of their
own causal softmax, so the gradients flow through the core's own backward: PyTorch's
(:func:`sdpa_core`), a learner's ``torch.autograd.Function``, or a core whose mask leaks the
next token (:func:`leaky_core`).

The task is next-token prediction on sequences that repeat with a fixed period after a random
prefix, noisily (:func:`noisy_periodic_batch`): inside the repeats a token is the one a period
back with probability ``keep``, else a fresh random token; the prefix and the first span are
random. No model that sees only the past can do better than :func:`loss_floor` on it (log V
nats on a fresh token, the entropy of the copy-or-not mixture on the others). A model whose
mask shows it the next token can, and that is how a leak gives itself away. The noise matters
for the second half of the story: with perfect copies a leaky model learns the period as a
spare route and still generates well; with noisy copies it leans on the leak and generates
poorly (the lesson measures both).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from mhalib import validate
from mhalib.induction.model import AttentionOnlyTransformer


@dataclass(frozen=True)
class CoreConfig:
    """The small model and its training run (same config and seed: same model)."""

    vocab_size: int = 16
    d_model: int = 32
    num_layers: int = 1
    num_heads: int = 2
    seq_len: int = 24
    period: int = 6
    keep: float = 0.6  # probability that a token in the repeats copies the one a period back
    batch_size: int = 32
    steps: int = 150
    learning_rate: float = 1e-2
    warmup_steps: int = 10
    weight_decay: float = 0.01
    seed: int = 0


def sdpa_core(q, k, v):
    """PyTorch's causal attention: (B, H, T, d) -> (B, H, T, d)."""
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def leaky_core(q, k, v):
    """Causal attention whose mask is one off: query i also sees key i + 1, the next token."""
    n = q.shape[-2]
    sees = torch.ones(n, n, dtype=torch.bool, device=q.device).tril(1)  # j <= i + 1
    return F.scaled_dot_product_attention(q, k, v, attn_mask=sees)


class CoreTransformer(AttentionOnlyTransformer):
    """tokens (B, T) -> logits (B, T, vocab_size), every layer's attention computed by
    ``core(q, k, v)`` on (B, H, T, d_head) heads (its mask is the core's business)."""

    def __init__(self, config: CoreConfig, core) -> None:
        super().__init__(config.vocab_size, config.d_model, config.num_layers,
                         config.num_heads, max_len=config.seq_len)
        self.core = core

    def forward(self, tokens: torch.Tensor, head_mask=None, return_weights=False,
                attention=None):
        if head_mask is not None or return_weights or attention is not None:
            raise ValueError("CoreTransformer computes attention with its core only: "
                             "head_mask, return_weights and attention are not supported")
        batch, n = tokens.shape
        resid = self.embed(tokens) + self.position(torch.arange(n, device=tokens.device))
        for norm, layer in zip(self.norms, self.layers):
            q, k, v = layer.qkv(norm(resid)).split(resid.shape[-1], dim=-1)  # (B, T, d) x3
            q, k, v = (t.view(batch, n, layer.num_heads, layer.d_head).transpose(1, 2)
                       for t in (q, k, v))  # (B, H, T, d_head)
            heads = self.core(q, k, v)  # (B, H, T, d_head)
            resid = resid + layer.out(heads.transpose(1, 2).reshape(batch, n, -1))
        return self.unembed(self.final_norm(resid))  # (B, T, vocab_size)


def noisy_periodic_batch(batch_size: int, seq_len: int, vocab_size: int, period: int,
                         keep: float, generator: torch.Generator | None = None):
    """``(tokens (B, T) int64, copyable (B, T - 1) bool)``.

    Each sequence draws a prefix length in ``[0, T - 2 period]``; the prefix and the span after
    it (``period`` tokens) are uniform random tokens; from then on token t is token t - period
    with probability ``keep``, else a uniform random token. ``copyable[:, t]`` is True where
    the target ``tokens[:, t + 1]`` lies in the repeats.
    """
    batch_size = validate.positive_int("batch_size", batch_size)
    seq_len = validate.positive_int("seq_len", seq_len)
    vocab_size = validate.positive_int("vocab_size", vocab_size)
    period = validate.positive_int("period", period)
    if not 0.0 <= keep <= 1.0:
        raise ValueError(f"keep={keep} must be a probability in [0, 1]")
    if 2 * period > seq_len:
        raise ValueError(f"seq_len={seq_len} is too short for two spans of period={period}")
    tokens = torch.randint(vocab_size, (batch_size, seq_len), generator=generator)  # (B, T)
    start = torch.randint(seq_len - 2 * period + 1, (batch_size,), generator=generator)  # (B,)
    copies = torch.rand((batch_size, seq_len), generator=generator) < keep  # (B, T)
    position = torch.arange(seq_len)
    repeating = position[None, :] >= (start + period)[:, None]  # (B, T)
    for t in range(period, seq_len):  # in order: a copy of a copy reads the token as it is
        copy = repeating[:, t] & copies[:, t]
        tokens[:, t] = torch.where(copy, tokens[:, t - period], tokens[:, t])
    return tokens, repeating[:, 1:]


def loss_floor(copyable: torch.Tensor, vocab_size: int, keep: float) -> float:
    """The lowest mean cross-entropy a model that sees only the past can expect on targets
    with this ``copyable`` mask: log V on a fresh token; on a copyable one the entropy of
    "the token a period back with probability keep + (1 - keep) / V, any other with
    (1 - keep) / V"."""
    rest = (1.0 - keep) / vocab_size
    top = keep + rest
    copy_entropy = -(top * math.log(top) + (vocab_size - 1) * (rest * math.log(rest)
                                                               if rest > 0 else 0.0))
    share = float(copyable.float().mean())
    return share * copy_entropy + (1.0 - share) * math.log(vocab_size)


def batch(config: CoreConfig, generator: torch.Generator):
    """(tokens (B, T), copyable (B, T - 1)): one training batch of the task."""
    return noisy_periodic_batch(config.batch_size, config.seq_len, config.vocab_size,
                                config.period, config.keep, generator)


def _learning_rate(step: int, config: CoreConfig) -> float:
    if step < config.warmup_steps:
        return config.learning_rate * (step + 1) / config.warmup_steps
    progress = (step - config.warmup_steps) / max(1, config.steps - config.warmup_steps)
    return config.learning_rate * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


def train_with_core(core, config: CoreConfig = CoreConfig()):
    """Train a fresh :class:`CoreTransformer` (seeded: the same initial weights and batches
    whatever the core); returns ``(model, history)`` with, every 10 steps, ``loss`` (all
    targets), ``copy_loss`` (targets in the repeats), ``fresh_loss`` (targets no one can
    predict: uniform random tokens, log(vocab_size) nats at best) and ``floor``
    (:func:`loss_floor` of that batch)."""
    generator = torch.Generator().manual_seed(config.seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        model = CoreTransformer(config, core)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.learning_rate,
                                  weight_decay=config.weight_decay)
    history = {"step": [], "loss": [], "copy_loss": [], "fresh_loss": [], "floor": []}
    model.train()
    for step in range(config.steps):
        for group in optimizer.param_groups:
            group["lr"] = _learning_rate(step, config)
        tokens, copyable = batch(config, generator)
        logits = model(tokens[:, :-1])  # (B, T - 1, V)
        losses = F.cross_entropy(logits.transpose(1, 2), tokens[:, 1:], reduction="none")
        loss = losses.mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if step % 10 == 0 or step == config.steps - 1:
            detached = losses.detach()
            history["step"].append(step)
            history["loss"].append(float(loss.detach()))
            history["copy_loss"].append(float(detached[copyable].mean()))
            history["fresh_loss"].append(float(detached[~copyable].mean()))
            history["floor"].append(loss_floor(copyable, config.vocab_size, config.keep))
    model.eval()
    return model, history


def generate(model, prompt: torch.Tensor, new_tokens: int) -> torch.Tensor:
    """Greedy continuation: ``prompt (B, T0)`` -> ``(B, new_tokens)`` predicted one at a
    time, each from the sequence so far (no token after the last one exists yet)."""
    tokens = prompt
    with torch.no_grad():
        for _ in range(new_tokens):
            logits = model(tokens[:, -model.max_len:])  # (B, t, V)
            tokens = torch.cat([tokens, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    return tokens[:, prompt.shape[1]:]


def continuation_accuracy(model, config: CoreConfig = CoreConfig(), prompts: int = 64,
                          new_tokens: int = 6, seed: int = 1):
    """Share of generated tokens that continue the period correctly, on ``prompts`` held-out
    sequences whose repeats are exact (keep = 1), cut ``new_tokens`` before their end (inside
    the repeats); returns ``(accuracy, prompt (B, T0), generated (B, new_tokens), wanted
    (B, new_tokens))``."""
    generator = torch.Generator().manual_seed(seed)
    tokens, _ = noisy_periodic_batch(prompts, config.seq_len, config.vocab_size,
                                     config.period, 1.0, generator)
    cut = config.seq_len - new_tokens
    prompt, wanted = tokens[:, :cut], tokens[:, cut:]
    generated = generate(model, prompt, new_tokens)
    return float((generated == wanted).float().mean()), prompt, generated, wanted


CORES = {"sdpa": sdpa_core, "leaky": leaky_core}
_TRAINED: dict = {}  # (core name, CoreConfig) -> (model, history)


def trained(name: str, config: CoreConfig = CoreConfig()):
    """``train_with_core(CORES[name], config)``, once per (name, config) in this process, so
    that every notebook cell can ask for the run itself, in any order. Do not modify the
    returned model."""
    if name not in CORES:
        raise ValueError(f"name={name!r} must be one of {sorted(CORES)}")
    if (name, config) not in _TRAINED:
        _TRAINED[(name, config)] = train_with_core(CORES[name], config)
    return _TRAINED[(name, config)]


def future_influence(model, tokens: torch.Tensor, position: int, seed: int = 0) -> float:
    """The largest change of the logits at positions ``<= position`` when every token after
    ``position`` is replaced by another random token: 0 (to rounding) for a model that
    cannot see the future."""
    position = validate.non_negative_int("position", position)
    if position + 1 >= tokens.shape[1]:
        raise ValueError(f"position={position} leaves no later token in a sequence of "
                         f"{tokens.shape[1]}")
    generator = torch.Generator().manual_seed(seed)
    changed = tokens.clone()
    later = changed[:, position + 1:]
    changed[:, position + 1:] = (later + torch.randint(1, model.vocab_size, later.shape,
                                                       generator=generator)) % model.vocab_size
    with torch.no_grad():
        before = model(tokens)[:, :position + 1]
        after = model(changed)[:, :position + 1]
    return float((after - before).abs().max())
