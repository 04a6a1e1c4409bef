"""Checkers for lesson 03: ``dot_product_variance``, ``softmax_entropy``, ``softmax_jacobian``.

``dot_product_variance`` is a Monte Carlo estimate, so it is judged against the exact variance
``d_k`` with a tolerance of six standard errors (any correct sampler passes, whatever order it
draws in), and its mistakes are the exact values of the wrong quantities (the scaled product's
variance 1, the standard deviation sqrt(d_k), ...). It must also honour ``seed`` (one case
calls it twice with the same seed and once with another) and actually sample: returning d_k
itself is named as a mistake.
"""

from __future__ import annotations

import numpy as np

from mhalib.checks.answer_key import answer_key
from mhalib.checks.exercise import Case, Exercise, Symptom, WrongAnswer
from mhalib.checks.slips import WrongAnswers

SEED_CASE = "the same seed twice, then another seed"
# Var(x y) for independent x, y ~ U(0, 1): E[x^2] E[y^2] - (E[x] E[y])^2 = 1/9 - 1/16
UNIFORM_PRODUCT_VARIANCE = 1 / 9 - 1 / 16


def _d_k(case: Case) -> int:
    return case.args[0]


def _n_samples(case: Case) -> int:
    return case.kwargs.get("n_samples", 100_000)


def _as_number(value):
    """A float from a Python number, a numpy scalar or a 0-d array; None otherwise."""
    if isinstance(value, np.ndarray) and value.shape == () and value.dtype.kind in "fiu":
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _is_exact(value: float | None, case: Case) -> bool:
    """A sampled variance is never d_k to nine digits; d_k itself (or d_k + tiny) is."""
    return value is not None and abs(value - _d_k(case)) <= 1e-9 * _d_k(case)


def _standard_error(case: Case, value: float) -> float:
    """Standard error of a sample variance of q . k around ``value`` (a rescaled variance)."""
    d_k = _d_k(case)
    # Var(S^2) = 2 d^2 + 6 d for S = q . k with standard normal entries (fourth moment 3d^2 + 6d)
    relative = np.sqrt((2 * d_k**2 + 6 * d_k) / _n_samples(case)) / d_k
    return abs(value) * relative


class DotProductVariance(Exercise):
    name = "dot_product_variance"
    assignment = "03-scaling"
    sigmas = 6.0
    # no repair search: an edit of a sampler can ask for billions of draws, in one numpy call
    # that no time limit interrupts (and the judgement is statistical anyway)
    repairable = False

    def visible_cases(self, rng):
        return [
            Case("d_k = 1", (1,), degenerate=True),
            Case("d_k = 16 with 20 000 samples", (16,), {"n_samples": 20_000}),
            Case("d_k = 64 with 10 000 samples, seed=5", (64,), {"n_samples": 10_000, "seed": 5}),
        ]

    def hidden_cases(self, rng):
        seed = int(rng.integers(1, 1000))
        return [
            Case("d_k = 256 with 5 000 samples", (256,), {"n_samples": 5_000, "seed": seed}),
            Case("d_k = 3", (3,), {"seed": seed + 1}),
            Case("d_k = 512 with 2 000 samples", (512,), {"n_samples": 2_000}),
            Case(SEED_CASE, (32,), {"n_samples": 5_000, "seed": seed + 2}),
        ]

    def call(self, func, case):
        if case.label != SEED_CASE:
            return func(*case.args, **case.kwargs), {}
        again = func(*case.args, **case.kwargs)
        other = func(*case.args, **{**case.kwargs, "seed": case.kwargs["seed"] + 1})
        return (func(*case.args, **case.kwargs), again, other), {}

    def expected(self, case):
        return float(_d_k(case))  # the exact variance; the answer key's estimate is not needed

    def judge_case(self, case, received, meta):
        if case.label == SEED_CASE:
            if not isinstance(received, tuple) or len(received) != 3:
                return "expected three values from three calls"
            first, again, other = (_as_number(r) for r in received)
            if first is not None and first != again:
                return (f"two calls with seed={case.kwargs['seed']} gave {first!r} and "
                        f"{again!r}: draw from np.random.default_rng(seed)")
            if first is not None and first == other:
                return "seeds differing by 1 gave the same value: the seed is not used"
            received = received[0]
        value = _as_number(received)
        if value is None:
            return f"expected a float, got {type(received).__name__} {str(received)[:60]}"
        if _is_exact(value, case):
            return f"returned exactly {value!r}: that is the theory, not a measurement"
        limit = self.sigmas * _standard_error(case, _d_k(case))
        if not abs(value - _d_k(case)) <= limit:  # NaN fails too
            return (f"expected about {_d_k(case)} (the variance of q . k is d_k; a sample of "
                    f"{_n_samples(case)} is within {limit:.3g}), got {value:.6g}")
        return None

    def reproduces(self, case, compute, received):
        """A statistical match: the learner's estimate lies within sampling error of the value
        the mistake would estimate, and that value is told apart from the right one."""
        value = _as_number(_first_value(case, received))
        if value is None:
            return False
        wrong = compute(case)
        right = float(_d_k(case))
        wrong_limit = self.sigmas * _standard_error(case, wrong)
        if abs(wrong - right) <= wrong_limit + self.sigmas * _standard_error(case, right):
            return False  # the mistake makes no difference here
        return abs(value - wrong) <= wrong_limit

    def mistakes(self):
        return [
            WrongAnswer("scaled", "the value is about 1 for every d_k: that is the variance of the "
                        "scaled product q . k / sqrt(d_k), of single products q_i k_i, or of the "
                        "entries of q or k themselves; this exercise asks for the unscaled "
                        "q . k (sum over the d_k products).",
                        lambda c: 1.0),
            WrongAnswer("standard_deviation", "the value is about sqrt(d_k): that is the standard "
                        "deviation; the variance is its square (np.var, not np.std).",
                        lambda c: float(np.sqrt(_d_k(c)))),
            WrongAnswer("scaled_by_d_k", "the value is about 1 / d_k: the products were divided by "
                        "d_k; measure q . k itself.", lambda c: 1 / _d_k(c)),
            WrongAnswer("same_vector", "the value is about 2 d_k, the variance of q . q: one "
                        "vector was dotted with itself (q . q where q . k belongs, or k drawn "
                        "equal to q); take the product of q with an independent k.",
                        lambda c: 2.0 * _d_k(c)),
            *(WrongAnswer(f"grows_as_d_k_{power}", f"the value grows as d_k^{power} (about "
                          f"{16 ** power} at d_k = 16), where the variance of q . k is d_k: "
                          "var(q . k) = d_k var(q_i) var(k_i), so here var(q_i) var(k_i) = "
                          f"d_k^{power - 1}: {how}. Draw every entry standard normal "
                          "(variance 1) and take the variance of q . k as it is.",
                          lambda c, power=power: float(_d_k(c)) ** power)
              for power, how in (
                  (2, "q or k was drawn with standard deviation sqrt(d_k) (the other standard "
                      "normal), or each dot product was multiplied by d_k^(1/2)"),
                  (3, "q and k were each drawn with standard deviation sqrt(d_k) (variance "
                      "d_k, not 1), or each dot product was multiplied by d_k"))),
            WrongAnswer("one_product_left_out", "the value is about d_k - 1 (exactly 0 for d_k "
                        "= 1): each dot product left one of its d_k products q_i k_i out, as a "
                        "loop over range(1, d_k) or range(d_k - 1), or a slice such as [1:] or "
                        "[:-1] of the features, does; sum all d_k of them.",
                        lambda c: float(_d_k(c) - 1)),
            WrongAnswer("uniform_draws", "the value matches uniform draws (rng.random): q and k "
                        "must be standard normal (rng.standard_normal).",
                        lambda c: _d_k(c) * UNIFORM_PRODUCT_VARIANCE),
            Symptom("summed_over_samples", "the value is about n_samples (exactly 0 for d_k = "
                    "1): the products q_i k_i were summed over the samples (axis 0), which "
                    "leaves d_k sums of n_samples products each, and the variance was taken of "
                    "those few numbers. Sum over the features (axis 1 or -1) to get one q . k "
                    "per sample, then take the variance of the n_samples dot products.",
                    _on_estimate(_of_feature_sums)),
            Symptom("about_zero", "the value is about 0 for every d_k: that is what the mean "
                    "of q . k gives (it is 0 on average), or the mean of the deviations from it "
                    "left unsquared. The variance is the mean of the SQUARED deviations, "
                    "np.mean((x - x.mean()) ** 2) or np.var(x): check where the ** 2 applies "
                    "(x - m ** 2 squares only m).",
                    _on_estimate(_about_zero)),
            Symptom("exact_value", "the function returns d_k itself; the exercise is to measure "
                    "the variance by sampling q and k, and see how close it comes.",
                    _on_estimate(lambda case, value: _is_exact(value, case))),
            Symptom("ignores_seed", "the result does not depend on `seed` the way it should: make "
                    "the generator with np.random.default_rng(seed) inside the function.",
                    lambda c, received, meta: c.label == SEED_CASE and _seed_ignored(received)),
        ]


def _on_estimate(test):
    """A symptom's test of the learner's estimate: ``test(case, value)`` on the number judged
    (:func:`_first_value`), None when there is none."""
    return lambda case, received, meta: test(case, _as_number(_first_value(case, received)))


def _about_zero(case: Case, value) -> bool:
    """True when ``value`` is within sampling error of 0 as a mean of n_samples dot products
    (standard deviation sqrt(d_k / n_samples)) would be."""
    if value is None or not np.isfinite(value):
        return False
    return abs(value) <= 6.0 * np.sqrt(_d_k(case) / _n_samples(case)) + 1e-9


def _of_feature_sums(case: Case, value) -> bool:
    """True when ``value`` is the variance of d_k sums over the samples: 0 for d_k = 1, else
    d_k * value / n_samples within the 0.01% and 99.99% points of a chi-square with d_k - 1
    degrees of freedom (np.var of d_k sums that each have variance n_samples; the
    Wilson-Hilferty approximation of its quantiles)."""
    if value is None:
        return False
    d_k, n = _d_k(case), _n_samples(case)
    if d_k == 1:
        return value == 0
    dof, z = d_k - 1, 3.72
    low, high = (dof * max(0.0, 1 - 2 / (9 * dof) + sign * z * np.sqrt(2 / (9 * dof))) ** 3
                 for sign in (-1, 1))
    return max(low, 1e-4 * dof) <= d_k * value / n <= high


def _first_value(case: Case, received):
    """The estimate to judge: the output itself, or on the seed case the first call's, when
    the three calls honour the seed (else the case shows the seed ignored, nothing else)."""
    if case.label != SEED_CASE:
        return received
    if not isinstance(received, tuple) or len(received) != 3 or _seed_ignored(received):
        return None
    return received[0]


def _seed_ignored(received) -> bool:
    """The seed case's three calls (seed, seed again, seed + 1) show the seed is not used:
    the same seed gave two values, or a different seed the same one."""
    if not isinstance(received, tuple) or len(received) != 3:
        return False
    first, again, other = (_as_number(r) for r in received)
    return first != again or first == other


# -- softmax_entropy ---------------------------------------------------------------------------
def _distributions(rng, shape, axis=-1, zeros=0.0, dtype=np.float64):
    """Random probability vectors along ``axis`` with a fraction ``zeros`` of exact zeros."""
    p = rng.gamma(0.5, size=shape)
    if zeros:
        p[rng.random(shape) < zeros] = 0.0
    p = np.moveaxis(p, axis, -1)
    p[..., 0] += (p.sum(axis=-1) == 0)  # no all-zero distribution
    p = p / p.sum(axis=-1, keepdims=True)
    return np.moveaxis(p, -1, axis).astype(dtype)


def _entropy_terms(p):
    """-p log p with NaN for p = 0 (the naive formula)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return p * np.log(p)


def _axis(case: Case) -> int:
    return case.kwargs.get("axis", -1)


def _special_rows(n: int) -> np.ndarray:
    one_hot = np.eye(n)[:2]  # entropy 0
    uniform = np.full((1, n), 1 / n)  # entropy log n
    tiny = np.full((1, n), 1e-300)
    tiny[0, 0] = 1 - (n - 1) * 1e-300
    return np.concatenate([one_hot, uniform, tiny])


def _with_empty_row(weights):
    """``weights`` with row 1 set to zeros: a query with no allowed key (the contract's zero
    row of weights)."""
    weights = weights.copy()
    weights[1] = 0.0
    return weights


class SoftmaxEntropy(Exercise):
    name = "softmax_entropy"
    assignment = "03-scaling"

    def visible_cases(self, rng):
        return [
            Case("five distributions over 6 keys", (_distributions(rng, (5, 6)),)),
            Case("one-hot, uniform and nearly one-hot rows", (_special_rows(5),)),
            Case("weights with exact zeros", (_distributions(rng, (4, 7), zeros=0.4),)),
        ]

    def hidden_cases(self, rng):
        return [
            Case("axis=0", (_distributions(rng, (6, 3), axis=0),), {"axis": 0}),
            Case("a (2, 5, 4) stack along axis=1",
                 (_distributions(rng, (2, 5, 4), axis=1, zeros=0.3),), {"axis": 1}),
            Case("float32", (_distributions(rng, (3, 8), dtype=np.float32),)),
            Case("a single vector", (_distributions(rng, (9,)),)),
            Case("axis=-2 with zeros", (_distributions(rng, (3, 5, 5), axis=-2, zeros=0.5),),
                 {"axis": -2}),
            Case("a fully masked row (all weights 0) has entropy 0", (_with_empty_row(
                _distributions(rng, (4, 6))),)),
        ]

    def mistakes(self):
        def with_reference(transform):
            return lambda c: transform(answer_key("softmax_entropy")(c.args[0], _axis(c)), c)

        return [
            WrongAnswer("bits", "the values are the entropy in bits (log base 2); use the natural "
                        "log (np.log) for nats.", with_reference(lambda h, c: h / np.log(2))),
            WrongAnswer("log10", "the values use log base 10; use the natural log (np.log).",
                        with_reference(lambda h, c: h / np.log(10))),
            WrongAnswer("nan_for_zeros", "NaN where weights are 0: 0 * log(0), or 0 / 0 from "
                        "dividing a row of zeros (a fully masked row) by its sum. A zero weight "
                        "contributes 0 to the entropy and a row of zeros has entropy 0 (log only "
                        "where p > 0, and do not renormalise).",
                        lambda c: -np.sum(_entropy_terms(c.args[0]), axis=_axis(c))),
            WrongAnswer("no_minus_sign", "the values are negative: entropy is minus the sum of p "
                        "log p.", with_reference(lambda h, c: -h)),
            WrongAnswer("mean_not_sum", "the values are the entropy divided by the number of keys: "
                        "sum the terms -p log p, do not average them.",
                        with_reference(lambda h, c: h / c.args[0].shape[_axis(c)])),
            WrongAnswer("ignores_axis", "the entropy was taken along the last axis whatever `axis` "
                        "says.", lambda c: answer_key("softmax_entropy")(c.args[0], -1)),
            WrongAnswer("whole_array", "the whole array was summed into one number: a sum "
                        "without axis=, or a sum of an array already flattened (a boolean index "
                        "such as p[p > 0] returns the kept entries in one 1-D array). Keep the "
                        "array's shape (np.where(p > 0, p * np.log(p), 0), or np.log with "
                        "where=) and sum along `axis` only.", lambda c: np.asarray(
                            answer_key("softmax_entropy")(c.args[0].reshape(-1), -1))),
            WrongAnswer("terms_not_summed", "these are the terms -p log p, one per weight, an "
                        "intermediate: sum them along `axis` to get one entropy per "
                        "distribution.", lambda c: -_entropy_terms_zero(c.args[0])),
            WrongAnswer("keepdims", "the result kept the reduced axis (keepdims=True, size 1): "
                        "sum without keepdims, so the result has one axis fewer than the "
                        "weights.", lambda c: np.expand_dims(
                            answer_key("softmax_entropy")(c.args[0], _axis(c)), _axis(c))),
            WrongAnswers("wrong_axis", "the entropy was taken along another axis than `axis` (a "
                         "hard-coded axis=0, or scipy.stats.entropy, which uses axis=0 and "
                         "normalises along it, called without axis=axis): sum along `axis`.",
                         lambda c: _entropy_along(c.args[0], _other_axes(c)[0]),
                         lambda c: [_entropy_along(c.args[0], a, normalise)
                                    for a in _other_axes(c) for normalise in (False, True)]),
            WrongAnswer("softmax_of_weights", "a softmax was applied to the weights first: they "
                        "are already probabilities, take the entropy of the weights as given.",
                        lambda c: _entropy_along(_softmax_along(c.args[0], _axis(c)), _axis(c))),
            WrongAnswer("normalised_by_log_n", "the entropy was divided by log(n), the entropy of "
                        "the uniform distribution (a 'normalised entropy' between 0 and 1): "
                        "return the entropy itself, in nats.",
                        with_reference(lambda h, c: h / np.log(c.args[0].shape[_axis(c)]))),
        ]


def _entropy_terms_zero(p):
    """p log p with 0 where p = 0."""
    p = np.asarray(p, dtype=np.float64)
    return np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0)


def _entropy_along(p, axis, normalise=False):
    """Entropy along ``axis``; ``normalise`` divides by the sum first, as scipy.stats.entropy
    does (NaN where that sum is 0)."""
    p = np.asarray(p, dtype=np.float64)
    if not normalise:
        return -np.sum(_entropy_terms_zero(p), axis=axis)
    total = p.sum(axis=axis, keepdims=True)
    entropy = -np.sum(_entropy_terms_zero(p / np.where(total > 0, total, 1.0)), axis=axis)
    return np.where(np.squeeze(total, axis=axis) > 0, entropy, np.nan)


def _softmax_along(x, axis):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _other_axes(case: Case) -> list[int]:
    ndim = np.ndim(case.args[0])
    right = _axis(case) % ndim
    return [a for a in range(ndim) if a != right]


# -- softmax_jacobian --------------------------------------------------------------------------
def _probabilities(rng, n, zeros=0.0, dtype=np.float64):
    return _distributions(rng, (n,), zeros=zeros, dtype=dtype)


class SoftmaxJacobian(Exercise):
    name = "softmax_jacobian"
    assignment = "03-scaling"

    def visible_cases(self, rng):
        return [
            Case("p over 5 keys", (_probabilities(rng, 5),)),
            Case("p over 3 keys", (_probabilities(rng, 3),)),
        ]

    def hidden_cases(self, rng):
        return [
            Case("one-hot p (saturated)", (np.eye(6)[2],), degenerate=True),
            Case("uniform p", (np.full(4, 0.25),)),
            Case("float32", (_probabilities(rng, 7, dtype=np.float32),)),
            Case("a single key", (np.ones(1),), degenerate=True),
            Case("p with zeros", (_probabilities(rng, 8, zeros=0.4),)),
            Case("40 keys", (_probabilities(rng, 40),)),
        ]

    def mistakes(self):
        def reference(c):
            return answer_key("softmax_jacobian")(c.args[0])

        def p(c):
            return c.args[0]

        def softmax_of(x):
            e = np.exp(x - x.max())
            return e / e.sum()

        return [
            WrongAnswer("outer_only", "the result is -p p^T only: the diagonal also has the term "
                        "p_i from the derivative of exp(x_i) (J = diag(p) - p p^T).",
                        lambda c: -np.outer(p(c), p(c))),
            WrongAnswer("diagonal_only", "only the diagonal is filled: the off-diagonal entries "
                        "are -p_i p_j (J = diag(p) - p p^T).",
                        lambda c: np.diag(np.diag(reference(c)))),
            WrongAnswer("diag_p_only", "the result is diag(p): the term - p p^T is missing.",
                        lambda c: np.diag(p(c))),
            WrongAnswer("sign_flipped", "every entry has the wrong sign: J = diag(p) - p p^T, not "
                        "p p^T - diag(p).", lambda c: -reference(c)),
            WrongAnswer("outer_positive", "the result is +p p^T: J = diag(p) - p p^T.",
                        lambda c: np.outer(p(c), p(c))),
            WrongAnswer("softmax_of_p", "the Jacobian was taken at softmax(p): p is already the "
                        "probability vector, use it directly.",
                        lambda c: np.diag(softmax_of(p(c))) - np.outer(softmax_of(p(c)),
                                                                       softmax_of(p(c)))),
            WrongAnswer("log_softmax_jacobian", "that is the Jacobian of log softmax, I - 1 p^T "
                        "(entry (i, j) = delta_ij - p_j): the Jacobian of softmax itself "
                        "multiplies row i by p_i, J = diag(p) - p p^T.",
                        lambda c: np.eye(len(p(c))) - p(c)[None, :]),
            WrongAnswer("inner_product", "the scalar p . p (np.dot or p @ p) was subtracted from "
                        "every entry: the term is the outer product p p^T (np.outer(p, p)), an "
                        "(n, n) matrix.", lambda c: np.diag(p(c)) - np.dot(p(c), p(c))),
            WrongAnswer("identity_not_diag_p", "the diagonal term is the identity: the derivative "
                        "of p_i with respect to x_i is p_i (1 - p_i), so J = diag(p) - p p^T, not "
                        "I - p p^T.", lambda c: np.eye(len(p(c))) - np.outer(p(c), p(c))),
            WrongAnswers("elementwise_square", "squares of p were subtracted (p_j^2 or p_i^2: "
                         "one index used twice, as p * p broadcast over the rows or columns does, "
                         "or p[i] where p[j] belongs) instead of the outer product p p^T, whose "
                         "entry (i, j) is p_i p_j: use np.outer(p, p) (in a loop, p[i] * p[j]).",
                         lambda c: np.diag(p(c)) - p(c) * p(c),
                         lambda c: [np.diag(p(c)) - (p(c) * p(c))[:, None]]),
            WrongAnswers("delta_everywhere", "every entry is p_i (1 - p_j) (or p_j (1 - p_i)): the "
                         "1 of (delta_ij - p_j) was put on every entry, but the Kronecker delta "
                         "delta_ij is 1 only on the diagonal (i == j) and 0 elsewhere, so the "
                         "off-diagonal entries are -p_i p_j: J = diag(p) - p p^T.",
                         lambda c: np.outer(p(c), 1 - p(c)),
                         lambda c: [np.outer(1 - p(c), p(c))]),
        ]


EXERCISES = {e.name: e for e in (DotProductVariance(), SoftmaxEntropy(), SoftmaxJacobian())}
