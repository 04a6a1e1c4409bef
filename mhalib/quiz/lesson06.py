"""Quick checks of lesson 06 (grouped-query attention and the KV cache)."""

from __future__ import annotations

from mhalib.quiz.question import FillIn, MultipleChoice


def _heads(h: int, num_heads: int, num_kv_heads: int) -> dict:
    return {"h": h, "num_heads": num_heads, "num_kv_heads": num_kv_heads}


QUESTIONS = {
    "qc_kv_group": FillIn(
        id="qc_kv_group",
        prompt="num_heads query heads share num_kv_heads K/V heads in equal, consecutive "
               "groups. Which K/V head does query head h read?",
        template="group = ____",
        scenarios=[_heads(5, 8, 2), _heads(3, 32, 8), _heads(31, 32, 8), _heads(6, 8, 8),
                   _heads(7, 8, 1), _heads(1, 4, 2)],
        expected=lambda s: s["h"] // (s["num_heads"] // s["num_kv_heads"]),
        explanation="Each K/V head serves n_rep = num_heads // num_kv_heads consecutive query "
                    "heads, so head h belongs to group h // n_rep. That is the layout "
                    "repeat_interleave produces (and Llama's repeat_kv).",
        hint="Heads 0..n_rep-1 share group 0, the next n_rep share group 1, and so on.",
        examples=["h // (num_heads // num_kv_heads)", "h * num_kv_heads // num_heads"],
    ),
    "qc_cache_shrink": FillIn(
        id="qc_cache_shrink",
        prompt="Going from multi-head attention to grouped-query attention with the same "
               "num_heads and head size, by what factor does the KV cache shrink?",
        template="factor = ____",
        scenarios=[_heads(0, 32, 8), _heads(0, 64, 8), _heads(0, 8, 1), _heads(0, 12, 12)],
        expected=lambda s: s["num_heads"] / s["num_kv_heads"],
        explanation="The cache stores one K and one V vector per K/V head, so it scales with "
                    "num_kv_heads: MHA keeps num_heads of them, GQA num_kv_heads (Llama-3.1 8B: "
                    "32 -> 8, four times less), MQA one.",
        hint="Which head count appears in the cache size: query heads or K/V heads?",
        examples=["num_heads / num_kv_heads"],
    ),
    "qc_decode_growth": MultipleChoice(
        id="qc_decode_growth",
        prompt="A decoder without a KV cache generates N tokens by rerunning the causal layer "
               "on the whole prefix at every step. How does its total attention work (the "
               "N^2 terms) grow with N?",
        options=["Like N", "Like N^2", "Like N^3", "It does not depend on N"],
        key="577dd5c61b1c508b98c4",
        explanation="Step t redoes t^2 query-key pairs, and the sum of t^2 for t up to N grows "
                    "like N^3 / 3. With a cache, step t does t pairs: N^2 / 2 in all.",
        why_wrong={0: "Even with a cache, step t compares one query with t keys: N^2 / 2 pairs.",
                   1: "That is the cost with a cache; without one each step is itself N^2.",
                   3: "Every new token has more tokens before it to look at."},
    ),
}
