"""Hints of lesson 06 (GQA, MQA and the KV cache): ``repeat_kv``,
``grouped_query_attention``, ``kv_cache_bytes`` and ``decode_with_cache``."""

HINTS: dict[str, tuple[str, ...]] = {
    "repeat_kv": (
        "Query head h reads group h // n_rep, so the copies of one group sit next to each "
        "other: with 2 groups and `n_rep = 3` the six heads read groups 0, 0, 0, 1, 1, 1, "
        "not 0, 1, 0, 1, 0, 1.",

        "`x.repeat(1, n_rep, 1, 1)` gives the second order (tiled), which is wrong here. "
        "Either repeat every group in place along dim 1, or give `x` a new axis of length 1 "
        "right after the group axis, expand that axis to `n_rep` copies, and reshape so that "
        "group and copy become one axis of G * n_rep heads. Where the new axis goes decides "
        "the order: put it in front of the group axis and the reshape tiles again.",

        "`torch.repeat_interleave(x, n_rep, dim=1)` does it in one call; without copying "
        "first: `x[:, :, None].expand(B, G, n_rep, N, d).reshape(B, G * n_rep, N, d)`.",
    ),
    "grouped_query_attention": (
        "It is lesson 02's layer with fewer key/value heads. Split the queries into "
        "`num_heads` heads and the keys and values into `num_kv_heads` heads, all of width "
        "d_head = d_model // num_heads; then your `repeat_kv`, with n_rep the number of "
        "query heads per K/V head, gives every query head its group, and attention goes on as "
        "usual.",

        "Shapes for B = 2, N = 5, d_model = 16, 4 query heads, 2 K/V heads: `x @ w_q` is "
        "(2, 5, 16) and `x @ w_k` (2, 5, 8); split, the queries are (2, 4, 5, 4) and the keys "
        "(2, 2, 5, 4); after `repeat_kv` the keys are (2, 4, 5, 4) and the scores "
        "(2, 4, 5, 5).",

        "With `causal=True` hide the keys j > i: fill those scores with -inf before the "
        "softmax, using a boolean (N, N) matrix that is True above the diagonal, on the "
        "device of `x`. Scale by sqrt(d_head); for float16 and bfloat16 inputs take the "
        "softmax of the scores in float32 and cast the weights back.",

        "First `if num_heads % num_kv_heads: raise ValueError(f\"num_heads={num_heads} is not "
        "a multiple of num_kv_heads={num_kv_heads}\")`. "
        "With `split(y, heads) = y.reshape(B, N, heads, d_head).transpose(1, 2)`: "
        "`q = split(x @ w_q, num_heads)`, `k = repeat_kv(split(x @ w_k, num_kv_heads), n_rep)`, "
        "`v` the same way; `scores = (q @ k.transpose(-2, -1)).float() / d_head ** 0.5`; when "
        "causal, `scores = scores.masked_fill(torch.ones(N, N, dtype=torch.bool, "
        "device=x.device).triu(1), float(\"-inf\"))`; "
        "`weights = torch.softmax(scores, dim=-1).to(x.dtype)`; "
        "`return (weights @ v).transpose(1, 2).reshape(B, N, d_model) @ w_o`.",
    ),
    "kv_cache_bytes": (
        "Count numbers first and bytes last. For every layer and every token, the cache holds "
        "one key vector and one value vector per K/V head, each `head_dim` numbers long.",

        "Then multiply by everything else that multiplies the count: the tokens, the sequences "
        "of the batch, and `bytes_per_element`. The number of query heads does not appear. "
        "Check: Llama-3.1 8B (32 layers, 8 K/V heads of 128) in bf16 takes 131,072 bytes per "
        "token.",

        "`return 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size "
        "* bytes_per_element` (the 2 is keys and values).",
    ),
    "decode_with_cache": (
        "Loop over the tokens t = 0 ... N-1. At step t project only the new token, "
        "`x[:, t:t + 1]` of shape (B, 1, d_model); append its key and value to a cache that "
        "grows by one token per step; and let its query attend over everything in the cache.",

        "No mask is needed: at step t the cache holds tokens 0 ... t, exactly the keys causal "
        "attention lets query t see. Do not pass `is_causal=True` to "
        "`F.scaled_dot_product_attention` with one query: its mask is aligned to the top-left "
        "corner, so that query would see key 0 only.",

        "Split the new token's query into `num_heads` heads and its key and value into "
        "`num_kv_heads`, give the cached keys and values to every query head with "
        "`repeat_kv`, scale by sqrt(d_head), and keep each step's (B, 1, d_model) output "
        "after `w_o`; `torch.cat` them along dim 1 at the end. Stay in torch: the checker "
        "refuses `.numpy()`, `np.asarray`, `.tolist()` and `.item()` while it measures.",

        "For each t: `x_t = x[:, t:t + 1]`; `q_t = split(x_t @ w_q, num_heads)`; "
        "`k_cache.append(split(x_t @ w_k, num_kv_heads))`, `v_cache` the same way; "
        "`k = repeat_kv(torch.cat(k_cache, dim=2), n_rep)`, `v` the same way; "
        "`weights = torch.softmax((q_t @ k.transpose(-2, -1)).float() / d_head ** 0.5, "
        "dim=-1).to(x.dtype)`; "
        "`outputs.append((weights @ v).transpose(1, 2).reshape(B, 1, d_model) @ w_o)`; after "
        "the loop `return torch.cat(outputs, dim=1)`. Here `split(y, heads)` is "
        "`y.reshape(B, 1, heads, d_head).transpose(1, 2)`.",
    ),
}
