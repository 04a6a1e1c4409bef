"""Answers to the quick checks of lesson 09 (merged into tests/quiz/bank_answers.py)."""

ACCEPT = {
    "qc_rope_partner": ["(j + d // 2) % d", "(j + d / 2) % d", "(d // 2 + j) % d"],
    "qc_rope_wavelength": ["2 * math.pi * base ** (2 * i / d)",
                           "2 * np.pi / base ** (-2 * i / d)",
                           "2*math.pi*math.exp(2*i/d*math.log(base))"],
    "qc_causal_swap": ["b", "B", 1, "Positions 0, 1 and 6 to 9"],
    "qc_decode_rotations": ["b", 1, "The new query and the new key, both at position t"],
}

REJECT = {
    # the first half only; adjacent pairs; forgetting the modulo
    "qc_rope_partner": ["j + d // 2", "j ^ 1", "j + 1", "d - 1 - j"],
    # the angle itself; no 2 pi; the exponent without its 2
    "qc_rope_wavelength": ["base ** (-2 * i / d)", "base ** (2 * i / d)",
                           "2 * math.pi * base ** (i / d)", "2 * math.pi / base ** (2 * i / d)"],
    "qc_causal_swap": ["a", "c", "d", 0, 2, 3],
    "qc_decode_rotations": ["a", "c", "d"],
}
