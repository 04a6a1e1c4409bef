"""Answers a learner could give to lesson 06's quick checks: right ones written differently
(ACCEPT) and the slips the lesson warns about (REJECT). Multiple-choice answers are canonical
option indexes or option texts."""

ACCEPT = {
    "qc_gqa_savings": [2, "The KV cache and the W_K, W_V weights"],
    "qc_kv_cache_gib": ["2*layers*kv_heads*head_dim*tokens*batch*bytes_per_value/2**30",
                        "layers * kv_heads * head_dim * tokens * batch * bytes_per_value "
                        "* 2 / 1024 / 1024 / 1024"],
    "qc_cache_reads": [1, "Like N^2, summed over the growing cache"],
    "qc_pool_first_head": ["h - h % (num_heads // num_kv_heads)",
                           "(h // (num_heads // num_kv_heads)) * num_heads // num_kv_heads"],
}
REJECT = {
    "qc_gqa_savings": [0, 1, 3],
    "qc_kv_cache_gib": ["2*layers*num_heads*head_dim*tokens*batch*bytes_per_value/2**30",
                        "2*layers*kv_heads*head_dim*tokens*batch*bytes_per_value",
                        "8*2*layers*kv_heads*head_dim*tokens*batch*bytes_per_value/2**30"],
    "qc_cache_reads": [0, 2, 3],
    "qc_pool_first_head": ["h // (num_heads // num_kv_heads)", "h % num_kv_heads", "h",
                           "h // num_kv_heads"],
}
