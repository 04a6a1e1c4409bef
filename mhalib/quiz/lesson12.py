"""Quick checks of lesson 12 (the backward pass of attention): what the learner sees, no answers.

The keys are instructor data in ``grading/quick_checks/lesson12.py``.
"""

from __future__ import annotations

import numpy as np

from mhalib.accounting.models import MODELS
from mhalib.quiz.question import FillIn, MultipleChoice

# (name, layers, query heads, K/V heads, head dim) from the course's model table; models with
# grouped K/V heads, so that heads and kv_heads differ for every learner
_MODELS = [(name, MODELS[name].num_layers, MODELS[name].num_heads, MODELS[name].num_kv_heads,
            MODELS[name].head_dim)
           for name in ("Llama-3.1 8B", "Llama-3.1 70B", "Llama-3.1 405B", "Mistral 7B",
                        "Qwen2 7B")]
_DTYPES = [("bfloat16", 2), ("float16", 2), ("float32", 4)]


def _biased_rows(rng: np.random.Generator) -> list[dict]:
    """One query's out = p v + b, its bias b and an upstream gradient, for several widths."""
    rows = []
    for n_keys, d in [(5, 3), (9, 4), (2, 6), (16, 8)]:
        p = rng.dirichlet(np.ones(n_keys))
        v = rng.normal(size=(n_keys, d))
        b = rng.normal(size=d) * 2.0
        rows.append({"out": p @ v + b, "b": b, "grad_out": rng.normal(size=d)})
    return rows


def _training_memory(rng: np.random.Generator) -> dict:
    model, layers, heads, kv_heads, head_dim = _MODELS[rng.integers(len(_MODELS))]
    dtype, size = _DTYPES[rng.integers(len(_DTYPES))]
    return {"model": model, "layers": layers, "heads": heads, "kv_heads": kv_heads,
            "head_dim": head_dim, "tokens": int(rng.choice([2048, 4096, 8192])),
            # batch is never 1 nor heads / kv_heads (4, 7, 8, 16), so that forgetting the batch
            # or using the K/V heads gives a number of its own
            "batch": int(rng.choice([2, 3, 6])), "dtype": dtype, "bytes_per_value": size}


QUESTIONS = {
    "qc_saturated_row": MultipleChoice(
        id="qc_saturated_row",
        prompt="After training, one query's softmax is saturated: its weight on one key is "
               "1.0 and on every other key 0.0, to float precision. What is that query's row "
               "of grad_s (the gradient of the scores), whatever grad_p is?",
        options=("grad_p at the chosen key and zeros at all the others",
                 "All zeros: no gradient reaches its scores",
                 "grad_p, unchanged",
                 "1 - grad_p at the chosen key and zeros elsewhere"),
        transfer=True,
    ),
    "qc_delta_with_bias": FillIn(
        id="qc_delta_with_bias",
        prompt="A layer adds a learned vector b to every attention output: out = p v + b, and "
               "that out is what the forward keeps. For one query, write the softmax "
               "gradient's row term delta = sum_j p_j grad_p_j (grad_p_j = grad_out . v_j) "
               "from the vectors out, b and grad_out alone.",
        template="delta = ____",
        names={"out": "the query's kept output p v + b (a vector of d values)",
               "b": "the bias vector (d values)",
               "grad_out": "dL/d(out) for this query (d values)"},
        scenarios=_biased_rows,
        transfer=True,
    ),
    "qc_saved_gib": FillIn(
        id="qc_saved_gib",
        prompt="{model} has {layers} layers, {heads} query heads and {kv_heads} K/V heads of "
               "width {head_dim}. It trains on a batch of {batch} sequences of {tokens} "
               "tokens in {dtype} ({bytes_per_value} bytes per value). Compare its attention "
               "layers (projections included) with the textbook core and with FlashAttention, "
               "as measured in section 4: how many GiB more does the textbook core keep for "
               "the backward pass, summed over all layers (1 GiB = 2**30 bytes)?",
        template="gib = ____",
        names={"layers": "layers", "heads": "query heads", "kv_heads": "K/V heads",
               "head_dim": "width of a head", "tokens": "tokens per sequence",
               "batch": "sequences", "bytes_per_value": "bytes per stored value"},
        variant=_training_memory,
        rtol=0.01,
        transfer=True,
    ),
    "qc_outer_loop": MultipleChoice(
        id="qc_outer_loop",
        prompt="FlashAttention-2's backward gives each GPU thread block one block of keys and "
               "loops over the query blocks inside. Why keys outside, when its forward "
               "gives each thread block a block of queries?",
        options=("delta is a sum over all the keys of a row, so the keys have to come first",
                 "grad_q then needs no accumulation over blocks",
                 "Each key block's grad_k and grad_v are then finished in one place",
                 "The log-sum-exp is stored per key, not per query"),
        transfer=True,
    ),
    "qc_leaky_generation": MultipleChoice(
        id="qc_leaky_generation",
        prompt="A model is trained with a mask that lets position i also see key i + 1, and its "
               "training loss falls far below what the data allows. Now it generates: given a "
               "prompt, it predicts the token after the prompt's last position. What does it "
               "base that prediction on?",
        options=("The next token, which it learned to read through the leak",
                 "A row of NaN, since key i + 1 is masked",
                 "Its right prediction, a little less sure",
                 "Only keys <= i, which the leak let it ignore"),
        transfer=True,
    ),
}
