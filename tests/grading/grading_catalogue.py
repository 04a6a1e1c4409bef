"""The catalogue of broken and hostile submissions, with the score and flags each must get.

Built on the fixture lesson (tests/grading/fixtures/solutions/01-single-head): exercises
``softmax`` (2 points) and ``attention`` (3 points), quick check ``qc_weights_shape`` (1 point),
and a hand-graded markdown cell. ``expect`` maps an item to its points under the course's
default rubric (a number), or to ``full``, ``zero`` or ``not_full``; ``flags`` must all appear
among the student's flags. The default rubric gives a softmax without the max shift (it
overflows) and an attention without the 1/sqrt(d_k) scale part credit (1/2 and 1/3), a softmax
over the wrong axis and answers that pass only degenerate cases nothing.
"""

from __future__ import annotations

import io
import json
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from mhalib.classroom.demo_class import ATTENTION_NO_SCALE, SOFTMAX_NO_SHIFT
from mhalib.grading.answered_notebook import (
    answer_sources,
    quick_check_answers,
    submission,
    to_bytes,
)
from tests.checkout import keys_of

ITEMS = ("softmax", "attention", "qc_weights_shape")
MARKER = "MHALIB_BG_MARKER_7731"


@dataclass
class Case:
    student: str
    build: object  # (model, context) -> bytes | None (None: no notebook) | ("zip", bytes)
    expect: dict[str, str | float]
    flags: set[str] = field(default_factory=set)
    needs_bwrap: bool = False


def _all(kind: str) -> dict[str, str]:
    return {item: kind for item in ITEMS}


def _right_quick_checks(model) -> dict:
    return quick_check_answers(model, keys_of(model.assignment))


def _nb(answers=None, after=None, drop=(), mutate=None, quick=None):
    """A submission: right answers unless ``answers`` (cells) or ``quick`` (quick-check
    answers, recorded as the form does) say otherwise."""
    def build(model, context):
        right = answer_sources(model)
        notebook = submission(model, {**right, **(answers or {})},
                              {k: v.format(**context) for k, v in (after or {}).items()}, drop,
                              {**_right_quick_checks(model), **(quick or {})})
        if mutate:
            mutate(notebook)
        return to_bytes(notebook)
    return build


def _cell(notebook, grade_id):
    return next(c for c in notebook["cells"]
                if c["metadata"].get("nbgrader", {}).get("grade_id") == grade_id)


def _rename_answer(notebook):
    _cell(notebook, "softmax")["metadata"]["nbgrader"]["grade_id"] = "softmax_v2"


def _change_metadata(notebook):
    notebook["metadata"]["kernelspec"] = {"name": "ir", "display_name": "R", "language": "R"}
    test = _cell(notebook, "test_softmax")
    test["metadata"]["nbgrader"].update(grade=False, solution=True)
    test["source"] = "print('tests passed')"


def _duplicate_test(notebook):
    test = _cell(notebook, "test_softmax")
    notebook["cells"].insert(notebook["cells"].index(test), json.loads(json.dumps(test)))


def _right_option_as_text(model, context):
    """The right option recorded by its text rather than its index (a hand-written record)."""
    from mhalib.quiz import get_question

    index = _right_quick_checks(model)["qc_weights_shape"]
    text = get_question("qc_weights_shape").options[index]
    return _nb(quick={"qc_weights_shape": text})(model, context)


def _forge_record_elsewhere(notebook):
    """A record of the right answer written by another cell: only the quick check's own cell
    counts."""
    from mhalib.quiz.record import bundle

    _cell(notebook, "test_softmax")["outputs"] = [{
        "output_type": "display_data", "metadata": {},
        "data": bundle("qc_weights_shape", 0, None)}]


def _record_as_other_student(notebook):
    from mhalib.quiz.record import MIME

    for output in _cell(notebook, "qc_weights_shape")["outputs"]:
        output["data"][MIME]["variant"] = "student:someone-else"


def _hostile_record(notebook):
    from mhalib.quiz.record import MIME

    for output in _cell(notebook, "qc_weights_shape")["outputs"]:
        output["data"][MIME] = {"question": "qc_weights_shape", "answer": {"$gt": ""},
                                "variant": "../../etc/passwd"}


def _answer_to_markdown(notebook):
    _cell(notebook, "attention")["cell_type"] = "markdown"
    _cell(notebook, "attention").pop("outputs", None)
    _cell(notebook, "attention").pop("execution_count", None)


def _huge(model, context):
    notebook = submission(model, answer_sources(model))
    notebook["cells"].append({"cell_type": "markdown", "metadata": {}, "id": "huge",
                              "source": "x" * 1_500_000})
    return to_bytes(notebook)


def _zip_of(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def _zip_correct(model, context):
    data = _nb()(model, context)
    return ("zip", _zip_of({f"submission/{model.notebook}": data,
                            "submission/helper.txt": b"kept next to the notebook",
                            "__MACOSX/._junk": b"x"}))


def _zip_traversal(model, context):
    data = _nb(after={"imports": "import os\nprint(sorted(os.listdir('.')))"})(model, context)
    return ("zip", _zip_of({model.notebook: data, "../../escape.py": b"print('escaped')",
                            "/abs.txt": b"absolute"}))


NDARRAY_CHEAT = '''class _Yes(np.ndarray):
    def __eq__(self, other):
        return np.ones(np.shape(self), dtype=bool).view(np.ndarray)
    def __array_finalize__(self, obj):
        pass
def softmax(x, axis=-1):
    return np.zeros_like(x).view(_Yes)
'''
AST_STRIP = '''import ast
class _NoAssert(ast.NodeTransformer):
    def visit_Assert(self, node):
        return ast.Pass()
get_ipython().ast_transformers.append(_NoAssert())
''' + SOFTMAX_NO_SHIFT
BLANK_LATER = '''def _blank(lines):
    return []
get_ipython().input_transformers_post.append(_blank)
'''
HIDE_TRACEBACKS = '''import sys
get_ipython().showtraceback = lambda *args, **kwargs: None
sys.excepthook = lambda *args: None
''' + SOFTMAX_NO_SHIFT
FAKE_PROBE = '''import mhalib.checks.record as _record
def _fake(exercise, func, seed, suite, call_timeout=None):
    return {{"format": "mhalib-record/1", "exercise": exercise.name, "seed": seed,
            "suite": suite, "status": "ok", "cases": []}}
_record.probe = _fake
'''
READ_OUTSIDE = '''import os, socket
for _path in {paths!r}:
    try:
        with open(_path, "rb") as _handle:
            print("READ", _path, len(_handle.read()))
    except OSError as _error:
        print("BLOCKED", _path, type(_error).__name__)
try:
    with open({gradebook!r}, "ab") as _handle:
        _handle.write(b"garbage")
    print("WROTE gradebook")
except OSError as _error:
    print("BLOCKED write", type(_error).__name__)
try:
    socket.create_connection(("1.1.1.1", 80), timeout=2)
    print("NETWORK open")
except OSError as _error:
    print("BLOCKED network", type(_error).__name__)
'''
ATTENTION_UNIFORM = '''def attention(q, k, v):
    weights = np.ones(q.shape[:-1] + k.shape[-2:-1]) / k.shape[-2]
    return weights @ v, weights
'''
ATTENTION_BY_POSITION = '''def attention(q, k, v):
    weights = np.broadcast_to(softmax(np.arange(k.shape[-2], dtype=float)),
                              q.shape[:-1] + k.shape[-2:-1])
    return weights @ v, weights
'''
ATTENTION_OVER_QUERIES = '''def attention(q, k, v):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    return softmax(scores, axis=-2) @ v, softmax(scores, axis=-2)
'''
IGNORE_ALARM_AND_HANG = """import signal
signal.signal(signal.SIGALRM, signal.SIG_IGN)
while True:
    pass
"""
BACKGROUND = '''import subprocess, sys
subprocess.Popen(["sleep", "613"], start_new_session=True)
subprocess.Popen([sys.executable, "-c", "import os, time\\nif os.fork() == 0:\\n    os.setsid()\\n"
                  "    time.sleep(600)  # {marker}"], start_new_session=True)
print("started background processes")
'''.replace("{marker}", MARKER)

CATALOGUE = [
    Case("correct", _nb(), _all("full")),
    Case("blank", lambda m, c: to_bytes(submission(m)),
         {"softmax": "zero", "attention": "zero", "qc_weights_shape": "zero"}, {"call_error"}),
    Case("partly-wrong", _nb({"softmax": SOFTMAX_NO_SHIFT}),
         {"softmax": 1.0, "attention": 1.5, "qc_weights_shape": "full"},
         {"mistake:no_max_shift"}),
    Case("no-scale", _nb({"attention": ATTENTION_NO_SCALE}),
         {"softmax": "full", "attention": 1.0}, {"mistake:no_scale"}),
    Case("uniform-weights", _nb({"attention": ATTENTION_UNIFORM}),  # right on one key only
         {"softmax": "full", "attention": 0.0}, {"mistake:wrong_scale"}),  # a scale of 0
    Case("position-weights", _nb({"attention": ATTENTION_BY_POSITION}),  # one key only, too
         {"softmax": "full", "attention": 0.0}),
    Case("softmax-over-queries", _nb({"attention": ATTENTION_OVER_QUERIES}),
         {"softmax": "full", "attention": 0.0}, {"mistake:softmax_over_queries"}),
    Case("invalid-json", lambda m, c: b'{"cells": [', _all("zero"), {"invalid_notebook"}),
    Case("not-a-notebook", lambda m, c: b'[1, 2, 3]', _all("zero"), {"invalid_notebook"}),
    Case("binary-garbage", lambda m, c: bytes(range(256)) * 8, _all("zero"),
         {"invalid_notebook"}),
    Case("missing-notebook", lambda m, c: None, _all("zero"), {"missing_notebook"}),
    Case("too-large", _huge, _all("zero"), {"too_large"}),
    Case("deleted-tests", _nb(drop=("test_softmax", "test_attention")), _all("full"),
         {"restored_cell"}),
    Case("renamed-answer-id", _nb(mutate=_rename_answer), _all("full"),
         {"unknown_cell_id", "missing_answer_cell"}),
    Case("changed-metadata", _nb(mutate=_change_metadata), _all("full"),
         {"changed_kernel", "changed_metadata", "edited_test_cell"}),
    Case("edited-test-wrong", _nb({"softmax": SOFTMAX_NO_SHIFT}, mutate=lambda nb: _cell(
        nb, "test_softmax").update(source="print('all tests passed')")),
         {"softmax": 1.0}, {"edited_test_cell"}),
    Case("duplicate-test-cell", _nb(mutate=_duplicate_test), _all("full"),
         {"duplicate_cell_id"}),
    Case("answer-turned-markdown", _nb(mutate=_answer_to_markdown), _all("full"),
         {"changed_cell_type"}),
    Case("monkeypatch-numpy", _nb({"softmax": "np.allclose = lambda *a, **k: True\n"
                                              "np.testing.assert_allclose = lambda *a, **k: None\n"
                                              + SOFTMAX_NO_SHIFT}),
         {"softmax": 1.0}, {"integrity"}),
    Case("ast-strips-asserts", _nb({"softmax": AST_STRIP}), {"softmax": 1.0}, {"integrity"}),
    Case("input-transformer-blanks", _nb(after={"imports": BLANK_LATER}),
         {"softmax": "zero", "attention": "zero", "qc_weights_shape": "full"},
         {"integrity", "missing"}),
    # quick checks: the answer recorded in the quick check's own cell, judged with the key
    Case("quick-check-wrong", _nb(quick={"qc_weights_shape": 1}),
         {"softmax": "full", "attention": "full", "qc_weights_shape": "zero"}),
    Case("quick-check-by-text", _right_option_as_text, _all("full")),
    Case("quick-check-forged-elsewhere", _nb(quick={"qc_weights_shape": None},
                                             mutate=_forge_record_elsewhere),
         {"softmax": "full", "attention": "full", "qc_weights_shape": "zero"}, {"no_record"}),
    Case("quick-check-other-student", _nb(mutate=_record_as_other_student), _all("full"),
         {"variant_of_other_student"}),
    Case("quick-check-hostile-record", _nb(mutate=_hostile_record),
         {"softmax": "full", "attention": "full", "qc_weights_shape": "zero"}, {"no_record"}),
    Case("ndarray-always-equal", _nb({"softmax": NDARRAY_CHEAT}), {"softmax": "zero"}),
    Case("hidden-tracebacks", _nb({"softmax": HIDE_TRACEBACKS}), {"softmax": 1.0},
         {"integrity"}),
    Case("tampered-recorder", _nb(after={"imports": FAKE_PROBE}),
         {"softmax": "zero", "attention": "zero", "qc_weights_shape": "full"}, {"bad_record"}),
    Case("answer-key-import", _nb({"softmax": "from mhalib.reference import softmax\n"}),
         {"softmax": "zero"}, {"missing"}),
    Case("sys-exit", _nb(after={"softmax": "import sys\nsys.exit(0)"}), _all("full")),
    Case("os-exit", _nb(after={"test_softmax": "import os\nos._exit(3)"}),
         {"softmax": "full", "attention": "zero", "qc_weights_shape": "full"}, {"kernel_died"}),
    Case("kills-own-kernel", _nb(after={"test_softmax": "import os, signal\n"
                                                          "os.kill(os.getpid(), signal.SIGKILL)"}),
         {"softmax": "full", "attention": "zero"}, {"kernel_died"}),
    Case("infinite-loop-answer", _nb({"softmax": "def softmax(x, axis=-1):\n    while True:\n"
                                                 "        pass\n"}),
         {"softmax": "zero", "attention": "zero"}, {"call_timeout"}),
    Case("ignores-alarm-hangs", _nb(after={"test_softmax": IGNORE_ALARM_AND_HANG}),
         {"softmax": "full", "attention": "zero", "qc_weights_shape": "full"}, {"timeout"}),
    Case("slow-cell", _nb(after={"imports": "import time\ntime.sleep(60)"}), _all("full"),
         {"cell_timeout"}),
    Case("memory-blowup", _nb(after={"imports": "big = np.ones((60_000, 60_000))"}),
         _all("full"), {"memory"}),
    Case("output-flood", _nb(after={"imports": "print('x' * 50_000_000)"}), _all("full"),
         {"output_truncated"}),
    Case("background-processes", _nb(after={"imports": BACKGROUND}), _all("full")),
    Case("reads-outside", _nb(after={"imports": READ_OUTSIDE}), _all("full"), needs_bwrap=True),
    Case("zip-correct_12345_678", _zip_correct, _all("full")),
    Case("zip-corrupt", lambda m, c: ("zip", b"PK\x03\x04 this is not a zip"), _all("zero"),
         {"invalid_notebook"}),
    Case("zip-traversal", _zip_traversal, _all("full")),
]


def student_of(case: Case) -> str:
    """The student id the grader derives (zip names lose their LMS number suffix)."""
    return case.student.split("_")[0]


def write_class(model, submitted: Path, context: dict, cases: list[Case]) -> None:
    """Write every case as a submission under ``submitted`` (nbgrader layout or zips)."""
    submitted.mkdir(parents=True, exist_ok=True)
    for case in cases:
        data = case.build(model, context)
        if isinstance(data, tuple):
            (submitted / f"{case.student}.zip").write_bytes(data[1])
            continue
        folder = submitted / case.student / model.assignment
        folder.mkdir(parents=True, exist_ok=True)
        if data is None:
            (folder / "notes.txt").write_text("I forgot the notebook", encoding="utf-8")
        else:
            (folder / model.notebook).write_bytes(data)
