"""mhalib.checks.repair_cancels: which of the learner's values held what the answer key computes,
and which a change makes wrong."""

from __future__ import annotations

import numpy as np
import pytest

from mhalib.checks import get_exercise
from mhalib.checks.repair_cancels import (
    broken_by,
    expression_values,
    expressions_changed,
    key_values,
    least_alike,
)


def _case(exercise, label_part: str):
    return next(c for c in exercise.cases(0, "grading") if label_part in c.label)


def test_the_keys_values_hold_its_locals_and_the_parts_of_its_expressions():
    exercise = get_exercise("kv_cache_bytes")
    case = exercise.cases(0, "grading")[0]
    named, parts = key_values(exercise, case)
    layers, kv_heads, dim, n = case.args[:4]
    batch = case.kwargs.get("batch_size", 1)
    # the key is one product: the elements (all but the bytes) are one of its parts
    assert 2 * layers * kv_heads * dim * n * batch in parts
    assert exercise.expected_once(case) in named


def test_a_key_that_cannot_run_on_the_case_gives_none():
    class NoKey:
        name = "no_such_exercise"
    assert key_values(NoKey(), None) is None


def test_the_case_chosen_has_the_fewest_sizes_alike():
    exercise = get_exercise("decode_attention_intensity")
    cases = exercise.cases(0, "grading")
    case, named = least_alike(exercise, cases)
    values = [v for v in named.values() if isinstance(v, int)]
    assert len(set(values)) == len(values) and named["bytes_per_element"] != 2
    assert case in cases


BEFORE = {"": {"flops": 4096, "cache": 1 << 20, "n_rep": 4, "x": np.arange(8.0)}}


@pytest.mark.parametrize(("after", "broken"), [
    ({"flops": 2048}, [("", "flops")]),  # right before, wrong after
    ({"flops": 4096, "cache": 1 << 19}, [("", "cache")]),
    ({"flops": 8192}, []),  # another of the key's values: not said
    ({"n_rep": 2}, []),  # a small int is no evidence either way
    ({"x": np.arange(8.0) + 1}, [("", "x")]),
    ({"x": np.arange(8.0) * (1 + 1e-9)}, []),  # the same values, within float tolerance
])
def test_a_change_breaks_only_values_that_were_the_keys(after, broken):
    pool = ([4096, 8192, 1 << 20, np.arange(8.0)], [])
    now = {"": {**BEFORE[""], **after}}
    assert broken_by(BEFORE, now, pool, {"n_rep": 4}) == broken


def test_a_whole_float_below_10_is_as_plain_as_the_int():
    # a learner's ratio of 8.0 equals the key's 8 K/V heads by chance
    assert broken_by({"": {"ratio": 8.0}}, {"": {"ratio": 16.0}}, ([8], []), {}) == []
    assert broken_by({"": {"ratio": 8.5}}, {"": {"ratio": 17.0}}, ([8.5], []), {}) == [
        ("", "ratio")]


def test_a_part_of_the_keys_counts_before_a_change_not_after():
    pool = ([4096], [2048])  # half the FLOPs is a part of the key (its scores)
    assert broken_by({"": {"flops": 4096}}, {"": {"flops": 2048}}, pool, {}) == [("", "flops")]
    assert broken_by({"": {"flops": 2048}}, {"": {"flops": 4096}}, pool, {}) == []


def flops_over_bytes(a, b):
    scores = 2 * a
    mix = 2 * a
    return (scores + mix) / b


def _dropping_mix():
    import ast
    from types import SimpleNamespace

    from mhalib.checks.mutant_schema import _parsed

    tree = _parsed(flops_over_bytes)
    total = next(n for n in ast.walk(tree) if isinstance(n, ast.BinOp)
                 and isinstance(n.op, ast.Add))
    return SimpleNamespace(edits=((total, total.left),))


def test_a_change_inside_one_expression_is_read_on_the_expressions_that_hold_it():
    changed = expressions_changed(flops_over_bytes, _dropping_mix())
    # (not what it returns: that is the learner's output, wrong on a failing case)
    assert [text for text, *_ in changed] == ["scores + mix"]
    seen = {"": {"a": 20, "b": 3, "scores": 40, "mix": 40}}
    before = expression_values(seen, "", flops_over_bytes, changed, 1)
    after = expression_values(seen, "", flops_over_bytes, changed, 2)
    assert before[""] == {"scores + mix": 80} and after[""] == {"scores + mix": 40}
    # the sum held the key's FLOPs (80): dropping a term of it makes a right value wrong
    assert broken_by(before, after, ([80], []), {}) == [("", "scores + mix")]
    assert broken_by(before, after, ([81], []), {}) == []


def test_an_expression_assigned_to_a_name_is_left_to_the_variable():
    import ast
    from types import SimpleNamespace

    from mhalib.checks.mutant_schema import _parsed

    tree = _parsed(flops_over_bytes)
    product = next(n for n in ast.walk(tree) if isinstance(n, ast.BinOp)
                   and isinstance(n.op, ast.Mult))
    edit = SimpleNamespace(edits=((product.left, ast.Constant(4)),))
    assert expressions_changed(flops_over_bytes, edit) == []
