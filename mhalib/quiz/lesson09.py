"""Quick checks of lesson 09 (positions: permutation equivariance and rotary embeddings): what
the learner sees, no answers.

The keys are instructor data in ``grading/quick_checks/lesson09.py``.
"""

from __future__ import annotations

import numpy as np

from mhalib.quiz.question import FillIn, MultipleChoice


def _features(rng: np.random.Generator) -> list[dict]:
    fixed = [(0, 8), (3, 8), (5, 8), (7, 8), (70, 128), (1, 2)]
    d = int(rng.choice([16, 64, 256]))
    return [{"j": j, "d": d} for j, d in fixed] + [{"j": int(rng.integers(d)), "d": d}]


def _pair(rng: np.random.Generator) -> dict:
    d = int(rng.choice([64, 128, 256]))
    return {"d": d, "i": int(rng.integers(1, d // 2 - 1)),
            "base": int(rng.choice([10_000, 500_000, 1_000_000]))}


QUESTIONS = {
    "qc_draft_positions": MultipleChoice(
        id="qc_draft_positions",
        prompt="Speculative decoding with RoPE: the cache holds the rotated keys of positions 0 "
               "to t - 1, and a small model has drafted 4 more tokens, which the large model "
               "checks in one forward pass. At which positions are the 4 new queries and keys "
               "rotated?",
        options=("0 to 3, as in a fresh prompt",
                 "t for all four (the cache length)",
                 "t to t + 3, one for each new token",
                 "t + 1 to t + 4, past the cache"),
        transfer=True,
    ),
    "qc_rope_partner": FillIn(
        id="qc_rope_partner",
        prompt="In the rotate-half layout, feature j of a head of width d (any j from 0 to "
               "d - 1, in the first half or the second) is rotated together with one partner "
               "feature. Which one?",
        template="partner = ____",
        names={"j": "the feature's index, 0 to d - 1", "d": "the head's width (even)"},
        scenarios=_features,
    ),
    "qc_rope_wavelength": FillIn(
        id="qc_rope_wavelength",
        prompt="A model's heads are d = {d} features wide and its RoPE base is {base:,}, so pair "
               "i turns by base ** (-2 i / d) radians per token. After how many tokens has pair "
               "i = {i} made exactly one full turn (its wavelength)? A number with at least "
               "three significant figures, or an expression, will do.",
        template="wavelength = ____",
        names={"i": "the pair's index", "d": "the head's width", "base": "the RoPE base"},
        variant=_pair,
        rtol=0.01,
        transfer=True,
    ),
    "qc_causal_swap": MultipleChoice(
        id="qc_causal_swap",
        prompt="A causal attention layer with no position information reads a 10-token "
               "sequence (positions 0 to 9). You swap the tokens at positions 2 and 5. Which "
               "positions are sure to give the same output as before?",
        options=("Positions 0, 1 and 6 to 9",
                 "All ten, with the outputs at 2 and 5 swapped",
                 "Only positions 0 and 1",
                 "Positions 2 and 5, which keep their outputs"),
        transfer=True,
    ),
}
