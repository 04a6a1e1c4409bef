"""A tiny attention-only transformer that learns induction heads on a CPU: about 15 s on a
laptop's cores, a minute or two on one busy core.

- :mod:`~mhalib.induction.data`: sequences with repeated spans (random tokens, then a copy).
- :mod:`~mhalib.induction.model`: ``AttentionOnlyTransformer`` that returns every head's
  attention pattern and accepts a mask that switches heads off.
- :mod:`~mhalib.induction.train`: a seeded training loop with a tqdm progress bar.
- :mod:`~mhalib.induction.prune`: the loss with heads switched off, one at a time or together.
- :mod:`~mhalib.induction.analysis`: patterns on repeated sequences, attention-sink weights,
  a held-out batch, heads picked by score.
"""

from __future__ import annotations

from mhalib.lazy import lazy_module_attributes

_HOME = {
    "TrainConfig": "mhalib.induction.train",
    "train": "mhalib.induction.train",
    "evaluate_loss": "mhalib.induction.train",
    "trained_model": "mhalib.induction.train",
    "repeated_patterns": "mhalib.induction.analysis",
    "sink_score": "mhalib.induction.analysis",
    "uniform_sink_score": "mhalib.induction.analysis",
    "held_out_batch": "mhalib.induction.analysis",
    "top_heads": "mhalib.induction.analysis",
    "held_out_ablation": "mhalib.induction.analysis",
    "AttentionOnlyTransformer": "mhalib.induction.model",
    "repeated_span_batch": "mhalib.induction.data",
    "repeated_sequence": "mhalib.induction.data",
    "head_ablation": "mhalib.induction.prune",
    "pruned_loss": "mhalib.induction.prune",
    "head_mask": "mhalib.induction.prune",
    "pruning_curve": "mhalib.induction.prune",
}

__getattr__, __dir__, __all__ = lazy_module_attributes("mhalib.induction", _HOME)
