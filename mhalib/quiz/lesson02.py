"""Quick checks of lesson 02 (multi-head attention): what the learner sees, no answers.

The keys are instructor data in ``grading/quick_checks/lesson02.py``.
"""

from __future__ import annotations

import numpy as np

from mhalib.accounting.models import MODELS
from mhalib.quiz.question import FillIn, MultipleChoice

# published configs whose heads split d_model exactly (H * d_head == d_model), MLA left out
_SPLIT_MODELS = tuple(name for name, m in MODELS.items()
                      if not m.is_mla and m.num_heads * m.head_dim == m.d_model)


def _model_heads(rng: np.random.Generator) -> dict:
    model = MODELS[_SPLIT_MODELS[rng.integers(len(_SPLIT_MODELS))]]
    return {"model": model.name, "d_model": model.d_model, "num_heads": model.num_heads,
            "head_dim": model.head_dim}


def _wide_heads(rng: np.random.Generator) -> dict:
    while True:
        d_model = int(rng.choice([2048, 4096, 5120]))
        num_heads = int(rng.choice([8, 16, 24, 32]))
        head_dim = int(rng.choice([128, 256]))
        if num_heads * head_dim != d_model:
            return {"d_model": d_model, "num_heads": num_heads, "head_dim": head_dim}


QUESTIONS = {
    "qc_seq_first_split": MultipleChoice(
        id="qc_seq_first_split",
        prompt="PyTorch's nn.MultiheadAttention takes its input sequence-first by default: x "
               "has shape (N, B, d_model). In numpy, after y = x.reshape(N, B, H, d_head), "
               "which call gives the (B, H, N, d_head) layout of split_heads?",
        options=("y.transpose(0, 2, 1, 3)", "y.transpose(1, 0, 2, 3)",
                 "x.reshape(B, H, N, d_head)", "y.transpose(1, 2, 0, 3)"),
        transfer=True,
    ),
    "qc_ablate_head": MultipleChoice(
        id="qc_ablate_head",
        prompt="A trained layer (no biases) keeps its heads in contiguous blocks of d_head "
               "features, as in this course. Which edit switches off head 3 (counting from 0) "
               "alone, so that it adds nothing to the output and the other heads are "
               "unchanged?",
        options=("Zero columns 3·d_head to 4·d_head − 1 of W_O",
                 "Zero rows 3·d_head to 4·d_head − 1 of W_O",
                 "Zero columns 3·d_head to 4·d_head − 1 of W_Q",
                 "Zero rows 3, 3 + H, 3 + 2H, … of W_O"),
        transfer=True,
    ),
    "qc_head_scale": FillIn(
        id="qc_head_scale",
        prompt="{model} has d_model = {d_model} and {num_heads} heads of width {head_dim}. A "
               "layer divides every head's scores by sqrt(d_model) instead of sqrt(d_head). "
               "With independent entries of mean 0 and variance 1 in q and k, what is "
               "the standard deviation of those scores (it should be 1)?",
        template="std = ____",
        names={"d_model": "the model width", "num_heads": "H",
               "head_dim": "d_head, the width of one head"},
        variant=_model_heads,
        rtol=0.01,
        transfer=True,
    ),
    "qc_attention_weights": FillIn(
        id="qc_attention_weights",
        prompt="A layer of width d_model = {d_model} runs {num_heads} heads of width "
               "{head_dim} (H · d_head need not equal d_model, as in Gemma 7B). How many "
               "weights do W_Q, W_K, W_V and W_O hold together (no biases)?",
        template="weights = ____",
        names={"d_model": "the model width", "num_heads": "H",
               "head_dim": "d_head, the width of one head"},
        variant=_wide_heads,
        transfer=True,
    ),
}
