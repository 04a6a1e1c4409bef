"""Quick checks of lesson 10 (multi-head latent attention)."""

from __future__ import annotations

from mhalib.quiz.question import FillIn, MultipleChoice


def _mla(kv_lora_rank: int, rope_head_dim: int, head_dim: int, num_heads: int) -> dict:
    return {"kv_lora_rank": kv_lora_rank, "rope_head_dim": rope_head_dim, "head_dim": head_dim,
            "num_heads": num_heads}


QUESTIONS = {
    "qc_mla_groups": FillIn(
        id="qc_mla_groups",
        prompt="An MLA layer caches kv_lora_rank + rope_head_dim numbers per token. A GQA layer "
               "with the same head_dim caches a key and a value of head_dim numbers per K/V "
               "group. How many groups would cache exactly as much as the MLA layer? (Names you "
               "may use: kv_lora_rank, rope_head_dim, head_dim, num_heads.)",
        template="groups = ____",
        scenarios=[_mla(512, 64, 128, 128), _mla(512, 64, 192, 16), _mla(1024, 64, 128, 32),
                   _mla(256, 32, 64, 8), _mla(96, 0, 48, 4)],
        expected=lambda s: (s["kv_lora_rank"] + s["rope_head_dim"]) / (2 * s["head_dim"]),
        explanation="A GQA group costs 2 * head_dim numbers (its key and its value), so the "
                    "MLA cache equals (kv_lora_rank + rope_head_dim) / (2 * head_dim) groups: "
                    "2.25 for DeepSeek-V2 and V3 (576 / 256), whatever their 128 heads.",
        hint="Divide what MLA caches per token by what one GQA group caches per token; the "
             "number of query heads plays no part.",
        examples=["(kv_lora_rank + rope_head_dim) / (2 * head_dim)",
                  "(kv_lora_rank + rope_head_dim) / head_dim / 2"],
    ),
    "qc_absorbed_query_width": MultipleChoice(
        id="qc_absorbed_query_width",
        prompt="DeepSeek-V3 also compresses its queries (q_lora_rank 1536; d_model 7168, 128 "
               "heads of 128, kv_lora_rank 512). Leaving the RoPE part aside, how many numbers "
               "does one head's absorbed query have when it meets the cached latents?",
        options=["128, the d_head of one head", "512, the width of the KV latent",
                 "1536, the width of the query latent", "7168, the model width d_model"],
        key="856686b35df9bdaf46ad",
        explanation="After absorption a head's query is x @ w_q_latent[h] (or, from the query "
                    "latent, c_q @ W_uq_h @ W_uk_h.T): it lives in the space of the KV latent, "
                    "so it has kv_lora_rank = 512 entries, and each score is a 512-long dot "
                    "product with a cached latent. How the query was produced (from x or from "
                    "a 1536-wide query latent) does not change where it ends up.",
        why_wrong={0: "That is the query of the naive form, which meets expanded keys of d_head "
                      "numbers; absorbing W_uk maps it into the latent space instead.",
                   2: "The query latent is only where queries start from; absorption moves them "
                      "to the space of the KV latent they are compared with.",
                   3: "7168 is the width of x, what the query projection starts from; a query's "
                      "width is that of the vectors it is compared with, and after absorption "
                      "those are the 512-wide cached latents."},
    ),
    "qc_rope_blocks_absorption": MultipleChoice(
        id="qc_rope_blocks_absorption",
        prompt="Suppose RoPE rotated the whole key c_s @ W_uk_h and the query. Why could W_uk_h "
               "then no longer be folded into W_q_h?",
        options=["Rotations make the keys non-linear in the latent",
                 "RoPE changes the length of the keys",
                 "The rotation R(s - t) sits between them",
                 "Rotated keys would have to be cached separately for every head"],
        key="a54f488fa549320f92ec",
        explanation="With RoPE the score is x_t W_q_h R(t)^T R(s) W_uk_h^T c_s^T = x_t W_q_h "
                    "R(s - t) W_uk_h^T c_s^T: the matrix between x_t and c_s now depends on the "
                    "positions, so no single precomputed W_q_h W_uk_h^T serves every pair. "
                    "DeepSeek keeps RoPE out of the latent part and adds a small separate "
                    "rotated part instead.",
        why_wrong={0: "A rotation is a linear map: the keys stay linear in c_s. The trouble is "
                      "that the map changes with the position.",
                   1: "Rotations preserve lengths; the scores change only through the angle "
                      "between query and key.",
                   3: "That is a consequence, not the reason: per-head rotated keys would have to "
                      "be cached precisely because the absorption no longer works."},
    ),
    "qc_per_head_rope_cache": MultipleChoice(
        id="qc_per_head_rope_cache",
        prompt="A variant of DeepSeek-V2-Lite (16 heads, latent 512, RoPE part 64) gives each "
               "head its own rotated key instead of one shared by all heads. How many numbers "
               "per token and layer must its cache hold?",
        options=["576: the latent and one key", "1,536: latent and 16 keys",
                 "1,152: latent and key, for K and V", "512: the RoPE keys are recomputed"],
        key="404ec3acac76136a0bba",
        explanation="512 for the latent plus 16 * 64 = 1,024 for the rotated keys: 1,536, about "
                    "2.7 times the 576 of the shared key (with DeepSeek-V3's 128 heads it "
                    "would be fifteen times). Sharing one RoPE key among all heads is what "
                    "keeps the position part cheap.",
        why_wrong={0: "That is the shared key; with one key per head the 64 numbers are needed "
                      "16 times.",
                   2: "Values are recomputed from the latent too, so nothing is stored twice; the "
                      "difference here is the number of RoPE keys.",
                   3: "The rotated key is made from the token's hidden state x_s (W_KR), not from "
                      "the cached latent, so it cannot be recomputed from the cache; it must be "
                      "cached (or the whole prefix run again)."},
    ),
}
