"""Quick checks of lesson 04 (masks): what the learner sees, no answers.

The keys are instructor data in ``grading/quick_checks/lesson04.py``.
"""

from __future__ import annotations

import numpy as np

from mhalib.quiz.question import FillIn, MultipleChoice


def _windows(rng: np.random.Generator) -> list[dict]:
    """Caches of different sizes (n_q new queries over n_k keys) and window widths."""
    cases = [(1, 9, 3), (3, 8, 4), (5, 5, 2), (4, 20, 6)]
    for _ in range(4):
        n_q = int(rng.integers(1, 40))
        cases.append((n_q, n_q + int(rng.integers(0, 200)), int(rng.integers(1, 64))))
    return [{"n_q": n_q, "n_k": n_k, "w": w} for n_q, n_k, w in cases]


def _chunk(rng: np.random.Generator) -> dict:
    n_k = int(rng.choice([2048, 4096, 8192, 16384]))
    n_q = int(rng.choice([128, 256, 512, 1024]))
    return {"n_q": n_q, "n_k": n_k, "cached": n_k - n_q}


QUESTIONS = {
    "qc_chunk_pairs": FillIn(
        id="qc_chunk_pairs",
        prompt="Chunked prefill: a long prompt goes through the model {n_q} tokens at a time. "
               "The chunk in hand holds the last n_q = {n_q} of n_k = {n_k} positions; the "
               "keys and values of the {cached} earlier positions are already in the cache. "
               "With this lesson's causal mask (bottom-right), how many (query, key) pairs may "
               "attend?",
        template="allowed_pairs = ____",
        names={"n_q": "the new queries of the chunk", "n_k": "all the keys, cached and new"},
        variant=_chunk,
        transfer=True,
    ),
    "qc_query_mask_shape": MultipleChoice(
        id="qc_query_mask_shape",
        prompt="Scores have shape (B, H, n, n). Besides the padded keys, you now want to mask "
               "the padded *queries* of each sequence: whole rows, the same for every head "
               "and every key (masked_attention then gives those rows zeros). A boolean (B, n) "
               "array says which positions are real. What shape should that query mask take?",
        options=("(B, 1, 1, n)",
                 "(B, 1, n, 1)",
                 "(B, n, 1)",
                 "(B, n): broadcasting adds the missing axes"),
        transfer=True,
    ),
    "qc_renormalise": MultipleChoice(
        id="qc_renormalise",
        prompt="Instead of filling forbidden scores with -inf, a colleague takes the softmax "
               "over all keys, multiplies the weights by the mask, then divides each row by "
               "its new sum. In exact arithmetic, for a row with at least one allowed key, how "
               "do the weights compare with masking the scores?",
        options=("Different: the masked keys still shift the rest",
                 "Each row sums to less than 1",
                 "The same only if masked scores are the lowest",
                 "Exactly the weights that masking the scores gives"),
        transfer=True,
    ),
    "qc_window_offset": FillIn(
        id="qc_window_offset",
        prompt="A sliding window of w keys: each position may attend itself and the w - 1 "
               "positions before it, and nothing later. Decoding against a cache, the n_q "
               "queries are the last n_q of n_k positions, as in section 1. Fill in the offset "
               "of the window's lower edge (i indexes the queries, j the keys).",
        template="allowed = (j <= i + n_k - n_q) & (j > i + ____)",
        names={"n_q": "the new queries", "n_k": "all the keys, cached and new",
               "w": "the window width, the query's own position included"},
        scenarios=_windows,
        transfer=True,
    ),
}
