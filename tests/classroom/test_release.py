"""The release pipeline: nbgrader strips solutions and hidden tests; output is canonical."""

import json

import nbformat
import pytest

from mhalib.classroom import release
from tests.checkout import COURSE

ANSWER = {"grade": False, "grade_id": "softmax", "locked": False, "schema_version": 3,
          "solution": True, "task": False}
TESTS = {"grade": True, "grade_id": "test_softmax", "locked": True, "points": 2,
         "schema_version": 3, "solution": False, "task": False}


@pytest.fixture(scope="module")
def solutions(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("course")
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python",
                                 "name": "python3"}
    cells = [
        nbformat.v4.new_markdown_cell("# A lesson", id="intro"),
        nbformat.v4.new_code_cell(
            "def softmax(x, axis=-1):\n    ### BEGIN SOLUTION\n    return SECRET_LINE\n"
            "    ### END SOLUTION", id="answer", metadata={"nbgrader": ANSWER}),
        nbformat.v4.new_code_cell(
            "check('softmax', softmax)\n### BEGIN HIDDEN TESTS\nHIDDEN_LINE\n"
            "### END HIDDEN TESTS", id="tests", metadata={"nbgrader": TESTS}),
    ]
    cells[1].outputs = [nbformat.v4.new_output("stream", text="noise")]
    cells[1].execution_count = 3
    nb.cells = cells
    folder = tmp_path / "solutions" / "01-single-head"
    folder.mkdir(parents=True)
    nbformat.write(nb, folder / "lesson.ipynb")
    return tmp_path / "solutions"


@pytest.fixture(scope="module")
def generated(solutions):
    return release.generate("01-single-head", solutions, COURSE.keys)


def test_generate_removes_solutions_and_hidden_tests(generated):
    text = generated["lesson.ipynb"]
    assert "SECRET_LINE" not in text and "HIDDEN_LINE" not in text
    assert "raise NotImplementedError()" in text
    cells = json.loads(text)["cells"]
    assert [c["id"] for c in cells] == ["intro", "answer", "tests"]
    assert all(not c.get("outputs") and c.get("execution_count") is None
               for c in cells if c["cell_type"] == "code")
    assert cells[2]["metadata"]["nbgrader"]["locked"] is True


def test_generation_is_deterministic_and_drift_is_detected(solutions, generated, tmp_path):
    first = generated
    notebooks = tmp_path / "notebooks"
    (notebooks / "01-single-head").mkdir(parents=True)
    (notebooks / "01-single-head" / "lesson.ipynb").write_text(first["lesson.ipynb"])
    (notebooks / "01-single-head" / "stray.ipynb").write_text("{}")
    # drift() generates afresh: equal text means generation is deterministic; the release's
    # quick-check file is part of it (missing here)
    assert release.drift("01-single-head", solutions, notebooks, COURSE.keys) == [
        "quick_checks.json", "stray.ipynb"]
    (notebooks / "01-single-head" / "quick_checks.json").write_text(first["quick_checks.json"])
    assert release.drift("01-single-head", solutions, notebooks, COURSE.keys) == ["stray.ipynb"]


def test_unknown_assignment_is_refused(solutions):
    with pytest.raises(ValueError, match="assignment='99-nope'"):
        release.generate("99-nope", solutions, COURSE.keys)


def test_an_assessed_release_carries_the_mode_and_no_key(solutions):
    data = json.loads(release.generate("01-single-head", solutions, COURSE.keys,
                                       mode="assessed")["quick_checks.json"])
    assert data == {"assignment": "01-single-head", "mode": "assessed"}
    with pytest.raises(ValueError, match="mode='exam'"):
        release.release_data("01-single-head", "exam", COURSE.keys)
