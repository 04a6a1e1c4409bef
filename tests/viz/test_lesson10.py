"""Lesson 10 pictures: the cache table and explorer draw the given function, the MLA key
matrix has rank d_c, the decode trade and the RoPE coupling have the right numbers."""

import numpy as np
import torch

from mhalib.accounting.models import MODELS
from mhalib.viz.lesson10 import (
    cache_explorer,
    cache_figure,
    cache_table_rows,
    cache_variants,
    decode_trade,
    decode_trade_figure,
    rope_coupling,
    rope_coupling_figure,
    singular_values_figure,
)


def mla_cache(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
              bytes_per_element=2):
    return num_layers * (kv_lora_rank + rope_head_dim) * seq_len * batch_size * bytes_per_element


def test_cache_variants_of_deepseek_v3_and_llama():
    v3 = {v["kind"]: v for v in cache_variants(mla_cache, MODELS["DeepSeek-V3"])}
    assert v3["MLA"]["bytes_per_token"] == 70_272 and v3["MLA"]["published"]
    assert v3["MHA"]["bytes_per_token"] == 2 * 61 * 128 * 128 * 2
    assert v3["GQA"]["bytes_per_token"] == 2 * 61 * 8 * 128 * 2
    llama = {v["kind"]: v for v in cache_variants(mla_cache, MODELS["Llama-3.1 8B"])}
    assert llama["GQA"]["published"] and not llama["MLA"]["published"]
    assert llama["MLA"]["bytes_per_token"] == 32 * (512 + 64) * 2  # DeepSeek's proportions


def test_table_marks_the_published_kind():
    rows = {r["model"]: r for r in cache_table_rows(mla_cache, MODELS)}
    assert rows["DeepSeek-V3"]["MLA bytes/token"] == "70,272 *"
    assert rows["Mistral 7B"]["GQA bytes/token"].endswith("*")


def test_cache_figure_draws_the_given_function():
    fig = cache_figure(mla_cache, MODELS["DeepSeek-V2-Lite"], seq_len=1024, batch_size=2)
    widths = [patch.get_width() for patch in fig.axes[0].patches]
    assert np.isclose(widths[3], mla_cache(27, 512, 64, 1024, 2) / 2**30)


def test_explorer_redraws_on_each_control():
    box = cache_explorer(mla_cache, MODELS, model="DeepSeek-V3")
    box.model.value = "Llama-3.1 70B"
    box.tokens.value = 4096
    box.batch.value = 8
    assert box.redraws == 4


def test_mla_key_matrix_has_rank_d_c():
    w_dkv, w_uk = torch.randn(32, 6, dtype=torch.float64), torch.randn(6, 48, dtype=torch.float64)
    fig = singular_values_figure(torch.randn(32, 48), w_dkv @ w_uk, d_c=6)
    values = fig.axes[0].lines[1].get_ydata()
    assert (values[:6] > 1e-6).all() and (values[6:] < 1e-9).all()


def test_decode_trade_for_deepseek_v3():
    naive, absorbed = decode_trade(MODELS["DeepSeek-V3"])
    assert naive["read"] == 128 * (128 + 64 + 128) and absorbed["read"] == 576
    assert absorbed["mults"] == 128 * (512 + 64 + 512)
    assert len(decode_trade_figure(MODELS["DeepSeek-V3"]).axes) == 2


def test_rope_coupling_is_zero_only_at_offset_zero():
    w_q_h, w_uk_h = torch.randn(16, 8, dtype=torch.float64), torch.randn(6, 8, dtype=torch.float64)
    distance = rope_coupling(w_q_h, w_uk_h, [0, 1, 5, 20])
    assert distance[0] < 1e-12 and (distance[1:] > 1e-3).all()
    assert len(rope_coupling_figure(w_q_h, w_uk_h, max_offset=8).axes[0].lines[0].get_xdata()) == 9


def test_random_mla_weights_shapes():
    from mhalib.viz.lesson10 import random_mla_weights

    shapes = [tuple(w.shape) for w in random_mla_weights(16, 4, 8, 6, d_rope=2)]
    assert shapes == [(16, 6), (6, 32), (6, 32), (16, 32), (32, 16), (16, 8), (16, 2)]


def test_rotation_matrix_composes_by_offset():
    from mhalib.viz.lesson10 import rotation_matrix

    r = {p: rotation_matrix(8, p, dtype=torch.float64) for p in (0, 3, 7, 4)}
    torch.testing.assert_close(r[0], torch.eye(8, dtype=torch.float64))
    torch.testing.assert_close(r[3].T @ r[7], r[4])  # R(t).T R(s) = R(s - t)
    torch.testing.assert_close(r[7].T @ r[7], torch.eye(8, dtype=torch.float64))


def test_decoupled_rope_decodes_from_latents_and_one_shared_key():
    from mhalib.reference import absorb_mla_weights
    from mhalib.viz.lesson10 import random_mla_weights, rope_mla_attention, rope_mla_decode

    w_dkv, w_uk, w_uv, w_q, w_o, w_qr, w_kr = random_mla_weights(16, 4, 8, 6, d_rope=4,
                                                                  dtype=torch.float64)
    x = torch.randn(2, 7, 16, dtype=torch.float64)
    naive = rope_mla_attention(x, w_dkv, w_uk, w_uv, w_q, w_o, w_qr, w_kr, 4)
    latent_weights = absorb_mla_weights(w_uk, w_uv, w_q, w_o, 4)
    decoded, per_token = rope_mla_decode(x, w_dkv, w_qr, w_kr, *latent_weights, d_head=8)
    torch.testing.assert_close(decoded, naive)
    assert per_token == 6 + 4  # the latent and the shared RoPE key, not 4 heads of anything


def test_decoupled_rope_without_rope_part_is_refused():
    import pytest

    from mhalib.viz.lesson10 import random_mla_weights, rope_mla_attention

    weights = random_mla_weights(8, 2, 4, 3, d_rope=2)
    with pytest.raises(ValueError, match="w_kr.shape"):
        rope_mla_attention(torch.randn(1, 3, 8), *weights[:5], weights[5][:, :0],
                           weights[6][:, :0], 2)
