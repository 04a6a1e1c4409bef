"""Quick checks of lesson 10 (multi-head latent attention): what the learner sees, no answers.

The keys are instructor data in ``grading/quick_checks/lesson10.py``.
"""

from __future__ import annotations

import numpy as np

from mhalib.accounting.models import MODELS
from mhalib.quiz.question import FillIn, MultipleChoice


def _mla_shapes(rng: np.random.Generator) -> list[dict]:
    shapes = [(512, 64, 128, 128), (512, 64, 192, 16), (1024, 64, 128, 32), (256, 32, 64, 8),
              (96, 0, 48, 4)]
    return [{"kv_lora_rank": rank, "rope_head_dim": rope, "head_dim": head, "num_heads": heads}
            for rank, rope, head, heads in shapes]


# published context lengths (README of github.com/deepseek-ai/DeepSeek-V2 and -V3): the tokens
# drawn stay within them
_MLA_CONTEXT = {"DeepSeek-V3": 131072, "DeepSeek-V2": 131072, "DeepSeek-V2-Lite": 32768}


def _mla_cache(rng: np.random.Generator) -> dict:
    model = MODELS[str(rng.choice(["DeepSeek-V3", "DeepSeek-V2", "DeepSeek-V2-Lite"]))]
    dtype, size = [("bfloat16", 2), ("fp8", 1), ("float32", 4)][rng.integers(3)]
    tokens = [t for t in (4096, 16384, 32768, 65536) if t <= _MLA_CONTEXT[model.name]]
    return {"model": model.name, "layers": model.num_layers, "num_heads": model.num_heads,
            "head_dim": model.head_dim, "kv_lora_rank": model.kv_lora_rank,
            "rope_head_dim": model.qk_rope_head_dim,
            "tokens": int(rng.choice(tokens)),
            "batch": int(rng.choice([2, 4, 8, 16, 32])), "dtype": dtype,
            "bytes_per_value": size, "bytes_text": f"{size} byte{'s' if size > 1 else ''}"}


QUESTIONS = {
    "qc_mla_cache_gib": FillIn(
        id="qc_mla_cache_gib",
        prompt="{model} ({layers} layers, {num_heads} heads of {head_dim}, kv_lora_rank "
               "{kv_lora_rank}, one shared RoPE key of {rope_head_dim} per token) serves a batch "
               "of {batch} sequences of {tokens:,} tokens each, with its MLA cache stored in "
               "{dtype} ({bytes_text} per number). How many GiB does the cache of all "
               "layers take (1 GiB = 2**30 bytes)? A number with at least three significant "
               "figures, or an expression, will do.",
        template="gib = ____",
        names={"layers": "the number of layers", "num_heads": "query heads per layer",
               "head_dim": "the width of each head", "kv_lora_rank": "the latent's width",
               "rope_head_dim": "the width of the shared RoPE key",
               "tokens": "tokens per sequence", "batch": "sequences in the batch",
               "bytes_per_value": "bytes per cached number"},
        variant=_mla_cache,
        rtol=0.01,
        transfer=True,
    ),
    "qc_alibi_absorption": MultipleChoice(
        id="qc_alibi_absorption",
        prompt="ALiBi (Press et al., 2022) gives attention positions without rotating anything: "
               "it adds -m_h (t - s) to head h's score of query t and key s, with a fixed slope "
               "m_h per head. In an MLA model that used ALiBi instead of RoPE, could W_UK,h "
               "still be folded into W_Q,h, with no extra RoPE key in the cache?",
        options=("No: the bias depends on t and s, as RoPE's angle does",
                 "No: each head's slope must scale its expanded keys",
                 "Only if all heads share one slope",
                 "Yes: the bias is added to the finished score, after the dot product"),
        transfer=True,
    ),
    "qc_mla_groups": FillIn(
        id="qc_mla_groups",
        prompt="An MLA layer caches kv_lora_rank + rope_head_dim numbers per token. A GQA layer "
               "with the same head_dim caches a key and a value of head_dim numbers per K/V "
               "group. How many groups would cache exactly as much as the MLA layer?",
        template="groups = ____",
        names={"kv_lora_rank": "the latent's width", "rope_head_dim": "the shared RoPE key's "
               "width", "head_dim": "the width of each head", "num_heads": "query heads"},
        scenarios=_mla_shapes,
    ),
    "qc_absorbed_query_width": MultipleChoice(
        id="qc_absorbed_query_width",
        prompt="DeepSeek-V3 also compresses its queries (q_lora_rank 1536; d_model 7168, 128 "
               "heads of 128, kv_lora_rank 512). Leaving the RoPE part aside, how many numbers "
               "does one head's absorbed query have when it meets the cached latents?",
        options=("512: the KV latent's width", "128, the d_head of one head",
                 "1536, the width of the query latent", "7168, the model width d_model"),
    ),
    "qc_per_head_rope_cache": MultipleChoice(
        id="qc_per_head_rope_cache",
        prompt="A variant of DeepSeek-V2-Lite (16 heads, latent 512, RoPE part 64) gives each "
               "head its own rotated key instead of one shared by all heads. How many numbers "
               "per token and layer must its cache hold?",
        options=("576: the latent and one shared key", "1,152: latent and key, for K and V",
                 "1,536: latent and 16 keys", "512: the RoPE keys are recomputed"),
        transfer=True,
    ),
}
