"""Learner-style answers to lesson 01, written independently of the checker's mistake models.

``WRONG[exercise]`` maps a mistake name (as flagged by the judge) to an answer that makes it;
``RIGHT[exercise]`` lists differently written correct answers.
"""

import math

import numpy as np
import scipy.special
import torch
import torch.nn.functional as F


# -- softmax: wrong --------------------------------------------------------------------------
def softmax_no_shift(x, axis=-1):
    e = np.exp(x)
    return e / np.sum(e, axis=axis, keepdims=True)


def softmax_global_max(x, axis=-1):
    e = np.exp(x - x.max())
    return e / e.sum(axis=axis, keepdims=True)


def softmax_last_axis_only(x, axis=-1):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def softmax_whole_array(x, axis=-1):
    e = np.exp(x - np.max(x))
    return e / np.sum(e)


def softmax_sum_over_whole_array(x, axis=-1):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / e.sum()


def softmax_sum_no_keepdims(x, axis=-1):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis)


def softmax_max_no_keepdims(x, axis=-1):
    e = np.exp(x - np.max(x, axis=axis))
    return e / np.sum(e, axis=axis, keepdims=True)


def softmax_log_space(x, axis=-1):
    t = torch.from_numpy(np.asarray(x))
    return torch.log_softmax(t, dim=axis).numpy()


def softmax_forgot_division(x, axis=-1):
    t = torch.from_numpy(np.asarray(x))
    return torch.exp(t - t.amax(dim=axis, keepdim=True)).numpy()


def softmax_sign_slip(x, axis=-1):
    e = np.exp(-(x - x.max(axis=axis, keepdims=True)))
    return e / e.sum(axis=axis, keepdims=True)


def softmax_max_over_last(x, axis=-1):
    m = np.max(x, axis=-1, keepdims=True)
    e = np.exp(x - m)
    return e / np.sum(e, axis=axis, keepdims=True)


def softmax_sum_over_last(x, axis=-1):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=-1, keepdims=True)


def softmax_movedim_once(x, axis=-1):
    t = torch.movedim(torch.from_numpy(np.asarray(x)), axis, -1)
    return torch.softmax(t, dim=-1).numpy()


def softmax_axis_zero(x, axis=-1):
    return scipy.special.softmax(x, axis=0)


def softmax_mean_shift(x, axis=-1):
    centred = x - np.mean(x, axis=axis, keepdims=True)
    return np.exp(centred) / np.exp(centred).sum(axis=axis, keepdims=True)


def softmax_half_shifted(x, axis=-1):
    top = x.max(axis=axis, keepdims=True)
    return np.exp(x - top) / np.exp(x).sum(axis=axis, keepdims=True)


def softmax_logistic(x, axis=-1):
    return scipy.special.expit(x)


def softmax_dot_t(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return (e / e.sum(axis=axis, keepdims=True)).T


# -- softmax: right --------------------------------------------------------------------------
def softmax_keepdims(x, axis=-1):
    shifted = x - np.max(x, axis=axis, keepdims=True)
    e = np.exp(shifted)
    return e / np.sum(e, axis=axis, keepdims=True)


def softmax_scipy(x, axis=-1):
    return scipy.special.softmax(x, axis=axis)


def softmax_torch(x, axis=-1):
    return torch.softmax(torch.from_numpy(np.asarray(x)), dim=axis).numpy()


def softmax_loops(x, axis=-1):
    moved = np.moveaxis(np.asarray(x, dtype=np.float64), axis, -1)
    out = np.empty_like(moved)
    for index in np.ndindex(moved.shape[:-1]):
        row = moved[index]
        top = max(row)
        exps = [math.exp(value - top) for value in row]
        total = sum(exps)
        out[index] = [e / total for e in exps]
    return np.moveaxis(out, -1, axis)


def softmax_float32(x, axis=-1):
    x = np.asarray(x, dtype=np.float32)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def softmax_logsumexp(x, axis=-1):
    return np.exp(x - scipy.special.logsumexp(x, axis=axis, keepdims=True))


# -- attention: wrong ------------------------------------------------------------------------
def _rows(scores):
    return softmax_keepdims(scores, axis=-1)


def attention_no_scale(q, k, v):
    w = _rows(q @ np.swapaxes(k, -1, -2))
    return w @ v, w


def attention_scale_d_k(q, k, v):
    w = _rows(q @ np.swapaxes(k, -1, -2) / q.shape[-1])
    return w @ v, w


def attention_scale_d_v(q, k, v):
    w = _rows(q @ np.swapaxes(k, -1, -2) / np.sqrt(v.shape[-1]))
    return w @ v, w


def attention_scale_multiplied(q, k, v):
    w = _rows(q @ np.swapaxes(k, -1, -2) * np.sqrt(q.shape[-1]))
    return w @ v, w


def attention_softmax_over_queries(q, k, v):
    w = softmax_keepdims(q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1]), axis=-2)
    return w @ v, w


def attention_naive_softmax(q, k, v):
    w = softmax_no_shift(q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1]))
    return w @ v, w


def attention_scale_after_softmax(q, k, v):
    w = _rows(q @ np.swapaxes(k, -1, -2)) / np.sqrt(q.shape[-1])
    return w @ v, w


def attention_returns_scores(q, k, v):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    return _rows(scores) @ v, scores


def attention_swapped(q, k, v):
    w = _rows(q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1]))
    return w, w @ v


def attention_output_only(q, k, v):
    return _rows(q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])) @ v


def attention_log_softmax_weights(q, k, v):
    s = torch.from_numpy(q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1]))
    log_w = torch.log_softmax(s, dim=-1).numpy()
    return np.exp(log_w) @ v, log_w


def attention_minus_scores(q, k, v):
    w = _rows(-(q @ np.swapaxes(k, -1, -2)) / np.sqrt(q.shape[-1]))
    return w @ v, w


def attention_k_q_scores(q, k, v):
    w = _rows(np.einsum("...kd,...qd->...kq", k, q) / np.sqrt(q.shape[-1]))
    return w @ v, w


def attention_weights_kq(q, k, v):
    w = _rows(q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1]))
    return w @ v, np.einsum("...qk->...kq", w)


def attention_softmax_dim0(q, k, v):
    w = scipy.special.softmax(q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1]), axis=0)
    return w @ v, w


def attention_hard_coded_scale(q, k, v):
    w = _rows(q @ np.swapaxes(k, -1, -2) / np.sqrt(64))
    return w @ v, w


def attention_v_as_keys(q, k, v):
    w = _rows(q @ np.swapaxes(v, -1, -2) / np.sqrt(q.shape[-1]))
    return w @ k, w


def attention_scores_times_v(q, k, v):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    w = _rows(scores)
    return scores @ v, w


def attention_out_by_vt(q, k, v):
    w = _rows(q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1]))
    return np.einsum("...kv,...qk->...vq", v, w), w


def attention_k_dot_t(q, k, v):
    """``k.T`` reverses every axis: right for 2-D inputs, broken with batch dims."""
    w = _rows(q @ k.T / np.sqrt(q.shape[-1]))
    return w @ v, w


# -- attention: right ------------------------------------------------------------------------
def attention_matmul(q, k, v):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    w = softmax_keepdims(scores)
    return w @ v, w


def attention_einsum(q, k, v):
    scores = np.einsum("...qd,...kd->...qk", q, k) / math.sqrt(k.shape[-1])
    w = scipy.special.softmax(scores, axis=-1)
    return np.einsum("...qk,...kv->...qv", w, v), w


def attention_loops(q, k, v):
    batch = q.shape[:-2]
    n_q, n_k, d_v = q.shape[-2], k.shape[-2], v.shape[-1]
    out = np.zeros(batch + (n_q, d_v))
    w = np.zeros(batch + (n_q, n_k))
    for b in np.ndindex(batch):
        for i in range(n_q):
            scores = [float(q[b][i] @ k[b][j]) / math.sqrt(q.shape[-1]) for j in range(n_k)]
            w[b][i] = softmax_loops(np.array(scores))
            out[b][i] = sum(w[b][i][j] * v[b][j] for j in range(n_k))
    return out, w


def attention_torch(q, k, v):
    q, k, v = (torch.from_numpy(np.asarray(a)) for a in (q, k, v))
    w = torch.softmax(q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5, dim=-1)
    return (w @ v).numpy(), w.numpy()


def attention_sdpa(q, k, v):
    tq, tk, tv = (torch.from_numpy(np.asarray(a)) for a in (q, k, v))
    out = F.scaled_dot_product_attention(tq, tk, tv)
    w = torch.softmax(tq @ tk.transpose(-2, -1) * q.shape[-1] ** -0.5, dim=-1)
    return out.numpy(), w.numpy()


def attention_float32(q, k, v):
    q, k, v = (np.asarray(a, dtype=np.float32) for a in (q, k, v))
    w = softmax_float32(q @ np.swapaxes(k, -1, -2) / np.float32(np.sqrt(q.shape[-1])))
    return w @ v, w


# -- answers that reach mhalib's own answer --------------------------------------------------
def softmax_from_reference(x, axis=-1):
    from mhalib.reference import softmax

    return softmax(x, axis=axis)


def attention_from_reference(q, k, v):
    import mhalib.reference

    return mhalib.reference.attention(q, k, v)


def attention_from_masked_reference(q, k, v):
    from mhalib.reference import masked_attention

    return masked_attention(q, k, v, np.ones((q.shape[-2], k.shape[-2]), dtype=bool))


def attention_from_checker_helper(q, k, v):
    from mhalib.checks import lesson01

    return lesson01._reference_attention(q, k, v)


WRONG = {
    "softmax": {
        "no_max_shift": softmax_no_shift,
        "global_max_shift": softmax_global_max,
        "ignores_axis": softmax_last_axis_only,
        "whole_array": softmax_whole_array,
        "sum_over_whole_array": softmax_sum_over_whole_array,
        "sum_no_keepdims": softmax_sum_no_keepdims,
        "max_no_keepdims": softmax_max_no_keepdims,
        "returns_log_probabilities": softmax_log_space,
        "no_normalisation": softmax_forgot_division,
        "negated_logits": softmax_sign_slip,
        "max_along_wrong_axis": softmax_max_over_last,
        "sum_along_wrong_axis": softmax_sum_over_last,
        "axis_not_moved_back": softmax_movedim_once,
        "wrong_axis": softmax_axis_zero,
        "shift_by_mean": softmax_mean_shift,
        "denominator_not_shifted": softmax_half_shifted,
        "sigmoid": softmax_logistic,
        "softmax_transposed": softmax_dot_t,
    },
    "attention": {
        "no_scale": attention_no_scale,
        "scale_by_d_k": attention_scale_d_k,
        "scale_by_d_v": attention_scale_d_v,
        "scale_multiplied": attention_scale_multiplied,
        "softmax_over_queries": attention_softmax_over_queries,
        "no_max_shift": attention_naive_softmax,
        "scale_after_softmax": attention_scale_after_softmax,
        "returns_scores": attention_returns_scores,
        "swapped_outputs": attention_swapped,
        "returns_only_output": attention_output_only,
        "returns_log_weights": attention_log_softmax_weights,
        "negated_scores": attention_minus_scores,
        "swapped_q_k": attention_k_q_scores,
        "weights_transposed": attention_weights_kq,
        "softmax_over_first_axis": attention_softmax_dim0,
        "wrong_scale": attention_hard_coded_scale,
        "swapped_k_v": attention_v_as_keys,
        "output_from_scores": attention_scores_times_v,
        "output_transposed": attention_out_by_vt,
    },
}

def softmax_swapped_once(x, axis=-1):
    """The axis swapped to the end and never swapped back."""
    last = np.swapaxes(np.asarray(x, dtype=float), axis, -1)
    e = np.exp(last - last.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


ALSO_WRONG = {
    "softmax": {"axis_not_moved_back": softmax_swapped_once},
}

RIGHT = {
    "softmax": [softmax_keepdims, softmax_scipy, softmax_torch, softmax_loops, softmax_float32,
                softmax_logsumexp],
    "attention": [attention_matmul, attention_einsum, attention_loops, attention_torch,
                  attention_sdpa, attention_float32],
}

# answers that fail with an exception on some case rather than a wrong value
BROKEN = {"attention": [attention_k_dot_t]}

ANSWER_KEY = {
    "softmax": [softmax_from_reference],
    "attention": [attention_from_reference, attention_from_masked_reference,
                  attention_from_checker_helper],
}
