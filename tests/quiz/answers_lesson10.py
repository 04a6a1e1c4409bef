"""Quick-check answers of lesson 10 (merged into tests/quiz/bank_answers.py)."""

ACCEPT = {
    "qc_mla_groups": ["(kv_lora_rank + rope_head_dim) / (2 * head_dim)",
                      "(kv_lora_rank + rope_head_dim) / head_dim / 2",
                      "0.5 * (kv_lora_rank + rope_head_dim) / head_dim"],
    "qc_absorbed_query_width": ["b", "B", 1],
    "qc_rope_blocks_absorption": ["c", 2],
    "qc_per_head_rope_cache": ["b", 1],
}
REJECT = {
    "qc_mla_groups": [
        "2.25",  # DeepSeek's value, not the expression
        "(kv_lora_rank + rope_head_dim) / head_dim",  # forgets that a group holds K and V
        "kv_lora_rank / (2 * head_dim)",  # forgets the RoPE key
        "num_heads * (kv_lora_rank + rope_head_dim) / (2 * head_dim)",  # per-head latents
        "(kv_lora_rank + rope_head_dim) / (2 * num_heads)",
    ],
    "qc_absorbed_query_width": ["a", "c", "d"],
    "qc_rope_blocks_absorption": ["a", "b", "d"],
    "qc_per_head_rope_cache": ["a", "c", "d"],
}
