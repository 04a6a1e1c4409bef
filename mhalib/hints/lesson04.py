"""Hints of lesson 04 (causal and padding masks): ``causal_mask``, ``padding_mask`` and
``masked_attention``."""

HINTS: dict[str, tuple[str, ...]] = {
    "causal_mask": (
        "Think in positions. The n_q queries are the *last* n_q positions of the n_k: query i "
        "sits at position i + n_k - n_q, and it may attend every key at that position or "
        "before. With n_q = n_k this is the lower triangle, diagonal included.",

        "Check on `causal_mask(2, 5)`: it must be [[True, True, True, True, False], "
        "[True, True, True, True, True]]. The last query sees every key; the one before it "
        "sees all but the last. A mask aligned to the top-left corner instead lets the first "
        "query see key 0 only.",

        "One comparison builds the whole table: a column of query positions, shape (n_q, 1), "
        "against a row of key positions, shape (1, n_k), broadcasts to (n_q, n_k). Remember "
        "`n_k = n_q` when `n_k` is None, and return booleans.",

        "`query_pos = np.arange(n_q)[:, None] + (n_k - n_q)`, "
        "`key_pos = np.arange(n_k)[None, :]`, `return key_pos <= query_pos`. "
        "(`np.tril(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q)` is the same table.)",
    ),
    "padding_mask": (
        "Sequence b has `lengths[b]` real tokens at positions 0 to lengths[b] - 1, then "
        "filler. The mask is True on the real keys: it depends only on the key position and "
        "on b.",

        "The result is 4-D, (B, 1, 1, n), so that it broadcasts against scores of shape "
        "(B, H, N_q, N_k): the two 1s stand for every head and every query (a padded *query* "
        "is not masked; its output is ignored later). Check: `padding_mask([3, 1], 4)[:, 0, 0]` "
        "is [[True, True, True, False], [True, False, False, False]].",

        "Compare a row of positions with a column of lengths and let broadcasting build the "
        "(B, n) table; `lengths` may come as a list, so pass it through `np.asarray` first. "
        "Strictly less than: position lengths[b] is already filler.",

        "`keep = np.arange(n)[None, :] < np.asarray(lengths)[:, None]` is (B, n); "
        "`return keep[:, None, None, :]`.",
    ),
    "masked_attention": (
        "Start from lesson 01's attention and change one thing before the softmax: where the "
        "mask is False, the score becomes -inf, so that e^(-inf) = 0 gives that key no "
        "weight. Masking the weights after the softmax leaves rows that no longer sum to 1. "
        "The mask need only broadcast to the scores (a padding mask is (B, 1, 1, N_k)), so "
        "use an operation that broadcasts, such as `np.where`; `scores[~mask] = ...` needs "
        "the two shapes to be equal.",

        "The hard part is a row where every key is masked. Its largest score is -inf, and "
        "subtracting it gives -inf - (-inf) = nan. Where a row's maximum is not finite "
        "(`np.isfinite` tells you), subtract 0 instead: the row's exponentials are then all 0.",

        "Such a row then sums to 0, and 0 / 0 is nan. Divide only where the sum is positive "
        "and keep zeros elsewhere: `np.divide` takes `out=` (an array of zeros to start from) "
        "and `where=` (a boolean array: divide only there). The output row, weights times "
        "values, is then zeros too.",

        "`scores = np.where(mask, q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1]), -np.inf)`; "
        "`top = scores.max(axis=-1, keepdims=True)`; "
        "`e = np.exp(scores - np.where(np.isfinite(top), top, 0.0))`; "
        "`total = e.sum(axis=-1, keepdims=True)`; "
        "`weights = np.divide(e, total, out=np.zeros_like(e), where=total > 0)`; "
        "`return weights @ v, weights`.",
    ),
}
