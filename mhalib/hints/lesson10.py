"""Hints of lesson 10 (multi-head latent attention): ``mla_kv_cache_bytes``,
``mla_attention`` and ``absorb_mla_weights``."""

HINTS: dict[str, tuple[str, ...]] = {
    "mla_kv_cache_bytes": (
        "Build it like lesson 06's `kv_cache_bytes`: the numbers one token leaves in one "
        "layer, times the layers, the tokens, the sequences of the batch and the bytes per "
        "number. Only the first factor is new, and no head count enters it: every head reads "
        "the same cached vectors.",

        "Per token and layer that is one latent of `kv_lora_rank` numbers plus one RoPE key "
        "of `rope_head_dim`, and no factor 2: unlike lesson 06's cache, keys and values are "
        "two readings of the same latent. Check: DeepSeek-V3 (61 layers, 512 + 64) in bf16 "
        "gives 70,272 bytes per token.",

        "`return num_layers * (kv_lora_rank + rope_head_dim) * seq_len * batch_size "
        "* bytes_per_element`.",
    ),
    "mla_attention": (
        "It is ordinary causal multi-head attention whose keys and values are made from the "
        "latent `c = x @ w_dkv` instead of from `x`: keys from `w_uk`, values from `w_uv`, "
        "while the queries still come from `x @ w_q`.",

        "Take d_head from the weights, `w_q.shape[1] // num_heads`, not from d_model: here "
        "`num_heads * d_head` may differ from d_model, so the merged heads are "
        "`num_heads * d_head` wide and `w_o` maps them back to d_model. The scale is "
        "sqrt(d_head), not sqrt(d_c) or sqrt(d_model).",

        "Shapes for B = 2, N = 5, d_model = 8, 3 heads of 4 and d_c = 6: the latent is "
        "(2, 5, 6); the queries, keys and values split into heads (2, 3, 5, 4); the scores "
        "(2, 3, 5, 5); the merged heads (2, 5, 12); the output (2, 5, 8). With "
        "`causal=True`, key j is hidden from query i when j > i; "
        "`F.scaled_dot_product_attention(..., is_causal=causal)` masks exactly that here, "
        "where there are as many queries as keys.",

        "With `split(y) = y.reshape(B, N, num_heads, d_head).transpose(1, 2)`: "
        "`c = x @ w_dkv`; `q, k, v = split(x @ w_q), split(c @ w_uk), split(c @ w_uv)`; "
        "`context = F.scaled_dot_product_attention(q, k, v, is_causal=causal)`; "
        "`return context.transpose(1, 2).reshape(B, N, num_heads * d_head) @ w_o`.",
    ),
    "absorb_mla_weights": (
        "Work head by head. Head h owns the columns h * d_head to (h + 1) * d_head - 1 of "
        "`w_q`, `w_uk` and `w_uv`, and the same rows of `w_o`, with "
        "d_head = `w_q.shape[1] // num_heads`. Multiply each head's own blocks: a product of "
        "the whole matrices adds all the heads' scores into one.",

        "Shapes for one head: its block of `w_q` is (d_model, d_head) and of `w_uk` "
        "(d_c, d_head), so the first product is (d_model, d_c) once `w_uk`'s block is "
        "transposed; its block of `w_uv` is (d_c, d_head) and of `w_o` (d_head, d_model), "
        "so the second is (d_c, d_model). Stack the H results on a new first axis.",

        "Test it: with `c = x @ w_dkv`, `(x @ w_q_latent[h]) @ c.T` must equal head h's "
        "`(x @ w_q_h) @ (c @ w_uk_h).T`, both divided by sqrt(d_head) afterwards (keep the "
        "scale out of the weights), and the sum over h of head h's weights times "
        "`c @ w_o_latent[h]` must equal `mla_attention`.",

        "With `cols = slice(h * d_head, (h + 1) * d_head)` for each head h: "
        "`w_q_latent = torch.stack([w_q[:, cols] @ w_uk[:, cols].T for each h])` and "
        "`w_o_latent = torch.stack([w_uv[:, cols] @ w_o[cols] for each h])`; "
        "`return w_q_latent, w_o_latent`.",
    ),
}
