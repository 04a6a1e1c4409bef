"""Parameter counts against real modules, and model configs against published sizes."""

from __future__ import annotations

import pytest
import torch

from mhalib.accounting.models import (
    MODELS,
    attention_params,
    model_kv_cache_bytes,
    table_rows,
    total_params,
)
from mhalib.accounting.params import gqa_param_count, mha_param_count, mqa_param_count
from mhalib.nn import GroupedQueryAttention


def _numel(module):
    return sum(p.numel() for p in module.parameters())


@pytest.mark.parametrize("d_model, heads", [(8, 2), (64, 8), (768, 12)])
@pytest.mark.parametrize("bias", [True, False])
def test_mha_param_count_matches_nn_multihead_attention(d_model, heads, bias):
    module = torch.nn.MultiheadAttention(d_model, heads, bias=bias, device="meta")
    assert mha_param_count(d_model, bias=bias) == _numel(module)


@pytest.mark.parametrize("heads, kv_heads", [(8, 8), (8, 2), (8, 1), (12, 4)])
@pytest.mark.parametrize("bias", [True, False])
def test_gqa_param_count_matches_linear_layers(heads, kv_heads, bias):
    d = 96
    kv_width = kv_heads * d // heads
    layers = torch.nn.ModuleList(
        torch.nn.Linear(d, width, bias=bias, device="meta") for width in (d, kv_width, kv_width, d)
    )
    assert gqa_param_count(d, heads, kv_heads, bias=bias) == _numel(layers)
    module = GroupedQueryAttention(d, heads, kv_heads, bias=bias, device="meta")
    assert gqa_param_count(d, heads, kv_heads, bias=bias) == _numel(module)


def test_mqa_and_mha_are_the_ends_of_gqa():
    assert gqa_param_count(512, 8, 8, bias=True) == mha_param_count(512, bias=True)
    assert mqa_param_count(512, 8) == 2 * 512 * 512 + 2 * 512 * 64


@pytest.mark.parametrize("name", sorted(MODELS))
def test_total_params_match_published_counts(name):
    config = MODELS[name]
    error = abs(total_params(config) - config.published_params)
    assert error <= config.published_unit // 2, (total_params(config), config.published_params)


def test_table_has_the_required_models_and_consistent_shapes():
    for name in (
        "GPT-2 small",
        "GPT-3 175B",
        "Llama-3.1 8B",
        "Llama-3.1 70B",
        "Llama-3.1 405B",
        "Mistral 7B",
    ):
        assert name in MODELS
    kinds = {config.attention_kind for config in MODELS.values()}
    assert kinds == {"MHA", "GQA", "MQA"}
    gqa_models = [c for c in MODELS.values() if c.attention_kind == "GQA"]
    assert len(gqa_models) >= 5  # Llama x3, Mistral, and at least one more
    for config in MODELS.values():
        assert config.num_heads % config.num_kv_heads == 0
        assert config.source


def test_seed_facts_about_heads():
    assert MODELS["GPT-2 small"].num_heads == 12 and MODELS["GPT-2 small"].d_model == 768
    assert MODELS["GPT-3 175B"].num_heads == 96 and MODELS["GPT-3 175B"].d_model == 12288
    assert MODELS["Llama-3.1 70B"].num_heads == 64 and MODELS["Llama-3.1 405B"].num_heads == 128


def test_attention_share_of_llama_8b():
    config = MODELS["Llama-3.1 8B"]
    per_layer = attention_params(config)
    assert per_layer == 4096 * 4096 * 2 + 4096 * 1024 * 2  # GQA: K and V are 4x narrower
    assert per_layer < 4 * 4096**2  # what plain MHA would cost (~67M)


def test_kv_cache_of_gqa_is_heads_over_kv_heads_smaller():
    llama = MODELS["Llama-3.1 8B"]
    as_mha = model_kv_cache_bytes(llama, 8192) * llama.num_heads // llama.num_kv_heads
    assert as_mha == 2 * 32 * 32 * 128 * 8192 * 2  # 4 GiB for MHA vs 1 GiB with 8 KV heads
    assert model_kv_cache_bytes(llama, 8192) == 2**30


def test_table_rows():
    rows = table_rows(seq_len=1024)
    assert [row["model"] for row in rows] == list(MODELS)
    for row in rows:
        assert row["params"] == total_params(MODELS[row["model"]])


def test_param_errors():
    with pytest.raises(TypeError, match="bias must be a bool, got bias='yes'"):
        mha_param_count(8, bias="yes")
    with pytest.raises(ValueError, match="d_model must be positive, got d_model=0"):
        mha_param_count(0)
    with pytest.raises(ValueError, match="num_heads=8 is not divisible by num_kv_heads=3"):
        gqa_param_count(64, 8, 3)
    with pytest.raises(ValueError, match="d_model=100 is not divisible by num_heads=8"):
        gqa_param_count(100, 8, 2)
