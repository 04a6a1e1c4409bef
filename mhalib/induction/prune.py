"""Switching heads off and measuring what the loss does (head pruning by ablation).

A head is "pruned" by multiplying its output by 0 before the output projection, which is the
same as deleting its slice of W_O. Ablating heads one at a time shows which heads the model
relies on; removing them in order of least effect shows how many it can lose.
"""

from __future__ import annotations

import torch

from mhalib.induction.train import evaluate_loss


def head_mask(num_layers: int, num_heads: int, off=()) -> torch.Tensor:
    """``(num_layers, num_heads)`` float mask of ones with zeros at the ``(layer, head)`` in off."""
    mask = torch.ones(num_layers, num_heads)
    for layer, head in off:
        if not (0 <= layer < num_layers and 0 <= head < num_heads):
            raise ValueError(f"head (layer={layer}, head={head}) is outside a model with "
                             f"num_layers={num_layers}, num_heads={num_heads}")
        mask[layer, head] = 0.0
    return mask


def pruned_loss(model, tokens: torch.Tensor, copyable: torch.Tensor, off=()) -> float:
    """Loss on the copyable targets with the heads in ``off`` switched off."""
    mask = head_mask(model.num_layers, model.num_heads, off)
    return evaluate_loss(model, tokens, copyable, head_mask=mask)


def head_ablation(model, tokens: torch.Tensor, copyable: torch.Tensor) -> torch.Tensor:
    """``(num_layers, num_heads)``: how much the loss rises when that head alone is off."""
    base = pruned_loss(model, tokens, copyable)
    rise = torch.zeros(model.num_layers, model.num_heads)
    for layer in range(model.num_layers):
        for head in range(model.num_heads):
            rise[layer, head] = pruned_loss(model, tokens, copyable, [(layer, head)]) - base
    return rise


def pruning_curve(model, tokens: torch.Tensor, copyable: torch.Tensor, order) -> list[float]:
    """Loss after removing the first 0, 1, ..., len(order) heads of ``order`` (cumulative)."""
    order = list(order)
    return [pruned_loss(model, tokens, copyable, order[:count])
            for count in range(len(order) + 1)]
