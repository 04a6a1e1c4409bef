"""Lesson 02 pictures: the hand-built heads do their jobs, and the head picker redraws."""

import numpy as np
import torch

from mhalib.viz.lesson02 import (
    designed_layer,
    head_explorer,
    head_weights,
    heads_figure,
    split_figure,
)


def torch_head_weights(layer):
    """Independent oracle: torch.nn.MultiheadAttention with the layer's weights."""
    d_model = layer.x.shape[-1]
    mha = torch.nn.MultiheadAttention(d_model, layer.num_heads, bias=False, batch_first=True,
                                      dtype=torch.float64)
    with torch.no_grad():
        fused = np.concatenate([layer.w_q, layer.w_k, layer.w_v], axis=1).T
        mha.in_proj_weight.copy_(torch.from_numpy(fused))
        mha.out_proj.weight.copy_(torch.from_numpy(layer.w_o.T))
        x = torch.from_numpy(layer.x)
        out, weights = mha(x, x, x, need_weights=True, average_attn_weights=False)
    return out.numpy(), weights[0].numpy()


def test_head_weights_match_torch():
    layer = designed_layer()
    out, weights = torch_head_weights(layer)
    assert np.allclose(head_weights(layer), weights, atol=1e-12)
    # with position one-hot values and W_O = I, output block h is head h's weights
    blocks = out[0].reshape(len(layer.tokens), layer.num_heads, -1).transpose(1, 0, 2)
    assert np.allclose(blocks, weights, atol=1e-12)


def test_each_head_does_its_job():
    layer = designed_layer()
    top = head_weights(layer).argmax(axis=-1)  # (H, N)
    n = len(layer.tokens)
    assert list(top[0]) == [0] + list(range(n - 1))  # previous token (first: itself)
    assert list(top[2]) == [0] * n  # first token
    assert list(top[3]) == list(range(n))  # current token
    same_word = head_weights(layer)[1]
    first, second = [i for i, t in enumerate(layer.tokens) if t == "the"]
    assert same_word[first, second] > 0.4 and same_word[second, first] > 0.4


def test_head_picker_redraws_the_chosen_head():
    box = head_explorer()
    assert box.picker.description == "head"
    assert len(box.picker.options) == 4
    before = box.redraws
    box.picker.value = 2
    assert box.redraws == before + 1


def test_static_figures_draw():
    layer = designed_layer()
    assert len(heads_figure(head_weights(layer), layer.tokens, layer.head_names).axes) == 8
    fig = split_figure(12, 3)
    first, second = fig.axes
    assert len(first.patches) == len(second.patches) == 12
    assert [t.get_text() for t in first.texts][:5] == ["h0", "h0", "h0", "h0", "h1"]
    assert [t.get_text() for t in second.texts][:4] == ["h0", "h1", "h2", "h0"]
