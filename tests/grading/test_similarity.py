"""The similarity report: a copied notebook is found through renamed names, new comments and
new layout; a shared quick-check seed is found; honest, differently written answers and
untouched templates are not listed."""

from __future__ import annotations

import copy
import json

from mhalib.grading.assignment import load_assignment
from mhalib.grading.similarity import fingerprints, similarity_report, write_similarity
from mhalib.quiz.record import bundle
from tests.checkout import COURSE

ASSIGNMENT = "01-single-head"
MODEL = load_assignment(ASSIGNMENT, COURSE.solutions)[0]

SOFTMAX = '''def softmax(x, axis=-1):
    shifted = x - np.max(x, axis=axis, keepdims=True)  # largest entry becomes 0
    e = np.exp(shifted)
    return e / np.sum(e, axis=axis, keepdims=True)
'''
ATTENTION = '''def attention(q, k, v):
    d_k = q.shape[-1]
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(d_k)
    weights = softmax(scores, axis=-1)
    return weights @ v, weights
'''
# the same code with every name changed, comments rewritten and the layout moved
SOFTMAX_RENAMED = '''def softmax(logits, axis=-1):
    # subtract the row max for stability
    z = logits - np.max(logits, axis=axis,
                        keepdims=True)
    ex = np.exp(z)
    return ex / np.sum(ex, axis=axis, keepdims=True)
'''
ATTENTION_RENAMED = '''def attention(q, k, v):
    width = q.shape[-1]   # key width
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(width)
    w = softmax(s, axis=-1)
    return w @ v, w
'''
# an honest answer written another way
SOFTMAX_OTHER = '''def softmax(x, axis=-1):
    x = np.moveaxis(np.asarray(x, dtype=float), axis, -1)
    out = np.empty_like(x)
    for index in np.ndindex(x.shape[:-1]):
        row = x[index]
        row = np.exp(row - row.max())
        out[index] = row / row.sum()
    return np.moveaxis(out, -1, axis)
'''
ATTENTION_OTHER = '''def attention(q, k, v):
    logits = np.einsum("...qd,...kd->...qk", q, k) * q.shape[-1] ** -0.5
    p = softmax(logits)
    out = np.einsum("...qk,...kv->...qv", p, v)
    return out, p
'''


def _notebook(softmax_code: str, attention_code: str, seed: str | None = None) -> bytes:
    nb = copy.deepcopy(MODEL.release)
    for cell in nb["cells"]:
        grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if grade_id == "softmax":
            cell["source"] = softmax_code
        elif grade_id == "attention":
            cell["source"] = attention_code
        elif seed and grade_id in MODEL.questions:
            cell["outputs"] = [{"output_type": "display_data", "metadata": {},
                                "data": bundle(grade_id, 1, seed)}]
    return json.dumps(nb).encode()


def _report(**students):
    return similarity_report(ASSIGNMENT, [MODEL], {name: {MODEL.notebook: data}
                                                   for name, data in students.items()})


def test_a_copy_with_new_names_comments_and_layout_is_listed():
    report = _report(ada=_notebook(SOFTMAX, ATTENTION),
                     bob=_notebook(SOFTMAX_RENAMED, ATTENTION_RENAMED),
                     cy=_notebook(SOFTMAX_OTHER, ATTENTION_OTHER))
    assert [(p.students, p.reason) for p in report.pairs] == [(("ada", "bob"),
                                                               "similar_answers")]
    assert report.pairs[0].similarity >= 0.9 and report.compared == 3


def test_untouched_templates_are_never_similar():
    blank = json.dumps(MODEL.release).encode()
    report = _report(ada=blank, bob=blank, cy=_notebook(SOFTMAX, ATTENTION))
    assert report.pairs == []


def test_a_shared_seed_is_listed_and_distinct_seeds_are_not():
    assert MODEL.questions, "lesson 01 has quick checks to record answers in"
    report = _report(ada=_notebook(SOFTMAX, ATTENTION, seed="seed:424242"),
                     bob=_notebook(SOFTMAX_OTHER, ATTENTION_OTHER, seed="seed:424242"),
                     cy=_notebook(SOFTMAX_OTHER, ATTENTION, seed="seed:7"))
    assert [(p.students, p.reason) for p in report.pairs] == [(("ada", "bob"), "shared_seed")]
    assert "seed:424242" in report.pairs[0].detail


def test_unreadable_or_missing_notebooks_are_skipped():
    report = similarity_report(ASSIGNMENT, [MODEL], {"ada": {MODEL.notebook: b"{not json"},
                                                     "bob": {MODEL.notebook: None}})
    assert report.compared == 0 and report.pairs == []


def test_fingerprints_ignore_names_comments_and_layout_but_not_calls():
    assert fingerprints(SOFTMAX) == fingerprints(SOFTMAX_RENAMED)
    assert fingerprints(SOFTMAX) != fingerprints(SOFTMAX.replace("np.max", "np.min"))


def test_the_report_is_written_as_json_csv_and_html(tmp_path):
    report = _report(ada=_notebook(SOFTMAX, ATTENTION),
                     bob=_notebook(SOFTMAX_RENAMED, ATTENTION_RENAMED))
    paths = write_similarity(report, tmp_path)
    assert [p.suffix for p in paths] == [".json", ".csv", ".html"]
    assert json.loads(paths[0].read_text())["pairs"][0]["students"] == ["ada", "bob"]
    assert paths[1].read_text().splitlines()[1].startswith("ada,bob,")
    assert "<table>" in paths[2].read_text() and "ada" in paths[2].read_text()
