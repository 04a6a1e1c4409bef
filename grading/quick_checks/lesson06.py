"""Keys of lesson 06's quick checks (instructor data: never copied into the package).

See mhalib.quiz.keys for the format.
"""

KEYS = {
    "qc_gqa_savings": {
        "answer": 2,
        "explanation": "The cache holds K and V of the 8 K/V heads instead of 64, and W_K, "
                       "W_V shrink from (8192, 8192) to (8192, 1024). The rest stays: W_Q and "
                       "W_O, and the attention arithmetic, since every query head still meets "
                       "every key.",
        "why_wrong": {
            0: "Each of the 64 query heads still scores all N keys and sums N values: the "
               "shared heads are repeated, not skipped, so the N^2 products cost the same "
               "as in MHA.",
            1: "Only W_K and W_V shrink; W_Q and W_O stay (8192, 8192). The layer goes from "
               "4 d^2 to 2 d^2 + 2 d^2 / 8 weights: 1.8 times fewer, not 8.",
            3: "GQA changes how many K/V heads there are, not their width: each cached key "
               "and value still has 128 numbers.",
        },
    },
    "qc_kv_cache_gib": {
        "answer": "2 * layers * kv_heads * head_dim * tokens * batch * bytes_per_value / 2**30",
        "explanation": "K and V (2) x {layers} layers x {kv_heads} K/V heads x {head_dim} x "
                       "{tokens} tokens x {batch} sequences x {bytes_text} = "
                       "{value} GiB. The {num_heads} query heads do not appear.",
        "hint": "Per token and layer the cache keeps one key and one value per K/V head; "
                "multiply out and divide by 2**30.",
        "mistakes": {
            "2 * layers * num_heads * head_dim * tokens * batch * bytes_per_value / 2**30":
                "That is the cache of an MHA model: the cache keeps one K and V per K/V "
                "head, {kv_heads} here, not per query head.",
            "layers * kv_heads * head_dim * tokens * batch * bytes_per_value / 2**30":
                "That is the keys alone: the cache holds the values too (factor 2).",
            "2 * layers * kv_heads * head_dim * tokens * batch * bytes_per_value / 1e9":
                "That is in GB (10**9 bytes); a GiB is 2**30 bytes, 7% more.",
            "2 * kv_heads * head_dim * tokens * batch * bytes_per_value / 2**30":
                "That is one layer: every one of the {layers} layers keeps its own keys and "
                "values.",
            "2 * layers * kv_heads * head_dim * tokens * bytes_per_value / 2**30":
                "That is one sequence: the batch holds {batch} of them, each with its own "
                "cache.",
        },
        "accepted": ["2 * layers * kv_heads * head_dim * tokens * batch * bytes_per_value "
                     "/ 1024**3"],
    },
    "qc_cache_reads": {
        "answer": 1,
        "explanation": "Step t reads the K and V of about t tokens, so N steps read about "
                       "1 + 2 + ... + N = N^2 / 2 tokens' worth (times 2 L G d_head b bytes "
                       "per token), the same growth as the attention FLOPs with a cache. With "
                       "the weights, read once per step, that traffic is what makes decoding "
                       "memory-bound.",
        "why_wrong": {
            0: "That is how the cache's size grows. Every step reads all of it, and the "
               "steps add up.",
            2: "N^3 is the attention work of recomputing every prefix; with a cache each "
               "step reads the t cached tokens once.",
            3: "Being in GPU memory is not being in the arithmetic units: every step moves "
               "the whole cache from memory to the cores, and that traffic takes time.",
        },
    },
    "qc_pool_first_head": {
        "answer": "h // (num_heads // num_kv_heads) * (num_heads // num_kv_heads)",
        "explanation": "Query head h reads K/V head g = h // n_rep, which was pooled from "
                       "the n_rep consecutive heads of group g: g n_rep to g n_rep + n_rep - "
                       "1. So first = (h // n_rep) * n_rep, h rounded down to a multiple of "
                       "n_rep.",
        "hint": "Start from the K/V head that query head h reads: which checkpoint heads "
                "were averaged into it?",
        "mistakes": {
            "h // (num_heads // num_kv_heads)": "That is the index g of the K/V head after the "
                                                "conversion; the checkpoint heads pooled "
                                                "into it start at g * n_rep.",
            "h % num_kv_heads": "That is the tiled pairing of x.repeat, which the lesson "
                                "warns against: with interleaved copies, group g is heads "
                                "g n_rep to g n_rep + n_rep - 1.",
            "h": "The K/V head h reads is a mean over its whole group, which starts at the "
                 "first head of the group, not at h itself.",
        },
        "accepted": ["h - h % (num_heads // num_kv_heads)",
                     "(h * num_kv_heads // num_heads) * num_heads // num_kv_heads"],
    },
}
