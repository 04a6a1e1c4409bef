"""Checkers for lesson 04: ``causal_mask``, ``padding_mask`` and ``masked_attention`` (numpy).

Masks are boolean, True = may attend. For ``masked_attention`` a mistake about the mask (using
it inverted, say) also changes which rows end up with no allowed key, and learners handle such
rows in different ways (NaN, zeros); a mistake model therefore also matches when its rows
without any allowed key come out as NaN instead of zeros.
"""

from __future__ import annotations

import numpy as np

from mhalib.checks.answer_key import answer_key
from mhalib.checks.compare import difference
from mhalib.checks.exercise import Case, Exercise, WrongAnswer
from mhalib.checks.slips import WrongAnswers

MASKED_ATTENTION_KEYS = ("attend", "tiled_attention", "flash_attention", "triton_flash_attention",
                         "online_softmax_attention", "_attention", "grouped_query_attention",
                         "forward")


def _causal(n_q: int, n_k: int | None = None) -> np.ndarray:
    return answer_key("causal_mask")(n_q, n_k)


def _sizes(case: Case) -> tuple[int, int]:
    n_q = case.args[0]
    n_k = case.args[1] if len(case.args) > 1 else case.kwargs.get("n_k")
    return n_q, n_q if n_k is None else n_k


class CausalMask(Exercise):
    name = "causal_mask"
    assignment = "04-masks"

    def visible_cases(self, rng):
        return [
            Case("n_q = 5 (square)", (5,)),
            Case("3 new queries, 6 keys in all (3 cached before them)", (3, 6)),
            Case("n_k as a keyword", (4,), {"n_k": 7}),
        ]

    def hidden_cases(self, rng):
        n = int(rng.integers(6, 10))
        return [
            Case("one query decoding against 8 keys", (1, 8), degenerate=True),
            Case("a single position", (1,), degenerate=True),
            Case(f"n_q = n_k = {n} given explicitly", (n, n)),
            Case("2 queries over 9 keys", (2, 9)),
            Case("more queries than keys (5, 3)", (5, 3)),
        ]

    def mistakes(self):
        def shifted(delta):
            def compute(c):
                n_q, n_k = _sizes(c)
                query = np.arange(n_q)[:, None] + (n_k - n_q)  # (n_q, 1)
                return np.arange(n_k)[None, :] <= query + delta  # (n_q, n_k)
            return compute

        return [
            WrongAnswer("strict", "the diagonal is missing: a query may attend its own position (j "
                        "<= i, not j < i).", shifted(-1)),
            WrongAnswer("top_left", "the mask is aligned top-left: when n_q < n_k the queries are "
                        "the LAST n_q positions, so query i may attend keys j <= i + n_k - n_q "
                        "(np.tril(..., k=n_k - n_q)).",
                        lambda c: np.tril(np.ones(_sizes(c), dtype=bool))),
            WrongAnswer("inverted", "True marks the future here; in this course True means 'may "
                        "attend' (the convention of F.scaled_dot_product_attention).",
                        lambda c: ~_causal(*_sizes(c))),
            WrongAnswer("upside_down", "the mask is upside down: the upper triangle (np.triu) lets "
                        "each query see the future; keep the lower triangle (np.tril).",
                        lambda c: np.triu(np.ones(_sizes(c), dtype=bool), k=_sizes(c)[1]
                                          - _sizes(c)[0])),
            WrongAnswer("transposed", "the mask is transposed: rows are queries (n_q) and columns "
                        "keys (n_k).", lambda c: _causal(*_sizes(c)).T),
            WrongAnswer("not_boolean", "the mask holds numbers (np.tril(np.ones(...)) is float): "
                        "return a boolean array, e.g. with .astype(bool).",
                        lambda c: _causal(*_sizes(c)).astype(np.float64)),
            WrongAnswer("ignores_n_k", "the mask is (n_q, n_q) whatever n_k is: use n_k keys (n_k "
                        "defaults to n_q only when it is None).",
                        lambda c: _causal(_sizes(c)[0])),
            WrongAnswer("sees_next", "the mask is off by one: each query also sees the key just "
                        "after it. Query i may attend keys j <= i + n_k - n_q (np.tril(..., "
                        "k=n_k - n_q), not k=n_k - n_q + 1).", shifted(1)),
            WrongAnswer("offset_sign_flipped", "the diagonal offset has the wrong sign: query i "
                        "sits at position i + n_k - n_q, so it may attend keys j <= i + (n_k - "
                        "n_q) (np.tril(..., k=n_k - n_q), not k=n_q - n_k).",
                        lambda c: np.tril(np.ones(_sizes(c), dtype=bool),
                                          k=_sizes(c)[0] - _sizes(c)[1])),
            WrongAnswer("square_n_k", "the mask is (n_k, n_k): it must have one row per query, "
                        "(n_q, n_k).", lambda c: _causal(_sizes(c)[1])),
            WrongAnswer("additive_mask", "this is an additive float mask (0 where allowed, -inf "
                        "where not), the other convention: return the boolean mask, True where "
                        "the query may attend.",
                        lambda c: np.where(_causal(*_sizes(c)), 0.0, -np.inf)),
        ]


# -- padding_mask ------------------------------------------------------------------------------
def _lengths(case: Case) -> np.ndarray:
    return np.asarray(case.args[0])


def _keep(case: Case) -> np.ndarray:
    n = case.args[1]
    return np.arange(n)[None, :] < _lengths(case)[:, None]  # (B, n)


class PaddingMask(Exercise):
    name = "padding_mask"
    assignment = "04-masks"

    def visible_cases(self, rng):
        return [
            Case("lengths [3, 5, 1], n = 5", (np.array([3, 5, 1]), 5)),
            Case("lengths [2, 4], n = 6", (np.array([2, 4]), 6)),
        ]

    def hidden_cases(self, rng):
        batch = int(rng.integers(3, 6))
        n = int(rng.integers(5, 9))
        return [
            Case("an empty sequence (length 0)", (np.array([0, 3, 4]), 4)),
            Case("no padding at all", (np.array([6, 6]), 6), degenerate=True),
            Case("one sequence", (np.array([2]), 7)),
            Case("int32 lengths", (rng.integers(0, n + 1, size=batch).astype(np.int32), n)),
            Case("lengths as a list", ([1, 4, 2], 4)),
        ]

    def mistakes(self):
        return [
            WrongAnswer("inverted", "True marks the padding here; in this course True means 'may "
                        "attend', so True where j < lengths[b].",
                        lambda c: ~_keep(c)[:, None, None]),
            WrongAnswer("off_by_one", "one padded position too many is allowed: key j is real when "
                        "j < lengths[b], not j <= lengths[b].",
                        lambda c: (np.arange(c.args[1])[None, :]
                                   <= _lengths(c)[:, None])[:, None, None]),
            WrongAnswer("flat_shape", "the mask has shape (B, n); it must be (B, 1, 1, n) so that "
                        "it broadcasts against scores (B, H, N_q, N_k).", _keep),
            WrongAnswer("three_dims", "the mask has shape (B, 1, n); it must be (B, 1, 1, n) (one "
                        "axis for the heads, one for the queries).", lambda c: _keep(c)[:, None]),
            WrongAnswer("masks_queries", "the mask is (B, 1, n, 1): it masks query rows; padding "
                        "removes KEYS, so the last axis must be n: (B, 1, 1, n).",
                        lambda c: _keep(c)[:, None, :, None]),
            WrongAnswer("not_boolean", "the mask holds numbers: return a boolean array.",
                        lambda c: _keep(c)[:, None, None].astype(np.int64)),
            WrongAnswer("one_short", "the last real token of each sequence is masked: key j is "
                        "real when j < lengths[b] (not j < lengths[b] - 1).",
                        lambda c: (np.arange(c.args[1])[None, :]
                                   < _lengths(c)[:, None] - 1)[:, None, None]),
            WrongAnswer("width_from_lengths", "the mask is max(lengths) keys wide: it must have "
                        "n columns, the padded length, even when every sequence is shorter.",
                        lambda c: (np.arange(_lengths(c).max())[None, :]
                                   < _lengths(c)[:, None])[:, None, None]),
            WrongAnswer("batch_not_first", "the mask is (1, 1, B, n): the batch axis must come "
                        "first, (B, 1, 1, n), so that sequence b's mask meets sequence b's "
                        "scores.", lambda c: _keep(c)[None, None]),
            WrongAnswer("masks_queries_and_keys", "the mask is (B, 1, n, n): it masks padded "
                        "queries as well as padded keys. Padding removes keys only: (B, 1, 1, n), "
                        "which broadcasts over the queries.",
                        lambda c: _keep(c)[:, None, :, None] & _keep(c)[:, None, None, :]),
            WrongAnswer("full_rows_empty", "the sequences with no padding (lengths[b] == n) "
                        "got no key at all: a slice counted back from the end by the number of "
                        "padded keys goes wrong when that number is 0, since -0 is 0: the keys "
                        "kept, [..., :-(n - lengths[b])], become [:0], none, and the keys "
                        "blanked, [..., -(n - lengths[b]):], become [0:], all. Count from the "
                        "front: keep [..., :lengths[b]], blank [..., lengths[b]:].",
                        lambda c: (_keep(c) & (_lengths(c) < c.args[1])[:, None])[:, None, None]),
            WrongAnswer("left_padding", "the real tokens were put at the END of each row (left "
                        "padding): here sequences are padded on the right, so key j is real when "
                        "j < lengths[b].",
                        lambda c: (np.arange(c.args[1])[None, :]
                                   >= c.args[1] - _lengths(c)[:, None])[:, None, None]),
        ]


# -- masked_attention --------------------------------------------------------------------------
def _reference(q, k, v, mask):
    return answer_key("masked_attention")(q, k, v, mask)


def _empty_rows(mask, q, k) -> np.ndarray:
    """True for the query rows with no allowed key: (..., N_q, 1)."""
    full = np.broadcast_to(mask, q.shape[:-2] + (q.shape[-2], k.shape[-2]))
    return ~full.any(axis=-1, keepdims=True)


def _scaled_scores(q, k):
    return q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])  # (..., N_q, N_k)


def _row_softmax(scores):
    with np.errstate(invalid="ignore"):
        e = np.exp(scores - scores.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)


def _zero_fill(q, k, v, mask):
    weights = _row_softmax(np.where(mask, _scaled_scores(q, k), 0.0))
    return weights @ v, weights


def _masked_after_softmax(q, k, v, mask):
    weights = _row_softmax(_scaled_scores(q, k)) * mask  # rows no longer sum to 1
    return weights @ v, weights


def _shift_by_all_keys(q, k, v, mask):
    """exp(s - max over all keys) * mask, renormalised: allowed keys far below a masked
    maximum underflow to 0."""
    scores = _scaled_scores(q, k)  # (..., N_q, N_k)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True)) * mask
    total = e.sum(axis=-1, keepdims=True)
    weights = e / np.where(total > 0, total, 1.0)
    return weights @ v, weights


def _over_queries(q, k, v, mask, nan_to_zero):
    """Masked softmax down each column; a column with no allowed query is NaN or zeros."""
    scores = np.where(mask, _scaled_scores(q, k), -np.inf)
    with np.errstate(invalid="ignore"):
        e = np.exp(scores - scores.max(axis=-2, keepdims=True))
        weights = e / e.sum(axis=-2, keepdims=True)
    if nan_to_zero:
        weights = np.nan_to_num(weights)
    return weights @ v, weights


def _exp_without_shift(q, k, v, mask, nan_to_zero):
    """exp of the masked scores, no shift: NaN where exp overflows and in rows with no allowed
    key (0 / 0), or zeros there."""
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(np.where(mask, _scaled_scores(q, k), -np.inf))
        weights = e / e.sum(axis=-1, keepdims=True)
    if nan_to_zero:
        weights = np.where(np.isnan(weights), 0.0, weights)
    return weights @ v, weights


def _mask_added(q, k, v, mask):
    weights = _row_softmax(_scaled_scores(q, k) + np.asarray(mask, dtype=np.float64))
    return weights @ v, weights


def _with_rows(q, k, v, mask, fill):
    """The reference, with rows that have no allowed key replaced: fill='nan', 'uniform' or
    'unmasked' (attention over all keys, what adding -1e9 to every score of the row gives)."""
    out, weights = _reference(q, k, v, mask)
    empty = _empty_rows(mask, q, k)  # (..., N_q, 1)
    if fill == "nan":
        return np.where(empty, np.nan, out), np.where(empty, np.nan, weights)
    if fill == "unmasked":
        free, free_weights = _reference(q, k, v, np.ones_like(np.asarray(mask)))
        return np.where(empty, free, out), np.where(empty, free_weights, weights)
    uniform = np.full(weights.shape, 1.0 / k.shape[-2])
    weights = np.where(empty, uniform, weights)
    return np.where(empty, np.mean(v, axis=-2, keepdims=True), out), weights


def _nan_rows(value):
    """The variant of a mistake's output whose weight rows of all zeros are NaN."""
    if not isinstance(value, tuple) or len(value) != 2:
        return None
    out, weights = (np.asarray(v, dtype=np.float64) for v in value)
    empty = ~np.any(weights != 0, axis=-1, keepdims=True)
    if not empty.any():
        return None
    return np.where(empty, np.nan, out), np.where(empty, np.nan, weights)


def _masked_key_far_above(rng) -> Case:
    """Allowed scores near -400 and a masked one at +400: exp never overflows, but a shift by
    the maximum over all keys (masked included) underflows every allowed key. This case tells
    that slip apart from a softmax without any shift, which only fails on huge logits."""
    allowed = np.round((-20 + 0.05 * rng.normal(size=4)) * 64) / 64  # exact in float32
    k = np.concatenate([allowed, [20.0]])[:, None]  # (5, 1): scores 20 * k
    q = np.full((3, 1), 20.0)
    mask = np.ones((3, 5), dtype=bool)
    mask[:, -1] = False
    return Case("a masked key far above the allowed ones", (q, k, rng.normal(size=(5, 2)), mask))


class MaskedAttention(Exercise):
    name = "masked_attention"
    assignment = "04-masks"
    answer_key_names = MASKED_ATTENTION_KEYS

    def visible_cases(self, rng):
        q, k, v = rng.normal(size=(3, 5, 8))
        some_keys = rng.random((3, 4)) < 0.6  # (N_q, N_k)
        some_keys[[0, 2], 0] = True
        some_keys[1] = False
        padding = answer_key("padding_mask")(np.array([3, 5]), 5)  # (2, 1, 1, 5)
        return [
            Case("a causal mask, N=5, d_k=8", (q, k, v, _causal(5))),
            Case("a padding mask, batch of 2 with 2 heads, N_q=4, N_k=5",
                 (rng.normal(size=(2, 2, 4, 6)), rng.normal(size=(2, 2, 5, 6)),
                  rng.normal(size=(2, 2, 5, 3)), padding)),
            Case("query 1 has no allowed key", (rng.normal(size=(3, 4)), rng.normal(size=(4, 4)),
                                                 rng.normal(size=(4, 2)), some_keys)),
        ]

    def hidden_cases(self, rng):
        big_q = np.round(rng.normal(size=(4, 4)) * 100)  # exact in float32, logits ~1e4
        big_k = np.round(rng.normal(size=(6, 4)) * 100)
        order = np.argsort(big_q @ big_k.T, axis=-1)  # (4, 6), best key last
        allowed = rng.random((4, 6)) < 0.5
        rows = np.arange(4)
        allowed[rows, order[:, -2]] = True  # the runner-up is allowed ...
        allowed[rows, order[:, -1]] = False  # ... the best key is masked, and far above it
        both = _causal(5) & answer_key("padding_mask")(np.array([2, 5]), 5)  # (2, 1, 5, 5)
        return [
            Case("3 new queries over 6 cached keys (bottom-right causal)",
                 (rng.normal(size=(3, 8)), rng.normal(size=(6, 8)), rng.normal(size=(6, 5)),
                  _causal(3, 6))),
            Case("an empty sequence in the batch (length 0)",
                 (rng.normal(size=(2, 1, 4, 4)), rng.normal(size=(2, 1, 4, 4)),
                  rng.normal(size=(2, 1, 4, 4)),
                  answer_key("padding_mask")(np.array([0, 3]), 4))),
            Case("causal and padding masks combined", (*rng.normal(size=(3, 2, 1, 5, 4)), both)),
            Case("float32", (*rng.normal(size=(3, 6, 16)).astype(np.float32), _causal(6))),
            Case("logits of about 1e4", (big_q, big_k, rng.normal(size=(6, 3)), allowed)),
            Case("a mask of shape (N_k,)", (*rng.normal(size=(3, 2, 4, 4)),
                                            np.array([True, False, True, True]))),
            Case("every key allowed", (*rng.normal(size=(3, 4, 6)), np.ones((4, 4), bool)),
                 degenerate=True),
            _masked_key_far_above(rng),
        ]

    def reproduces(self, case, compute, received):
        if super().reproduces(case, compute, received):
            return True
        try:
            variant = _nan_rows(compute(case))
        except Exception:
            return False
        return (variant is not None and difference(self.expected(case), variant) is not None
                and difference(variant, received) is None)

    def mistakes(self):
        def reference_with(transform):
            def compute(c):
                q, k, v, mask = c.args
                return _reference(*transform(q, k, v, np.asarray(mask)))
            return compute

        return [
            WrongAnswer("nan_on_empty_rows", "a row with no allowed key came out as NaN: every "
                        "score there is -inf, so its maximum is -inf too and s - max is -inf - "
                        "(-inf) = NaN (a guard that looks for NaN or 0 misses a -inf maximum), "
                        "or the shift is guarded and the sum of the exponentials is 0 (0 / 0). "
                        "Give such rows zero weights and a zero output.",
                        lambda c: _with_rows(*c.args, fill="nan")),
            WrongAnswers("finite_fill_on_empty_rows", "a row with no allowed key still gets "
                         "weights: with a finite fill (-1e9, set or added) its softmax runs over "
                         "the masked keys (uniform, or as if unmasked); the contract wants zero "
                         "weights and a zero output there.",
                         lambda c: _with_rows(*c.args, fill="uniform"),
                         lambda c: [_with_rows(*c.args, fill="unmasked")]),
            WrongAnswers("no_max_shift", "exp overflows for large scores (inf / inf = NaN): "
                         "what is subtracted from the masked scores before np.exp must be their "
                         "row maximum (no shift at all, the maximum added, or a shift by "
                         "another value overflows).",
                         lambda c: _exp_without_shift(*c.args, nan_to_zero=False),
                         lambda c: [_exp_without_shift(*c.args, nan_to_zero=True)]),
            WrongAnswer("shift_by_masked_max", "the shift before exp is not the maximum over the "
                        "allowed keys (a maximum over all keys, masked ones included, or the "
                        "maximum added instead of subtracted): with large logits the allowed keys "
                        "underflow to 0. Set masked scores to -inf first, then subtract the row "
                        "maximum.",
                        lambda c: _shift_by_all_keys(*c.args)),
            WrongAnswer("mask_after_softmax", "the mask was applied to the weights after the "
                        "softmax, so allowed weights no longer sum to 1: set masked scores to -inf "
                        "BEFORE the softmax.", lambda c: _masked_after_softmax(*c.args)),
            WrongAnswer("zero_fill", "masked scores were set to 0 (filled with 0, or multiplied "
                        "by the mask), which still gives masked keys weight: fill them with "
                        "-inf.",
                        lambda c: _zero_fill(*c.args)),
            WrongAnswer("inverted_mask", "the mask was used inverted: in this course True means "
                        "'may attend', so keep the scores where the mask is True.",
                        reference_with(lambda q, k, v, m: (q, k, v, ~m))),
            WrongAnswer("ignores_mask", "the output matches attention without any mask: apply the "
                        "mask to the scores before the softmax.",
                        reference_with(lambda q, k, v, m: (q, k, v, np.ones_like(m)))),
            WrongAnswer("no_scale", "the scores reach the softmax unscaled: they were not "
                        "divided by sqrt(d_k) (or the scale was applied where it changes "
                        "nothing: added to every score, or to a result you do not use).",
                        reference_with(lambda q, k, v, m: (q * np.sqrt(q.shape[-1]), k, v, m))),
            WrongAnswers("softmax_over_queries", "the softmax ran over the queries (axis -2): "
                         "each query's weights over its allowed keys must sum to 1, axis=-1.",
                         lambda c: _over_queries(*c.args, nan_to_zero=True),
                         lambda c: [_over_queries(*c.args, nan_to_zero=False)]),
            WrongAnswer("mask_added", "the boolean mask was added to the scores (True counts as "
                        "+1, False as 0), which masks nothing: set the scores of masked keys to "
                        "-inf (np.where(mask, scores, -np.inf)).",
                        lambda c: _mask_added(*c.args)),
            WrongAnswer("returns_only_output", "only the output came back: return the pair "
                        "(out, weights).", lambda c: _reference(*c.args)[0]),
            WrongAnswer("negated_scores", "the sign of the scores is flipped: the most similar "
                        "allowed key gets the least weight. The scores are +q . k / sqrt(d_k).",
                        reference_with(lambda q, k, v, m: (-q, k, v, m))),
        ]


EXERCISES = {e.name: e for e in (CausalMask(), PaddingMask(), MaskedAttention())}
