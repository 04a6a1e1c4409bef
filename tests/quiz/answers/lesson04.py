"""Answers a learner could give to lesson 04's quick checks: right ones written differently
(ACCEPT) and the slips the lesson warns about (REJECT). Multiple-choice answers are canonical
option indexes or option texts."""

ACCEPT = {
    "qc_chunk_pairs": ["n_q*(n_k-n_q) + n_q*(n_q+1)//2", "n_q * n_k - n_q * (n_q - 1) / 2",
                       "(n_k - n_q) * n_q + (n_q ** 2 + n_q) / 2"],
    "qc_query_mask_shape": [1, "(B, 1, n, 1)"],
    "qc_renormalise": [3, "Exactly the weights that masking the scores gives"],
    "qc_window_offset": ["n_k - n_q - w", "n_k-(n_q+w)", "-w + n_k - n_q"],
}
REJECT = {
    "qc_chunk_pairs": ["n_q * (n_q + 1) / 2", "n_q * n_k", "n_q * n_k / 2",
                       "n_q * (n_k - n_q)", "n_k * (n_k + 1) / 2"],
    "qc_query_mask_shape": [0, 2, 3, "(B, 1, 1, n)"],
    "qc_renormalise": [0, 1, 2],
    "qc_window_offset": ["-w", "n_k - n_q - w + 1", "n_k - w", "n_k - n_q", "w"],
}
