"""Quick checks of lesson 11 (decode on a roofline, the paged KV cache, chunked prefill): what
the learner sees, no answers.

The keys are instructor data in ``grading/quick_checks/lesson11.py``.
"""

from __future__ import annotations

import numpy as np

from mhalib.accounting.models import MODELS
from mhalib.accounting.roofline import H100_SXM
from mhalib.quiz.question import FillIn, MultipleChoice

# one H100 SXM holds 80 GB; the question's model (bf16 weights) and cache must fit in it, so
# only models of about 8B parameters whose context reaches the 64k tokens drawn (Mistral 7B's
# sliding window of 4,096 tokens would cap its cache)
_H100_BYTES = 80e9


def _decode_step(rng: np.random.Generator) -> dict:
    while True:
        model = MODELS[str(rng.choice(["Llama-3.1 8B", "Qwen2 7B"]))]
        dtype, size = [("bfloat16", 2), ("fp8", 1)][rng.integers(2)]
        tokens = int(rng.choice([4096, 8192, 16384, 65536]))
        batch = int(rng.choice([4, 8, 16, 64]))
        cache = 2 * model.num_layers * model.num_kv_heads * model.head_dim * tokens * batch * size
        if 2 * model.published_params + cache <= _H100_BYTES:
            break
    return {"model": model.name, "layers": model.num_layers, "num_heads": model.num_heads,
            "kv_heads": model.num_kv_heads, "head_dim": model.head_dim, "tokens": tokens,
            "batch": batch, "dtype": dtype, "bytes_per_value": size,
            "bytes_text": f"{size} byte{'s' if size > 1 else ''}",
            "peak_flops": H100_SXM.peak_flops, "bandwidth": H100_SXM.bandwidth}


def _tokens(rng: np.random.Generator) -> list[dict]:
    fixed = [(13, 4), (16, 4), (1, 16), (100, 16), (33, 32)]
    page = int(rng.choice([8, 16, 32]))
    return [{"n": n, "page_size": p} for n, p in fixed] + [
        {"n": int(rng.integers(1, 2000)), "page_size": page}]


def _chunks(rng: np.random.Generator) -> list[dict]:
    fixed = [(8192, 512), (12, 4), (100, 10), (64, 64), (6, 1)]
    chunk = int(rng.choice([32, 128, 256]))
    return [{"N": n, "C": c} for n, c in fixed] + [{"N": chunk * int(rng.integers(2, 40)),
                                                     "C": chunk}]


QUESTIONS = {
    "qc_decode_read_time": FillIn(
        id="qc_decode_read_time",
        prompt="{model} ({layers} layers, {num_heads} query heads and {kv_heads} K/V heads of "
               "{head_dim}) decodes a batch of {batch} sequences, each with {tokens:,} cached "
               "tokens, its cache stored in {dtype} ({bytes_text} per number), on one H100 SXM "
               "(80 GB, enough for the bf16 weights and this cache; 989 TFLOP/s dense BF16, "
               "3.35 TB/s). At least how many milliseconds "
               "does the attention of one decode step take, all layers together? A number with "
               "at least three significant figures, or an expression, will do.",
        template="ms = ____",
        names={"layers": "the number of layers", "num_heads": "query heads per layer",
               "kv_heads": "K/V heads per layer", "head_dim": "the width of each head",
               "tokens": "cached tokens per sequence", "batch": "sequences in the batch",
               "bytes_per_value": "bytes per cached number",
               "peak_flops": "the H100's 989e12 FLOP/s", "bandwidth": "its 3.35e12 bytes/s"},
        variant=_decode_step,
        rtol=0.01,
        transfer=True,
    ),
    "qc_h200_ridge": MultipleChoice(
        id="qc_h200_ridge",
        prompt="An H200 has the arithmetic of an H100 SXM (989 TFLOP/s dense BF16) but faster "
               "memory: 4.8 TB/s of HBM3e instead of 3.35 TB/s. DeepSeek-V3's absorbed MLA "
               "decode step does about 242 FLOPs per byte of cache it reads. Where does that "
               "step sit on the H200's roofline?",
        options=("Memory-bound: the ridge stays at about 295",
                 "Compute-bound: the ridge drops to ~206",
                 "Memory-bound: the ridge rises to about 420",
                 "Compute-bound: its intensity rises to about 350"),
        transfer=True,
    ),
    "qc_chunk_scores": FillIn(
        id="qc_chunk_scores",
        prompt="Chunked prefill of one head over N tokens, in chunks of C queries (N a multiple "
               "of C): each chunk scores its queries against every key up to the chunk's end, "
               "and masks afterwards. How many scores does it compute in all, masked ones "
               "included?",
        template="scores = ____",
        names={"N": "the prompt's tokens", "C": "queries per chunk (C divides N)"},
        scenarios=_chunks,
        transfer=True,
    ),
    "qc_gqa_decode": MultipleChoice(
        id="qc_gqa_decode",
        prompt="A model with 40 query heads of 128 is changed from MHA to GQA with 5 K/V heads "
               "(cache in bf16). At 16k tokens of context on an H100, what happens to the time "
               "of one decode step's attention?",
        options=("It falls about 8x, as the cache it reads does",
                 "Little change: the step does as many FLOPs as before",
                 "It grows: each K/V head serves 8 heads",
                 "It falls about 40x: one K/V head per group is read"),
        transfer=True,
    ),
    "qc_page_waste": FillIn(
        id="qc_page_waste",
        prompt="A paged cache hands out whole pages of page_size slots. How many slots does a "
               "sequence of n >= 1 tokens leave unused?",
        template="unused = ____",
        names={"n": "the sequence's tokens (n >= 1)", "page_size": "slots per page"},
        scenarios=_tokens,
    ),
}
