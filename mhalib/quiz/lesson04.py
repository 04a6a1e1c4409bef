"""Quick checks of lesson 04 (masks)."""

from __future__ import annotations

from mhalib.quiz.question import FillIn, MultipleChoice

QUESTIONS = {
    "qc_cache_offset": FillIn(
        id="qc_cache_offset",
        prompt="Decoding with a KV cache: n_q new queries are the last n_q of n_k positions. "
               "Fill in the offset so that query i may attend exactly the keys up to its own "
               "position.",
        template="allowed = j <= i + ____",
        scenarios=[{"n_q": 1, "n_k": 9}, {"n_q": 3, "n_k": 8}, {"n_q": 5, "n_k": 5},
                   {"n_q": 2, "n_k": 4}],
        expected=lambda s: s["n_k"] - s["n_q"],
        explanation="Query i sits at absolute position i + n_k - n_q, so it may attend keys "
                    "j <= i + n_k - n_q. When n_q == n_k the offset is 0 and the mask is the "
                    "plain lower triangle.",
        hint="Where does query 0 sit when only the last n_q positions are queries?",
        examples=["n_k - n_q", "-(n_q - n_k)"],
    ),
    "qc_mask_fill": MultipleChoice(
        id="qc_mask_fill",
        prompt="Before the softmax, what should a masked score be replaced with?",
        options=["0, so the key contributes nothing",
                 "-inf, so that exp(score) is exactly 0 and the other weights still sum to 1",
                 "The smallest score in the row",
                 "It should be left alone; multiply the weights by the mask afterwards"],
        key="dd0b3c7f5d67ca3862b9",
        explanation="exp(-inf) = 0, so a masked key gets no weight and the softmax normalises "
                    "over the allowed keys only. (Rows with no allowed key need a guard: their "
                    "softmax would be 0 / 0.)",
        why_wrong={0: "exp(0) = 1: a score of 0 still gives the masked key a weight.",
                   2: "The smallest score still has a positive exponential, so masked keys keep "
                      "some weight.",
                   3: "Then the allowed weights no longer sum to 1; you would have to "
                      "renormalise, and large masked scores can still underflow the rest."},
    ),
    "qc_padding_shape": MultipleChoice(
        id="qc_padding_shape",
        prompt="Scores have shape (B, H, N_q, N_k). Why does padding_mask return (B, 1, 1, n) "
               "rather than (B, n)?",
        options=["To save memory",
                 "Because every head needs its own padding",
                 "So that it broadcasts: the same keys are padding for every head and every "
                 "query of a sequence",
                 "Because masks must always have four dimensions"],
        key="e1bf681e83c6d2d8e1be",
        explanation="Broadcasting aligns shapes from the right: (B, 1, 1, n) lines up n with N_k "
                    "and B with the batch, and repeats over heads and queries. A (B, n) mask "
                    "would be aligned with (N_q, N_k) instead, which is wrong (or fails).",
        why_wrong={0: "(B, n) and (B, 1, 1, n) hold the same number of values.",
                   1: "Padding is a property of the sequence, the same for all heads.",
                   3: "A causal mask of shape (N_q, N_k) broadcasts just as well; it is about "
                      "lining up the axes."},
    ),
}
