"""Mutants of the answer key (issue 22, mhalib.checks.mutants): single edits of the key's own
code, tried when no mistake model matched. The schema (every edit switchable) must compute the
key exactly while no edit is on; a slip that is one edit (or one kind of edit in every place)
must be named by the fragment it changes; nothing is named past the time budget or the
number of tries."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
import torch

from mhalib.checks import get_exercise, judge_record
from mhalib.checks.answer_key import answer_key
from mhalib.checks.compare import difference
from mhalib.checks.mutant_schema import (
    build_in_background,
    built,
    clear_schemas,
    foreground,
    schema,
)
from mhalib.checks.mutants import default_expected, mutant_diagnosis, refuses
from mhalib.checks.probe import probe
from mhalib.checks.registry import LESSONS
from mhalib.checks.torch_exercise import TorchExercise, torch_model


def judged(exercise: str, func, seed: int = 0, suite: str = "grading"):
    checker = get_exercise(exercise)
    return judge_record(exercise, probe(checker, func, seed, suite), seed, suite)


ALL_EXERCISES = sorted(name for _, names in LESSONS.values() for name in names)


@pytest.mark.parametrize("name", ALL_EXERCISES)
def test_the_schema_with_no_edit_on_computes_the_answer_key(name):
    checker = get_exercise(name)
    if not default_expected(checker):
        pytest.skip("this exercise's expected output is not its answer key alone")
    found = schema(answer_key(name))
    assert found is not None and found.mutants
    assert not found.active
    for case in checker.cases(0, "grading"):
        if refuses(case):
            continue
        if isinstance(checker, TorchExercise):
            got = torch_model(found.function)(case)
        else:
            got = found.function(*case.args, **case.kwargs)
        assert difference(checker.expected(case), got, 1e-12, 1e-12) is None, case.label


# -- slips that are one edit, written apart from the key --------------------------------------

def softmax_without_keepdims(x, axis=-1):
    top = x.max(axis=axis)
    e = np.exp(x - top)
    return e / e.sum(axis=axis)


def mla_cache_multiplied(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    per_token = kv_lora_rank * rope_head_dim
    return num_layers * per_token * seq_len * batch_size * bytes_per_element


def prefill_scaled_by_model_width(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    b, n, d_model = x.shape
    d_head = w_q.shape[1] // num_heads

    def heads(t):
        return t.reshape(b, n, num_heads, d_head).transpose(1, 2)
    q, k, v = heads(x @ w_q), heads(x @ w_k), heads(x @ w_v)
    outs = []
    for start in range(0, n, chunk_size):
        stop = min(n, start + chunk_size)
        s = q[:, :, start:stop] @ k[:, :, :stop].transpose(-1, -2) / math.sqrt(d_model)
        rows = torch.arange(start, stop)[:, None]
        s = s.masked_fill(torch.arange(stop)[None, :] > rows, float("-inf"))
        outs.append(torch.softmax(s, -1) @ v[:, :, :stop])
    return torch.cat(outs, 2).transpose(1, 2).reshape(b, n, -1) @ w_o


@pytest.mark.parametrize("exercise, func, fragments", [
    ("softmax", softmax_without_keepdims, ["keepdims=True", "the same slip in each place"]),
    ("mla_kv_cache_bytes", mla_cache_multiplied, ["`kv_lora_rank * rope_head_dim`"]),
    ("chunked_prefill", prefill_scaled_by_model_width, ["sqrt(d_model)"]),
])
def test_a_slip_that_is_one_edit_of_the_key_is_named_by_its_fragment(exercise, func, fragments):
    verdict = judged(exercise, func)
    assert not verdict.passed
    assert any(flag.startswith("mutant:") for flag in verdict.flags), verdict.diagnosis
    for fragment in fragments:
        assert fragment in verdict.diagnosis, verdict.diagnosis
    assert "__mhalib" not in verdict.diagnosis  # the schema's switches never show


def test_the_visible_suite_builds_in_the_background_then_names_it_too():
    clear_schemas()
    first = judged("softmax", softmax_without_keepdims, suite="visible")
    assert not first.passed and "keepdims=True" not in first.diagnosis  # not built yet
    for _ in range(200):  # the build (a few milliseconds for softmax) runs on a daemon thread
        if default_schema_built("softmax"):
            break
        time.sleep(0.01)
    assert "keepdims=True" in judged("softmax", softmax_without_keepdims, suite="visible").diagnosis


def test_a_background_build_waits_while_a_check_runs():
    clear_schemas()
    key = answer_key("softmax")
    with foreground():  # (what mhalib.checks.check runs the probe and the judge inside)
        build_in_background(key)
        time.sleep(0.3)  # (the build alone takes a few milliseconds)
        assert not built(key)
    for _ in range(200):
        if built(key):
            break
        time.sleep(0.01)
    assert built(key)


def default_schema_built(name: str) -> bool:
    return built(answer_key(name))


def test_a_right_answer_passes():
    right = judged("softmax", lambda x, axis=-1: torch.softmax(torch.as_tensor(x), axis).numpy())
    assert right.passed, right.diagnosis


def test_no_time_or_tries_left_means_nothing_named():
    checker = get_exercise("mla_kv_cache_bytes")
    recorded = []
    for case in checker.cases(0, "grading"):
        if not getattr(case, "must_raise", ""):
            recorded.append((case, {"status": "ok",
                                    "output": mla_cache_multiplied(*case.args, **case.kwargs)}))
    assert mutant_diagnosis(checker, recorded, budget_s=10.0) is not None
    assert mutant_diagnosis(checker, recorded, budget_s=0.0) is None
    assert mutant_diagnosis(checker, recorded, max_tried=0) is None
