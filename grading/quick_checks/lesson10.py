"""Keys of lesson 10's quick checks (instructor data: never copied into the package).

See mhalib.quiz.keys for the format.
"""

_MLA_GIB = "layers * (kv_lora_rank + rope_head_dim) * tokens * batch * bytes_per_value / 2**30"

KEYS = {
    "qc_mla_cache_gib": {
        "answer": _MLA_GIB,
        "explanation": "Per token and layer MLA keeps one latent of {kv_lora_rank} numbers and "
                       "one RoPE key of {rope_head_dim}, whatever the number of heads: {layers} "
                       "x ({kv_lora_rank} + {rope_head_dim}) x {tokens} x {batch} x "
                       "{bytes_text} / 2^30 = {value} GiB. MHA with {num_heads} heads of "
                       "{head_dim} would cache 2 x {num_heads} x {head_dim} numbers per token "
                       "and layer instead.",
        "hint": "Count the numbers one token leaves in one layer, then multiply by the layers, "
                "the tokens of every sequence and the bytes per number.",
        "mistakes": {
            "2 * " + _MLA_GIB: "MLA has no factor 2: keys and values are two readings of the "
                               "same latent, and the latent is cached once.",
            "layers * num_heads * (kv_lora_rank + rope_head_dim) * tokens * batch * "
            "bytes_per_value / 2**30": "The latent and the RoPE key are shared by all heads: "
                                       "the head count does not appear.",
            "2 * layers * num_heads * head_dim * tokens * batch * bytes_per_value / 2**30":
                "That is the cache of MHA with the same heads (a key and a value per head); MLA "
                "caches the latent and the shared RoPE key instead.",
            "layers * kv_lora_rank * tokens * batch * bytes_per_value / 2**30":
                "The shared RoPE key is cached too: it is made from the token's hidden state, "
                "not from the latent, so it cannot be recomputed.",
            "layers * (kv_lora_rank + rope_head_dim) * tokens * bytes_per_value / 2**30":
                "That is one sequence; each sequence of the batch has its own cache.",
            "(kv_lora_rank + rope_head_dim) * tokens * batch * bytes_per_value / 2**30":
                "That is one layer; every layer keeps its own latents.",
            "layers * (kv_lora_rank + rope_head_dim) * tokens * batch * bytes_per_value / 1e9":
                "That is in GB (10**9 bytes); a GiB is 2**30 bytes.",
        },
        "accepted": ["layers * (kv_lora_rank + rope_head_dim) * tokens * batch * "
                     "bytes_per_value / 1024**3"],
    },
    "qc_mla_groups": {
        "answer": "(kv_lora_rank + rope_head_dim) / (2 * head_dim)",
        "explanation": "A GQA group costs 2 * head_dim numbers (its key and its value), so the "
                       "MLA cache equals (kv_lora_rank + rope_head_dim) / (2 * head_dim) groups: "
                       "2.25 for DeepSeek-V2 and V3 (576 / 256), whatever their 128 heads.",
        "hint": "Divide what MLA caches per token by what one GQA group caches per token.",
        "mistakes": {
            "(kv_lora_rank + rope_head_dim) / head_dim": "A GQA group caches a key and a value, "
                                                         "2 * head_dim numbers, not head_dim.",
            "kv_lora_rank / (2 * head_dim)": "MLA also caches the shared RoPE key next to the "
                                             "latent.",
            "num_heads * (kv_lora_rank + rope_head_dim) / (2 * head_dim)":
                "The latent is shared by all heads: MLA's cache does not grow with the number of "
                "query heads.",
        },
        "accepted": ["(kv_lora_rank + rope_head_dim) / head_dim / 2",
                     "0.5 * (kv_lora_rank + rope_head_dim) / head_dim"],
    },
    "qc_absorbed_query_width": {
        "answer": 0,
        "explanation": "After absorption a head's query is taken into the space of the KV latent "
                       "(x @ w_q_latent[h], or from the query latent c_q @ W_uq_h @ W_uk_h.T), so "
                       "it has kv_lora_rank = 512 entries and each score is a 512-long dot "
                       "product with a cached latent. Where the query started (x, or a "
                       "1536-wide query latent) does not change where it ends up.",
        "why_wrong": {
            1: "That is the query of the naive form, which meets expanded keys of d_head "
               "numbers; absorbing W_uk maps it into the latent space instead.",
            2: "The query latent is only where queries start from; absorption moves them to the "
               "space of the KV latent they are compared with.",
            3: "7168 is the width of x, what the query projection starts from; a query has the "
               "width of the vectors it is compared with, here the 512-wide cached latents.",
        },
    },
    "qc_alibi_absorption": {
        "answer": 3,
        "explanation": "The score of head h becomes x_t W_Q,h W_UK,h^T c_s^T / sqrt(d_head) - "
                       "m_h (t - s). Nothing stands between W_Q,h and W_UK,h^T, so their product "
                       "is precomputed as before, and the bias needs only the two positions, "
                       "nothing cached. What blocks absorption under RoPE is not that it "
                       "depends on positions but that its rotation sits inside the product.",
        "why_wrong": {
            0: "A dependence on positions is harmless as long as it stays out of the product "
               "of the weights: RoPE's rotation sits between W_Q,h and W_UK,h^T, ALiBi's bias "
               "is added to the finished score.",
            1: "The slope multiplies the distance t - s, not the keys: the bias is one number "
               "per head and pair of positions, added to the score, and needs no key at all.",
            2: "Absorption is per head anyway (one product W_Q,h W_UK,h^T for each h), and each "
               "head adds its own bias to its own scores, so different slopes cost nothing.",
        },
    },
    "qc_per_head_rope_cache": {
        "answer": 2,
        "explanation": "512 for the latent plus 16 * 64 = 1,024 for the rotated keys: 1,536, "
                       "about 2.7 times the 576 of the shared key (with DeepSeek-V3's 128 heads "
                       "it would be fifteen times). Sharing one RoPE key among all heads is what "
                       "keeps the position part cheap.",
        "why_wrong": {
            0: "That is the shared key; with one key per head the 64 numbers are needed 16 "
               "times.",
            1: "Keys and values are two readings of the same latent, which is cached once, so "
               "nothing is stored twice; what changes here is the number of RoPE keys.",
            3: "The rotated key is made from the token's hidden state x_s (W_KR), not from the "
               "cached latent, so it cannot be recomputed from the cache; it must be cached (or "
               "the whole prefix run again).",
        },
    },
}
