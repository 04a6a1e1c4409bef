"""Which attention weights did the learner's code use? Read back from its output (issue 22).

An attention output row is a weighted sum of value vectors: ``out_i = sum_j w_ij v_j``. When a
head has no more keys than value features (``N_k <= d_v``) and its values are in general
position, the weights are determined by the output: ``w = out @ pinv(v)``. Once read back, they
say what the code did without any mistake model:

- **which keys each query used** (a causal mask that hides the diagonal, lets one future key in,
  is aligned top-left, is upside down or inverted, or keeps only the current token or chunk);
- **whether each row was normalised** (rows summing to 1/sqrt(d): a scale after the softmax);
- **which scale the scores had**: ``log w_ij = c * (q_i . k_j) + const_i`` gives ``c``, which is
  1/sqrt(d) in a right answer and names the width used otherwise (1/sqrt(d_model), 1/d, 1);
- **whose values and scores they were** (another head's or group's, keys and values swapped),
  when the output is not a weighted sum of this head's values but is one of another set's.

Only what the read-back reproduces is said; when nothing fits, this module says nothing and the
other diagnoses speak. The views of each exercise (how its inputs become per-head q, k, v and
its output per-head rows) are in :mod:`mhalib.checks.weights_views`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mhalib.checks.explain_sizes import factor_name
from mhalib.checks.weights_masks import OWN_POSITION_ONLY, mask_added, masked_as_zero

FIT = 1e-5  # relative residual of a weighted-sum reading that counts as exact
USED = 1e-8  # a weight below this (relative to its row's largest) counts as 0 (float64 cases)


@dataclass
class Head:
    """One head of one case, in float64: ``q (N_q, d)``, ``k (N_k, d)``, ``v (N_k, d_v)``, the
    learner's ``out (N_q, d_v)``, the ``allowed (N_q, N_k)`` keys and the right ``scale``."""

    label: str
    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    out: np.ndarray
    allowed: np.ndarray
    scale: float
    # other value sets to read ``out`` against when this head's values do not fit:
    # (sentence naming the slip, values (N_k', d_v), keys for the same positions or None)
    value_options: list = field(default_factory=list)


@dataclass(frozen=True)
class Pattern:
    """A named set of visible keys: ``mask (N_q, N_k)`` and the sentence that names it."""

    name: str
    mask: np.ndarray
    sentence: str


def read_weights(out: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, float] | None:
    """``(w (N_q, N_k), relative residual)`` with ``w @ values ~ out``, or None when the values
    do not determine the weights or cannot refute them (as many keys as features or more: any
    output is then some combination of the values; or values not independent)."""
    n_k, d_v = values.shape
    finite = np.isfinite(out).all(axis=1)  # rows that are NaN (0 / 0) are left unread
    if n_k == 0 or n_k >= d_v or not finite.any():  # N_k = d_v fits any output
        return None
    if np.linalg.matrix_rank(values, tol=1e-8 * max(1.0, np.abs(values).max())) < n_k:
        return None
    solution, *_ = np.linalg.lstsq(values.T, out[finite].T, rcond=None)
    w = np.full((out.shape[0], n_k), np.nan)
    w[finite] = solution.T
    residual = np.linalg.norm(w[finite] @ values - out[finite]) / max(
        np.linalg.norm(out[finite]), 1e-12)
    return w, float(residual)


def causal_patterns(n_q: int, n_k: int, right: np.ndarray) -> list[Pattern]:
    """The usual wrong sets of visible keys for a bottom-right causal ``right`` mask."""
    i = np.arange(n_q)[:, None]
    j = np.arange(n_k)[None, :]
    offset = n_k - n_q
    found = [
        Pattern("no_mask", np.ones((n_q, n_k), bool),
                "every query gives weight to every key, future ones included: no score was "
                "hidden before the softmax (key j is allowed only when j <= i): the causal mask "
                "is not applied, or is applied in a way that hides nothing (a mask that is all "
                "True, a fill whose result is not used, or weights taken before the mask)"),
        Pattern("diagonal_hidden", j < i + offset,
                "no query gives weight to its own position: the mask hides the diagonal "
                "(j < i where it should be j <= i)"),
        Pattern("one_future_key", j <= i + offset + 1,
                "each query also gives weight to the next position: the causal mask is off by "
                "one (j <= i + 1 where it should be j <= i)"),
        Pattern("upside_down", j >= i + offset,
                "each query sees itself and the FUTURE keys: the causal mask is upside down "
                "(the lower triangle is the allowed one: j <= i)"),
        Pattern("self_only", j == i + offset,
                "each query gives all its weight to its own position and none to the earlier "
                "ones: the earlier keys and values are missing (a cache overwritten instead of "
                "appended, or attention over the new token alone)"),
    ]
    found.append(Pattern("inverted", ~right,
                         "each query gives weight exactly to the keys it must NOT see: the mask "
                         "is used inverted (True means 'may attend' in this course)"))
    if offset:
        found.append(Pattern("top_left", j <= i,
                             "the causal mask is aligned top-left (j <= i): with N_q != N_k "
                             "query i sits at position i + N_k - N_q, so it may see keys "
                             "j <= i + N_k - N_q (bottom-right)"))
    return [p for p in found if not np.array_equal(p.mask, right)]


def _support_problem(heads, weights, extra_patterns, noise: float = 0.0
                     ) -> tuple[str, str] | None:
    """Which keys each query used, against the keys it may use (``noise``: the reading's
    relative residual; an output computed in float32 reads back weights of about 1e-7 where
    the weight is 0, which must not count as a key used)."""
    threshold = max(USED, 1e3 * noise)
    for head, w in zip(heads, weights):
        finite = np.isfinite(w).all(axis=1)
        w = np.where(finite[:, None], w, 0.0)
        top = np.abs(w).max(axis=1, keepdims=True)
        used = np.abs(w) > threshold * np.maximum(top, 1e-300)
        used &= (top > 1e-12)
        rows = head.allowed.any(axis=1) & (top[:, 0] > 1e-12) & finite
        if np.array_equal(used[rows], head.allowed[rows]):
            continue
        zero_filled = masked_as_zero(head, w, rows)
        if zero_filled:
            return "weights:masked_as_zero", f"{zero_filled} ({head.label})"
        added = mask_added(head, w, rows)
        if added:
            return "weights:mask_added", f"{added} ({head.label})"
        n_q, n_k = head.allowed.shape
        patterns = extra_patterns(head) if extra_patterns else []
        if not head.allowed.all():
            patterns += causal_patterns(n_q, n_k, head.allowed)
        for pattern in patterns:
            if np.array_equal(used[rows], pattern.mask[rows]):
                return f"weights:{pattern.name}", f"{pattern.sentence} ({head.label})"
        if n_q == n_k > 1 and np.array_equal(used[rows], np.eye(n_q, dtype=bool)[rows]):
            return "weights:own_position_only", f"{OWN_POSITION_ONLY} ({head.label})"
        row = int(np.argwhere((used != head.allowed).any(axis=1) & rows)[0][0]) \
            if ((used != head.allowed).any(axis=1) & rows).any() else None
        if row is None:
            continue
        extra = np.flatnonzero(used[row] & ~head.allowed[row]).tolist()
        missing = np.flatnonzero(~used[row] & head.allowed[row]).tolist()
        if not extra and not np.isclose(w[row].sum(), 1.0, atol=5e-3):
            continue  # (a tiny weight in a row that is not normalised: round Y's softmax
            # summed over the heads; the normalisation reading says that)
        said = []
        if extra:
            said.append(f"gives weight to key(s) {_positions(extra)} it must not see")
        if missing:
            said.append(f"gives no weight to key(s) {_positions(missing)} it should see")
        return "weights:visible_keys", (
            f"read back from your output, query {row} of {head.label} " + " and ".join(said)
            + f"; it may see keys {_positions(np.flatnonzero(head.allowed[row]).tolist())}: "
            "check which keys your mask (or your cache, or your loop over blocks) lets in"
            + ("" if extra else ", and that the softmax shifts each row by its own maximum (a "
               "larger shift underflows weights to 0)"))
    return None


def _positions(items: list[int]) -> str:
    if len(items) > 2 and items == list(range(items[0], items[-1] + 1)):
        return f"{items[0]}..{items[-1]}"
    return ", ".join(str(i) for i in items[:8]) + (" ..." if len(items) > 8 else "")


def _normalisation_problem(heads, weights, names) -> tuple[str, str] | None:
    sums = []
    for head, w in zip(heads, weights):
        rows = head.allowed.any(axis=1) & np.isfinite(w).all(axis=1)
        sums.extend(w[rows].sum(axis=1).tolist())
    sums = np.array(sums)
    if not len(sums) or np.allclose(sums, 1.0, atol=5e-3):
        return None  # (to within half precision's rounding: what is wrong is not the sums)
    if np.allclose(sums, 0.0, atol=1e-12):
        return "weights:all_zero", (
            "read back from your output, every row of weights is all 0 where it should sum to "
            "1 (the output is 0 there). Either that part of the output was never computed (a "
            "loop over the heads, tokens or blocks that skips it, writing into a buffer of "
            "zeros), or the scores were NaN (or all -inf) before the softmax and a guard turned "
            "them into 0. 0 * -inf and -inf - (-inf) are NaN: a mask added as (~mask) * -inf makes "
            "the allowed scores NaN too; put -inf only where the mask hides a key (np.where, or "
            "masked_fill in torch). Or a guard skipped the division because a row's sum was not "
            "positive (the exp left out: raw scores summed)")
    if np.allclose(sums, sums[0], rtol=1e-4):
        factor = float(sums[0])
        return "weights:rows_scaled", (
            f"read back from your output, every row of weights sums to {factor:.4g}"
            f"{_factor_name(factor, names)} instead of 1: the output is that factor off, as "
            "if the weights were multiplied (or divided) after the softmax, or the heads' "
            "outputs averaged where they add up, or the output scaled at the end; scale the "
            "scores before the softmax and leave the weights, and the heads' sum, as they are")
    # weight on a key whose value is zero leaves nothing in the output: read back, the rows
    # then sum to less than 1 although the softmax itself is right
    unseen = (", or a mask zeroed some weights after the softmax (mask the scores before it), "
              "or some of the weight went to keys that should not be there whose values are "
              "zero and leave nothing in the output (cache slots not written yet, padding)"
              if sums.max() <= 1 + 1e-4 else "")
    return "weights:not_normalised", (
        f"read back from your output, the rows of weights sum to values between "
        f"{sums.min():.3g} and {sums.max():.3g}, not 1: the division by the sum of the "
        "exponentials is missing or uses the wrong sum (one over another axis, such as the "
        "heads or the queries; another row's; a partial one; or one that was not rescaled "
        f"when the running maximum changed){unseen}")


def _factor_name(value: float, names: dict[str, int]) -> str:
    """`` = 1/sqrt(d_head)`` (the case's sizes only), or ""."""
    name = factor_name(value, names, sizes_only=True)
    return f" = {name}" if name else ""


def _scale_fit(head, w, scores) -> tuple[float, float] | None:
    """``(c, residual)`` of ``log w_ij = c * scores_ij + b_i`` over the used weights."""
    top = np.abs(w).max(axis=1, keepdims=True)
    used = head.allowed & (w > 1e-9 * np.maximum(top, 1e-300))
    xs, ys = [], []
    for i in range(w.shape[0]):
        if not np.isfinite(w[i]).all():
            continue
        cols = np.flatnonzero(used[i])
        if len(cols) < 2:
            continue
        y = np.log(w[i, cols])
        x = scores[i, cols]
        xs.append(x - x.mean())
        ys.append(y - y.mean())
    if not xs:
        return None
    x, y = np.concatenate(xs), np.concatenate(ys)
    if float(x @ x) < 1e-12:
        return None
    c = float(x @ y / (x @ x))
    residual = float(np.linalg.norm(y - c * x) / max(np.linalg.norm(y), 1e-12))
    return c, residual


def _scale_problem(heads, weights, names) -> tuple[str, str] | None:
    found = []
    for head, w in zip(heads, weights):
        if (np.nan_to_num(w) < -1e-9).any():
            return None
        fit = _scale_fit(head, w, head.q @ head.k.T)
        if fit is None:
            continue
        c, residual = fit
        if residual > 1e-3:
            return None
        found.append((c, head))
    if not found:
        return None
    c, head = found[0]
    if all(abs(other - head.scale) <= 1e-3 * head.scale for other, _ in found):
        return None
    if not all(abs(other - c) <= 1e-3 * abs(c) for other, _ in found):
        return None
    if c < 0:
        return "weights:sign", (
            f"read back from your output, the weights favour the SMALLEST scores (they are "
            f"softmax({c:.3g} * q . k)): a minus sign crept into the scores or the exponent")
    name = _factor_name(c, names)
    if abs(c - 1.0) < 1e-3:
        name = " (no scale at all)"
    right = _factor_name(head.scale, names) or f" = {head.scale:.4g}"
    return "weights:scale", (
        f"read back from your output, the weights are softmax(c * q . k) with c = {c:.4g}{name}"
        f"; the scores must be scaled by 1/sqrt(d){right}, the width of the vectors in each "
        "dot product")


def _values_problem(heads, weights_or_none) -> tuple[str, str] | None:
    """When this head's values do not explain its output but another value set does: the
    sentence whose value set explains the most such heads (all of them when it can), provided
    the value sets explain more than half of those heads."""
    misfits = [head for head, read in zip(heads, weights_or_none)
               if read is None or read[1] > FIT]
    votes: dict[str, list] = {}
    for head in misfits:
        for sentence, values, keys in head.value_options:
            other = read_weights(head.out, values)
            if other is not None and other[1] <= FIT and _softmax_like(other[0], head, keys):
                votes.setdefault(sentence, []).append(head.label)
    explained = {label for labels in votes.values() for label in labels}
    if not votes or 2 * len(explained) <= len(misfits):
        return None  # (one head of four read as a slip: a coincidence of that head, round AB)
    sentence, labels = max(votes.items(), key=lambda item: len(item[1]))
    return "weights:values", f"{sentence} ({labels[0]})"


def _softmax_like(w, head, keys=None) -> bool:
    """True when weights ``w (N_q, n)`` read over another value set could come from a softmax
    over that set: rows summing to 1, none negative, and, when the set's ``keys`` are known, the
    very weights softmax(scale q . k) gives over them (under the head's mask when the set has
    its width). A set that fits with some keys at weight 0 where a softmax gives them weight is
    not the set read, only a superset of it."""
    w = np.nan_to_num(w)
    rows = np.isfinite(head.out).all(axis=1)
    if (w < -1e-6).any() or not np.allclose(w[rows].sum(axis=1), 1.0, atol=1e-6):
        return False
    if keys is None or keys.shape[0] != w.shape[1]:
        return True
    logits = head.scale * (head.q @ keys.T)  # (N_q, n)
    if head.allowed.shape == logits.shape:
        logits = np.where(head.allowed, logits, -np.inf)
    with np.errstate(all="ignore"):
        top = logits.max(axis=1, keepdims=True)
        e = np.exp(logits - np.where(np.isfinite(top), top, 0.0))
        softmax = e / e.sum(axis=1, keepdims=True)
    return bool(np.allclose(w[rows], softmax[rows], atol=1e-6))


def all_fit(reads) -> bool:
    """True when every head's output was read as an exact weighted sum of its values."""
    return all(r is not None and r[1] <= FIT for r in reads)


def diagnose(heads: list[Head], names: dict[str, int], extra_patterns=None,
             same_weights_message: str | None = None, reads=None) -> tuple[str, str] | None:
    """``(flag, message)`` of what the weights read back from the heads' outputs show, or None
    when they show nothing wrong or cannot be read (``reads``: :func:`read_weights` of each
    head, when the caller has them already)."""
    if reads is None:
        reads = [read_weights(h.out, h.v) for h in heads]
    if all(r is None for r in reads):
        return None
    if any(r is not None and r[1] > FIT for r in reads):
        return _values_problem(heads, reads)
    kept = [(h, r[0]) for h, r in zip(heads, reads) if r is not None]
    hs, ws = [h for h, _ in kept], [w for _, w in kept]
    noise = max((r[1] for r in reads if r is not None), default=0.0)
    for step in (lambda: _support_problem(hs, ws, extra_patterns, noise),
                 lambda: _same_weights(hs, ws, same_weights_message),
                 lambda: _normalisation_problem(hs, ws, names),
                 lambda: _scale_problem(hs, ws, names)):
        found = step()
        if found:
            return found
    return None


def _same_weights(heads, weights, message) -> tuple[str, str] | None:
    if message is None or len(heads) < 2:
        return None
    shapes = {w.shape for w in weights}
    if len(shapes) != 1:
        return None
    first = weights[0]
    if not all(np.allclose(w, first, atol=1e-7, equal_nan=True) for w in weights[1:]):
        return None
    if np.allclose(np.nan_to_num(first), 0.0) or all(
            _softmax_like(w, h, h.k) for h, w in zip(heads, weights)):
        return None  # no weights at all (a head left out: round R's loop from head 1, on a
        # case of one head), or each head's own right weights, alike on this case
    seen = np.where(np.isfinite(first), first, 0.0)
    rows = seen.reshape(-1, seen.shape[-1])
    uniform = all(np.allclose(r[r > 1e-12], r[r > 1e-12][0], atol=1e-7)
                  for r in rows if (r > 1e-12).any())
    if uniform:  # equal weights on every key a query sees: the keys' scores are all equal
        message += ("; or every key a query sees has the same score in every head (its "
                    "weights are uniform): keys that are all equal, such as cache slots "
                    "that were never written (zeros)")
    return "weights:same_for_all_heads", message
