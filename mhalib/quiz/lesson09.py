"""Quick checks of lesson 09 (positions: permutation equivariance and rotary embeddings)."""

from __future__ import annotations

import math

from mhalib.quiz.question import FillIn, MultipleChoice


def _feature(j: int, d: int) -> dict:
    return {"j": j, "d": d}


def _pair(i: int, d: int, base: float) -> dict:
    return {"i": i, "d": d, "base": base}


QUESTIONS = {
    "qc_rope_partner": FillIn(
        id="qc_rope_partner",
        prompt="In the rotate-half layout, feature j of a head of width d (any j from 0 to "
               "d - 1, in the first half or the second) is rotated together with one partner "
               "feature. Which? Use the names j and d.",
        template="partner = ____",
        scenarios=[_feature(0, 8), _feature(3, 8), _feature(5, 8), _feature(7, 8),
                   _feature(70, 128), _feature(1, 2)],
        expected=lambda s: (s["j"] + s["d"] // 2) % s["d"],
        explanation="Pairs are (i, i + d/2) for i < d/2, so a feature of the first half finds "
                    "its partner d/2 further on and a feature of the second half d/2 back: "
                    "(j + d/2) mod d covers both.",
        hint="Feature 5 of a head of width 8 is in the second half: its partner is 1, not 9.",
        examples=["(j + d // 2) % d", "(j + d / 2) % d"],
    ),
    "qc_rope_wavelength": FillIn(
        id="qc_rope_wavelength",
        prompt="Pair i of a head of width d turns by base ** (-2 i / d) radians per token. "
               "After how many tokens has it made exactly one full turn (its wavelength, in "
               "general not a whole number)? Use the names i, d and base (math and np are "
               "available).",
        template="wavelength = ____",
        scenarios=[_pair(0, 128, 10000.0), _pair(63, 128, 10000.0), _pair(32, 64, 500000.0),
                   _pair(5, 16, 100.0)],
        expected=lambda s: 2 * math.pi * s["base"] ** (2 * s["i"] / s["d"]),
        explanation="A full turn is 2 pi radians, so the pair comes back after 2 pi / theta_i = "
                    "2 pi base^(2i/d) tokens: about 6.3 tokens for pair 0, and for the last "
                    "pair of a 128-wide head with base 10000 about 54,000 tokens.",
        hint="Divide one full turn (in radians) by the angle per token.",
        examples=["2 * math.pi * base ** (2 * i / d)", "2 * np.pi / base ** (-2 * i / d)"],
    ),
    "qc_causal_swap": MultipleChoice(
        id="qc_causal_swap",
        prompt="A causal attention layer with no position information reads a 10-token "
               "sequence (positions 0 to 9). You swap the tokens at positions 2 and 5. Which "
               "positions are sure to give the same output as before?",
        options=["All ten, with the outputs at 2 and 5 swapped, as without a mask",
                 "Positions 0, 1 and 6 to 9",
                 "Only positions 0 and 1",
                 "Only positions 2 and 5, which keep their own outputs"],
        key="38f295f35c0ca834997c",
        explanation="Position t attends to the set of tokens 0..t, with no order inside it. "
                    "Positions 0 and 1 never see either token; from position 5 on the set "
                    "holds both, so it is unchanged, except at position 5 itself, where the "
                    "query now comes from the old token 2 instead of token 5. Positions 2, 3 "
                    "and 4 see token 5 where token 2 was.",
        why_wrong={0: "Without a mask that holds; the mask makes the set a query sees depend on "
                      "where it stands, so a token moved across other tokens changes what "
                      "they see.",
                   2: "Positions after 5 see both swapped tokens, and attention without "
                      "positions cannot tell their order: the set is the same, so the output "
                      "is too.",
                   3: "Token 5 moved to position 2 now sees only tokens 0, 1 and itself, not "
                      "the six tokens it saw before, so its output changes (and so does token "
                      "2's, which now sees more)."},
    ),
    "qc_decode_rotations": MultipleChoice(
        id="qc_decode_rotations",
        prompt="Decoding with RoPE: the cache holds the keys of positions 0 to t - 1, stored "
               "after rotation. What does step t rotate?",
        options=["Every cached key again, by its distance to t",
                 "The new query and the new key, both at position t",
                 "The new query at t, and the new key at position 0",
                 "Nothing: rotations are only needed during the prefill"],
        key="c901b27c6381e0962648",
        explanation="A key's rotation depends on its own position only, and q_t . k_n then "
                    "depends on t - n by itself: each key is rotated once, before it is "
                    "cached, and never touched again.",
        why_wrong={0: "Each cached key already carries the rotation of its own position n, and "
                      "the dot product with the query rotated at t turns the two into the "
                      "distance t - n by itself. Rotating the cached keys again would change "
                      "that distance, and cost work that grows with t at every step.",
                   2: "The new token is at position t, not 0: a decode step that restarts "
                      "positions at 0 puts every new token at the start of the sequence.",
                   3: "The new query and key have not been rotated yet; without their "
                      "rotation the newest token has no position at all."},
    ),
}
