"""Readings of which keys each query used, read back from an output (part of
:mod:`mhalib.checks.weights_seen`): masked keys given the weight of a score of 0 (a mask filled
with 0 where -inf belongs), or their right score plus one amount (a float mask added), and every
query on its own position alone (no scores formed between positions)."""

from __future__ import annotations

import numpy as np

OWN_POSITION_ONLY = (
    "read back from your output, each query gives all its weight to its own position and none "
    "to the other keys it may see: no scores were formed between positions. A score per "
    "position ((q * k).sum(-1) where q @ k^T belongs), or heads never moved in front of the "
    "tokens (a transpose(1, 2) missing after the reshape to (B, N, H, d_head), so q @ k^T "
    "pairs the heads of one token), leaves the softmax a single entry or the heads to run "
    "over; or the mask keeps only the diagonal")



def masked_as_zero(head, w, rows) -> str | None:
    """What it says when every masked key that got weight got the weight a score of 0 gives (a
    mask filled with 0, or multiplied in, where -inf belongs), else None."""
    hidden = ~head.allowed & rows[:, None]
    # (a chunk's keys past its end are not there to weigh, round AS: a read-back weight of
    # about 1e-16 there is no weight)
    seen = hidden & (w > 1e-6 * np.abs(w).max(axis=1, keepdims=True))
    if not seen.any() or not (w[head.allowed & rows[:, None]] > 0).all():
        return None
    logits = head.scale * (head.q @ head.k.T)  # (N_q, N_k), the right scores
    log_w = np.log(np.where(w > 0, w, 1.0))
    shift = np.where(head.allowed, log_w - logits, np.nan)  # the row's log-normaliser
    with np.errstate(all="ignore"):
        offset = np.nanmean(shift, axis=1, keepdims=True)  # (N_q, 1)
    allowed_fit = np.allclose(shift[head.allowed & rows[:, None]],
                              np.broadcast_to(offset, shift.shape)[head.allowed & rows[:, None]],
                              atol=1e-6)
    zero_fit = np.allclose(log_w[seen], np.broadcast_to(offset, w.shape)[seen], atol=1e-6)
    if not (allowed_fit and zero_fit):
        return None
    which = "every masked key" if np.array_equal(seen, hidden) else "every masked key it weighs"
    return (f"{which} gets exactly the weight of a score of 0: the masked scores were set to 0 "
            "(filled with 0, or multiplied by a 0/1 mask) instead of -inf, and exp(0) = 1 still "
            "gives them weight; fill them with -inf (float('-inf')) so that exp gives 0")


def mask_added(head, w, rows) -> str | None:
    """What it says when every masked key got its right score plus one same finite amount
    (a float 0/1 mask added to the scores, as an additive attn_mask is), else None."""
    hidden = ~head.allowed & rows[:, None]
    if not hidden.any() or not (w[rows] > 0).all():
        return None
    logits = head.scale * (head.q @ head.k.T)  # (N_q, N_k), the right scores
    gap = np.log(np.where(w > 0, w, 1.0)) - logits  # the row's log-normaliser, plus any offset
    with np.errstate(all="ignore"):
        offset = np.nanmean(np.where(head.allowed, gap, np.nan), axis=1, keepdims=True)
    shown = head.allowed & rows[:, None]
    if not np.allclose(gap[shown], np.broadcast_to(offset, gap.shape)[shown], atol=1e-6):
        return None
    moved = (gap - offset)[hidden]
    if not np.allclose(moved, moved[0], atol=1e-6) or abs(moved[0]) < 1e-3:
        return None
    return (f"every masked key got its right score {moved[0]:+.3g}: the mask was added to the "
            "scores as numbers (a float 0/1 mask moves them by 1; "
            "F.scaled_dot_product_attention adds a float attn_mask) instead of hiding those keys; "
            "pass a bool mask (True = may attend) or fill the hidden scores with -inf")
