"""Hints of lesson 08 (what heads learn): ``previous_token_score`` and ``induction_score``."""

HINTS: dict[str, tuple[str, ...]] = {
    "previous_token_score": (
        "For each head you need the N - 1 entries `weights[h, i, i - 1]`, i = 1 ... N-1, and "
        "their mean. Query 0 has no previous token: leave it out (do not wrap around to key "
        "N - 1). A perfect previous-token head scores exactly 1.",

        "Those entries lie on the diagonal just below the main one. `torch.diagonal` takes "
        "the diagonal of dims 0 and 1 unless told otherwise; for `weights` of shape (H, N, N) "
        "you want the last two dims, which leaves an (H, N - 1) tensor. Average over its last "
        "axis, not over the heads: the result is (H,).",

        "`torch.diagonal(weights, offset=-1, dim1=-2, dim2=-1).float().mean(dim=-1)`.",
    ),
    "induction_score": (
        "Only the queries of the second copy count, i = period ... 2 * period - 1 (there are "
        "`period` of them), and for query i the key that matters is the one right after the "
        "earlier copy of the current token. Average those weights for each head.",

        "Check with period = 3 (N = 6): the entries are `weights[h, 3, 1]`, "
        "`weights[h, 4, 2]` and `weights[h, 5, 3]`. Key i - period (`weights[h, 3, 0]`, ...) "
        "is the earlier copy of the current token itself: a head that looks there is a "
        "duplicate-token head, not an induction head.",

        "Those entries lie on the diagonal with offset 1 - period, but that diagonal starts "
        "one row too early, at query period - 1 (key 0), which has no earlier copy: drop its "
        "first entry. Or index with two tensors at once, one of query positions and one of "
        "the matching key positions, which gives an (H, period) tensor.",

        "`queries = torch.arange(period, 2 * period)`, `keys = queries - period + 1`, "
        "`return weights[:, queries, keys].float().mean(dim=-1)`.",
    ),
}
