"""DeepSeek entries of the model table (lesson 10): configs as published, attention parameters
counted tensor by tensor, totals against the published 671B / 236B / 15.7B, MLA cache sizes."""

from __future__ import annotations

import pytest

from mhalib.accounting.kv_cache import kv_cache_bytes
from mhalib.accounting.models import (
    MODELS,
    attention_params,
    model_kv_cache_bytes,
    table_rows,
    total_params,
)
from mhalib.accounting.params import mla_param_count

# inference/configs/*.json of github.com/deepseek-ai/DeepSeek-V3 (config_16B.json is the shape
# of DeepSeek-V2-Lite, arXiv:2405.04434 appendix B.1; config_236B.json of DeepSeek-V2)
PUBLISHED_CONFIGS = {
    "DeepSeek-V3": {"vocab_size": 129280, "dim": 7168, "inter_dim": 18432, "moe_inter_dim": 2048,
                    "n_layers": 61, "n_dense_layers": 3, "n_heads": 128,
                    "n_routed_experts": 256, "n_shared_experts": 1, "n_activated_experts": 8,
                    "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128,
                    "qk_rope_head_dim": 64, "v_head_dim": 128},
    "DeepSeek-V2": {"vocab_size": 102400, "dim": 5120, "inter_dim": 12288, "moe_inter_dim": 1536,
                    "n_layers": 60, "n_dense_layers": 1, "n_heads": 128,
                    "n_routed_experts": 160, "n_shared_experts": 2, "n_activated_experts": 6,
                    "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128,
                    "qk_rope_head_dim": 64, "v_head_dim": 128},
    "DeepSeek-V2-Lite": {"vocab_size": 102400, "dim": 2048, "inter_dim": 10944,
                         "moe_inter_dim": 1408, "n_layers": 27, "n_dense_layers": 1,
                         "n_heads": 16, "n_routed_experts": 64, "n_shared_experts": 2,
                         "n_activated_experts": 6, "q_lora_rank": 0, "kv_lora_rank": 512,
                         "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128},
}
FIELDS = {"vocab_size": "vocab_size", "dim": "d_model", "inter_dim": "ffn_dim",
          "moe_inter_dim": "moe_ffn_dim", "n_layers": "num_layers",
          "n_dense_layers": "num_dense_layers", "n_heads": "num_heads",
          "n_routed_experts": "num_routed_experts", "n_shared_experts": "num_shared_experts",
          "n_activated_experts": "num_activated_experts", "q_lora_rank": "q_lora_rank",
          "kv_lora_rank": "kv_lora_rank", "qk_nope_head_dim": "qk_nope_head_dim",
          "qk_rope_head_dim": "qk_rope_head_dim", "v_head_dim": "v_head_dim"}


@pytest.mark.parametrize("name", sorted(PUBLISHED_CONFIGS))
def test_entries_match_the_published_configs(name):
    config = MODELS[name]
    for key, value in PUBLISHED_CONFIGS[name].items():
        assert getattr(config, FIELDS[key]) == value, key
    assert config.is_mla and config.is_moe and config.cache_kind == "MLA"
    assert config.attention_kind == "MHA"  # one key and value per head, made from the latent


def test_v3_attention_parameters_tensor_by_tensor():
    """The shapes of one layer's attention in DeepSeek-V3's checkpoint (inference/model.py:
    wq_a, q_norm, wq_b, wkv_a, kv_norm, wkv_b, wo)."""
    shapes = [(1536, 7168), (1536,), (128 * 192, 1536), (512 + 64, 7168), (512,),
              (128 * (128 + 128), 512), (7168, 128 * 128)]
    count = sum(a * (b[0] if b else 1) for a, *b in shapes)
    assert count == 187_107_328
    assert attention_params(MODELS["DeepSeek-V3"]) == count


def test_v2_lite_attention_parameters_tensor_by_tensor():
    """No query compression: wq (16 * 192, 2048), then wkv_a, kv_norm, wkv_b, wo."""
    shapes = [(16 * 192, 2048), (512 + 64, 2048), (512,), (16 * 256, 512), (2048, 16 * 128)]
    count = sum(a * (b[0] if b else 1) for a, *b in shapes)
    assert attention_params(MODELS["DeepSeek-V2-Lite"]) == count == 13_763_072


def test_totals_match_the_published_counts():
    # 671B (DeepSeek-V3 README, main model without the MTP module), 236B and 15.7B
    # (arXiv:2405.04434 section 3.1.2 and appendix B.1), within their rounding
    assert total_params(MODELS["DeepSeek-V3"]) == 671_026_419_200
    assert total_params(MODELS["DeepSeek-V2"]) == 235_741_434_880
    assert total_params(MODELS["DeepSeek-V2-Lite"]) == 15_706_484_224
    for name in PUBLISHED_CONFIGS:
        config = MODELS[name]
        assert abs(total_params(config) - config.published_params) <= config.published_unit // 2


def test_mla_param_count_without_rope_is_mha_with_factored_keys_and_values():
    d, heads, d_head, rank = 64, 4, 16, 8
    factored = d * rank + rank + rank * 2 * heads * d_head  # W_dkv, its norm, W_uk | W_uv
    assert mla_param_count(d, heads, rank, d_head, 0, d_head) == 2 * d * d + factored


def test_mla_cache_per_token_and_the_gqa_equivalent():
    v3, v2 = MODELS["DeepSeek-V3"], MODELS["DeepSeek-V2"]
    assert model_kv_cache_bytes(v3, 1) == 61 * (512 + 64) * 2 == 70_272
    assert model_kv_cache_bytes(MODELS["DeepSeek-V2-Lite"], 1) == 27 * 576 * 2
    # "equal to GQA with only 2.25 groups" (arXiv:2405.04434 Table 1): 4 x MLA == 9 groups
    assert 4 * model_kv_cache_bytes(v2, 1) == kv_cache_bytes(60, 9, 128, 1)
    as_mha = kv_cache_bytes(v3.num_layers, v3.num_heads, v3.head_dim, 1)
    assert as_mha // model_kv_cache_bytes(v3, 1) == 56  # 128 heads of K and V vs 576 numbers


def test_table_rows_report_the_cache_kind():
    rows = {row["model"]: row for row in table_rows(seq_len=1)}
    assert rows["DeepSeek-V3"]["cache"] == "MLA" and rows["DeepSeek-V3"]["kv_cache_bytes"] == 70_272
    assert rows["Llama-3.1 8B"]["cache"] == "GQA"
