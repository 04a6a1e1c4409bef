"""Lesson 12 helpers: the forward with its log-sum-exp, the softmax-gradient row and its
slider, the heatmaps, the saved-memory widget (measured curves), the tiled stepper's states,
loss curves and generation rows."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from mhalib.accounting.models import MODELS
from mhalib.viz.lesson12 import (
    attention_with_lse,
    flops_figure,
    generation_rows,
    gradient_heatmaps,
    loss_curves_figure,
    row_gradient,
    row_problem,
    saved_memory_explorer,
    saved_memory_figure,
    saved_rows,
    softmax_gradient_explorer,
    softmax_gradient_figure,
    tiled_backward_figure,
    tiled_backward_stepper,
    tiled_states,
)


@pytest.mark.parametrize("n_q,n_k,causal", [(5, 5, False), (4, 9, True), (7, 3, True)])
def test_attention_with_lse_is_sdpa_and_logsumexp(n_q, n_k, causal):
    q = torch.randn(2, 3, n_q, 4, dtype=torch.float64)
    k, v = torch.randn(2, 3, n_k, 4, dtype=torch.float64), torch.randn(2, 3, n_k, 6,
                                                                      dtype=torch.float64)
    out, lse = attention_with_lse(q, k, v, causal)
    sees = torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q) if causal else \
        torch.ones(n_q, n_k, dtype=torch.bool)
    scores = (q @ k.transpose(-2, -1) / 2.0).masked_fill(~sees, -math.inf)
    torch.testing.assert_close(lse, torch.logsumexp(scores, -1))
    live = sees.any(-1)
    torch.testing.assert_close(out[..., live, :], F.scaled_dot_product_attention(
        q[..., live, :], k, v, attn_mask=sees[live]))
    assert torch.equal(out[..., ~live, :], torch.zeros_like(out[..., ~live, :]))


def test_row_gradient_is_the_formula_and_vanishes_when_saturated():
    logits, grad_p = row_problem()
    found = row_gradient(logits, grad_p, 1.0)
    p = found["p"]
    assert np.isclose(p.sum(), 1.0)
    jacobian = np.diag(p) - np.outer(p, p)
    np.testing.assert_allclose(found["grad_s"], jacobian @ grad_p, atol=1e-12)
    norms = [np.linalg.norm(row_gradient(logits, grad_p, s)["grad_s"]) for s in (1, 2, 4, 8, 12)]
    assert all(a > b for a, b in zip(norms, norms[1:])) and norms[-1] < 1e-3


def test_softmax_gradient_slider_redraws():
    box = softmax_gradient_explorer()
    assert box.slider.description == "sharpness"
    box.slider.value = 6.0
    assert box.redraws == 2
    fig = softmax_gradient_figure(*row_problem(), 0.0)  # uniform weights
    assert "softmax(0 x logits)" in fig.axes[0].get_title()


def test_heatmaps_and_flops_figure_draw():
    p = torch.softmax(torch.randn(6, 6), -1)
    fig = gradient_heatmaps(p, torch.randn(6, 6), "title")
    assert len(fig.axes) == 4  # two images and their colour bars
    fig = flops_figure([{"what": "a", "measured": 4.0, "formula": 4.0}])
    assert fig.axes[0].get_xlabel().startswith("FLOPs")


def test_saved_rows_show_p_only_in_the_naive_layer():
    rows = saved_rows(MODELS["GPT-2 small"], 512)
    naive = [r for r in rows if r["core"] == "naive"]
    flash = [r for r in rows if r["core"] == "flash"]
    assert "(1, 12, 512, 512)" in [r["shape"] for r in naive]
    assert all("512, 512" not in r["shape"] for r in flash)
    assert "float32" in [r["dtype"] for r in flash]  # the log-sum-exp


def test_saved_memory_widget_redraws_with_measured_curves():
    box = saved_memory_explorer()
    assert box.model.value == "GPT-2 small" and box.batch.value == 1
    box.batch.value = 4
    assert box.redraws == 2
    fig = saved_memory_figure(MODELS["GPT-2 small"], 1, seq_lens=(512, 1024, 2048))
    naive, flash = (line.get_ydata() for line in fig.axes[0].lines)
    n = np.array([512, 1024, 2048])
    layers, heads = MODELS["GPT-2 small"].num_layers, MODELS["GPT-2 small"].num_heads
    p_minus_lse = layers * heads * n * (n * 2 - 4) / 2**30  # bfloat16 p, float32 lse
    np.testing.assert_allclose(naive - flash, p_minus_lse, rtol=1e-12)


def test_tiled_states_end_with_the_exact_gradient():
    states = tiled_states(n=24, block=6)
    assert len(states) == 4
    assert np.all(states[-1]["q_error"] < 1e-12)
    assert np.any(states[0]["q_error"][6:] > 0.01)  # later queries still miss blocks
    assert np.all(states[0]["q_error"][:6] < 1e-12)  # causal: queries 0..5 see block 0 only


def test_tiled_stepper_redraws_and_clamps():
    box = tiled_backward_stepper()
    assert box.slider.description == "blocks" and box.slider.max == 4
    box.slider.value = 3
    assert box.redraws == 2
    fig = tiled_backward_figure(tiled_states(), 99)
    assert "block 4 of 4" in fig.axes[0].get_title()


def test_loss_curves_and_generation_rows():
    history = {"step": [0, 10], "loss": [3.0, 2.0]}
    fig = loss_curves_figure({"a": history}, floor=1.5)
    assert "floor of the data: 1.50 nats" in [line.get_label() for line in fig.axes[0].lines]
    prompt = torch.arange(20).reshape(2, 10)
    wanted = torch.tensor([[1, 2], [3, 4]])
    rows = generation_rows(prompt, wanted, {"model": torch.tensor([[1, 5], [3, 4]])}, count=2)
    assert rows[0]["model"] == "1 [5]" and rows[1]["model"] == "3 4"
    assert rows[0]["prompt ends"] == "2 3 4 5 6 7 8 9"
