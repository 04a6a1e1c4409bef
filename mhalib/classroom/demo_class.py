"""A demo class for lesson 01, built from the release: correct, partly wrong, blank, broken,
hostile. ``grading/examples/`` is generated with it and the README grades it::

    python -m mhalib.classroom.demo_class --out grading/examples/submitted \
        --zips grading/examples/zips

(in the course's top folder, or with ``--root``). The submissions are built by
:mod:`mhalib.grading.answered_notebook`; the right quick-check answers come from the
instructor's keys.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from mhalib.classroom.course_folder import locate
from mhalib.grading.answered_notebook import (
    answer_sources,
    quick_check_answers,
    submission,
    to_bytes,
)
from mhalib.grading.assignment import NotebookModel, load_assignment
from mhalib.quiz.keys import instructor_keys

SOFTMAX_NO_SHIFT = '''def softmax(x, axis=-1):
    e = np.exp(x)
    return e / e.sum(axis=axis, keepdims=True)
'''
ATTENTION_NO_SCALE = '''def attention(q, k, v):
    scores = q @ np.swapaxes(k, -1, -2)
    weights = softmax(scores, axis=-1)
    return weights @ v, weights
'''
# hostile: claims success everywhere it can reach, but its softmax is wrong
HOSTILE_PATCHES = '''import numpy as np
np.allclose = lambda *args, **kwargs: True
np.testing.assert_allclose = lambda *args, **kwargs: None
import ast
class _DropAsserts(ast.NodeTransformer):
    def visit_Assert(self, node):
        return ast.Pass()
get_ipython().ast_transformers.append(_DropAsserts())
get_ipython().showtraceback = lambda *args, **kwargs: None
for path in ["../../../../solutions", "/work", "/root", "gradebook.db"]:
    try:
        print(path, __import__("os").listdir(path)[:3])
    except OSError as error:
        print(path, "not reachable:", type(error).__name__)
def softmax(x, axis=-1):
    return np.ones_like(x) / x.shape[axis]
'''


def demo_submissions(model: NotebookModel, keys: dict) -> dict[str, bytes]:
    """student id -> notebook bytes for the demo class (``keys``: the instructor's quick-check
    keys of the assignment)."""
    right = answer_sources(model)
    quick = quick_check_answers(model, keys)
    slips = {qid: "0" if isinstance(answer, str) else (answer + 1) % 2
             for qid, answer in quick.items()}  # a wrong blank, a wrong option
    first = model.exercises[0]
    wrong = {**right, "softmax": SOFTMAX_NO_SHIFT, "attention": ATTENTION_NO_SCALE}
    hostile = {**right, "softmax": HOSTILE_PATCHES}
    return {
        "ada-correct": to_bytes(submission(model, right, quick_checks=quick)),
        "bert-partly-wrong": to_bytes(submission(model, {**right, "softmax": SOFTMAX_NO_SHIFT},
                                                 quick_checks=quick)),
        "cleo-wrong": to_bytes(submission(model, wrong, quick_checks=slips)),
        "dev-blank": to_bytes(submission(model)),
        "eve-hostile": to_bytes(submission(model, hostile, quick_checks=quick)),
        "finn-broken": to_bytes(submission(model, right, quick_checks=quick))[:700],
        "gus-crashes": to_bytes(submission(model, right, quick_checks=quick, after={
            first: "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)"})),
    }


def write_demo_class(model: NotebookModel, out: Path, keys: dict) -> list[Path]:
    """Write the demo class in nbgrader's submitted/ layout under ``out``."""
    written = []
    for student, data in demo_submissions(model, keys).items():
        path = Path(out) / student / model.assignment / model.notebook
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        (path.parent / "timestamp.txt").write_text("2025-01-15 12:00:00.000000 UTC\n",
                                                   encoding="utf-8")
        written.append(path)
    return written


def write_demo_zips(model: NotebookModel, out: Path, keys: dict) -> list[Path]:
    """Two submissions as an LMS would download them: one zip per student."""
    import io
    import zipfile

    Path(out).mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(f"hana/{model.notebook}", to_bytes(submission(
            model, answer_sources(model), quick_checks=quick_check_answers(model, keys))))
        archive.writestr("hana/notes.txt", "my notes travel with the notebook\n")
    paths = [Path(out) / "hana_1001_2001.zip", Path(out) / "ivan_1002_2002.zip"]
    paths[0].write_bytes(buffer.getvalue())
    paths[1].write_bytes(buffer.getvalue()[: len(buffer.getvalue()) // 3])  # cut download
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--assignment", default="01-single-head")
    parser.add_argument("--root", type=Path, help="the course's top folder (default: "
                        "MHALIB_COURSE_ROOT, else the working directory)")
    parser.add_argument("--source", type=Path, help="default: solutions of the course")
    parser.add_argument("--keys", type=Path, help="default: MHALIB_QUICK_CHECK_KEYS, else "
                        "grading/quick_checks of the course")
    parser.add_argument("--out", type=Path,
                        help="default: grading/examples/submitted of the course")
    parser.add_argument("--zips", type=Path, help="also write LMS-style zips to this folder")
    args = parser.parse_args(argv)
    files = locate(args.root, solutions=args.source, keys=args.keys)
    out = args.out or files.root / "grading" / "examples" / "submitted"
    for model in load_assignment(args.assignment, files.solutions):
        keys = instructor_keys(model.assignment, files.keys) if model.questions else {}
        written = write_demo_class(model, out, keys)
        written += write_demo_zips(model, args.zips, keys) if args.zips else []
        for path in written:
            print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
