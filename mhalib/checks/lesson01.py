"""Checkers for lesson 01: ``softmax`` and ``attention`` (numpy).

Every mistake model is the answer with exactly one thing wrong. None of them computes the right
answer on all cases: where a model needs the right part of the computation it goes through the
answer key under the exercise's own name, so a learner who calls a model is caught as well.
"""

from __future__ import annotations

import numpy as np

from mhalib.checks.answer_key import answer_key
from mhalib.checks.exercise import Case, Exercise, Symptom, WrongAnswer
from mhalib.checks.slips import WrongAnswers

# other mhalib functions that compute attention: reaching them from `attention` scores 0
ATTENTION_KEYS = ("masked_attention", "attend", "tiled_attention", "flash_attention",
                  "triton_flash_attention", "online_softmax_attention", "_attention")


def _exact_in_float32(x):
    """Round to integers: large logits that float32 arithmetic still represents exactly, so an
    answer computed in float32 is judged on its method, not on rounding its inputs."""
    return np.round(x)


def _axis(case: Case) -> int:
    return case.kwargs.get("axis", -1)


def _exp_over_sum(x, axis):
    """exp / sum without the max shift: overflows to inf / inf = NaN for large logits."""
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(x)
        return e / e.sum(axis=axis, keepdims=True)


def _global_max_shift(x, axis):
    """Shifts by the maximum of the whole array: slices far below it underflow to 0 / 0."""
    with np.errstate(invalid="ignore", divide="ignore"):
        e = np.exp(x - np.max(x))
        return e / e.sum(axis=axis, keepdims=True)


def _sum_without_keepdims(x, axis):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / e.sum(axis=axis)  # broadcasts against the wrong axis (or fails)


def _max_without_keepdims(x, axis):
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(x - np.max(x, axis=axis))  # shifts slice i by the max of slice j
        return e / e.sum(axis=axis, keepdims=True)


class Softmax(Exercise):
    name = "softmax"
    assignment = "01-single-head"

    def visible_cases(self, rng):
        return [
            Case("a (4, 7) batch of logits", (rng.normal(size=(4, 7)),)),
            Case("a square (5, 5) batch", (rng.normal(size=(5, 5)) * 2,)),
            Case("axis=0", (rng.normal(size=(5, 3)),), {"axis": 0}),
            Case("logits of magnitude 1e4", (_exact_in_float32(rng.normal(size=(3, 6)) * 1e4),)),
        ]

    def hidden_cases(self, rng):
        with_inf = rng.normal(size=(4, 6))
        with_inf[rng.random((4, 6)) < 0.4] = -np.inf
        with_inf[:, 0] = rng.normal(size=4)  # every row keeps one finite entry
        return [
            Case("-inf entries get weight 0", (with_inf,)),
            Case("a 3-D input with axis=1", (rng.normal(size=(2, 5, 3)) * 3,), {"axis": 1}),
            Case("axis=-2 on a square slice", (rng.normal(size=(3, 4, 4)),), {"axis": -2}),
            Case("float32 logits", (rng.normal(size=(3, 9)).astype(np.float32) * 5,)),
            Case("large negative logits (-1e4)", (-1e4 - rng.integers(0, 9, size=(2, 5)) / 8,)),
            # -inf read as 0 (or as any finite stand-in) makes 0 the row's maximum here, and
            # every weight underflows (round P: -inf replaced by 0 before the max)
            Case("-inf beside logits near -1e4", (np.array([[-1e4, -np.inf, -9999.0],
                                                            [-800.0, -np.inf, -801.0]]),)),
            Case("a single vector", (rng.normal(size=8),)),
            Case("logits of 1e4 along axis=0", (_exact_in_float32(rng.normal(size=(6, 4)) * 1e4),),
                 {"axis": 0}),
            Case("a 4-D input with axis=1 (two axes after it)", (rng.normal(size=(2, 3, 4, 5)),),
                 {"axis": 1}),
        ]

    def mistakes(self):
        return [
            WrongAnswer("no_max_shift", "exp overflows for large logits (you get NaN or inf): "
                        "what is subtracted before np.exp must be the maximum along the axis "
                        "(no shift at all, the maximum added instead of subtracted, or a "
                        "shift by another value lets exp overflow).",
                        lambda c: _exp_over_sum(c.args[0], _axis(c))),
            WrongAnswer("global_max_shift", "you subtract the maximum of the whole array, so "
                        "slices far below it underflow to 0 / 0 = NaN: subtract each slice's own "
                        "maximum (np.max(x, axis=axis, keepdims=True)).",
                        lambda c: _global_max_shift(c.args[0], _axis(c))),
            WrongAnswer("ignores_axis", "the result is normalised along the last axis whatever "
                        "`axis` says: pass axis (and keepdims=True) to max and sum.",
                        lambda c: _softmax_last_axis(c.args[0])),
            WrongAnswers("whole_array", "the whole array sums to 1 instead of each slice along "
                         "`axis`: the normalisation ran over every entry at once (a max or sum "
                         "with no axis, or scipy.special.softmax called without axis=, whose "
                         "default None means the whole array): normalise along the slice's own "
                         "axis (for a reduction, axis=... with keepdims=True).",
                         lambda c: _whole_array(c.args[0]),
                         lambda c: [_exp_over_sum(c.args[0], None)]),
            WrongAnswer("sum_over_whole_array", "each slice is shifted by its own maximum but the "
                        "division uses the sum of the whole array: reduce with axis=axis, "
                        "keepdims=True.", lambda c: _shifted_whole_sum(c.args[0], _axis(c))),
            WrongAnswer("sum_no_keepdims", "the sums are divided along the wrong axis: use "
                        "keepdims=True in the sum so the shapes broadcast per slice.",
                        lambda c: _sum_without_keepdims(c.args[0], _axis(c))),
            WrongAnswer("max_no_keepdims", "each slice is shifted by another slice's maximum: use "
                        "keepdims=True in the max so it broadcasts per slice.",
                        lambda c: _max_without_keepdims(c.args[0], _axis(c))),
            WrongAnswer("returns_log_probabilities", "these are the log-probabilities (log "
                        "softmax, all <= 0), an intermediate: return their exponentials, which "
                        "are >= 0 and sum to 1 along `axis`.",
                        lambda c: _log_softmax(c.args[0], _axis(c))),
            WrongAnswer("no_normalisation", "the exponentials were returned without dividing by "
                        "their sum (dividing by their maximum changes nothing): divide by "
                        "e.sum(axis=axis, keepdims=True) so each slice sums to 1.",
                        lambda c: _shifted_exp(c.args[0], _axis(c))),
            WrongAnswers("negated_logits", "the largest logit gets the smallest weight: the sign "
                         "is flipped (exp(max - x), or a softmax of -x); compute exp(x - max).",
                         lambda c: _softmax_along(-c.args[0], _axis(c)),
                         lambda c: [_exp_of_max_minus_x(c.args[0], _axis(c))]),
            WrongAnswer("max_along_wrong_axis", "each entry was shifted by the maximum along the "
                        "last axis, but summed along `axis`: take the maximum along `axis` too "
                        "(np.max(x, axis=axis, keepdims=True)).",
                        lambda c: _shift_last_sum_axis(c.args[0], _axis(c))),
            WrongAnswer("sum_along_wrong_axis", "each slice along `axis` was shifted by its "
                        "maximum, but divided by the sum along the last axis: sum along `axis` "
                        "too (e.sum(axis=axis, keepdims=True)).",
                        lambda c: _shift_axis_sum_last(c.args[0], _axis(c))),
            WrongAnswers("axis_not_moved_back", "the softmax is right but its axis is left "
                         "last: move it back the way it came, so the output has the input's "
                         "shape (after np.moveaxis(x, axis, -1), np.moveaxis(result, -1, axis); "
                         "after np.swapaxes(x, axis, -1), swap the same two axes again).",
                         lambda c: np.moveaxis(_softmax_along(c.args[0], _axis(c)), _axis(c), -1),
                         lambda c: [np.swapaxes(_softmax_along(c.args[0], _axis(c)), _axis(c),
                                                -1)]),
            WrongAnswers("wrong_axis", "each slice along another axis sums to 1 (a hard-coded "
                         "axis=0 or dim=0?): normalise along the axis given by `axis`.",
                         lambda c: _softmax_along(c.args[0], _other_axes(c)[0]),
                         lambda c: [_softmax_along(c.args[0], a) for a in _other_axes(c)[1:]]),
            WrongAnswer("softmax_transposed", "the softmax is right but transposed (.T reverses "
                        "every axis): return it in the input's layout, without .T.",
                        lambda c: np.transpose(_softmax_along(c.args[0], _axis(c)))),
            WrongAnswer("sigmoid", "that is the logistic sigmoid 1 / (1 + exp(-x)) of each entry "
                        "on its own; softmax normalises: exp(x - max) / sum of exp(x - max) along "
                        "`axis`.", lambda c: _sigmoid(c.args[0])),
            WrongAnswer("shift_by_mean", "each slice was shifted by something other than its "
                        "maximum (its mean or its minimum, say): for large logits exp(x - shift) "
                        "still overflows (inf / inf = NaN). "
                        "Subtract the maximum, so the largest exponent is exp(0) = 1.",
                        lambda c: _shift_by_mean(c.args[0], _axis(c))),
            WrongAnswer("denominator_not_shifted", "the normaliser is computed from the "
                        "unshifted x: the sum of exp(x) (or its log, a log-sum-exp) overflows to "
                        "inf for large logits, and the output turns 0 there. Shift the "
                        "exponentials and their sum by the same maximum (e = np.exp(x - max); e / "
                        "e.sum(axis=axis, keepdims=True)), or take the log-sum-exp as max + "
                        "log(sum(exp(x - max))).",
                        lambda c: _unshifted_denominator(c.args[0], _axis(c))),
        ]


def _sigmoid(x):
    with np.errstate(over="ignore"):
        return 1 / (1 + np.exp(-x))


def _shift_by_mean(x, axis):
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(x - np.mean(x, axis=axis, keepdims=True))
        return e / e.sum(axis=axis, keepdims=True)


def _unshifted_denominator(x, axis):
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        return np.exp(x - np.max(x, axis=axis, keepdims=True)) / np.exp(x).sum(axis=axis,
                                                                               keepdims=True)


def _softmax_along(x, axis):
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(x - np.max(x, axis=axis, keepdims=True))
        return e / e.sum(axis=axis, keepdims=True)


def _other_axes(case: Case) -> list[int]:
    """The axes of the input other than ``axis`` (normalised), axis 0 first."""
    x = np.asarray(case.args[0])
    right = _axis(case) % x.ndim
    return [a for a in range(x.ndim) if a != right]


def _log_softmax(x, axis):
    with np.errstate(invalid="ignore", divide="ignore"):
        shifted = x - np.max(x, axis=axis, keepdims=True)
        return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


def _shifted_exp(x, axis):
    with np.errstate(invalid="ignore"):
        return np.exp(x - np.max(x, axis=axis, keepdims=True))


def _exp_of_max_minus_x(x, axis):
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(np.max(x, axis=axis, keepdims=True) - x)
        return e / e.sum(axis=axis, keepdims=True)


def _shift_last_sum_axis(x, axis):
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(x - np.max(x, axis=-1, keepdims=True))
        return e / e.sum(axis=axis, keepdims=True)


def _shift_axis_sum_last(x, axis):
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(x - np.max(x, axis=axis, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)


def _softmax_last_axis(x):
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(x - np.max(x, axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)


def _shifted_whole_sum(x, axis):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / e.sum()


def _whole_array(x):
    with np.errstate(invalid="ignore"):
        e = np.exp(x - np.max(x))
        return e / e.sum()


# ---------------------------------------------------------------------------------------------
# attention


def _scores(q, k):
    """Unscaled dot products q . k: (..., N_q, N_k)."""
    return q @ np.swapaxes(k, -1, -2)


def _reference_attention(q, k, v):
    return answer_key("attention")(q, k, v)


def _rescaled(q, k, v, factor):
    """Attention whose scores are multiplied by ``factor`` on top of 1/sqrt(d_k)."""
    return _reference_attention(q * factor, k, v)


def _weights_over_queries(q, k, v):
    """Softmax down each column (over the queries) instead of along each row."""
    scores = _scores(q, k) / np.sqrt(q.shape[-1])  # (..., N_q, N_k)
    e = np.exp(scores - np.max(scores, axis=-2, keepdims=True))
    weights = e / e.sum(axis=-2, keepdims=True)
    return weights @ v, weights


def _unshifted(q, k, v):
    weights = _exp_over_sum(_scores(q, k) / np.sqrt(q.shape[-1]), -1)  # NaN for large logits
    return weights @ v, weights


def _scale_after_softmax(q, k, v):
    out, weights = _reference_attention(q * np.sqrt(q.shape[-1]), k, v)  # unscaled softmax
    weights = weights / np.sqrt(q.shape[-1])  # rows no longer sum to 1
    return weights @ v, weights


class Attention(Exercise):
    name = "attention"
    assignment = "01-single-head"
    answer_key_names = ATTENTION_KEYS

    def visible_cases(self, rng):
        return [
            Case("self-attention, N=5, d_k=8", tuple(rng.normal(size=(3, 5, 8)))),
            Case("N_q != N_k and d_v != d_k", (rng.normal(size=(4, 16)), rng.normal(size=(6, 16)),
                                               rng.normal(size=(6, 3)))),
            Case("a batch of 2", (rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 5, 4)),
                                  rng.normal(size=(2, 5, 6)))),
        ]

    def hidden_cases(self, rng):
        big = rng.normal(size=(2, 3, 4, 64))
        return [
            Case("extra batch dims (2, 3)", (big, rng.normal(size=(2, 3, 7, 64)),
                                             rng.normal(size=(2, 3, 7, 5)))),
            Case("logits of about 1e4", (_exact_in_float32(rng.normal(size=(3, 4)) * 100),
                                          _exact_in_float32(rng.normal(size=(5, 4)) * 100),
                                          rng.normal(size=(5, 2)))),
            Case("float32 inputs", tuple(rng.normal(size=(3, 6, 32)).astype(np.float32))),
            Case("one query, many keys", (rng.normal(size=(1, 8)), rng.normal(size=(9, 8)),
                                          rng.normal(size=(9, 4)))),
            Case("a single key", (rng.normal(size=(3, 2)), rng.normal(size=(1, 2)),
                                  rng.normal(size=(1, 3))), degenerate=True),
        ]

    def mistakes(self):
        def d_k(c):
            return c.args[0].shape[-1]

        def scores_instead(c):
            q, k, v = c.args
            return _reference_attention(q, k, v)[0], _scores(q, k) / np.sqrt(d_k(c))

        def swapped(c):
            out, weights = _reference_attention(*c.args)
            return weights, out

        return [
            WrongAnswer("no_scale", "the output matches attention without the 1/sqrt(d_k) scale: "
                        "did you forget to divide the scores by sqrt(d_k), or apply the scale "
                        "where it changes nothing (added to every score, or to a result you do "
                        "not use)?",
                        lambda c: _rescaled(*c.args, np.sqrt(d_k(c)))),
            WrongAnswer("scale_by_d_k", "the scores were divided by d_k instead of sqrt(d_k).",
                        lambda c: _rescaled(*c.args, 1 / np.sqrt(d_k(c)))),
            WrongAnswer("scale_by_d_v", "the scale uses d_v (v.shape[-1]) instead of d_k "
                        "(q.shape[-1]).",
                        lambda c: _rescaled(*c.args, np.sqrt(d_k(c) / c.args[2].shape[-1]))),
            WrongAnswer("scale_multiplied", "the scores were multiplied by sqrt(d_k) instead of "
                        "divided by it.", lambda c: _rescaled(*c.args, d_k(c))),
            WrongAnswer("softmax_over_queries", "each column sums to 1 instead of each row: the "
                        "softmax runs over the queries (axis -2) instead of the keys (axis -1).",
                        lambda c: _weights_over_queries(*c.args)),
            WrongAnswer("no_max_shift", "large logits overflow to NaN: the softmax must "
                        "subtract each row's maximum before exp (no shift at all, the maximum "
                        "added instead, or a shift by another value overflows).",
                        lambda c: _unshifted(*c.args)),
            WrongAnswer("scale_after_softmax", "the weights were divided by sqrt(d_k) after the "
                        "softmax, so rows no longer sum to 1: scale the scores before it.",
                        lambda c: _scale_after_softmax(*c.args)),
            WrongAnswers("returns_scores", "the second value returned is the scores, not the "
                         "softmax weights.", scores_instead,
                         lambda c: [(scores_instead(c)[0], _scores(*c.args[:2]))]),
            WrongAnswer("output_from_scores", "the output was computed from the scores (scores @ "
                        "v), not from the weights: out = weights @ v.",
                        lambda c: _out_from_scores(*c.args)),
            WrongAnswer("swapped_outputs", "the two values come back in the wrong order: return "
                        "(out, weights).", swapped),
            WrongAnswer("returns_only_output", "only the output came back: return the pair "
                        "(out, weights).", lambda c: _reference_attention(*c.args)[0]),
            WrongAnswer("returns_log_weights", "the second value is the log of the weights (a log "
                        "softmax, all <= 0): return the weights themselves, which are >= 0 and "
                        "sum to 1 along each row.", log_weights_instead),
            WrongAnswer("negated_scores", "the sign of the scores is flipped: the most similar key "
                        "gets the least weight. The scores are +q . k / sqrt(d_k).",
                        lambda c: _rescaled(*c.args, -1.0)),
            WrongAnswer("swapped_q_k", "q and k swapped roles: the scores are k @ q^T instead of "
                        "q @ k^T (queries along the rows, keys along the columns).",
                        lambda c: _keys_as_queries(*c.args)),
            WrongAnswer("output_transposed", "the output is transposed (..., d_v, N_q) (v^T @ "
                        "weights^T): compute weights @ v, shape (..., N_q, d_v).",
                        lambda c: _output_transposed(c)),
            WrongAnswer("swapped_k_v", "keys and values swapped roles: the scores use v and the "
                        "output mixes k. Score the keys (q @ k^T) and mix the values "
                        "(weights @ v).", lambda c: _values_as_keys(*c.args)),
            WrongAnswer("weights_transposed", "the weights come back transposed (N_k, N_q): row i "
                        "must hold query i's weights over the keys, shape (..., N_q, N_k).",
                        lambda c: transposed_weights(c)),
            WrongAnswer("softmax_over_first_axis", "the softmax ran over axis 0 (dim=0), which is "
                        "the batch axis when there are batch dimensions: run it over the keys, "
                        "axis=-1.", lambda c: _weights_over_axis0(*c.args)),
            Symptom("wrong_scale", "the weights match attention whose scores were scaled by a "
                    "different factor than 1/sqrt(d_k): divide q . k by sqrt(d_k), where d_k = "
                    "q.shape[-1] is the size of the vectors in each dot product (not a sequence "
                    "length or another axis).",
                    lambda c, received, meta: self._rescaled_weights(c, received)),
        ]

    def _rescaled_weights(self, case, received) -> bool:
        """True when ``received`` is attention with the scores scaled by some other factor (fitted
        from the learner's weights)."""
        q, k, v = case.args
        factor = _fitted_factor(_scores(q, k), received)
        if factor is None:
            return False
        return self.reproduces(case, lambda c: _rescaled(q, k, v, factor * np.sqrt(q.shape[-1])),
                               received)


def _fitted_factor(scores, received):
    """The factor s for which softmax(s * scores) best fits the learner's weights, or None."""
    if not isinstance(received, tuple) or len(received) != 2:
        return None
    weights = np.asarray(received[1], dtype=np.float64)
    if weights.shape != scores.shape:
        return None
    top = np.argmax(weights, axis=-1)[..., None]
    with np.errstate(divide="ignore", invalid="ignore"):
        logs = np.log(weights)
        a = logs - np.take_along_axis(logs, top, axis=-1)
    b = scores - np.take_along_axis(scores, top, axis=-1)
    valid = np.isfinite(a) & np.isfinite(b) & (weights > 1e-200)
    denominator = float(np.sum(np.where(valid, b * b, 0.0)))
    if denominator <= 0:
        return None
    return float(np.sum(np.where(valid, a * b, 0.0))) / denominator


def _keys_as_queries(q, k, v):
    scores = k @ np.swapaxes(q, -1, -2) / np.sqrt(q.shape[-1])  # (..., N_k, N_q)
    weights = _softmax_along(scores, -1)
    return weights @ v, weights  # raises unless N_q == N_k, as the learner's code does


def _out_from_scores(q, k, v):
    scores = _scores(q, k) / np.sqrt(q.shape[-1])
    return scores @ v, _softmax_along(scores, -1)


def _output_transposed(c):
    out, weights = _reference_attention(*c.args)
    return np.swapaxes(out, -1, -2), weights


def _values_as_keys(q, k, v):
    weights = _softmax_along(_scores(q, v) / np.sqrt(q.shape[-1]), -1)
    return weights @ k, weights  # raises unless d_v == d_k, as the learner's code does


def _weights_over_axis0(q, k, v):
    weights = _softmax_along(_scores(q, k) / np.sqrt(q.shape[-1]), 0)
    return weights @ v, weights


def log_weights_instead(c):
    q, k, v = c.args
    out, _ = _reference_attention(q, k, v)
    return out, _log_softmax(_scores(q, k) / np.sqrt(q.shape[-1]), -1)


def transposed_weights(c):
    out, weights = _reference_attention(*c.args)
    return out, np.swapaxes(weights, -1, -2)


EXERCISES = {e.name: e for e in (Softmax(), Attention())}
