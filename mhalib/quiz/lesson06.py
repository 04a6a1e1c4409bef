"""Quick checks of lesson 06 (grouped-query attention and the KV cache): what the learner
sees, no answers.

The keys are instructor data in ``grading/quick_checks/lesson06.py``.
"""

from __future__ import annotations

import numpy as np

from mhalib.accounting.models import MODELS
from mhalib.quiz.question import FillIn, MultipleChoice

# (name, layers, query heads, K/V heads, head dim) from the course's model table: GQA models
# whose context reaches the 64k tokens drawn and whose cache grows with every token (not Mistral
# 7B: its sliding window of 4,096 tokens caps its cache, sliding_window in its config.json)
_MODELS = [(name, MODELS[name].num_layers, MODELS[name].num_heads, MODELS[name].num_kv_heads,
            MODELS[name].head_dim)
           for name in ("Llama-3.1 8B", "Llama-3.1 70B", "Llama-3.1 405B", "Qwen2 7B")]
_DTYPES = [("fp8", 1), ("bfloat16", 2), ("float16", 2)]


def _cache(rng: np.random.Generator) -> dict:
    model, layers, num_heads, kv_heads, head_dim = _MODELS[rng.integers(len(_MODELS))]
    dtype, size = _DTYPES[rng.integers(len(_DTYPES))]
    return {"model": model, "layers": layers, "num_heads": num_heads, "kv_heads": kv_heads,
            "head_dim": head_dim, "tokens": int(rng.choice([8192, 16384, 32768, 65536])),
            "batch": int(rng.choice([4, 8, 16])), "dtype": dtype,
            "bytes_per_value": size, "bytes_text": f"{size} byte{'s' if size > 1 else ''}"}


def _pooled(rng: np.random.Generator) -> list[dict]:
    cases = [(5, 8, 2), (37, 64, 8), (3, 32, 8), (6, 8, 8), (7, 8, 1), (27, 28, 4)]
    for _ in range(4):
        num_kv_heads = int(rng.choice([1, 2, 4, 8]))
        num_heads = num_kv_heads * int(rng.choice([2, 3, 4, 8, 16]))
        cases.append((int(rng.integers(num_heads)), num_heads, num_kv_heads))
    return [{"h": h, "num_heads": heads, "num_kv_heads": kv} for h, heads, kv in cases]


QUESTIONS = {
    "qc_gqa_savings": MultipleChoice(
        id="qc_gqa_savings",
        prompt="Llama-3.1 70B (d_model 8192) has 64 query heads and 8 K/V heads, all of "
               "width 128. Next to an MHA layer with the same 64 heads of 128, which of its "
               "costs is 8 times smaller?",
        options=("The FLOPs of the scores and the weighted sum",
                 "All the attention layer's weights",
                 "The KV cache and the W_K, W_V weights",
                 "Each cached key's width"),
    ),
    "qc_kv_cache_gib": FillIn(
        id="qc_kv_cache_gib",
        prompt="{model} has {layers} layers, {num_heads} query heads and {kv_heads} K/V heads "
               "of width {head_dim}. It serves a batch of {batch} sequences of {tokens} "
               "tokens, and caches its keys and values in {dtype}, {bytes_text} per number. "
               "How many GiB does the KV cache take (1 GiB = 2**30 bytes)?",
        template="gib = ____",
        names={"layers": "layers", "num_heads": "query heads", "kv_heads": "K/V heads",
               "head_dim": "width of a head", "tokens": "tokens per sequence",
               "batch": "sequences", "bytes_per_value": "bytes per stored number"},
        variant=_cache,
        rtol=0.01,
        transfer=True,
    ),
    "qc_cache_reads": MultipleChoice(
        id="qc_cache_reads",
        prompt="With a cache, a decoder generates N tokens after a short prompt, and every "
               "step reads the whole cache. How do the bytes read from the cache, summed over "
               "the N steps, grow with N?",
        options=("Like N: one token's K and V are added per step",
                 "Like N^2, summed over the growing cache",
                 "Like N^3, as without a cache",
                 "Not at all: the cache is already in memory"),
        transfer=True,
    ),
    "qc_pool_first_head": FillIn(
        id="qc_pool_first_head",
        prompt="An MHA checkpoint with num_heads heads becomes GQA with num_kv_heads K/V heads "
               "by mean-pooling, as above. After the conversion, query head h reads a K/V "
               "head that is the mean of the checkpoint's K/V heads first, first + 1, ..., "
               "first + n_rep - 1 (n_rep = num_heads // num_kv_heads). Fill in first.",
        template="first = ____",
        names={"h": "the query head", "num_heads": "query heads",
               "num_kv_heads": "K/V heads after the conversion"},
        scenarios=_pooled,
        transfer=True,
    ),
}
