"""Checkers for lesson 08: ``previous_token_score`` and ``induction_score`` (torch).

The inputs are attention patterns (H, N, N) with planted heads: a previous-token head, an
induction head, a duplicate-token head (on the earlier copy of the current token itself), a
head that attends to itself and diffuse heads, so that every slip along a diagonal gives a
visibly different score.
"""

from __future__ import annotations

import numpy as np

from mhalib.checks.exercise import WrongAnswer
from mhalib.checks.readback_positions import CODED_LABEL, coded_weights
from mhalib.checks.slips import WrongAnswers
from mhalib.checks.torch_exercise import TorchCase, TorchExercise, exact_inputs


def planted_patterns(rng, n, offsets, causal=True, strength=6.0):
    """(H, N, N) softmax rows; head h favours key i + offsets[h] (None: no preference).

    Logits are N(0, 1) plus ``strength`` on the favoured key; causal patterns give the
    future weight 0 (rows are renormalised over j <= i).
    """
    heads = len(offsets)
    logits = rng.normal(size=(heads, n, n))
    rows = np.arange(n)
    for h, offset in enumerate(offsets):
        if offset is None:
            continue
        cols = rows + offset
        valid = (cols >= 0) & (cols < n)
        if causal:
            valid &= cols <= rows
        logits[h, rows[valid], cols[valid]] += strength
    if causal:
        logits = np.where(np.tri(n, dtype=bool), logits, -np.inf)
    logits -= logits.max(axis=-1, keepdims=True)
    weights = np.exp(logits)
    return weights / weights.sum(axis=-1, keepdims=True)


def induction_patterns(rng, period, causal=True):
    """Patterns on a sequence of length 2 * period with induction, duplicate-token,
    previous-token, self and diffuse heads."""
    offsets = [1 - period, -period, -1, 0, None]
    order = rng.permutation(len(offsets))
    return planted_patterns(rng, 2 * period, [offsets[i] for i in order], causal)


def _score(weights, offset, first_query, divide_by=None, wrap=False):
    """Mean of weights[h, i, i + offset] over queries i >= first_query (numpy)."""
    heads, n, _ = weights.shape
    queries = np.arange(first_query, n)
    keys = queries + offset
    if wrap:
        keys = keys % n
    else:
        keep = (keys >= 0) & (keys < n)
        queries, keys = queries[keep], keys[keep]
    values = weights[:, queries, keys]  # (H, count)
    return values.sum(axis=-1) / (divide_by or max(1, len(queries)))


def _argmax_share(weights, offset, first_query):
    """The share of queries i >= first_query whose largest weight is on key i + offset."""
    heads, n, _ = weights.shape
    queries = np.arange(first_query, n)
    keys = queries + offset
    keep = (keys >= 0) & (keys < n)
    queries, keys = queries[keep], keys[keep]
    hits = weights[:, queries].argmax(axis=-1) == keys  # (H, count)
    return hits.sum(axis=-1) / max(1, len(queries))


def _earlier_keys(weights):
    """The mean over queries i >= 1 of all the weight on keys before i (below the diagonal)."""
    below = np.tril(weights, k=-1).sum(axis=-1)  # (H, N)
    return below[:, 1:].mean(axis=-1) if weights.shape[1] > 1 else np.zeros(weights.shape[0])


def _weights(case):
    args, _ = exact_inputs(case)
    return args[0].numpy()


class PreviousTokenScore(TorchExercise):
    name = "previous_token_score"
    assignment = "08-heads"

    def visible_cases(self, rng):
        return [
            TorchCase("5 heads, N=12 (causal patterns)",
                      (planted_patterns(rng, 12, [-1, 0, 1, -2, None]),)),
            TorchCase("3 heads, N=20", (planted_patterns(rng, 20, [None, -1, 0]),)),
        ]

    def hidden_cases(self, rng):
        return [
            TorchCase("non-causal patterns (query 0 puts weight on the last key)",
                      (planted_patterns(rng, 9, [-1, 1, None, 0], causal=False),)),
            TorchCase("one head, N=2", (planted_patterns(rng, 2, [-1]),), degenerate=True),
            TorchCase("float64, 6 heads, N=16",
                      (planted_patterns(rng, 16, [0, -1, None, -3, 1, -1]),), dtype="float64"),
            TorchCase("float16, 4 heads, N=32",
                      (planted_patterns(rng, 32, [-1, 0, None, 2]),), dtype="float16"),
            TorchCase("bfloat16, 4 heads, N=10",
                      (planted_patterns(rng, 10, [None, -1, 1, 0]),), dtype="bfloat16"),
            # each entry a distinct power of 2: the score says which entries it averaged
            TorchCase(CODED_LABEL, (coded_weights(6),), dtype="float64"),
        ]

    def mistakes(self):
        def score(**how):
            return lambda c: _score(_weights(c), **how)

        return [
            WrongAnswer("next_token", "that is the weight on key i + 1 (or w[h, i - 1, i], the "
                        "transposed entry): a previous-token head puts query i's weight on key i - "
                        "1, the entry weights[h, i, i - 1].", score(offset=1, first_query=0)),
            WrongAnswer("self_token", "that is the weight each query puts on itself (the main "
                        "diagonal); the previous token is one column to the left.",
                        score(offset=0, first_query=0)),
            WrongAnswer("wraps_query_0", "query 0 was included and its 'previous' key wrapped "
                        "around to the last position (index -1); average over queries i >= 1 only.",
                        score(offset=-1, first_query=0, wrap=True)),
            WrongAnswer("includes_query_0", "the sum over queries 1..N-1 was divided by N: query 0 "
                        "has no previous token, so average over the N - 1 queries i >= 1.",
                        lambda c: _score(_weights(c), -1, 1, divide_by=_weights(c).shape[1])),
            WrongAnswer("mean_over_heads", "the average ran over the heads (axis 0) instead of the "
                        "queries: return one score per head, shape (H,).",
                        lambda c: np.diagonal(_weights(c), offset=-1, axis1=1, axis2=2).mean(0)),
            WrongAnswer("sum_not_mean", "the weights on key i - 1 were summed, not averaged over "
                        "the queries.", lambda c: _score(_weights(c), -1, 1, divide_by=1)),
            WrongAnswer("not_averaged", "that is the diagonal itself, weights[h, i, i - 1] for "
                        "every query (H, N - 1), an intermediate: average it over the queries to "
                        "get one score per head, shape (H,).",
                        lambda c: np.diagonal(_weights(c), offset=-1, axis1=1, axis2=2)),
            WrongAnswer("keepdim", "the result has shape (H, 1): average without keepdim, so "
                        "the scores have shape (H,).",
                        lambda c: _score(_weights(c), -1, 1)[:, None]),
            WrongAnswer("two_back", "that is the weight on key i - 2, two tokens back: the "
                        "previous token is key i - 1 (offset=-1).",
                        lambda c: _mean_or_nan(np.diagonal(_weights(c), offset=-2, axis1=1,
                                                           axis2=2))),
            WrongAnswer("single_number", "that is one number for all heads together (a mean "
                        "without dim=): average over the queries only, one score per head, shape "
                        "(H,).", lambda c: np.asarray(_score(_weights(c), -1, 1).mean())),
            WrongAnswer("diagonal_over_wrong_axes", "the diagonal was taken over the head and "
                        "query axes (torch.diagonal's default dim1=0, dim2=1): take it over the "
                        "query and key axes, torch.diagonal(weights, offset=-1, dim1=1, dim2=2).",
                        lambda c: _diagonal_default_axes(_weights(c), -1)),
            WrongAnswer("argmax_share", "that is how often key i - 1 is the query's largest "
                        "weight (a hit rate of the argmax): the score is the weight itself, "
                        "weights[h, i, i - 1], averaged over the queries i >= 1.",
                        lambda c: _argmax_share(_weights(c), -1, 1)),
            WrongAnswer("all_earlier_keys", "that is the weight on every earlier key (all of "
                        "the row below the diagonal), not on key i - 1 alone: take the one entry "
                        "weights[h, i, i - 1] of each query i >= 1.",
                        lambda c: _earlier_keys(_weights(c))),
        ]


class InductionScore(TorchExercise):
    name = "induction_score"
    assignment = "08-heads"

    def visible_cases(self, rng):
        return [
            TorchCase("period 6 (N=12), 5 planted heads", (induction_patterns(rng, 6), 6)),
            TorchCase("period 10 (N=20)", (induction_patterns(rng, 10), 10)),
        ]

    def hidden_cases(self, rng):
        return [
            TorchCase("non-causal patterns, period 5", (induction_patterns(rng, 5, False), 5)),
            TorchCase("period 1 (N=2)", (planted_patterns(rng, 2, [0, -1, None]), 1),
                      degenerate=True),
            TorchCase("period given as a keyword", (induction_patterns(rng, 7),),
                      {"period": 7}),
            TorchCase("float64, period 16", (induction_patterns(rng, 16), 16), dtype="float64"),
            TorchCase("float16, period 12", (induction_patterns(rng, 12), 12), dtype="float16"),
            TorchCase("bfloat16, period 4", (induction_patterns(rng, 4), 4), dtype="bfloat16"),
            # each entry a distinct power of 2: the score says which entries it averaged
            TorchCase(CODED_LABEL, (coded_weights(6), 3), dtype="float64"),
        ]

    def mistakes(self):
        def period(c):
            return c.kwargs["period"] if "period" in c.kwargs else c.args[1]

        def score(offset_from_period, first_from_period=0, **how):
            return lambda c: _score(_weights(c), offset_from_period - period(c),
                                    period(c) + first_from_period, **how)

        return [
            WrongAnswer("duplicate_token", "that is the weight on key i - period, the earlier copy "
                        "of the current token itself (a duplicate-token head). An induction head "
                        "attends to the token AFTER it: key i - period + 1.", score(0)),
            WrongAnswers("key_after_next", "that is the weight on key i - period + 2; the "
                         "induction target is key i - period + 1.", score(2),
                         lambda c: _without_last_query(_weights(c), 2 - period(c), period(c))),
            WrongAnswer("includes_query_period_minus_1", "query period - 1 (in the first half, "
                        "attending key 0) was included, e.g. the whole diagonal at offset 1 - "
                        "period was averaged. Average over queries i >= period only.",
                        score(1, first_from_period=-1)),
            WrongAnswer("all_queries", "the average ran over every query, first half included; "
                        "only queries in the second half (i >= period) have an earlier copy to "
                        "look at.",
                        lambda c: _score(_weights(c), 1 - period(c), 0, wrap=True)),
            WrongAnswer("divides_by_n", "the sum over the period second-half queries was divided "
                        "by N = 2 * period instead of period.",
                        lambda c: _score(_weights(c), 1 - period(c), period(c),
                                         divide_by=2 * period(c))),
            WrongAnswer("mean_over_heads", "the average ran over the heads (axis 0) instead of the "
                        "queries: return one score per head, shape (H,).",
                        lambda c: _weights(c)[:, np.arange(period(c), 2 * period(c)),
                                              np.arange(1, period(c) + 1)].mean(0)),
            WrongAnswers("key_before_duplicate", "that is the weight on key i - period - 1, the "
                         "token BEFORE the earlier copy (at query i = period that key would be "
                         "-1, which an index wraps around to the last key and a diagonal leaves "
                         "out). An induction head attends to the token after the copy: key i - "
                         "period + 1.",
                         score(-1, wrap=True), lambda c: [score(-1)(c)]),
            WrongAnswer("skips_first_query", "query i = period was left out (the range starts "
                        "at period + 1): average over all the period queries i = period ... "
                        "2 * period - 1.",
                        lambda c: _mean_or_nan(_induction_entries(_weights(c), period(c))[:, 1:])),
            WrongAnswer("shifted_query_range", "the queries run from period - 1 to 2 period - 2, "
                        "one too early (range(period - 1, 2 * period - 1)): the queries whose "
                        "earlier copy exists are i = period ... 2 * period - 1.",
                        lambda c: _mean_or_nan(_induction_entries(_weights(c), period(c),
                                                                  first=period(c) - 1))),
            WrongAnswer("transposed", "every score is 0. Either the entries read are above "
                        "the diagonal, which causal weights hold as 0, or the average was rounded "
                        "down to 0 (// where / belongs, or an int result). Above the diagonal: "
                        "query and key indices swapped (weights[h, i - period "
                        "+ 1, i]), or a diagonal offset of the wrong sign or without the period "
                        "(torch.diagonal's offset must be 1 - period); the score reads row i "
                        "(the query), column i - period + 1 (the key), weights[h, i, i - period "
                        "+ 1].",
                        lambda c: _transposed_induction(_weights(c), period(c))),
            WrongAnswer("not_averaged", "that is one weight per query (H, period), an "
                        "intermediate: average over the queries to get one score per head, "
                        "shape (H,).", lambda c: _induction_entries(_weights(c), period(c))),
            WrongAnswer("argmax_share", "that is how often key i - period + 1 is the query's "
                        "largest weight (a hit rate of the argmax): the score is the weight "
                        "itself, weights[h, i, i - period + 1], averaged over the queries i >= "
                        "period.", lambda c: _argmax_share(_weights(c), 1 - period(c), period(c))),
            WrongAnswer("keepdim", "the result has shape (H, 1): average without keepdim, so "
                        "the scores have shape (H,).",
                        lambda c: _induction_entries(_weights(c), period(c)).mean(-1)[:, None]),
            WrongAnswer("sum_not_mean", "the weights on key i - period + 1 were summed over the "
                        "queries, not averaged: divide by the period.",
                        lambda c: _induction_entries(_weights(c), period(c)).sum(-1)),
            WrongAnswer("single_number", "that is one number for all heads together (a mean "
                        "without dim=): average over the queries only, one score per head, shape "
                        "(H,).",
                        lambda c: np.asarray(_induction_entries(_weights(c), period(c)).mean())),
            WrongAnswer("diagonal_over_wrong_axes", "the diagonal was taken over the head and "
                        "query axes (torch.diagonal's default dim1=0, dim2=1): take it over the "
                        "query and key axes, dim1=1, dim2=2.",
                        lambda c: _diagonal_default_axes(_weights(c), 1 - period(c))),
        ]


def _without_last_query(weights, offset, period):
    """The key at i + offset averaged over the queries period .. 2 period - 2 (the last one
    left out, as if its key were out of range), divided by period or by period - 1."""
    queries = np.arange(period, 2 * period - 1)
    total = weights[:, queries, queries + offset].sum(-1)
    return [total / period] + ([total / (period - 1)] if period > 1 else [])


def _diagonal_default_axes(weights, offset):
    """torch.diagonal(weights, offset) with its default dims (0, 1), averaged over the last."""
    return _mean_or_nan(np.diagonal(weights, offset=offset, axis1=0, axis2=1))


def _mean_or_nan(values):
    """Mean over the last axis; NaN where it is empty (what torch's and numpy's mean give)."""
    if values.shape[-1] == 0:
        return np.full(values.shape[:-1], np.nan)
    return values.mean(-1)


def _induction_entries(weights, period, first=None):
    """weights[h, i, i - period + 1] for the period queries i = first .. first + period - 1
    (first = period unless given): (H, period)."""
    first = period if first is None else first
    queries = np.arange(first, first + period)
    return weights[:, queries, queries - period + 1]


def _transposed_induction(weights, period):
    queries = np.arange(period, 2 * period)
    return weights[:, queries - period + 1, queries].mean(-1)


EXERCISES = {e.name: e for e in (PreviousTokenScore(), InductionScore())}
