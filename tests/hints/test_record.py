"""The record of hint use saved with the notebook, and how the grader reads it back."""

from __future__ import annotations

import pytest

from mhalib.hints.record import MIME, bundle, hints_taken, parse


def cell(*outputs) -> dict:
    return {"cell_type": "code", "metadata": {}, "outputs": list(outputs)}


def shown(counts) -> dict:
    return {"output_type": "display_data", "data": bundle(counts, {}), "metadata": {}}


def test_a_record_says_what_it_holds_and_round_trips():
    data = bundle({"attention": 2, "softmax": 0}, {"attention": 4})
    assert data[MIME] == {"hints": {"attention": 2}, "version": 1}
    assert "attention 2 of 4" in data["text/plain"] and "softmax" not in data["text/plain"]
    assert 'class="mhalib-hint-record"' in data["text/html"]
    assert parse(data[MIME]) == {"attention": 2}
    empty = bundle({}, {})
    assert parse(empty[MIME]) == {} and "recorded with this notebook" in empty["text/plain"]


def test_the_grader_takes_the_most_any_record_says_per_exercise():
    notebook = {"cells": [
        cell(shown({"softmax": 1})),  # an early record, never updated (a re-run elsewhere)
        cell({"output_type": "stream", "name": "stdout", "text": "hello"},
             shown({"softmax": 2, "attention": 1})),
        cell(shown({"attention": 3})),
    ]}
    assert hints_taken(notebook) == {"softmax": 2, "attention": 3}
    assert hints_taken(notebook, ["attention"]) == {"attention": 3}
    assert hints_taken({"cells": [cell()]}) == {}


@pytest.mark.parametrize("data", [
    None, "text", {"hints": "attention"}, {"hints": {"attention": "2"}},
    {"hints": {"attention": True}}, {"hints": {"attention": 1.5}}, {"hints": {3: 1}},
    {"hints": {f"e{i}": 1 for i in range(65)}},
])
def test_malformed_records_are_ignored(data):
    assert parse(data) is None
    notebook = {"cells": [cell({"output_type": "display_data", "data": {MIME: data}})]}
    assert hints_taken(notebook) == {}


def test_counts_are_clamped_and_hostile_notebooks_read_as_nothing():
    assert parse({"hints": {"attention": 99, "softmax": -3}}) == {"attention": 4, "softmax": 0}
    for hostile in ({}, [], {"cells": "x"}, {"cells": [1, {"outputs": 3}, {"outputs": [2]}]},
                    {"cells": [{"outputs": [{"data": []}]}]}):
        assert hints_taken(hostile) == {}
