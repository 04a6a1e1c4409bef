"""Lesson 06 pictures: the group map, the cache plot of the learner's function, the explorer."""

import numpy as np

from mhalib.accounting.models import MODELS
from mhalib.viz.lesson06 import (
    cache_variants,
    decode_cost_figure,
    group_map_figure,
    growth_exponent,
    kv_cache_explorer,
    kv_cache_figure,
)


def cache(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    return 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element


def test_group_map_shows_interleaved_and_tiled_assignments():
    fig = group_map_figure(8, 2)
    interleaved, tiled = (ax.images[0].get_array() for ax in fig.axes[:2])
    assert interleaved.shape == (2, 8)
    assert list(np.argmax(interleaved, axis=0)) == [0, 0, 0, 0, 1, 1, 1, 1]
    assert list(np.argmax(tiled, axis=0)) == [0, 1, 0, 1, 0, 1, 0, 1]


def test_cache_variants_of_real_models():
    assert [k for _, k in cache_variants(MODELS["Llama-3.1 70B"])] == [64, 8, 1]
    assert [k for _, k in cache_variants(MODELS["GPT-2 small"])] == [12, 1]


def test_cache_figure_draws_the_given_function():
    config = MODELS["Llama-3.1 8B"]
    fig = kv_cache_figure(cache, config, batch_size=2, max_len=4096)
    mha, gqa, mqa = fig.axes[0].lines[:3]
    n = mha.get_xdata()[-1]
    expected = cache(config.num_layers, 8, config.head_dim, int(n), 2) / 2**30
    assert np.isclose(gqa.get_ydata()[-1], expected)
    assert np.allclose(mha.get_ydata() / gqa.get_ydata(), 4)  # 32 query heads over 8 K/V
    assert np.allclose(gqa.get_ydata() / mqa.get_ydata(), 8)


def test_explorer_redraws_on_model_and_batch():
    box = kv_cache_explorer(cache, MODELS, model="Llama-3.1 8B")
    assert box.model.description == "model" and box.batch.description == "batch"
    box.model.value = "Llama-3.1 405B"
    box.batch.value = 4
    assert box.redraws == 3


def test_decode_cost_figure_and_growth_exponent():
    n = [8, 16, 32, 64]
    costs = {"seq_len": n, "cached_flops": [x**2 for x in n], "recompute_flops": [x**3 for x in n],
             "cached_s": [1e-3 * x for x in n], "recompute_s": [1e-4 * x**2 for x in n]}
    fig = decode_cost_figure(costs)
    assert len(fig.axes) == 2
    assert np.isclose(growth_exponent(n, costs["recompute_flops"]), 3)
    assert np.isclose(growth_exponent(n, costs["cached_flops"]), 2)
