"""Checkers for lesson 02: ``split_heads``, ``merge_heads`` and ``multi_head_attention`` (numpy).

The mistake models are the slips people make with the head axis (a reshape without the
transpose, the wrong transpose, strided heads) and with the layer around it (no output
projection, the wrong scale, ``nn.Linear``'s weight layout). Models that need the correct
computation reach it through the answer key, never through a general helper with knobs.
"""

from __future__ import annotations

import numpy as np

from mhalib.checks.answer_key import answer_key
from mhalib.checks.compare import difference
from mhalib.checks.exercise import Case, Exercise, Symptom, WrongAnswer, refusal_mistakes
from mhalib.checks.slips import NO_HEAD_SCALE, WrongAnswers

# other mhalib functions that compute these answers
SPLIT_KEYS = ("_split", "_project")
MERGE_KEYS = ("_merge",)
MHA_KEYS = ("grouped_query_attention", "decode_with_cache", "attend", "forward", "_attention",
            "tiled_attention", "flash_attention", "triton_flash_attention",
            "online_softmax_attention")


def _activations(rng, batch: int, n: int, d_model: int, dtype=np.float64) -> np.ndarray:
    return rng.normal(size=(batch, n, d_model)).astype(dtype)  # (B, N, d_model)


# -- wrong ways to split (B, N, d_model) -> (B, H, N, d_head) ----------------------------------
def _split_plain_reshape(x, num_heads):
    batch, n, d_model = x.shape
    return x.reshape(batch, num_heads, n, d_model // num_heads)  # tokens and features mixed


def _split_heads_last(x, num_heads):
    batch, n, d_model = x.shape
    return x.reshape(batch, n, num_heads, d_model // num_heads)  # (B, N, H, d_head)


def _split_heads_first(x, num_heads):
    batch, n, d_model = x.shape
    return x.reshape(batch, n, num_heads, d_model // num_heads).transpose(2, 0, 1, 3)


def _split_features_last(x, num_heads):
    batch, n, d_model = x.shape
    return x.reshape(batch, n, num_heads, d_model // num_heads).transpose(0, 2, 3, 1)


def _split_strided(x, num_heads):
    batch, n, d_model = x.shape
    return x.reshape(batch, n, d_model // num_heads, num_heads).transpose(0, 3, 1, 2)


def _split_folded(x, num_heads):
    batch, n, d_model = x.shape
    heads = x.reshape(batch, n, num_heads, d_model // num_heads).transpose(0, 2, 1, 3)
    return heads.reshape(batch * num_heads, n, d_model // num_heads)


def _split_sizes_swapped(x, num_heads):
    batch, n, d_model = x.shape
    return x.reshape(batch, n, d_model // num_heads, num_heads).transpose(0, 2, 1, 3)


class SplitHeads(Exercise):
    name = "split_heads"
    assignment = "02-multi-head"
    answer_key_names = SPLIT_KEYS

    def visible_cases(self, rng):
        return [
            Case("B=2, N=5, d_model=12, 3 heads", (_activations(rng, 2, 5, 12), 3)),
            Case("B=1, N=4, d_model=8, 2 heads", (_activations(rng, 1, 4, 8), 2)),
        ]

    def hidden_cases(self, rng):
        return [
            Case("num_heads as a keyword", (_activations(rng, 3, 6, 24),), {"num_heads": 4}),
            Case("one head", (_activations(rng, 2, 3, 6), 1), degenerate=True),
            Case("d_head = 1", (_activations(rng, 2, 4, 5), 5), degenerate=True),
            Case("float32", (_activations(rng, 2, 7, 16, np.float32), 8)),
            Case("one token", (_activations(rng, 2, 1, 12), 3), degenerate=True),
            Case("d_model=10 over 4 heads must raise ValueError", (_activations(rng, 1, 3, 10), 4),
                 must_raise="d_model=10 is not divisible by num_heads=4"),
        ]

    def mistakes(self):
        def model(split):
            return lambda c: split(c.args[0], _heads(c))

        return [
            WrongAnswer("no_transpose", "the heads were made by a plain reshape to (B, H, N, "
                        "d_head): that slices the flattened (N, d_model) block, mixing tokens into "
                        "heads. Reshape to (B, N, H, d_head) first, then transpose(0, 2, 1, 3).",
                        model(_split_plain_reshape)),
            WrongAnswer("heads_last", "the result is (B, N, H, d_head): the head axis comes after "
                        "the tokens, where it belongs before them. Either the reshape to (B, N, H, "
                        "d_head) is not followed by the transpose(0, 2, 1, 3) that brings the "
                        "head axis forward, or the heads were stacked along axis 2 (np.stack(..., "
                        "axis=2)) where axis 1 belongs.",
                        model(_split_heads_last)),
            WrongAnswer("heads_before_batch", "the head axis ended up before the batch axis (H, B, "
                        "N, d_head) where (B, H, N, d_head) belongs: from the (B, N, H, d_head) "
                        "reshape the transpose is (0, 2, 1, 3); heads stacked on axis 0 need "
                        "axis 1 instead (or the first two axes swapped).",
                        model(_split_heads_first)),
            WrongAnswer("features_before_tokens", "the last two axes are swapped (B, H, d_head, "
                        "N) where (B, H, N, d_head) belongs: from the (B, N, H, d_head) reshape "
                        "the transpose is (0, 2, 1, 3), not (0, 2, 3, 1).",
                        model(_split_features_last)),
            WrongAnswer("strided_heads", "head h got the strided features h, h+H, h+2H, ... (a "
                        "reshape to (B, N, d_head, H)); it should get the contiguous block "
                        "h*d_head:(h+1)*d_head, i.e. reshape to (B, N, H, d_head).",
                        model(_split_strided)),
            WrongAnswer("heads_folded_into_batch", "the heads were folded into the batch axis (B "
                        "* H, N, d_head): keep them as an axis of their own, (B, H, N, d_head).",
                        model(_split_folded)),
            WrongAnswer("sizes_swapped", "the reshape used (B, N, d_head, H), the last two sizes "
                        "swapped, and gives (B, d_head, N, H): reshape to (B, N, H, d_head), then "
                        "transpose(0, 2, 1, 3).", model(_split_sizes_swapped)),
            *refusal_mistakes(
                "d_model is not divisible by num_heads",
                'if d_model % num_heads: raise ValueError(f"d_model={d_model} is not divisible '
                'by num_heads={num_heads}")'),
        ]


def _heads(case: Case) -> int:
    return case.kwargs.get("num_heads", case.args[1] if len(case.args) > 1 else None)


# -- wrong ways to merge (B, H, N, d_head) -> (B, N, d_model) ----------------------------------
def _merge_plain_reshape(x):
    batch, heads, n, d_head = x.shape
    return x.reshape(batch, n, heads * d_head)


def _merge_strided(x):
    batch, heads, n, d_head = x.shape
    return x.transpose(0, 2, 3, 1).reshape(batch, n, heads * d_head)


def _merge_no_reshape(x):
    return x.transpose(0, 2, 1, 3)  # (B, N, H, d_head)


def _merge_heads_major(x):
    batch, heads, n, d_head = x.shape
    return x.transpose(1, 0, 2, 3).reshape(batch, n, heads * d_head)


class MergeHeads(Exercise):
    name = "merge_heads"
    assignment = "02-multi-head"
    answer_key_names = MERGE_KEYS

    def visible_cases(self, rng):
        return [
            Case("B=2, 3 heads, N=5, d_head=4", (rng.normal(size=(2, 3, 5, 4)),)),
            Case("B=1, 2 heads, N=6, d_head=3", (rng.normal(size=(1, 2, 6, 3)),)),
        ]

    def hidden_cases(self, rng):
        return [
            Case("one head", (rng.normal(size=(2, 1, 4, 6)),), degenerate=True),
            Case("d_head = 1", (rng.normal(size=(3, 5, 4, 1)),), degenerate=True),
            Case("float32", (rng.normal(size=(2, 4, 7, 8)).astype(np.float32),)),
            Case("one token", (rng.normal(size=(2, 3, 1, 4)),), degenerate=True),
            Case("B equal to H", (rng.normal(size=(3, 3, 5, 2)),)),
        ]

    def mistakes(self):
        return [
            WrongAnswer("no_transpose", "the heads were merged by a plain reshape of (B, H, N, "
                        "d_head): tokens and heads get mixed. transpose(0, 2, 1, 3) to (B, N, H, "
                        "d_head) first, then reshape to (B, N, H * d_head).",
                        lambda c: _merge_plain_reshape(c.args[0])),
            WrongAnswer("strided_heads", "the features of the heads are interleaved (feature f of "
                        "head h at position f*H + h); head h must fill the block "
                        "h*d_head:(h+1)*d_head.", lambda c: _merge_strided(c.args[0])),
            WrongAnswer("no_reshape", "the result is still 4-D (B, N, H, d_head): reshape it to "
                        "(B, N, H * d_head).", lambda c: _merge_no_reshape(c.args[0])),
            WrongAnswer("batch_and_heads_swapped", "batch and head axes were swapped before the "
                        "reshape: move the head axis next to d_head with transpose(0, 2, 1, 3).",
                        lambda c: _merge_heads_major(c.args[0])),
            WrongAnswers("heads_summed", "the heads were added up (or averaged) into one of width "
                         "d_head: merging concatenates them side by side, (B, N, H * d_head).",
                         lambda c: c.args[0].sum(axis=1), lambda c: [c.args[0].mean(axis=1)]),
            WrongAnswer("concatenated_along_tokens", "the heads were concatenated along the "
                        "token axis (B, H * N, d_head): concatenate along the features, "
                        "(B, N, H * d_head).",
                        lambda c: np.concatenate(list(np.moveaxis(c.args[0], 1, 0)), axis=1)),
            WrongAnswer("tokens_last", "the result is (B, H * d_head, N), features before tokens: "
                        "the tokens stay on axis 1, (B, N, H * d_head).",
                        lambda c: np.swapaxes(_merge_correct(c.args[0]), 1, 2)),
        ]


def _merge_correct(x):
    return answer_key("merge_heads")(x)


# -- multi-head attention ----------------------------------------------------------------------
def _weights(rng, d_model: int, dtype=np.float64) -> list[np.ndarray]:
    """Four (d_model, d_model) weights scaled so that projections keep unit variance."""
    return [(rng.normal(size=(d_model, d_model)) / np.sqrt(d_model)).astype(dtype)
            for _ in range(4)]


def _mha_case(rng, label, batch, n, d_model, heads, dtype=np.float64, spread=1.0,
              degenerate=False, must_raise="") -> Case:
    x = _activations(rng, batch, n, d_model, dtype) * spread
    return Case(label, (x, *_weights(rng, d_model, dtype), heads), degenerate=degenerate,
                must_raise=must_raise)


def _reference_mha(x, w_q, w_k, w_v, w_o, num_heads):
    return answer_key("multi_head_attention")(x, w_q, w_k, w_v, w_o, num_heads)


def _heads_by(split, merge, x, w_q, w_k, w_v, w_o, num_heads):
    """Attention per head with the given (wrong) split and merge."""
    attention = answer_key("attention")
    q, k, v = (split(x @ w, num_heads) for w in (w_q, w_k, w_v))  # (B, H, N, d_head)
    heads, _ = attention(q, k, v)  # (B, H, N, d_head)
    return merge(heads) @ w_o  # (B, N, d_model)


def _heads_with(x, w_q, w_k, w_v, w_o, num_heads, axis=-1, causal=False):
    """Multi-head attention whose softmax runs along ``axis``, optionally causal."""
    q, k, v = (_correct_split(x @ w, num_heads) for w in (w_q, w_k, w_v))  # (B, H, N, d_head)
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])  # (B, H, N, N)
    if causal:
        n = scores.shape[-1]
        scores = np.where(np.tril(np.ones((n, n), dtype=bool)), scores, -np.inf)
    e = np.exp(scores - np.max(scores, axis=axis, keepdims=True))
    weights = e / e.sum(axis=axis, keepdims=True)
    return answer_key("merge_heads")(weights @ v) @ w_o  # (B, N, d_model)


def _unprojected(case, slot):
    """Multi-head attention with args[slot] (w_q, w_k or w_v) replaced by the identity."""
    args = list(case.args)
    args[slot] = np.eye(args[0].shape[-1], dtype=args[0].dtype)
    return _reference_mha(*args)


def _reused(case, which):
    """Multi-head attention whose q, k, v are projected with the weights args[which[0..2]]."""
    x, *_, num_heads = case.args
    w_q, w_k, w_v = (case.args[i] for i in which)
    return _reference_mha(x, w_q, w_k, w_v, case.args[4], num_heads)


def _correct_split(x, num_heads):
    return answer_key("split_heads")(x, num_heads)


class MultiHeadAttention(Exercise):
    name = "multi_head_attention"
    axes = {"x": "B N d_model"}  # the case's sizes by name (diagnoses)
    assignment = "02-multi-head"
    answer_key_names = MHA_KEYS

    def visible_cases(self, rng):
        return [
            _mha_case(rng, "B=2, N=5, d_model=12, 3 heads", 2, 5, 12, 3, spread=2.0),
            _mha_case(rng, "B=1, N=4, d_model=8, 2 heads", 1, 4, 8, 2, spread=2.0),
        ]

    def hidden_cases(self, rng):
        return [
            _mha_case(rng, "B=2, N=7, d_model=32, 4 heads", 2, 7, 32, 4, spread=2.0),
            _mha_case(rng, "one head", 2, 4, 6, 1, degenerate=True),
            _mha_case(rng, "d_head = 1", 1, 5, 6, 6, spread=2.0, degenerate=True),
            _mha_case(rng, "float32", 2, 6, 16, 4, np.float32, spread=2.0),
            _mha_case(rng, "one token", 3, 1, 8, 2, degenerate=True),
            _mha_case(rng, "large activations", 1, 6, 8, 2, spread=30.0),
            # as many tokens as a head is wide: the weights can be read back from the output
            _mha_case(rng, "B=1, N=4, d_model=16, 2 heads", 1, 4, 16, 2),
            # the contract's rule for bad arguments: a width that the heads do not divide
            _mha_case(rng, "d_model=10 over 4 heads must raise ValueError", 1, 3, 10, 4,
                      must_raise="d_model=10 is not divisible by num_heads=4"),
        ]

    def mistakes(self):
        def rescaled_queries(factor):
            def compute(c):
                x, w_q, w_k, w_v, w_o, h = c.args
                return _reference_mha(x, w_q * factor(c), w_k, w_v, w_o, h)
            return compute

        def d_head(c):
            return c.args[0].shape[-1] // c.args[5]

        def no_w_o(c):
            x, w_q, w_k, w_v, w_o, h = c.args
            return _reference_mha(x, w_q, w_k, w_v, np.eye(x.shape[-1], dtype=x.dtype), h)

        def transposed(c):
            x, *ws, h = c.args
            return _reference_mha(x, *(w.T for w in ws), h)

        def one_head(c):
            x, w_q, w_k, w_v, w_o, _ = c.args
            return _reference_mha(x, w_q, w_k, w_v, w_o, 1)

        def heads_by(split, merge):
            return lambda c: _heads_by(split, merge, *c.args)

        return [
            WrongAnswer("split_without_transpose", "the heads were split by a plain reshape to (B, "
                        "H, N, d_head), which mixes tokens into heads: reshape to (B, N, H, "
                        "d_head), then transpose(0, 2, 1, 3) (and undo it the same way).",
                        heads_by(_split_plain_reshape, _merge_plain_reshape)),
            WrongAnswer("merge_without_transpose", "the split is right but the heads were merged "
                        "by a plain reshape of (B, H, N, d_head): transpose(0, 2, 1, 3) first.",
                        heads_by(_correct_split, _merge_plain_reshape)),
            WrongAnswer("strided_heads", "head h works on the strided features h, h+H, ... instead "
                        "of the block h*d_head:(h+1)*d_head.",
                        heads_by(_split_strided, _merge_strided)),
            WrongAnswer("no_output_projection", "the output matches multi-head attention without "
                        "the output projection: multiply the merged heads by w_o.", no_w_o),
            WrongAnswer("scale_by_d_model", "each head's scores were divided by sqrt(d_model); a "
                        "head works in d_head = d_model / num_heads dimensions, so divide by "
                        "sqrt(d_head).", rescaled_queries(lambda c: np.sqrt(1 / c.args[5]))),
            WrongAnswer("no_scale", NO_HEAD_SCALE,
                        rescaled_queries(lambda c: np.sqrt(d_head(c)))),
            WrongAnswer("single_head", "the output matches one head of width d_model: split the "
                        "projections into num_heads heads before attention.", one_head),
            WrongAnswer("transposed_weights", "the weights were applied as x @ W.T (nn.Linear's "
                        "layout); in this course a weight (d_in, d_out) is applied as x @ W.",
                        transposed),
            WrongAnswer("single_head_d_head_scale", "the output matches ONE head of width d_model "
                        "(scaled by sqrt(d_head)): each score is the sum of every head's dot "
                        "product. Either the projections were never split into num_heads heads "
                        "of width d_head, or they were and the head axis was summed away in the "
                        "scores (an einsum such as 'bqhd,bkhd->bqk' sums over h; keep it: "
                        "'bqhd,bkhd->bhqk'). Each head needs its own scores and weights, merged "
                        "after.",
                        lambda c: one_head(Case(c.label, (c.args[0], c.args[1]
                                                          * np.sqrt(c.args[5]), *c.args[2:])))),
            WrongAnswer("softmax_over_queries", "each head's softmax ran over the queries (axis "
                        "-2): each query's weights over the keys must sum to 1, axis=-1.",
                        lambda c: _heads_with(*c.args, axis=-2)),
            WrongAnswer("swapped_q_k", "queries and keys swapped roles (x @ w_k used as queries, x "
                        "@ w_q as keys, or attention(k, q, v)): the scores are q @ k^T.",
                        lambda c: _reference_mha(c.args[0], c.args[2], c.args[1],
                                                 *c.args[3:])),
            WrongAnswer("swapped_k_v", "keys and values swapped roles (attention(q, v, k), or x "
                        "@ w_v used as keys): the scores use the keys x @ w_k, the output mixes "
                        "the values x @ w_v.",
                        lambda c: _reference_mha(c.args[0], c.args[1], c.args[3], c.args[2],
                                                 *c.args[4:])),
            WrongAnswer("causal_mask_applied", "a causal mask was applied: this exercise is "
                        "attention without a mask, every token sees every token.",
                        lambda c: _heads_with(*c.args, causal=True)),
            WrongAnswer("softmax_over_heads", "the softmax ran over the head axis (axis 1 of the "
                        "(B, H, N, N) scores): each query's weights over the keys must sum to 1, "
                        "axis=-1.", lambda c: _heads_with(*c.args, axis=1)),
            WrongAnswer("batch_flattened", "the sequences of the batch were joined into one "
                        "(x reshaped to (1, B * N, d_model), or its (B * N, d_model) rows used as "
                        "one sequence), so each token attends to the tokens of every sequence: "
                        "keep the batch axis, (B, H, N, N) scores, one sequence each.",
                        lambda c: _reference_mha(c.args[0].reshape(1, -1, c.args[0].shape[-1]),
                                                 *c.args[1:]).reshape(c.args[0].shape)),
            WrongAnswer("residual_added", "the input x was added to the output (the residual "
                        "connection of a transformer block): this function returns the attention "
                        "output alone.", lambda c: c.args[0] + _reference_mha(*c.args)),
            WrongAnswer("scale_by_d_head", "each head's scores were divided by d_head, not by "
                        "sqrt(d_head).", rescaled_queries(lambda c: 1 / np.sqrt(d_head(c)))),
            WrongAnswer("heads_and_width_swapped", "the projections were split into d_head heads "
                        "of width num_heads (num_heads and d_head swapped): split into num_heads "
                        "heads of width d_head = d_model // num_heads.",
                        lambda c: _reference_mha(*c.args[:5], c.args[0].shape[-1] // c.args[5])),
            WrongAnswers("projection_weight_reused", "one projection used another's weight (k = x "
                         "@ w_q, say: a copy-paste slip): the queries, keys and values each have "
                         "their own weight, x @ w_q, x @ w_k, x @ w_v.",
                         lambda c: _reused(c, (1, 1, 3)),
                         lambda c: [_reused(c, which) for which in
                                    ((2, 2, 3), (1, 3, 3), (1, 2, 1), (1, 2, 2), (3, 2, 3))]),
            WrongAnswers("projection_missing", "the keys (or the queries, or the values) are x "
                         "itself, not projected: each of q, k and v is x times its own weight, x "
                         "@ w_q, x @ w_k, x @ w_v.", lambda c: _unprojected(c, 2),
                         lambda c: [_unprojected(c, 1), _unprojected(c, 3)]),
            Symptom("returns_weights_too", "the function returned a tuple whose first element is "
                    "the right output: return only the output (B, N, d_model), not the weights "
                    "with it.", lambda c, received, meta: self._first_is_right(c, received)),
            *refusal_mistakes(
                "d_model is not divisible by num_heads",
                'if d_model % num_heads: raise ValueError(f"d_model={d_model} is not divisible '
                'by num_heads={num_heads}")'),
        ]

    def _first_is_right(self, case, received) -> bool:
        return (isinstance(received, tuple) and len(received) >= 2
                and difference(self.expected(case), received[0]) is None)


EXERCISES = {e.name: e for e in (SplitHeads(), MergeHeads(), MultiHeadAttention())}
