"""The class cache: an instructor cell runs once per class and is replayed only for learners who
left it, and everything it reads, as released; anyone else is graded on what they submitted."""

from __future__ import annotations

import base64
import copy
import json
import pickle
import re

import pytest

from mhalib.grading.answered_notebook import (
    answer_sources,
    quick_check_answers,
    submission,
    to_bytes,
)
from mhalib.grading.assignment import nbgrader_meta
from mhalib.grading.class_run import run_class_cache
from mhalib.grading.plan import build_plan
from mhalib.grading.records import GradingTask
from mhalib.grading.rubric import default_rubric
from mhalib.grading.sandbox.class_cache import cache_key
from mhalib.grading.sandbox.limits import Limits
from mhalib.grading.unit import close_sandboxes, grade_unit
from tests.checkout import keys_of

TRAIN = ('import os\ntrained_in = os.getpid()\nweights = np.full(3, 0.5)\n'
         'print("trained in", trained_in, "sum", weights.sum())')
LIMITS = Limits(notebook_seconds=30, cell_seconds=10)


@pytest.fixture(scope="module")
def cached_model(fixture_model):
    """The fixture lesson with a class-cached cell after its imports."""
    model = copy.deepcopy(fixture_model)
    cell = {"cell_type": "code", "id": "train", "execution_count": None, "outputs": [],
            "metadata": {"mhalib": {"class_cache": True}}, "source": TRAIN}
    for notebook in (model.source, model.release):
        at = next(i for i, c in enumerate(notebook["cells"])
                  if nbgrader_meta(c).get("grade_id") == "imports")
        notebook["cells"].insert(at + 1, copy.deepcopy(cell))
    model.class_cache = [TRAIN]
    return model


@pytest.fixture(scope="module")
def class_cache(cached_model):
    try:
        yield run_class_cache(cached_model, "none", LIMITS, echo=lambda text: None)
    finally:
        close_sandboxes()


def _grade(model, cache, notebook: dict):
    task = GradingTask(student="s", assignment=model.assignment, model=model.for_worker(),
                       seed=3, limits=LIMITS, rubric=default_rubric(), sandbox="none",
                       submission=to_bytes(notebook), class_cache=cache,
                       quick_check_keys=keys_of(model.assignment))
    result = grade_unit(task)
    train = next(c for c in result.graded_notebook["cells"] if "trained_in" in c["source"])
    text = "".join(o.get("text", "") for o in train["outputs"])
    return result, text


def _pid(text: str) -> int:
    return int(re.search(r"trained in (\d+)", text).group(1))


def _class_pid(cache) -> int:
    entry = json.loads(next(iter(cache.values())))
    return _pid("".join(o.get("text", "") for o in entry["outputs"]))


def _with_train(model, source: str, before: str | None = None) -> dict:
    notebook = submission(model, answer_sources(model), quick_checks=quick_check_answers(
        model, keys_of(model.assignment)))
    for index, cell in enumerate(notebook["cells"]):
        if cell.get("id") == "train":
            cell["source"] = source
            if before is not None:
                notebook["cells"].insert(index, {"cell_type": "code", "id": "mine",
                                                 "metadata": {}, "execution_count": None,
                                                 "outputs": [], "source": before})
            return notebook
    raise AssertionError("no train cell")


def test_only_the_released_source_is_planned_for_replay(cached_model):
    plan = build_plan(_with_train(cached_model, TRAIN), cached_model)
    assert [s.get("class_cache") for s in plan.steps if s.get("class_cache")] == [
        cache_key(TRAIN)]
    edited = build_plan(_with_train(cached_model, TRAIN + "  # mine"), cached_model)
    assert not any(s.get("class_cache") for s in edited.steps)


def test_an_unchanged_cell_is_replayed_from_the_class_run(cached_model, class_cache):
    assert list(class_cache) == [f"{cache_key(TRAIN)}.json"]
    result, text = _grade(cached_model, class_cache, _with_train(cached_model, TRAIN))
    assert _pid(text) == _class_pid(class_cache) and "sum 1.5" in text
    assert "class_cache_refused" not in result.issue_flags()
    assert result.points() == result.max_points() == 6.0


def test_an_edited_cell_is_graded_as_submitted(cached_model, class_cache):
    edited = TRAIN.replace("0.5", "0.25")
    result, text = _grade(cached_model, class_cache, _with_train(cached_model, edited))
    assert _pid(text) != _class_pid(class_cache) and "sum 0.75" in text


@pytest.mark.parametrize("before", [
    "class _Fake:\n    def full(self, n, v):\n        import numpy\n"
    "        return numpy.full(n, 2 * v)\nnp = _Fake()",  # a name the cell reads, rebound
    "np.full = lambda n, v, _full=np.full: _full(n, 2 * v)",  # numpy patched (tampering)
    "print = lambda *args: None",  # a builtin the cell uses, shadowed
])
def test_a_changed_input_is_refused_and_flagged(cached_model, class_cache, before):
    result, text = _grade(cached_model, class_cache, _with_train(cached_model, TRAIN, before))
    assert "class_cache_refused" in result.issue_flags()
    assert not text or _pid(text) != _class_pid(class_cache)  # it ran as submitted
    if text:
        assert "sum 3.0" in text


def test_without_a_class_run_the_cell_just_runs(cached_model):
    try:
        result, text = _grade(cached_model, {}, _with_train(cached_model, TRAIN))
    finally:
        close_sandboxes()
    assert "class_cache_refused" not in result.issue_flags() and "sum 1.5" in text


MEMO_CELL = ('import linecache, os\n'
             'linecache.cache.setdefault("<mhalib-memo>", (1, None, [str(os.getpid())], "m"))')


def test_a_memo_the_cell_fills_is_filled_again_on_replay(fixture_model):
    """Lesson 08 keeps its trained model in a process memo that later cells ask again."""
    model = copy.deepcopy(fixture_model)
    cell = {"cell_type": "code", "id": "train", "execution_count": None, "outputs": [],
            "metadata": {"mhalib": {"class_cache": True, "memo": ["linecache.cache"]}},
            "source": MEMO_CELL}
    for notebook in (model.source, model.release):
        at = next(i for i, c in enumerate(notebook["cells"])
                  if nbgrader_meta(c).get("grade_id") == "imports")
        notebook["cells"].insert(at + 1, copy.deepcopy(cell))
    model.class_cache = [MEMO_CELL]
    later = 'import linecache\nprint("memo from", linecache.cache["<mhalib-memo>"][2][0])'
    try:
        cache = run_class_cache(model, "none", LIMITS, echo=lambda text: None)
        entry = json.loads(next(iter(cache.values())))
        assert list(entry["memo"]) == ["linecache.cache"]
        notebook = submission(model, answer_sources(model), after={"softmax": later})
        result = grade_unit(GradingTask(
            student="s", assignment=model.assignment, model=model.for_worker(), seed=3,
            limits=LIMITS, rubric=default_rubric(), sandbox="none",
            submission=to_bytes(notebook), class_cache=cache))
    finally:
        close_sandboxes()
    printed = "".join(o.get("text", "") for c in result.graded_notebook["cells"]
                      if "memo from" in c["source"] for o in c.get("outputs", []))
    class_pid = pickle.loads(base64.b64decode(entry["memo"]["linecache.cache"]))
    assert printed.strip() == f"memo from {class_pid['<mhalib-memo>'][2][0]}"
    assert "class_cache_refused" not in result.issue_flags()


@pytest.mark.slow
def test_every_lessons_class_run_exports_all_its_cached_cells():
    """The class run uses the sandbox's package copy (answer key and computing modules
    stubbed): every lesson with class-cached cells must still export all of them, or each
    learner's notebook re-runs them (lesson 08: about 25 s of CPU a notebook instead of 2)."""
    from mhalib import course
    from mhalib.grading.assignment import load_assignment
    from mhalib.grading.unit import resolve_mode
    from tests.checkout import COURSE

    try:
        for lesson in course.LESSONS:
            model = load_assignment(lesson.assignment, COURSE.solutions)[0]
            if not model.class_cache:
                continue
            said = []
            exported = run_class_cache(model, resolve_mode("auto"), Limits(), echo=said.append)
            assert len(exported) == len(model.class_cache), (lesson.assignment, said)
    finally:
        close_sandboxes()
