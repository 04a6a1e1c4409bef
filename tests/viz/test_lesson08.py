"""Lesson 08 pictures: head grid, the layer/head selector, scores, ablation and pruning plots."""

import numpy as np
import torch

from mhalib.viz.lesson08 import (
    ablation_figure,
    head_explorer,
    head_grid_figure,
    head_label,
    loss_figure,
    pruning_figure,
    score_figure,
)


def patterns(layers=2, heads=3, n=6):
    w = torch.rand(layers, heads, n, n).tril()
    return w / w.sum(-1, keepdim=True)


def test_head_grid_has_one_panel_per_head():
    fig = head_grid_figure(patterns(), scores={"prev": np.zeros((2, 3))})
    assert len(fig.axes) == 6
    assert fig.axes[4].get_title().startswith("L1H1")


def test_explorer_dropdowns_redraw():
    box = head_explorer(patterns(), tokens=list("abcdef"), scores={"ind": np.ones((2, 3))})
    assert box.layer.description == "layer" and box.head.description == "head"
    box.head.value = 2
    box.layer.value = 0
    assert box.redraws == 3


def test_score_bars_show_the_scores():
    previous = np.array([[0.9, 0.1], [0.2, 0.3]])
    induction = np.array([[0.0, 0.1], [0.8, 0.05]])
    fig = score_figure(previous, induction)
    heights = [p.get_height() for p in fig.axes[0].patches]
    assert np.allclose(heights[:4], previous.ravel())
    assert np.allclose(heights[4:], induction.ravel())


def test_ablation_pruning_and_loss_figures():
    fig = ablation_figure(torch.tensor([[0.5, 0.0], [2.0, -0.1]]))
    assert len(fig.axes[0].texts) == 4
    fig = pruning_figure([0.5, 0.6, 3.0], [(0, 1), (1, 0)])
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["none", "L0H1", "L1H0"]
    fig = loss_figure({"step": [0, 25], "loss": [4.2, 3.0], "copy_loss": [4.2, 1.0],
                       "config": {"vocab_size": 64}})
    assert len(fig.axes[0].lines) >= 3
    assert head_label(1, 3) == "L1H3"
