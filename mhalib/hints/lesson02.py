"""Hints of lesson 02 (multi-head attention): ``split_heads``, ``merge_heads`` and
``multi_head_attention``."""

HINTS: dict[str, tuple[str, ...]] = {
    "split_heads": (
        "Two moves, and one reshape cannot do both: first cut each token's d_model features "
        "into num_heads blocks of d_head = d_model // num_heads, then bring the head axis in "
        "front of the token axis.",

        "Check on an example: for `x = np.arange(12).reshape(1, 2, 6)` and 3 heads, head 1 "
        "must be [[2, 3], [8, 9]] (features 2 and 3 of both tokens). Reshaping straight to "
        "(1, 3, 2, 2) gives the right shape but reads memory in order, so its head 1 is "
        "[[4, 5], [6, 7]]: features of two different tokens.",

        "Reshape to (B, N, num_heads, d_head) first: feature h * d_head + i of a token lands at "
        "[h, i], so head h gets the contiguous block. Then swap axes 1 and 2: "
        "`x.reshape(B, N, num_heads, d_head).transpose(0, 2, 1, 3)` is (B, H, N, d_head). "
        "Before it, refuse a width that does not divide: `if d_model % num_heads: raise "
        "ValueError(f\"d_model={d_model} is not divisible by num_heads={num_heads}\")`.",
    ),
    "merge_heads": (
        "Undo split_heads in reverse order: first put the token axis back in front of the head "
        "axis, then join each token's heads into one axis of H * d_head features, head 0's "
        "block first.",

        "Test it on a round trip: for `x = np.arange(24).reshape(1, 4, 6)` and 2 or 3 heads, "
        "`merge_heads(split_heads(x, H))` must equal `x` exactly (`np.array_equal`). A reshape "
        "of (B, H, N, d_head) straight to (B, N, H * d_head) keeps the shape but fails this "
        "test: it mixes tokens.",

        "With `B, H, N, d_head = x.shape`: "
        "`x.transpose(0, 2, 1, 3).reshape(B, N, H * d_head)`.",
    ),
    "multi_head_attention": (
        "No loop over the heads is needed. After the split the queries, keys and values are "
        "(B, H, N, d_head), and `@` treats every axis before the last two as a batch axis: "
        "lesson 01's attention, written for (..., N, d), runs every head of every sequence at "
        "once.",

        "This notebook has no `softmax` of its own: write the stable one of lesson 01 again "
        "(each row shifted by its maximum, along the last axis, the keys, with "
        "`keepdims=True`). The scale is sqrt(d_head), the width of one head (the last axis "
        "after the split), not sqrt(d_model).",

        "Shapes to check along the way, for B = 2, N = 5, d_model = 8 and 2 heads: `x @ w_q` "
        "is (2, 5, 8); after the split (2, 2, 5, 4); the scores and weights (2, 2, 5, 5); "
        "the weights times the values (2, 2, 5, 4); merged (2, 5, 8); and after `w_o` the "
        "result is (2, 5, 8).",

        "`q = split_heads(x @ w_q, num_heads)`, and `k`, `v` the same way with `w_k`, `w_v`; "
        "`weights` = the softmax over the last axis (each row shifted by its maximum, as in "
        "lesson 01) of "
        "`q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])`; "
        "`return merge_heads(weights @ v) @ w_o`.",
    ),
}
