"""Keys of lesson 09's quick checks (instructor data: never copied into the package).

See mhalib.quiz.keys for the format.
"""

KEYS = {
    "qc_rope_partner": {
        "answer": "(j + d // 2) % d",
        "explanation": "Pairs are (i, i + d/2) for i < d/2, so a feature of the first half "
                       "finds its partner d/2 further on and a feature of the second half d/2 "
                       "back: (j + d/2) mod d covers both.",
        "hint": "Feature 5 of a head of width 8 is in the second half: its partner is 1, not 9.",
        "mistakes": {
            "j + d // 2": "Right for the first half, but a feature of the second half has its "
                          "partner d/2 back, not past the end of the head: wrap around.",
            "j + 1 - 2 * (j % 2)": "Those are the adjacent pairs (2i, 2i + 1) of Meta's original "
                                   "layout; rotate-half pairs feature i with feature i + d/2.",
            "j - d // 2": "Right for the second half, but a feature of the first half has its "
                          "partner d/2 further on, not before the start of the head.",
        },
        "accepted": ["(j + d / 2) % d", "(d // 2 + j) % d", "(j - d // 2) % d"],
    },
    "qc_rope_wavelength": {
        "answer": "2 * math.pi * base ** (2 * i / d)",
        "explanation": "A full turn is 2 pi radians and pair {i} turns by {base}^(-2 x {i} / "
                       "{d}) radians per token, so it comes back after 2 pi x {base}^(2 x {i} / "
                       "{d}) = {value} tokens.",
        "hint": "Divide one full turn (in radians) by the angle the pair turns per token.",
        "mistakes": {
            "base ** (-2 * i / d)": "That is the angle the pair turns per token, in radians; "
                                    "the wavelength is the number of tokens one full turn "
                                    "(2 pi radians) takes.",
            "2 * math.pi * base ** (-2 * i / d)": "That multiplies a full turn by the angle per "
                                                  "token; divide by it instead.",
            "2 * math.pi * base ** (i / d)": "The exponent of the frequency is -2i/d, not -i/d: "
                                             "the d features form only d/2 pairs.",
            "2 * math.pi * base ** (2 * (i + 1) / d)": "Pairs are counted from 0: pair 0 turns "
                                                       "by one radian per token.",
        },
        "accepted": ["2 * np.pi / base ** (-2 * i / d)",
                     "2 * math.pi * math.exp(2 * i / d * math.log(base))"],
    },
    "qc_causal_swap": {
        "answer": 0,
        "explanation": "Position p attends to the set of tokens 0..p, with no order inside it. "
                       "Positions 0 and 1 never see either swapped token; from position 6 on "
                       "the set holds both and the query is unchanged, so the output is too. "
                       "At position 5 the set is the same but the query now comes from the old "
                       "token 2; positions 2, 3 and 4 see token 5 where token 2 was.",
        "why_wrong": {
            1: "Without a mask that holds; with it, the set a query sees depends on where it "
               "stands, so a token moved across others changes what they see.",
            2: "Positions after 5 see both swapped tokens, and attention without positions "
               "cannot tell their order: the set is the same, so the output is too.",
            3: "Token 5, moved to position 2, now sees only tokens 0, 1 and itself instead of "
               "six tokens, so its output changes; token 2, moved to position 5, sees more than "
               "before.",
        },
    },
    "qc_draft_positions": {
        "answer": 2,
        "explanation": "Each token is rotated at its own position, and the cache's t tokens "
                       "hold positions 0 to t - 1, so the drafted tokens stand at t, t + 1, "
                       "t + 2 and t + 3. Their keys then enter the cache rotated, exactly as "
                       "four single decode steps would have rotated them.",
        "why_wrong": {
            0: "Counting from 0 again puts the drafted tokens at the start of the text: their "
               "scores against the cached keys would measure the wrong distances.",
            1: "The cache length is the position of the first new token only; the drafted "
               "tokens follow one another, and a shared position would make them "
               "indistinguishable to RoPE.",
            3: "The cache holds positions 0 to t - 1, so the first free position is t itself, "
               "not t + 1: this shifts every distance to the cache by one.",
        },
    },
}
