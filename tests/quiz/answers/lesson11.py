"""Answers a learner could give to lesson 11's quick checks: right ones written differently
(ACCEPT) and the slips the lesson warns about (REJECT). Multiple-choice answers are canonical
option indexes or option texts."""

ACCEPT = {
    "qc_decode_read_time": [
        "2 * layers * kv_heads * head_dim * tokens * batch * bytes_per_value / bandwidth * 1e3",
        "1000 * 2 * kv_heads * head_dim * bytes_per_value * layers * batch * tokens / 3.35e12",
        "layers * kv_heads * head_dim * tokens * batch * bytes_per_value / 1.675e9",
    ],
    "qc_h200_ridge": [1, "Compute-bound: the ridge drops to ~206"],
    "qc_gqa_decode": [0, "It falls about 8x, as the cache it reads does"],
    "qc_page_waste": ["math.ceil(n / page_size) * page_size - n", "(-n) % page_size",
                      "(page_size - n % page_size) % page_size"],
    "qc_chunk_scores": ["N * (N + C) / 2", "(N**2 + N*C) / 2", "N / 2 * (N + C)",
                        "C * C * (N // C) * (N // C + 1) / 2"],
}
REJECT = {
    "qc_decode_read_time": [
        # compute time; query heads; no factor 2; one layer; one sequence; seconds; GiB/s
        "4 * batch * num_heads * tokens * head_dim * layers / peak_flops * 1e3",
        "2 * layers * num_heads * head_dim * tokens * batch * bytes_per_value / bandwidth * 1e3",
        "layers * kv_heads * head_dim * tokens * batch * bytes_per_value / bandwidth * 1e3",
        "2 * kv_heads * head_dim * tokens * batch * bytes_per_value / bandwidth * 1e3",
        "2 * layers * kv_heads * head_dim * tokens * bytes_per_value / bandwidth * 1e3",
        "2 * layers * kv_heads * head_dim * tokens * batch * bytes_per_value / bandwidth",
        "2 * layers * kv_heads * head_dim * tokens * batch * bytes_per_value / (3.35 * 2**40)"
        " * 1e3",
    ],
    "qc_h200_ridge": [0, 2, 3, "Memory-bound: the ridge stays at about 295"],
    "qc_gqa_decode": [1, 2, 3],
    "qc_page_waste": ["page_size - n % page_size", "n % page_size", "page_size - 1",
                      "math.ceil(n / page_size)"],
    "qc_chunk_scores": ["N ** 2", "N * (N + 1) / 2", "N ** 2 / 2", "N * C",
                        "N * (N - C) / 2"],
}
