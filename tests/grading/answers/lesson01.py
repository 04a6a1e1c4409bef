"""Learner answers for lesson 01's ``attention`` (numpy), right and wrong in known ways, and the
grading record each leaves (made in this process by the real probe)."""

from __future__ import annotations

import json

import numpy as np


def softmax(x, axis=-1):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def overflowing_softmax(x, axis=-1):
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(x)
        return e / e.sum(axis=axis, keepdims=True)


def _attend(q, k, v, scale=True, normalise=softmax):
    scores = q @ np.swapaxes(k, -1, -2)
    if scale:
        scores = scores / np.sqrt(q.shape[-1])
    weights = normalise(scores, axis=-1)
    return weights @ v, weights


def correct(q, k, v):
    return _attend(q, k, v)


def no_scale(q, k, v):
    return _attend(q, k, v, scale=False)


def no_scale_and_overflow(q, k, v):
    """Two slips: no 1/sqrt(d_k), and a softmax that overflows on large logits."""
    return _attend(q, k, v, scale=False, normalise=overflowing_softmax)


def uniform_weights(q, k, v):
    """Ignores q and k: right only when there is a single key (a degenerate case); the
    checker names it ``wrong_scale`` (a scale of 0), which the default rubric gives nothing."""
    weights = np.ones(q.shape[:-1] + k.shape[-2:-1]) / k.shape[-2]
    return weights @ v, weights


def position_weights(q, k, v):
    """Weights from the key positions only (ignores q and k): right only with a single key,
    and like no known mistake elsewhere."""
    positions = np.arange(k.shape[-2], dtype=float)
    weights = np.broadcast_to(softmax(positions), q.shape[:-1] + k.shape[-2:-1])
    return weights @ v, weights


def wrong_for_one_query(q, k, v):
    """Right everywhere except when there is one query: no known mistake explains it."""
    out, weights = _attend(q, k, v)
    return (out * 2, weights) if q.shape[-2] == 1 else (out, weights)


def transposed_scores(q, k, v):
    """Softmax over the queries (axis -2): a named mistake the rubric gives nothing."""
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    weights = softmax(scores, axis=-2)
    return weights @ v, weights


def raises(q, k, v):
    raise ValueError("shapes do not match")


def record_text(exercise_name: str, func, seed: int) -> str:
    """The seal the warden writes when ``func`` is graded with ``seed`` (its record, made here
    by the real probe, with the seed the warden issued)."""
    from mhalib.checks.physical import SEAL_FORMAT
    from mhalib.checks.probe import probe
    from mhalib.checks.registry import get_exercise

    record = probe(get_exercise(exercise_name), func, seed, "grading", call_timeout=5.0)
    return json.dumps({"format": SEAL_FORMAT, "exercise": exercise_name, "session": "generic",
                       "seed": seed, "record": record, "facts": {}})
