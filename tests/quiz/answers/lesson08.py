"""Answers a learner could give to lesson 08's quick checks: right ones written differently
(ACCEPT) and the slips the lesson warns about (REJECT). Multiple-choice answers are canonical
option indexes or option texts."""

ACCEPT = {
    "qc_period_two": [3, "A perfect previous-token head"],
    "qc_induction_key": ["query - span + 1", "query + 1 - span", "1 + query - span"],
    "qc_induction_circuit": [0, "A head of layer 0 that attends from j to key j - 1"],
    "qc_sink_previous": ["(1 + (tokens - 2) / 2) / (tokens - 1)", "tokens / (2 * tokens - 2)",
                         "(1 + 0.5 * (tokens - 2)) / (tokens - 1)",
                         "1 / (tokens - 1) + (tokens - 2) / (2 * (tokens - 1))"],
}
REJECT = {
    "qc_period_two": [0, 1, 2, "None: only an induction head can score 1"],
    "qc_induction_key": ["query - span", "query - 2 * span + 1", "query - prefix - span + 1",
                         "query - span - 1", "query - prefix + 1", "query + 1"],
    "qc_induction_circuit": [1, 2, 3, "The position embedding added at position j"],
    "qc_sink_previous": ["0.5", "(tokens - 2) / 2 / (tokens - 1)",
                         "(1 + (tokens - 2) / 2) / tokens", "1 / tokens",
                         "(1 + (tokens - 2) / 2) / (tokens - 2)", "1 / (tokens - 1)"],
}
