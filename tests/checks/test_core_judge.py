"""The judge scores only what was recorded, names mistakes, and never crashes on bad records."""

import copy

import numpy as np
import pytest

from mhalib.checks import Verdict, get_exercise, judge_record
from mhalib.checks.probe import probe
from mhalib.reference.single_head import softmax as reference_softmax


def stable_softmax(x, axis=-1):
    shifted = x - np.max(x, axis=axis, keepdims=True)
    e = np.exp(shifted)
    return e / np.sum(e, axis=axis, keepdims=True)


def attention_without_scale(q, k, v):
    w = stable_softmax(q @ np.swapaxes(k, -1, -2))
    return w @ v, w


def test_correct_answer_passes_with_full_score():
    record = probe(get_exercise("softmax"), stable_softmax, seed=3, suite="grading")
    verdict = judge_record("softmax", record, seed=3)
    assert verdict.passed and verdict.score == 1.0 and not verdict.flags


def test_mistake_is_named_and_partial_score_counts_cases():
    record = probe(get_exercise("attention"), attention_without_scale, seed=5, suite="grading")
    verdict = judge_record("attention", record, seed=5)
    assert not verdict.passed
    assert "mistake:no_scale" in verdict.flags
    assert "1/sqrt(d_k)" in verdict.diagnosis
    assert 0 <= verdict.score < 1
    assert verdict.cases_total == len(get_exercise("attention").cases(5, "grading"))


def test_judge_rebuilds_inputs_from_its_own_seed():
    # outputs recorded for seed 1 do not pass when judged as seed 2
    record = probe(get_exercise("softmax"), stable_softmax, seed=1, suite="grading")
    record["seed"] = 2
    assert not judge_record("softmax", record, seed=2).passed


def test_record_for_another_seed_or_exercise_is_refused():
    record = probe(get_exercise("softmax"), stable_softmax, seed=1, suite="grading")
    assert "bad_record" in judge_record("softmax", record, seed=9).flags
    assert "bad_record" in judge_record("attention", record, seed=1).flags


def test_the_record_cannot_choose_an_easier_suite():
    record = probe(get_exercise("softmax"), stable_softmax, seed=4, suite="visible")
    verdict = judge_record("softmax", record, seed=4)  # the grader judges the grading suite
    assert not verdict.passed and "bad_record" in verdict.flags


def test_wrong_output_structure_is_described():
    def only_output(q, k, v):
        return attention_without_scale(q, k, v)[0]

    record = probe(get_exercise("attention"), only_output, seed=0, suite="visible")
    verdict = judge_record("attention", record, seed=0, suite="visible")
    assert not verdict.passed and "expected tuple of 2" in verdict.diagnosis


def test_exceptions_and_timeouts_are_reported_per_case():
    def broken(x, axis=-1):
        raise KeyError("oops")

    record = probe(get_exercise("softmax"), broken, seed=0, suite="visible")
    verdict = judge_record("softmax", record, seed=0, suite="visible")
    assert "error" in verdict.flags and "KeyError" in verdict.diagnosis

    def slow(x, axis=-1):
        while True:
            pass

    record = probe(get_exercise("softmax"), slow, seed=0, suite="visible", call_timeout=0.05)
    assert "timeout" in judge_record("softmax", record, seed=0, suite="visible").flags


@pytest.mark.parametrize("mutate", [
    lambda r: r.update(format="other"),
    lambda r: r.update(cases="nope"),
    lambda r: r["cases"].pop(),
    lambda r: r["cases"][0].update(output={"__ndarray__": "!!", "dtype": "float64", "shape": [1]}),
    lambda r: r["cases"][0].update(output={"__ndarray__": "", "dtype": "object", "shape": [0]}),
    lambda r: r["cases"].__setitem__(0, "not a dict"),
    lambda r: r.update(status="weird"),
])
def test_malformed_records_fail_cleanly(mutate):
    record = probe(get_exercise("softmax"), stable_softmax, seed=2, suite="grading")
    bad = copy.deepcopy(record)
    mutate(bad)
    verdict = judge_record("softmax", bad, seed=2)
    assert isinstance(verdict, Verdict) and not verdict.passed and verdict.score == 0
    assert "bad_record" in verdict.flags


def test_missing_function_and_answer_key_records():
    missing = {"format": "mhalib-record/1", "exercise": "softmax", "seed": 0, "status": "missing",
               "cases": []}
    verdict = judge_record("softmax", missing, seed=0)
    assert verdict.flags == ["missing"] and "no function named softmax" in verdict.diagnosis

    record = probe(get_exercise("softmax"), reference_softmax, seed=0, suite="grading")
    verdict = judge_record("softmax", record, seed=0)
    assert verdict.score == 0 and verdict.flags == ["called_answer_key"]
    assert "mhalib's own answer" in verdict.diagnosis


def test_an_output_on_the_meta_device_is_not_told_not_written_yet():
    import torch

    from mhalib.checks import get_exercise, judge_record

    def meta_output(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, *args, **kwargs):
        return torch.empty(x.shape, device="meta")

    record = probe(get_exercise("grouped_query_attention"), meta_output, 0, "grading")
    verdict = judge_record("grouped_query_attention", record, 0, "grading")
    assert not verdict.passed and verdict.score == 0
    assert "not written yet" not in verdict.diagnosis
    assert "meta" in verdict.diagnosis and "device" in verdict.diagnosis
