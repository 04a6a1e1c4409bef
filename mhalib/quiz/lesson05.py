"""Quick checks of lesson 05 (FLOPs, the N^2 crossover and MFU): what the learner sees, no
answers.

The keys are instructor data in ``grading/quick_checks/lesson05.py``.
"""

from __future__ import annotations

import numpy as np

from mhalib.accounting.models import MODELS
from mhalib.quiz.question import FillIn

# widths and published parameter counts of the course's model table; for _TRAINED, the
# smallest of the GPU counts drawn (x1, x2 or x4). _WIDTHS holds models whose context reaches
# the 16k tokens drawn (GPT-2 small's is 1,024) and whose query heads are d_model wide in all,
# so that the N^2 terms are the lesson's 4 N^2 d_model
_WIDTHS = [(name, MODELS[name].d_model)
           for name in ("Qwen2 7B", "Llama-3.1 8B", "Llama-3.1 70B", "Llama-3.1 405B")]
_TRAINED = [(name, MODELS[name].published_params, gpus)
            for name, gpus in (("Llama-3.1 8B", 8), ("Mistral 7B", 8), ("Qwen2 7B", 16),
                               ("Llama-3.1 70B", 64))]
# dense BF16 Tensor Core peaks from NVIDIA's datasheets (half the figures "with sparsity")
_CHIPS = [("H100 SXM", 989), ("A100 SXM", 312)]


def _widths(rng: np.random.Generator) -> list[dict]:
    return [{"d_model": d} for d in (768, 4096, 12288, 3, int(rng.integers(10, 5000)))]


def _decode_steps(rng: np.random.Generator) -> list[dict]:
    cases = [(1, 64), (4096, 4096), (100, 768), (7, 3)]
    cases += [(int(rng.integers(1, 10000)), int(rng.integers(8, 2000))) for _ in range(3)]
    return [{"n": n, "d_model": d} for n, d in cases]


def _skipping(rng: np.random.Generator) -> dict:
    model, d_model = _WIDTHS[rng.integers(len(_WIDTHS))]
    return {"model": model, "d_model": d_model, "seq_len": int(rng.choice([4096, 8192, 16384])),
            "block": int(rng.choice([64, 128, 256]))}


def _training_run(rng: np.random.Generator) -> dict:
    model, params, gpus = _TRAINED[rng.integers(len(_TRAINED))]
    gpus *= int(rng.choice([1, 2, 4]))
    chip, peak_tflops = _CHIPS[rng.integers(len(_CHIPS))]
    mfu = rng.uniform(0.3, 0.55)
    tokens = mfu * gpus * peak_tflops * 1e12 / (6 * params)
    tokens = int(float(f"{tokens:.3g}"))  # three significant figures, as a log would show
    return {"model": model, "params": params, "gpus": gpus, "chip": chip,
            "peak_tflops": peak_tflops, "tokens_per_second": tokens}


QUESTIONS = {
    "qc_causal_skip": FillIn(
        id="qc_causal_skip",
        prompt="A causal kernel computes the scores and the weighted sum in square tiles of "
               "block x block (query, key) pairs, and skips a tile only when every pair in it "
               "is masked (tiles on the diagonal are computed in full). Take one layer of "
               "{model} (d_model = {d_model}) on one sequence of seq_len = {seq_len} tokens, "
               "with block = {block}. How many FLOPs does skipping save, next to this "
               "lesson's dense count? (An expression, or a number to at least 4 significant "
               "figures.)",
        template="saved_flops = ____",
        names={"seq_len": "N", "d_model": "the model width",
               "block": "the side of a tile"},
        variant=_skipping,
        rtol=1e-3,
        transfer=True,
    ),
    "qc_decode_step": FillIn(
        id="qc_decode_step",
        prompt="Generating text, the layer of this lesson gets one new token. The keys and "
               "values of the earlier tokens are kept, so only the new token is projected "
               "(Q, K, V and the output), and its query meets the n keys of the context, its "
               "own included. How many matrix-product FLOPs does this one step take?",
        template="flops = ____",
        names={"n": "the keys the new query meets", "d_model": "the model width"},
        scenarios=_decode_steps,
        transfer=True,
    ),
    "qc_block_crossover": FillIn(
        id="qc_block_crossover",
        prompt="A GPT-2 style block follows attention with an MLP of two matrix products, "
               "(N, d_model) by (d_model, 4 d_model) and (N, 4 d_model) by (4 d_model, "
               "d_model). At which N does attention's N^2 work (scores and weighted sum) "
               "equal all the other matrix products of the block: the four projections and "
               "the MLP?",
        template="N = ____",
        names={"d_model": "the model width"},
        scenarios=_widths,
        transfer=True,
    ),
    "qc_mfu": FillIn(
        id="qc_mfu",
        prompt="{model} ({params:,} parameters) trains on {gpus} {chip} GPUs, each with a peak "
               "of {peak_tflops} TFLOP/s in bf16, at {tokens_per_second} tokens per second "
               "for the whole cluster. Estimate the model FLOPs utilisation with the "
               "6 x params rule (leave out the N^2 terms), as a fraction (0.4, not 40), to 3 "
               "significant figures.",
        template="mfu = ____",
        names={"params": "the parameter count", "gpus": "the number of GPUs",
               "peak_tflops": "one GPU's peak in TFLOP/s (1 TFLOP/s = 1e12 FLOP/s)",
               "tokens_per_second": "the cluster's throughput"},
        variant=_training_run,
        rtol=0.005,
        transfer=True,
    ),
}
