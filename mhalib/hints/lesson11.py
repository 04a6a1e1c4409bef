"""Hints of lesson 11 (serving): ``decode_attention_intensity``, ``paged_attention`` and
``chunked_prefill``."""

HINTS: dict[str, tuple[str, ...]] = {
    "decode_attention_intensity": (
        "Count two things separately, then divide: the FLOPs of the two products of one decode "
        "step (scores and weighted sum), and the bytes of K and V that the step reads from the "
        "cache.",

        "FLOPs: each of the batch_size * num_heads new queries takes a dot product "
        "(2 * head_dim FLOPs) with each of the seq_len cached keys, and the weighted sum of "
        "seq_len values costs as much again. Bytes: every cached key and value of every "
        "sequence is read once, and a token has `num_kv_heads` of each, not `num_heads`.",

        "Return a float (divide with `/`, not `//`). Check: 64 query heads sharing 8 K/V heads "
        "in bf16 give 8.0 FLOPs per byte, whatever seq_len, head_dim and batch_size; MHA in "
        "bf16 gives 1.0.",

        "`flops = 4 * batch_size * num_heads * seq_len * head_dim` (scores plus weighted sum); "
        "`cache_bytes = 2 * batch_size * num_kv_heads * seq_len * head_dim "
        "* bytes_per_element` (keys plus values); `return flops / cache_bytes`.",
    ),
    "paged_attention": (
        "One sequence at a time: first gather its first `seq_lens[b]` keys and values out of "
        "the pool into ordinary tensors of shape (G, n, d); from there it is lesson 06's "
        "attention for a single query per head.",

        "Token t of sequence b is in page `block_table[b, t // page_size]` at slot "
        "`t % page_size`. With `t = torch.arange(n)` you get every page and slot at once; "
        "indexing the pool with both index tensors together (and `:` for the K/V heads "
        "between them) pairs them up and gives (n, G, d); swap the first two axes to get "
        "(G, n, d).",

        "Read exactly `seq_lens[b]` keys: the rest of the last page holds stale values. Give "
        "query head h the K/V head h // (H // G) (`repeat_interleave` along the head axis, as "
        "in lesson 06), scale by sqrt(d), and leave a row of zeros for a sequence of length 0.",

        "Start from `out = torch.zeros_like(q)`; for each b with `n = int(seq_lens[b]) > 0`: "
        "`t = torch.arange(n)`; "
        "`pages = block_table[b, t // page_size].long()`; "
        "`k = k_pages[pages, :, t % page_size].transpose(0, 1)` (G, n, d), `v` the same way; "
        "`k.repeat_interleave(H // G, dim=0)` and `v` too; "
        "`scores = (k @ q[b][:, :, None])[..., 0] / math.sqrt(d)` (H, n); "
        "`out[b] = (torch.softmax(scores, dim=-1)[:, None] @ v)[:, 0]`.",
    ),
    "chunked_prefill": (
        "Loop over the chunks, `start` = 0, chunk_size, 2 * chunk_size, ... with "
        "`stop = min(start + chunk_size, N)`. Each chunk projects only its own tokens, writes "
        "their keys and values into a cache, and its queries attend to every key cached so "
        "far, 0 ... stop - 1.",

        "The mask of a chunk is lesson 04's bottom-right causal mask with C = stop - start "
        "queries and `stop` keys: the earlier chunks are fully visible, and inside the chunk "
        "query i sees keys up to its own position. Check: with chunk_size = 2 and N = 5 the "
        "last chunk has 1 query and 5 keys, and sees all 5.",

        "The largest score tensor is then (B, H, C, stop), never N x N. Keep the cache as a "
        "(B, H, N, d_head) tensor filled chunk by chunk (or lists joined with `torch.cat`), "
        "put each chunk's output into a (B, N, d_model) result, and apply `w_o` to it. Stay "
        "in torch: the checker refuses `.numpy()`, `np.asarray`, `.tolist()` and `.item()`.",

        "With `k_cache` and `v_cache` = `torch.zeros(B, num_heads, N, d_head, dtype=x.dtype, "
        "device=x.device)`, `out = torch.zeros(B, N, d_model, dtype=x.dtype, device=x.device)` "
        "and "
        "`split(y) = y.reshape(B, -1, num_heads, d_head).transpose(1, 2)`, per chunk: "
        "`x_c = x[:, start:stop]`; `q = split(x_c @ w_q)`; "
        "`k_cache[:, :, start:stop] = split(x_c @ w_k)`, `v_cache` the same way; "
        "`scores = q @ k_cache[:, :, :stop].transpose(-2, -1) / math.sqrt(d_head)`; "
        "`scores = scores.masked_fill(~causal_mask(stop - start, stop, device=x.device), "
        "float(\"-inf\"))`; "
        "`out[:, start:stop] = (torch.softmax(scores, dim=-1) @ v_cache[:, :, :stop])"
        ".transpose(1, 2).reshape(B, stop - start, d_model)`; at the end `return out @ w_o`.",
    ),
}
