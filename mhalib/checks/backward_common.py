"""What the lesson 12 checkers share: inputs (numpy, float64), output checks, and the base
class of the exercises that return hand-written gradients.

Cases hold numpy arrays so that the judge can rebuild them from the seed; the forward pass a
flash backward case needs (``out`` and ``lse``) is computed here in float64, from the same
q, k, v, independently of the answer key.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mhalib.checks.autograd_watch import carries_graph
from mhalib.checks.exercise import Symptom, WrongAnswer
from mhalib.checks.torch_exercise import TorchExercise, output_dtypes, output_kind


def softmax_rows(logits, allowed=None):
    """Softmax over the last axis (float64); where ``allowed`` is False the weight is 0, and a
    row with nothing allowed is all zeros."""
    logits = np.asarray(logits, dtype=float)
    if allowed is not None:
        logits = np.where(allowed, logits, -np.inf)
    top = logits.max(axis=-1, keepdims=True)
    top = np.where(np.isinf(top), 0.0, top)
    weights = np.exp(logits - top)
    total = weights.sum(axis=-1, keepdims=True)
    return weights / np.where(total == 0, 1.0, total)


def visible(n_q: int, n_k: int) -> np.ndarray:
    """Bool (N_q, N_k): query i sees key j <= i + N_k - N_q (bottom-right, as lesson 04)."""
    return np.tril(np.ones((n_q, n_k), dtype=bool), n_k - n_q)


def weights_and_grads(rng, shape, spread=2.0, allowed=None, grad_scale=1.0):
    """(weights, grad_weights): rows of a softmax of N(0, spread^2) logits, and N(0, 1) * scale
    upstream gradients of the same shape (where ``allowed`` is False the weight is 0).

    The inputs are built here, from ``rng``, with no helper a learner's cell could call on its
    own arrays: what the grader's sandbox keeps computes no answer (mhalib.grading.stubbing)."""
    logits = rng.normal(size=shape) * spread
    if allowed is not None:
        logits = np.where(allowed, logits, -np.inf)
    top = logits.max(axis=-1, keepdims=True)
    shifted = np.exp(logits - np.where(np.isinf(top), 0.0, top))
    total = shifted.sum(axis=-1, keepdims=True)
    return shifted / np.where(total == 0, 1.0, total), rng.normal(size=shape) * grad_scale


def qkv_grad(rng, lead, n_q, n_k, d, d_v=None, logit_scale=1.0):
    """q (lead, N_q, d), k (lead, N_k, d), v (lead, N_k, d_v), grad_out (lead, N_q, d_v)."""
    lead = tuple(lead)
    d_v = d if d_v is None else d_v
    return (rng.normal(size=lead + (n_q, d)) * logit_scale, rng.normal(size=lead + (n_k, d)),
            rng.normal(size=lead + (n_k, d_v)), rng.normal(size=lead + (n_q, d_v)))


def forward_with_lse(q, k, v, causal=False):
    """(out, lse) of attention in float64: lse = log-sum-exp of each row's scaled scores,
    -inf (and a zero output row) where no key is visible."""
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(d)
    if causal:
        scores = np.where(visible(n_q, n_k), scores, -np.inf)
    top = scores.max(axis=-1, keepdims=True)
    safe = np.where(np.isinf(top), 0.0, top)
    total = np.exp(scores - safe).sum(axis=-1, keepdims=True)
    with np.errstate(divide="ignore"):
        lse = (safe + np.log(total))[..., 0]
    return softmax_rows(scores) @ v, lse


def flash_inputs(rng, batch, heads, n, d, causal=False, logit_scale=1.0, block=512):
    """(q, k, v, out, lse, grad_out) for flash_attention_backward: (B, H, N, d) tensors and
    lse (B, H, N), out and lse from the float64 forward, computed here ``block`` queries at a
    time (so a large case never holds N x N scores), with no helper a learner's cell could call
    on its own arrays (what the grader's sandbox keeps computes no answer)."""
    q, k, v, grad_out = qkv_grad(rng, (batch, heads), n, n, d, logit_scale=logit_scale)
    out, lse = np.empty_like(q), np.empty(q.shape[:-1])
    for start in range(0, n, block):
        rows = slice(start, start + block)
        scores = q[..., rows, :] @ np.swapaxes(k, -1, -2) / np.sqrt(d)  # (B, H, b, N)
        if causal:
            seen = np.arange(n)[None, :] <= np.arange(n)[rows][:, None]
            scores = np.where(seen, scores, -np.inf)
        top = scores.max(axis=-1, keepdims=True)  # every row sees key 0: finite
        weights = np.exp(scores - top)
        total = weights.sum(axis=-1, keepdims=True)
        out[..., rows, :] = (weights / total) @ v
        lse[..., rows] = (top + np.log(total))[..., 0]
    return q, k, v, out, lse, grad_out


def triple_kind(output) -> str:
    """'triple' for a tuple or list of three tensors, else what it is (recorded in meta)."""
    if isinstance(output, (tuple, list)):
        kinds = [output_kind(o) for o in output]
        if kinds == ["tensor"] * 3:
            return "triple"
        return f"a {type(output).__name__} of {len(kinds)} ({', '.join(kinds)})"
    kind = output_kind(output)
    return "one tensor" if kind == "tensor" else f"a {kind}"


class GradientExercise(TorchExercise):
    """A lesson 12 exercise whose function returns gradients computed by hand: its probe
    records how autograd was used (:mod:`mhalib.checks.autograd_watch`), and the judge fails a
    case that used it, or that switched the watch off, whatever the values.

    ``returns`` is "tensor" or "triple" (grad_q, grad_k, grad_v).
    """

    returns = "tensor"

    def output_meta(self, output, report) -> dict:
        """What every probe of these exercises records about one output."""
        kind = triple_kind(output) if self.returns == "triple" else output_kind(output)
        meta = {"output_kind": kind, **report.meta()}
        if carries_graph(output) and "autograd" not in meta:
            meta["autograd"] = "the returned tensors carry an autograd graph (grad_fn)"
        dtypes = output_dtypes(output)
        if dtypes is not None:
            meta["output_dtypes"] = dtypes
        return meta

    def judge_case(self, case, received, meta):
        if meta.get("left_torch"):
            return f"left torch while it ran: {meta['left_torch']}"
        if meta.get("evaded"):
            return (f"the measurement of its work was switched off while it ran: "
                    f"{meta['evaded']}")
        if meta.get("autograd"):
            return (f"computed with torch.autograd ({meta['autograd']}); this exercise asks "
                    "for the gradients written out, and autograd is the oracle they are "
                    "compared with")
        kind = meta.get("output_kind", "triple" if self.returns == "triple" else "tensor")
        if self.returns == "triple" and kind != "triple":
            return (f"output: returned {kind}; return the three gradients (grad_q, grad_k, "
                    "grad_v) as a tuple of torch.Tensors")
        return super().judge_case(case, received, {"output_kind": "tensor"}
                                  if self.returns == "triple" else meta) or \
            self.dtype_problem(case, meta)

    def watch_symptoms(self) -> list:
        """The symptoms every measured call of these exercises can show."""
        return [
            Symptom("uses_autograd", "the gradients were computed with torch.autograd "
                    "(.backward(), torch.autograd.grad, requires_grad or torch.func): this "
                    "exercise is the backward pass written out by hand, with the products "
                    "and the softmax gradient of the lesson. Autograd is what the checker "
                    "compares your result with.",
                    lambda case, received, meta: bool(meta.get("autograd"))
                    and not meta.get("evaded")),
            Symptom("measurement_evaded", "the function switched off what measures it (the "
                    "dispatch modes, the profile hook, another thread or process, or the C "
                    "methods behind .numpy()): the check cannot tell how the result was "
                    "computed, so it does not count. Compute in plain torch in the calling "
                    "thread.",
                    lambda case, received, meta: bool(meta.get("evaded"))),
        ]


@dataclass(frozen=True)
class WrongAnswerEither(WrongAnswer):
    """A :class:`WrongAnswer` that a learner writes in more than one way (a softmax that gives
    NaN for a row with no visible key, or one guarded against it): detected when the output
    equals ``compute``'s or one of ``alternatives``'."""

    alternatives: tuple = ()

    def detect(self, exercise, case, received, meta) -> bool:
        return any(exercise.reproduces(case, compute, received)
                   for compute in (self.compute, *self.alternatives))
