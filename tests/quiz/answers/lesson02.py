"""Answers a learner could give to lesson 02's quick checks: right ones written differently
(ACCEPT) and the slips the lesson warns about (REJECT). Multiple-choice answers are canonical
option indexes or option texts."""

ACCEPT = {
    "qc_seq_first_split": [3, "y.transpose(1, 2, 0, 3)"],
    "qc_ablate_head": [1, "Zero rows 3·d_head to 4·d_head − 1 of W_O"],
    "qc_head_scale": ["1 / math.sqrt(num_heads)", "num_heads ** -0.5",
                      "(head_dim / d_model) ** 0.5", "np.sqrt(head_dim) / np.sqrt(d_model)"],
    "qc_attention_weights": ["4 * d_model * num_heads * head_dim",
                             "2 * d_model * num_heads * head_dim * 2"],
}
REJECT = {
    "qc_seq_first_split": [0, 1, 2, "y.transpose(0, 2, 1, 3)"],
    "qc_ablate_head": [0, 2, 3],
    "qc_head_scale": ["head_dim / d_model", "math.sqrt(d_model / head_dim)", "1 / num_heads", "1",
                      "math.sqrt(head_dim)"],
    "qc_attention_weights": ["4 * d_model ** 2", "3 * d_model * num_heads * head_dim",
                             "4 * num_heads * head_dim ** 2", "4 * d_model * head_dim",
                             "d_model * num_heads * head_dim"],
}
