"""Answers a learner could give to lesson 10's quick checks: right ones written differently
(ACCEPT) and the slips the lesson warns about (REJECT). Multiple-choice answers are canonical
option indexes or option texts."""

ACCEPT = {
    "qc_mla_cache_gib": [
        "layers * (kv_lora_rank + rope_head_dim) * tokens * batch * bytes_per_value / 2**30",
        "(kv_lora_rank + rope_head_dim) * layers * batch * tokens * bytes_per_value / 1073741824",
        "layers * 576 * tokens * batch * bytes_per_value / 1024 / 1024 / 1024",
    ],
    "qc_mla_groups": ["(kv_lora_rank + rope_head_dim) / (2 * head_dim)",
                      "(kv_lora_rank + rope_head_dim) / head_dim / 2",
                      "0.5 * (kv_lora_rank + rope_head_dim) / head_dim"],
    "qc_absorbed_query_width": [0, "512: the KV latent's width"],
    "qc_alibi_absorption": [3, "Yes: the bias is added to the finished score, after the dot "
                                "product"],
    "qc_per_head_rope_cache": [2, "1,536: latent and 16 keys"],
}
REJECT = {
    "qc_mla_cache_gib": [
        # K and V counted twice; per-head latents; MHA's cache; no RoPE key; GB
        "2 * layers * (kv_lora_rank + rope_head_dim) * tokens * batch * bytes_per_value / 2**30",
        "layers * num_heads * 576 * tokens * batch * bytes_per_value / 2**30",
        "2 * layers * num_heads * head_dim * tokens * batch * bytes_per_value / 2**30",
        "layers * 512 * tokens * batch * bytes_per_value / 2**30",
        "layers * 576 * tokens * batch * bytes_per_value / 1e9",
        "layers * 576 * tokens * batch * bytes_per_value",
    ],
    "qc_mla_groups": [
        "2.25",  # DeepSeek's value, not the expression
        "(kv_lora_rank + rope_head_dim) / head_dim",  # forgets that a group holds K and V
        "kv_lora_rank / (2 * head_dim)",  # forgets the RoPE key
        "num_heads * (kv_lora_rank + rope_head_dim) / (2 * head_dim)",  # per-head latents
        "(kv_lora_rank + rope_head_dim) / (2 * num_heads)",
    ],
    "qc_absorbed_query_width": [1, 2, 3],
    "qc_alibi_absorption": [0, 1, 2],
    "qc_per_head_rope_cache": [0, 1, 3],
}
