"""Checkers for lesson 09: ``rope_angles`` and ``apply_rope`` (torch).

The mistake models are RoPE written with one knob turned (:func:`angles_variant`,
:func:`rope_variant`): the adjacent-pair layout, a rotation the wrong way, frequencies with the
wrong exponent, positions replaced by 0..N-1, the base not passed on... evaluated on the
learner's inputs in float64. An odd ``head_dim`` must raise ValueError; the probe records that
as the output ``"raised ValueError"``. ``apply_rope`` must also return x's dtype: the probe
records the dtype that came back.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mhalib.checks.answer_key import answer_key
from mhalib.checks.compare import describe, difference
from mhalib.checks.exercise import Symptom, WrongAnswer, refusal_mistakes
from mhalib.checks.torch_exercise import (
    TorchCase,
    TorchExercise,
    as_numpy,
    case_tensors,
    exact_inputs,
    one_thread,
    output_kind,
    torch_model,
)

RAISED = "raised ValueError"  # what the probe records when an odd head_dim is refused
ASSERTED = "raised AssertionError"  # ... and when an assert stopped it instead
ROPE_HELPERS = ("rotary_cos_sin", "apply_rotary")  # mhalib.nn.rope computes the answer too


# -- RoPE with knobs ---------------------------------------------------------------------------

def angles_variant(positions, head_dim, base=10000.0, *, exponent=2.0, sign=-1.0, first_pair=0,
                   positions_mode="given", shape="half"):
    """float64 angles (N, d/2) with one thing changed.

    ``exponent``: the k in base ** (sign * k * i / d) (2 is right). ``first_pair``: i counted
    from 1. ``positions_mode``: "given", or "arange" (0..N-1 whatever was passed). ``shape``:
    "half" (N, d/2), "both_halves" (N, d) as [angles, angles], "transposed" (d/2, N).
    """
    import torch

    if head_dim % 2:
        raise ValueError("odd head_dim")
    n = positions.shape[0]
    pos = torch.arange(n) if positions_mode == "arange" else positions
    i = torch.arange(first_pair, first_pair + head_dim // 2, dtype=torch.float64)
    inv_freq = float(base) ** (sign * exponent * i / head_dim)
    angles = pos.to(torch.float64)[:, None] * inv_freq[None, :]  # (N, d/2)
    if shape == "both_halves":
        return torch.cat([angles, angles], dim=-1)
    if shape == "transposed":
        return angles.T
    return angles


def rope_variant(x, positions, base=10000.0, *, layout="half", direction=1.0, negate=True,
                 tables="cat", output="both", **angle_knobs):
    """Rotary embedding of x (..., N, d) in float64 with one thing changed.

    ``layout``: "half" pairs (i, i + d/2); "adjacent" pairs (2i, 2i + 1). ``direction``: -1
    turns every pair the other way. ``negate``: False drops the minus of rotate_half.
    ``tables``: "repeat_interleave" builds the width-d cos/sin tables as (t0, t0, t1, t1, ...)
    while pairing (i, i + d/2). ``output``: "both", "first_half" (only the rotated first
    features, width d/2) or "first_half_rotated" (second half returned unrotated).
    ``angle_knobs`` go to :func:`angles_variant`.
    """
    import torch

    x = x.to(torch.float64)
    d = x.shape[-1]
    angles = direction * angles_variant(positions, d, base, **angle_knobs)  # (N, d/2)
    if layout == "adjacent":
        pairs = x.reshape(*x.shape[:-1], d // 2, 2)  # (..., N, d/2, 2)
        a, b = pairs[..., 0], pairs[..., 1]
        cos, sin = angles.cos(), angles.sin()
        return torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).reshape(x.shape)
    if tables == "repeat_interleave":
        full = angles.repeat_interleave(2, dim=-1)  # (N, d): t0, t0, t1, t1, ...
    else:
        full = torch.cat([angles, angles], dim=-1)  # (N, d): the angle of pair i, twice
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    turned = torch.cat([-x2 if negate else x2, x1], dim=-1)  # rotate_half
    y = x * full.cos() + turned * full.sin()
    if output == "first_half":
        return y[..., : d // 2]
    if output == "first_half_rotated":
        return torch.cat([y[..., : d // 2], x2], dim=-1)
    return y


def _model(fn, **knobs):
    """A mistake model: ``fn`` with ``knobs`` on the case's float64 inputs, as numpy; a
    ``base`` knob replaces the case's base, wherever it was given."""
    if "base" in knobs:
        return torch_model(lambda first, second, *rest, **kwargs: fn(first, second, **kwargs),
                           **knobs)
    return torch_model(fn, **knobs)


def _expects_error(case) -> bool:
    """The case whose head_dim is odd: the contract wants a ValueError."""
    return bool(getattr(case, "expects_error", False))


def _raised(received) -> bool:
    return isinstance(received, str) and received == RAISED


def _odd_case_accepted(case, received, meta) -> bool:
    return _expects_error(case) and not _raised(received) and not _asserted(received)


def _asserted(received) -> bool:
    return isinstance(received, str) and received == ASSERTED


def _odd_case_asserted(case, received, meta) -> bool:
    return _expects_error(case) and _asserted(received)


# -- cases -------------------------------------------------------------------------------------

@dataclass
class RopeCase(TorchCase):
    """A case with ``expects_error``: True where the call must raise ValueError."""

    expects_error: bool = False


def _positions(*parts) -> np.ndarray:
    return np.concatenate([np.asarray(p) for p in parts]).astype(np.int64)


def _sorted_positions(rng, n, high) -> np.ndarray:
    return np.sort(rng.choice(high, size=n, replace=False)).astype(np.int64)


class _RopeExercise(TorchExercise):
    """What both exercises share: the odd-head_dim case and the raise marker."""

    expected_is_the_key = True  # on every case but the odd head_dim (mutants of it may run)

    def call(self, func, case):
        args, kwargs = case_tensors(case)
        with one_thread():
            if not _expects_error(case):
                output = func(*args, **kwargs)
            else:
                try:
                    output = func(*args, **kwargs)
                except ValueError:
                    return RAISED, {"output_kind": "raised"}
                except AssertionError:
                    return ASSERTED, {"output_kind": "raised"}
        meta = {"output_kind": output_kind(output)}
        if meta["output_kind"] == "tensor":
            meta["output_dtype"] = str(output.dtype).removeprefix("torch.")
        return output, meta

    def expected(self, case):
        if _expects_error(case):
            return RAISED
        args, kwargs = exact_inputs(case)
        return as_numpy(answer_key(self.name)(*args, **kwargs))

    def judge_case(self, case, received, meta):
        if _expects_error(case):
            if _raised(received):
                return None
            return (f"head_dim is odd here, so there is no partner for the last feature: "
                    f"raise ValueError, not return {describe(received)}")
        return super().judge_case(case, received, meta)

    def reproduces(self, case, compute, received):
        if _expects_error(case):
            return False
        return super().reproduces(case, compute, received)


# -- rope_angles -------------------------------------------------------------------------------

class RopeAngles(_RopeExercise):
    name = "rope_angles"
    assignment = "09-rope"
    answer_key_names = ROPE_HELPERS
    # an angle's error is what turns the pair wrongly, whatever the largest angle of the case:
    # float32's own rounding is ~1e-6 of an angle (0.1 rad at position 131071), and a
    # position rounded to bfloat16 (257 -> 256) is 1 rad off, which float32's default
    # tolerance (2e-4 of the case's largest angle, 14 rad at 70001) let through (round O)
    rtol, atol = 1e-5, 1e-6

    def visible_cases(self, rng):
        return [
            RopeCase("positions 0..9, head_dim 16", (np.arange(10), 16)),
            RopeCase("positions 37..42 (after 37 cached tokens), head_dim 12, base 500",
                     (np.arange(37, 43), 12), {"base": 500.0}),
        ]

    def hidden_cases(self, rng):
        return [
            RopeCase("head_dim 128, base 500000 (Llama 3), positions up to 131071",
                     (_positions([0, 1, 2], _sorted_positions(rng, 5, 131_072)), 128),
                     {"base": 500000.0}),
            RopeCase("two packed sequences: positions 0..3 then 0..4",
                     (_positions(np.arange(4), np.arange(5)), 8)),
            RopeCase("unsorted positions, head_dim 6, base 10000 given by position",
                     (rng.permutation(20)[:7].astype(np.int64), 6, 10000.0)),
            RopeCase("one position (1000), head_dim 32", (np.array([1000]), 32)),
            # integers past 256 that bfloat16 rounds (257 -> 256, 70001 -> 70144): positions
            # must stay exact (round O: positions cast to the model's bfloat16)
            RopeCase("positions 257, 263, 2003 and 70001, head_dim 8",
                     (np.array([257, 263, 2003, 70001]), 8)),
            RopeCase("head_dim 2 (a single pair turns by the position itself)",
                     (np.arange(3, 9), 2), degenerate=True),
            RopeCase("odd head_dim 7 raises ValueError", (np.arange(4), 7), expects_error=True),
        ]

    def mistakes(self):
        def wrong(**knobs):
            return _model(angles_variant, **knobs)

        return [
            Symptom("odd_head_dim_accepted", "an odd head_dim leaves the last feature without a "
                    "partner: check head_dim % 2 and raise ValueError.", _odd_case_accepted),
            Symptom("odd_head_dim_by_assert", "an odd head_dim stops at an `assert`: an "
                    "AssertionError is not the contract's refusal (and asserts vanish under "
                    "python -O); raise ValueError naming head_dim yourself.", _odd_case_asserted),
            WrongAnswer("exponent_i_over_d", "the exponent is i / head_dim; the contract has "
                        "2 i / head_dim (pair i holds two features), so the frequencies fall "
                        "half as fast as they should. Use base ** (-2 * i / head_dim) with i = 0, "
                        "1, ..., head_dim/2 - 1, or arange(0, head_dim, 2) / head_dim.",
                        wrong(exponent=1.0)),
            WrongAnswer("exponent_doubled", "the exponent is doubled (4 i / head_dim): 2 i "
                        "multiplied by 2 again (torch.arange(0, head_dim, 2) already holds 2 i), "
                        "or divided by head_dim // 2 instead of head_dim.", wrong(exponent=4.0)),
            WrongAnswer("positive_exponent", "the frequencies grow with i instead of shrinking: "
                        "the exponent needs its minus sign, base ** (-2 i / head_dim) (or "
                        "1 / base ** (2 i / head_dim)).", wrong(sign=1.0)),
            WrongAnswer("pairs_from_one", "the pairs are counted from 1: pair 0 must turn by the "
                        "position itself (base ** 0 = 1), so i runs over 0 .. head_dim/2 - 1.",
                        wrong(first_pair=1)),
            WrongAnswer("ignores_positions", "the angles use 0, 1, ..., N-1 instead of the "
                        "positions passed in: multiply positions (not torch.arange(N)) by the "
                        "frequencies. With a KV cache or packed sequences they differ.",
                        wrong(positions_mode="arange")),
            WrongAnswer("base_ignored", "the angles use base 10000 whatever base is passed: "
                        "use the base argument.", wrong(base=10000.0)),
            WrongAnswer("both_halves", "the angles come back twice, shape (N, head_dim) as "
                        "[angles, angles] (the cos/sin table of the rotate-half code); "
                        "rope_angles returns one angle per pair, (N, head_dim // 2).",
                        wrong(shape="both_halves")),
            WrongAnswer("transposed", "the angles come back as (head_dim // 2, N): put the "
                        "positions on the rows, angles[n, i] = positions[n] * freq[i] "
                        "(torch.outer(positions, freq), not the other order).",
                        wrong(shape="transposed")),
        ]


# -- apply_rope --------------------------------------------------------------------------------

LOW_PRECISION = ("float16", "bfloat16")


def _x(rng, *shape):
    return rng.normal(size=shape)


def _returns_other_dtype(case, received, meta) -> bool:
    dtype = meta.get("output_dtype")
    return isinstance(dtype, str) and dtype != getattr(case, "dtype", "float32")


class ApplyRope(_RopeExercise):
    name = "apply_rope"
    assignment = "09-rope"
    answer_key_names = ("rope_angles",) + ROPE_HELPERS

    @staticmethod
    def derived_sizes(found: dict[str, int]) -> dict[str, int]:
        """Half of x's last axis, the number of pairs: the halves a rotation pairs (feature i
        with i + head_dim / 2), so that halves taken as strided entries can be read back."""
        last = max((key for key in found if key.startswith("x.shape[")),
                   key=lambda key: int(key[len("x.shape["):-1]), default=None)
        if last is None or found[last] % 2:
            return {}
        return {"head_dim / 2": found[last] // 2}

    def visible_cases(self, rng):
        return [
            RopeCase("x (1, 2, 6, 8) at positions 0..5", (_x(rng, 1, 2, 6, 8), np.arange(6))),
            RopeCase("x (2, 3, 5, 16) at positions 37..41 (after 37 cached tokens), base 500",
                     (_x(rng, 2, 3, 5, 16), np.arange(37, 42)), {"base": 500.0}),
            RopeCase("bfloat16 x (1, 2, 4, 8): the output stays bfloat16",
                     (_x(rng, 1, 2, 4, 8), np.arange(4)), dtype="bfloat16"),
        ]

    def hidden_cases(self, rng):
        return [
            RopeCase("x (4, 7, 32) (heads, tokens, d): two packed sequences 0..2 and 0..3",
                     (_x(rng, 4, 7, 32), _positions(np.arange(3), np.arange(4)))),
            RopeCase("x (9, 6): one head, no batch axes, unsorted positions",
                     (_x(rng, 9, 6), rng.permutation(30)[:9].astype(np.int64))),
            RopeCase("head_dim 128, base 500000, positions 1000..1015",
                     (_x(rng, 1, 2, 16, 128), np.arange(1000, 1016)), {"base": 500000.0}),
            RopeCase("float64, positions 0..11", (_x(rng, 1, 1, 12, 10), np.arange(12)),
                     dtype="float64"),
            RopeCase("float16 (the output stays float16)",
                     (_x(rng, 1, 2, 8, 32), np.arange(20, 28)), dtype="float16"),
            RopeCase("bfloat16 (the output stays bfloat16)",
                     (_x(rng, 2, 2, 6, 16), np.arange(6)), {"base": 10000.0},
                     dtype="bfloat16"),
            RopeCase("bfloat16, packed: positions 2000..2007 then 3..10",
                     (_x(rng, 1, 2, 16, 16), _positions(np.arange(2000, 2008), np.arange(3, 11))),
                     dtype="bfloat16"),
            RopeCase("one token at position 1000 (a decode step)",
                     (_x(rng, 2, 4, 1, 16), np.array([1000]))),
            RopeCase("head_dim 2: one pair, both layouts agree",
                     (_x(rng, 1, 3, 5, 2), np.arange(5)), degenerate=True),
            RopeCase("x (1, 2, 4, 7): an odd head_dim must raise ValueError",
                     (_x(rng, 1, 2, 4, 7), np.arange(4)), must_raise="head_dim=7 is odd, so "
                     "the last feature has no partner to rotate with"),
        ]

    def judge_case(self, case, received, meta):
        problem = super().judge_case(case, received, meta)
        if problem is None and _returns_other_dtype(case, received, meta):
            return (f"right values, but returned {meta['output_dtype']} for {case.dtype} input: "
                    "the result must keep x's dtype")
        return problem

    def _low_precision_angles(self, case, received, meta) -> bool:
        """A half-precision case whose output is right at positions below 256 (which float16
        and bfloat16 hold exactly, with small angles) and wrong at the large ones."""
        if getattr(case, "dtype", "float32") not in LOW_PRECISION or _expects_error(case):
            return False
        positions = np.asarray(case.args[1])
        small, large = positions < 256, positions >= 1024
        if not small.any() or not large.any():
            return False
        expected = self.expected_once(case)
        received = np.asarray(received, dtype=np.float64)
        tolerance = self.tolerance(case)
        return (difference(expected[..., small, :], received[..., small, :], *tolerance) is None
                and difference(expected[..., large, :], received[..., large, :], *tolerance)
                is not None)

    def mistakes(self):
        def wrong(**knobs):
            return _model(rope_variant, **knobs)

        return [
            Symptom("angles_in_low_precision", "right at small positions, wrong at large ones: "
                    "the angles were computed in x's half precision. bfloat16 holds integers "
                    "exactly only up to 256 (position 2003 becomes 2000) and an angle near 2000 "
                    "radians keeps no digits after the point. Compute positions, frequencies, "
                    "angles, cos and sin in float32 (or float64), rotate, then cast the result "
                    "to x.dtype.", self._low_precision_angles),
            Symptom("dtype_changed", "the values are right but the dtype is not x's: a cast "
                    "in the computation (x.float() or x.double(), a dtype= given to a tensor "
                    "made from it, or float32 angles that promote a half-precision x) was never "
                    "undone. Compute in float32 if you like, then return y.to(x.dtype); "
                    "attention downstream needs q, k and v in one dtype.",
                    _returns_other_dtype),
            WrongAnswer("adjacent_pairs", "features were paired as neighbours (0, 1), (2, 3), ... "
                        "(the interleaved layout of the original RoFormer and Meta's Llama code). "
                        "This exercise uses the rotate-half layout: feature i pairs with "
                        "i + head_dim // 2.", wrong(layout="adjacent")),
            WrongAnswer("rotates_backwards", "every pair turns the wrong way: the sin terms have "
                        "swapped signs. y_i = x_i cos - x_{i+d/2} sin and y_{i+d/2} = x_i sin + "
                        "x_{i+d/2} cos (rotate_half(x) is cat(-x2, x1), not cat(x2, -x1)).",
                        wrong(direction=-1.0)),
            WrongAnswer("rotate_half_without_minus", "rotate_half lost its minus sign: it is "
                        "cat(-x2, x1), not cat(x2, x1). Without it the map is not a rotation "
                        "(lengths change) and q.k no longer depends only on m - n.",
                        wrong(negate=False)),
            WrongAnswer("tables_repeat_interleave", "the cos/sin tables were widened with "
                        "repeat_interleave (t0, t0, t1, t1, ...), the adjacent layout's order, "
                        "while the features are paired as (i, i + d/2): widen with "
                        "torch.cat([angles, angles], -1) so both features of a pair get its "
                        "angle.", wrong(tables="repeat_interleave")),
            WrongAnswer("first_half_only", "only the first half of the features came back: "
                        "return torch.cat([y1, y2], dim=-1) with y2 = x1 sin + x2 cos.",
                        wrong(output="first_half")),
            WrongAnswer("second_half_unrotated", "the second half of the features was returned "
                        "unchanged: its features turn too, y2 = x1 sin + x2 cos.",
                        wrong(output="first_half_rotated")),
            WrongAnswer("ignores_positions", "x was rotated at positions 0, 1, ..., N-1 instead "
                        "of the positions passed in: after a KV cache of 37 tokens the new token "
                        "sits at position 37, not 0.", wrong(positions_mode="arange")),
            WrongAnswer("exponent_i_over_d", "the frequencies use i / head_dim instead of "
                        "2 i / head_dim in the exponent.", wrong(exponent=1.0)),
            WrongAnswer("base_not_passed", "the base argument was not passed on: the angles were "
                        "computed with the default 10000.", wrong(base=10000.0)),
            *refusal_mistakes(
                "head_dim is odd",
                'if head_dim % 2: raise ValueError(f"head_dim={head_dim} is odd; RoPE rotates '
                'pairs of features")'),
        ]


EXERCISES = {e.name: e for e in (RopeAngles(), ApplyRope())}
