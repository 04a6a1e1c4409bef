"""Answers a learner could give to lesson 09's quick checks: right ones written differently
(ACCEPT) and the slips the lesson warns about (REJECT). Multiple-choice answers are canonical
option indexes or option texts."""

ACCEPT = {
    "qc_rope_partner": ["(j + d // 2) % d", "(j + d / 2) % d", "(d // 2 + j) % d",
                        "(j + d * 0.5) % d"],
    "qc_rope_wavelength": ["2 * math.pi * base ** (2 * i / d)",
                           "2 * np.pi / base ** (-2 * i / d)",
                           "2*math.pi*math.exp(2*i/d*math.log(base))",
                           "2 * math.pi / (1 / base) ** (2 * i / d)"],
    "qc_causal_swap": [0, "Positions 0, 1 and 6 to 9"],
    "qc_draft_positions": [2, "t to t + 3, one for each new token"],
}
REJECT = {
    # forgetting the wrap-around; adjacent pairs; a mirror image; no partner at all
    "qc_rope_partner": ["j + d // 2", "j ^ 1", "j + 1", "d - 1 - j", "j"],
    # the angle itself; no 2 pi; the exponent without its 2; one pair too far
    "qc_rope_wavelength": ["base ** (-2 * i / d)", "base ** (2 * i / d)",
                           "2 * math.pi * base ** (i / d)", "2 * math.pi / base ** (2 * i / d)",
                           "2 * math.pi", "2 * math.pi * base ** (2 * i / d) / 2"],
    "qc_causal_swap": [1, 2, 3, "All ten, with the outputs at 2 and 5 swapped"],
    "qc_draft_positions": [0, 1, 3, "0 to 3, as in a fresh prompt"],
}
