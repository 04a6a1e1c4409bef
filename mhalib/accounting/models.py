"""Attention shapes and parameter counts of real models, with where each number comes from.

Each entry holds what the model's published config states (layers, d_model, heads, KV
heads, head dim, MLP width, vocabulary) plus the published parameter count, so that
:func:`total_params` can be checked against it. ``published_unit`` is the rounding of the
published figure: 1 for an exact count, 1e9 for "175B".

DeepSeek's models add two optional groups of fields. Multi-head latent attention (MLA,
``kv_lora_rank > 0``): keys and values come from a cached latent of ``kv_lora_rank`` numbers,
queries optionally from a latent of ``q_lora_rank``, and a decoupled RoPE part of
``qk_rope_head_dim`` per head (one shared key). Mixture of experts (``num_routed_experts >
0``): after ``num_dense_layers`` ordinary MLPs, each layer's MLP is ``num_shared_experts`` +
``num_routed_experts`` SwiGLU experts of width ``moe_ffn_dim`` and a router.
"""

from __future__ import annotations

from dataclasses import dataclass

from mhalib.accounting.kv_cache import kv_cache_bytes, mla_kv_cache_bytes
from mhalib.accounting.params import gqa_param_count, mla_param_count


@dataclass(frozen=True)
class ModelConfig:
    name: str
    num_layers: int
    d_model: int
    num_heads: int
    num_kv_heads: int  # == num_heads: MHA; 1: MQA; in between: GQA
    head_dim: int
    ffn_dim: int
    vocab_size: int
    mlp: str  # "gelu": up + down matrices; "swiglu": gate + up + down
    norm: str  # "layernorm": weight and bias; "rmsnorm": weight only
    norms_per_layer: int
    tied_embeddings: bool  # output head shares the token embedding
    attention_bias: str  # "none", "qkv" (biases on q, k, v only) or "all" (q, k, v, o)
    mlp_bias: bool
    learned_positions: int  # rows of a learned position table; 0 with rotary embeddings
    published_params: int
    published_unit: int  # the published figure is rounded to a multiple of this
    source: str
    # multi-head latent attention (0: not MLA). With MLA, head_dim is qk_nope_head_dim and
    # num_kv_heads == num_heads: every head has its own key and value, computed from the latent
    q_lora_rank: int = 0  # 0: queries projected straight from x
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0
    # mixture of experts (0 routed experts: every MLP is dense, of width ffn_dim)
    num_dense_layers: int = 0  # the first layers keep a dense MLP of width ffn_dim
    moe_ffn_dim: int = 0
    num_routed_experts: int = 0
    num_shared_experts: int = 0
    num_activated_experts: int = 0  # routed experts each token uses
    router_bias: bool = False  # a per-expert bias on the routing scores (DeepSeek-V3)

    def __post_init__(self):
        if self.is_mla and (self.num_kv_heads != self.num_heads or not self.v_head_dim):
            raise ValueError(f"{self.name}: an MLA entry has num_kv_heads == num_heads "
                             f"(got {self.num_kv_heads}) and a v_head_dim")
        if self.is_moe and not (self.moe_ffn_dim and self.num_activated_experts):
            raise ValueError(f"{self.name}: a mixture-of-experts entry needs moe_ffn_dim and "
                             "num_activated_experts")

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def is_moe(self) -> bool:
        return self.num_routed_experts > 0

    @property
    def qk_nope_head_dim(self) -> int:
        """MLA's name for the per-head query/key width that carries no position."""
        return self.head_dim

    @property
    def attention_kind(self) -> str:
        """By the number of distinct K/V heads attention computes with: MHA, GQA or MQA. MLA is
        MHA-shaped (one key and value per head); what it caches is :attr:`cache_kind`."""
        if self.num_kv_heads == self.num_heads:
            return "MHA"
        return "MQA" if self.num_kv_heads == 1 else "GQA"

    @property
    def cache_kind(self) -> str:
        """What the KV cache holds per token: "MLA" (a latent and a shared RoPE key) or, for
        the others, K and V of each K/V head (the attention kind)."""
        return "MLA" if self.is_mla else self.attention_kind


MODELS = {
    # Radford et al. 2019; config.json of openai-community/gpt2 (n_layer 12, n_embd 768,
    # n_head 12, n_positions 1024, vocab 50257). The checkpoint holds 124,439,808 values.
    "GPT-2 small": ModelConfig(
        name="GPT-2 small", num_layers=12, d_model=768, num_heads=12, num_kv_heads=12, head_dim=64,
        ffn_dim=3072, vocab_size=50257, mlp="gelu", norm="layernorm", norms_per_layer=2,
        tied_embeddings=True, attention_bias="all", mlp_bias=True, learned_positions=1024,
        published_params=124_439_808, published_unit=1,
        source="huggingface.co/openai-community/gpt2",
    ),
    # Brown et al. 2020, "Language Models are Few-Shot Learners", Table 2.1: 96 layers,
    # d_model 12288, 96 heads of 128, context 2048; MLP 4 d_model; GPT-2 vocabulary.
    "GPT-3 175B": ModelConfig(
        name="GPT-3 175B", num_layers=96, d_model=12288, num_heads=96, num_kv_heads=96,
        head_dim=128, ffn_dim=49152, vocab_size=50257, mlp="gelu", norm="layernorm",
        norms_per_layer=2, tied_embeddings=True, attention_bias="all", mlp_bias=True,
        learned_positions=2048, published_params=175_000_000_000, published_unit=1_000_000_000,
        source="arXiv:2005.14165 Table 2.1",
    ),
    # Meta Llama 3.1 config.json files (meta-llama/Llama-3.1-8B, -70B, -405B); counts are
    # the checkpoints' totals (model cards: 8B, 70B, 405B).
    "Llama-3.1 8B": ModelConfig(
        name="Llama-3.1 8B", num_layers=32, d_model=4096, num_heads=32, num_kv_heads=8,
        head_dim=128, ffn_dim=14336, vocab_size=128256, mlp="swiglu", norm="rmsnorm",
        norms_per_layer=2, tied_embeddings=False, attention_bias="none", mlp_bias=False,
        learned_positions=0, published_params=8_030_261_248, published_unit=1,
        source="huggingface.co/meta-llama/Llama-3.1-8B",
    ),
    "Llama-3.1 70B": ModelConfig(
        name="Llama-3.1 70B", num_layers=80, d_model=8192, num_heads=64, num_kv_heads=8,
        head_dim=128, ffn_dim=28672, vocab_size=128256, mlp="swiglu", norm="rmsnorm",
        norms_per_layer=2, tied_embeddings=False, attention_bias="none", mlp_bias=False,
        learned_positions=0, published_params=70_553_706_496, published_unit=1,
        source="huggingface.co/meta-llama/Llama-3.1-70B",
    ),
    "Llama-3.1 405B": ModelConfig(
        name="Llama-3.1 405B", num_layers=126, d_model=16384, num_heads=128, num_kv_heads=8,
        head_dim=128, ffn_dim=53248, vocab_size=128256, mlp="swiglu", norm="rmsnorm",
        norms_per_layer=2, tied_embeddings=False, attention_bias="none", mlp_bias=False,
        learned_positions=0, published_params=405_853_388_800, published_unit=1,
        source="huggingface.co/meta-llama/Llama-3.1-405B",
    ),
    # Jiang et al. 2023, "Mistral 7B", Table 1; config.json of mistralai/Mistral-7B-v0.1.
    "Mistral 7B": ModelConfig(
        name="Mistral 7B", num_layers=32, d_model=4096, num_heads=32, num_kv_heads=8, head_dim=128,
        ffn_dim=14336, vocab_size=32000, mlp="swiglu", norm="rmsnorm", norms_per_layer=2,
        tied_embeddings=False, attention_bias="none", mlp_bias=False, learned_positions=0,
        published_params=7_241_732_096, published_unit=1,
        source="huggingface.co/mistralai/Mistral-7B-v0.1",
    ),
    # Qwen2 technical report (arXiv:2407.10671) and config.json of Qwen/Qwen2-7B: 28 query
    # heads share 4 K/V heads; q, k, v projections carry biases.
    "Qwen2 7B": ModelConfig(
        name="Qwen2 7B", num_layers=28, d_model=3584, num_heads=28, num_kv_heads=4, head_dim=128,
        ffn_dim=18944, vocab_size=152064, mlp="swiglu", norm="rmsnorm", norms_per_layer=2,
        tied_embeddings=False, attention_bias="qkv", mlp_bias=False, learned_positions=0,
        published_params=7_615_616_512, published_unit=1, source="huggingface.co/Qwen/Qwen2-7B",
    ),
    # config.json of tiiuae/falcon-7b: multi-query attention (one K/V head), attention and
    # MLP in parallel after a single LayerNorm, no biases; published as "7B".
    "Falcon 7B": ModelConfig(
        name="Falcon 7B", num_layers=32, d_model=4544, num_heads=71, num_kv_heads=1, head_dim=64,
        ffn_dim=18176, vocab_size=65024, mlp="gelu", norm="layernorm", norms_per_layer=1,
        tied_embeddings=True, attention_bias="none", mlp_bias=False, learned_positions=0,
        published_params=7_000_000_000, published_unit=1_000_000_000,
        source="huggingface.co/tiiuae/falcon-7b",
    ),
    # DeepSeek-V3 (arXiv:2412.19437); inference/configs/config_671B.json of
    # github.com/deepseek-ai/DeepSeek-V3 (dim 7168, 61 layers, 128 heads, q_lora_rank 1536,
    # kv_lora_rank 512, qk_nope/rope/v head dims 128/64/128, vocab 129280, inter_dim 18432 for
    # the first 3 dense layers, then 1 shared + 256 routed experts of 2048, 8 active, a router
    # bias). "671B total parameters" (README; README_WEIGHTS.md: the main model, without the
    # 14B of its multi-token-prediction module).
    "DeepSeek-V3": ModelConfig(
        name="DeepSeek-V3", num_layers=61, d_model=7168, num_heads=128, num_kv_heads=128,
        head_dim=128, ffn_dim=18432, vocab_size=129280, mlp="swiglu", norm="rmsnorm",
        norms_per_layer=2, tied_embeddings=False, attention_bias="none", mlp_bias=False,
        learned_positions=0, published_params=671_000_000_000, published_unit=1_000_000_000,
        source="github.com/deepseek-ai/DeepSeek-V3 inference/configs/config_671B.json",
        q_lora_rank=1536, kv_lora_rank=512, qk_rope_head_dim=64, v_head_dim=128,
        num_dense_layers=3, moe_ffn_dim=2048, num_routed_experts=256, num_shared_experts=1,
        num_activated_experts=8, router_bias=True,
    ),
    # DeepSeek-V2 (arXiv:2405.04434 section 3.1.2: 60 layers, hidden 5120, 128 heads of 128,
    # d_c 512, d_c' 1536, d_h^R 64, first layer dense, 2 shared + 160 routed experts of 1536,
    # 6 active; "236B total parameters"); inter_dim 12288 and vocab 102400 from
    # inference/configs/config_236B.json of github.com/deepseek-ai/DeepSeek-V3.
    "DeepSeek-V2": ModelConfig(
        name="DeepSeek-V2", num_layers=60, d_model=5120, num_heads=128, num_kv_heads=128,
        head_dim=128, ffn_dim=12288, vocab_size=102400, mlp="swiglu", norm="rmsnorm",
        norms_per_layer=2, tied_embeddings=False, attention_bias="none", mlp_bias=False,
        learned_positions=0, published_params=236_000_000_000, published_unit=1_000_000_000,
        source="arXiv:2405.04434 section 3.1.2; DeepSeek-V3 repo inference/configs/"
               "config_236B.json",
        q_lora_rank=1536, kv_lora_rank=512, qk_rope_head_dim=64, v_head_dim=128,
        num_dense_layers=1, moe_ffn_dim=1536, num_routed_experts=160, num_shared_experts=2,
        num_activated_experts=6,
    ),
    # DeepSeek-V2-Lite (arXiv:2405.04434 appendix B.1: 27 layers, hidden 2048, 16 heads of 128,
    # d_c 512, queries not compressed, d_h^R 64, first layer dense, 2 shared + 64 routed
    # experts of 1408, 6 active; "15.7B total parameters"); inter_dim 10944 and vocab 102400
    # from inference/configs/config_16B.json of github.com/deepseek-ai/DeepSeek-V3.
    "DeepSeek-V2-Lite": ModelConfig(
        name="DeepSeek-V2-Lite", num_layers=27, d_model=2048, num_heads=16, num_kv_heads=16,
        head_dim=128, ffn_dim=10944, vocab_size=102400, mlp="swiglu", norm="rmsnorm",
        norms_per_layer=2, tied_embeddings=False, attention_bias="none", mlp_bias=False,
        learned_positions=0, published_params=15_700_000_000, published_unit=100_000_000,
        source="arXiv:2405.04434 appendix B.1; DeepSeek-V3 repo inference/configs/"
               "config_16B.json",
        kv_lora_rank=512, qk_rope_head_dim=64, v_head_dim=128,
        num_dense_layers=1, moe_ffn_dim=1408, num_routed_experts=64, num_shared_experts=2,
        num_activated_experts=6,
    ),
}


def attention_params(config: ModelConfig) -> int:
    """Parameters of one attention layer (projections and their biases; for MLA also the
    RMSNorms of its latents, which sit inside the attention block)."""
    if config.is_mla:
        return mla_param_count(config.d_model, config.num_heads, config.kv_lora_rank,
                               config.head_dim, config.qk_rope_head_dim, config.v_head_dim,
                               config.q_lora_rank)
    q_width = config.num_heads * config.head_dim
    kv_width = config.num_kv_heads * config.head_dim
    if q_width == config.d_model:
        weights = gqa_param_count(config.d_model, config.num_heads, config.num_kv_heads)
    else:  # head_dim decoupled from d_model / num_heads
        weights = 2 * config.d_model * q_width + 2 * config.d_model * kv_width
    biases = {
        "none": 0,
        "qkv": q_width + 2 * kv_width,
        "all": q_width + 2 * kv_width + config.d_model,
    }[config.attention_bias]
    return weights + biases


def mlp_params(config: ModelConfig, width: int | None = None) -> int:
    """Parameters of one dense MLP block (of ``width``, default ``ffn_dim``)."""
    width = config.ffn_dim if width is None else width
    matrices = {"gelu": 2, "swiglu": 3}[config.mlp]
    weights = matrices * config.d_model * width
    biases = (width * (matrices - 1) + config.d_model) if config.mlp_bias else 0
    return weights + biases


def moe_params(config: ModelConfig) -> int:
    """Parameters of one mixture-of-experts block: shared and routed experts (each a dense MLP
    of width ``moe_ffn_dim``) and the router (one d_model vector per routed expert, plus its
    bias when ``router_bias``)."""
    experts = (config.num_shared_experts + config.num_routed_experts) * mlp_params(
        config, config.moe_ffn_dim)
    router = config.num_routed_experts * (config.d_model + int(config.router_bias))
    return experts + router


def ffn_params(config: ModelConfig) -> int:
    """Parameters of the MLPs of all layers (dense and mixture-of-experts)."""
    if not config.is_moe:
        return config.num_layers * mlp_params(config)
    dense = config.num_dense_layers
    return dense * mlp_params(config) + (config.num_layers - dense) * moe_params(config)


def norm_params(config: ModelConfig) -> int:
    """Parameters of one normalisation layer."""
    return {"layernorm": 2, "rmsnorm": 1}[config.norm] * config.d_model


def total_params(config: ModelConfig) -> int:
    """All parameters: embeddings, layers, final norm and (if untied) the output head."""
    per_layer = attention_params(config) + config.norms_per_layer * norm_params(config)
    embeddings = (config.vocab_size + config.learned_positions) * config.d_model
    head = 0 if config.tied_embeddings else config.vocab_size * config.d_model
    return (embeddings + config.num_layers * per_layer + ffn_params(config) + norm_params(config)
            + head)


def model_kv_cache_bytes(
    config: ModelConfig, seq_len: int, batch_size: int = 1, bytes_per_element: int = 2
) -> int:
    """KV-cache bytes of the whole model for ``batch_size`` sequences of ``seq_len`` tokens
    (for MLA: the latents and the shared RoPE keys)."""
    if config.is_mla:
        return mla_kv_cache_bytes(config.num_layers, config.kv_lora_rank,
                                  config.qk_rope_head_dim, seq_len, batch_size, bytes_per_element)
    return kv_cache_bytes(
        config.num_layers,
        config.num_kv_heads,
        config.head_dim,
        seq_len,
        batch_size,
        bytes_per_element,
    )


def table_rows(seq_len: int = 8192, bytes_per_element: int = 2) -> list[dict]:
    """One row per model: shapes, attention kind, parameters, KV cache for one sequence."""
    rows = []
    for config in MODELS.values():
        rows.append(
            {
                "model": config.name,
                "layers": config.num_layers,
                "d_model": config.d_model,
                "heads": config.num_heads,
                "kv_heads": config.num_kv_heads,
                "head_dim": config.head_dim,
                "attention": config.attention_kind,
                "cache": config.cache_kind,
                "params": total_params(config),
                "attention_params": config.num_layers * attention_params(config),
                "kv_cache_bytes": model_kv_cache_bytes(
                    config, seq_len, bytes_per_element=bytes_per_element
                ),
            }
        )
    return rows
