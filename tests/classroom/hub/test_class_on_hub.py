"""A class on JupyterHub, end to end: real system users, the hub's login page, nbgrader's
Assignment List in headless Chromium, the instructor grading with ``mhalib grade``.

One journey (the ``journey`` fixture) runs once for the module: the instructor releases lesson
01; two learners log in, fetch it from the Assignment List, answer (one right, one with the
1/sqrt(d_k) scale forgotten), save and submit; the instructor collects, grades and returns
feedback; each learner fetches it. The tests then check what each person saw and could read.
Scores are compared (full marks, strictly less), never matched to exact partial credit.
"""

from __future__ import annotations

import csv
import json
import os
import re
import time
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

import pytest

from mhalib.classroom.hub.class_setup import COURSE_FOLDER
from tests.browser.lab_server import REPO
from tests.classroom.hub import hub_pages

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.xdist_group("class_hub"),
              pytest.mark.timeout(900)]

ASSIGNMENT = "01-single-head"
NOTEBOOK = "single_head_attention"
MARKERS = ("### BEGIN SOLUTION", "### END SOLUTION")
ATTENTION_NO_SCALE = '''def attention(q, k, v):
    scores = q @ np.swapaxes(k, -1, -2)
    weights = softmax(scores, axis=-1)
    return weights @ v, weights'''
TOTAL = re.compile(r"Total:\s*([\d.]+)\s*/\s*([\d.]+)")


def solution_answers() -> dict[str, str]:
    """grade_id -> the instructor's answer for every code answer cell of lesson 01."""
    source = json.loads((REPO / "solutions" / ASSIGNMENT / f"{NOTEBOOK}.ipynb").read_text())
    answers = {}
    for cell in source["cells"]:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell["cell_type"] == "code" and meta.get("solution"):
            text = "".join(cell["source"])
            answers[meta["grade_id"]] = "\n".join(
                line for line in text.split("\n") if line.strip() not in MARKERS)
    return answers


def quick_check_answers() -> dict[str, tuple[str, str]]:
    """What a learner who knows the answers types or picks in each quick-check form."""
    from mhalib.quiz import MultipleChoice, get_question
    from tests.checkout import keys_of

    answers = {}
    for question_id, key in keys_of(ASSIGNMENT).items():
        question = get_question(question_id)
        if isinstance(question, MultipleChoice):
            answers[question_id] = ("choice", question.options[key["answer"]])
        else:
            answers[question_id] = ("fill", key["answer"])
    return answers


@dataclass
class Seen:
    """What one learner's browser showed at the end."""

    feedback_text: str = ""
    totals: tuple[float, float] = (0.0, 0.0)  # (points, maximum) shown as "Total: x / y"


class StepClock:
    """Seconds each step of the journey took (printed; pytest shows it with -s or on failure)."""

    def __init__(self):
        self.start = self.last = time.monotonic()
        self.steps: list[tuple[str, float]] = []

    def done(self, step: str) -> None:
        now = time.monotonic()
        self.steps.append((step, now - self.last))
        self.last = now

    def __str__(self) -> str:
        lines = [f"  {seconds:6.1f} s  {step}" for step, seconds in self.steps]
        return "\n".join(["journey:", *lines, f"  {self.last - self.start:6.1f} s  in all"])


def screenshot_dir(tmp_path_factory) -> Path:
    chosen = os.environ.get("MHALIB_SCREENSHOTS")
    if chosen:
        Path(chosen).mkdir(parents=True, exist_ok=True)
        return Path(chosen)
    return tmp_path_factory.mktemp("hub-screenshots")


def instructor_does(hub, *argv: str) -> str:
    result = hub.run_as(hub.instructor, list(argv), cwd=hub.home(hub.instructor) / COURSE_FOLDER)
    assert result.returncode == 0, (f"`{' '.join(argv)}` as the instructor exited with "
                                    f"{result.returncode}:\n{result.stdout[-3000:]}\n"
                                    f"{result.stderr[-3000:]}")
    return result.stdout + result.stderr


def learner_submits(browser, hub, learner: str, answers: dict[str, str]):
    """Log in, fetch lesson 01, write ``answers``, answer every quick check in its form,
    save and submit."""
    context = browser.new_context(viewport={"width": 1100, "height": 640})
    page = context.new_page()
    hub_pages.log_in(page, hub.url, learner, hub.passwords[learner])
    hub_pages.open_assignment_list(page)
    page.locator(f"{hub_pages.RELEASED} .list_item", has_text=ASSIGNMENT).wait_for()
    hub_pages.fetch_assignment(page, ASSIGNMENT)
    hub_pages.open_fetched_notebook(page, ASSIGNMENT, NOTEBOOK)
    hub_pages.answer(page, answers, quick_check_answers())
    hub_pages.submit(page, ASSIGNMENT)
    return context, page


def learner_reads_feedback(hub, page, learner: str, shots: Path | None) -> Seen:
    """Fetch Feedback in the Assignment List, then open the page it brought home."""
    hub_pages.fetch_feedback(page, ASSIGNMENT)
    if shots:
        page.screenshot(path=str(shots / "hub_assignment_list.png"))
    pages = sorted((hub.home(learner) / ASSIGNMENT / "feedback").glob(f"*/{NOTEBOOK}.html"))
    assert len(pages) == 1, f"{learner} fetched {len(pages)} feedback pages: {pages}"
    relative = pages[0].relative_to(hub.home(learner)).as_posix()
    page.goto(f"{hub.url}/user/{learner}/files/{urllib.parse.quote(relative)}")
    text = page.locator("body").inner_text()
    if shots:
        page.screenshot(path=str(shots / "hub_feedback.png"))
    found = TOTAL.search(text)
    assert found, f"no 'Total: x / y' in {learner}'s feedback:\n{text[:2000]}"
    return Seen(feedback_text=text, totals=(float(found.group(1)), float(found.group(2))))


@pytest.fixture(scope="module")
def journey(class_hub, hub_browser, tmp_path_factory):
    """Release, fetch, answer, submit, collect, grade, return feedback; what each one saw."""
    hub = class_hub
    right, partly_wrong = hub.learners
    shots = screenshot_dir(tmp_path_factory)
    clock = StepClock()
    instructor_does(hub, "nbgrader", "release_assignment", ASSIGNMENT)
    clock.done("instructor releases")

    answers = solution_answers()
    wrong_answers = {**answers, "attention": ATTENTION_NO_SCALE}
    contexts = {right: learner_submits(hub_browser, hub, right, answers)}
    clock.done("learner 1 logs in, fetches, answers, submits")
    contexts[partly_wrong] = learner_submits(hub_browser, hub, partly_wrong, wrong_answers)
    clock.done("learner 2 logs in, fetches, answers, submits")

    course = hub.home(hub.instructor) / COURSE_FOLDER
    instructor_does(hub, "nbgrader", "collect", ASSIGNMENT)
    grading = instructor_does(hub, "mhalib", "grade", "--assignment", ASSIGNMENT,
                              str(course / "submitted"), "--source", str(course / "source"),
                              "--course", str(course), "--jobs", "1", "--no-progress")
    # (the keys: the hub gives the instructor MHALIB_QUICK_CHECK_KEYS of their course)
    instructor_does(hub, "mhalib", "hub", "feedback", ASSIGNMENT)
    clock.done("instructor collects, grades, returns feedback")

    seen = {}
    for learner, (_context, page) in contexts.items():
        seen[learner] = learner_reads_feedback(hub, page, learner,
                                               shots if learner == partly_wrong else None)
    clock.done("learners fetch and read feedback")
    print(clock)
    with open(course / "exports" / f"{ASSIGNMENT}.csv", newline="") as table:
        rows = list(csv.DictReader(table))
    yield {"hub": hub, "seen": seen, "rows": rows, "grading": grading, "course": course,
           "contexts": contexts}
    for context, _page in contexts.values():
        context.close()


def test_the_correct_learner_gets_full_marks_and_sees_them(journey):
    right = journey["hub"].learners[0]
    points, maximum = journey["seen"][right].totals
    assert maximum > 0 and points == maximum, (journey["grading"], journey["seen"][right])


def test_the_partly_wrong_learner_gets_less_and_sees_the_diagnosis(journey):
    right, partly_wrong = journey["hub"].learners
    points, maximum = journey["seen"][partly_wrong].totals
    assert maximum == journey["seen"][right].totals[1]
    assert 0 < points < maximum, journey["grading"]
    diagnosis = next(row["diagnosis"] for row in journey["rows"]
                     if row["student"] == partly_wrong and row["exercise"] == "attention")
    assert diagnosis.strip(), journey["rows"]
    text = " ".join(journey["seen"][partly_wrong].feedback_text.split())
    # the export joins the checker's diagnosis and the rubric's reason with " — "; the page shows
    # them as two paragraphs
    found, _, credit = diagnosis.partition(" — ")
    assert " ".join(found.split()) in text
    assert " ".join(credit.split()) in text
    assert found not in journey["seen"][right].feedback_text


def _readable_by(hub, user: str, paths: list[Path]) -> dict[str, str]:
    """Which of ``paths`` ``user`` can open (files) or list (folders): path -> what happened."""
    code = ("import json, os, sys\nout = {}\n"
            "for p in json.loads(sys.argv[1]):\n"
            "    try:\n"
            "        os.listdir(p) if os.path.isdir(p) else open(p, 'rb').read(1)\n"
            "        out[p] = 'read'\n"
            "    except OSError as e:\n"
            "        out[p] = type(e).__name__\n"
            "print(json.dumps(out))")
    result = hub.run_as(user, [hub.settings().python, "-c", code,
                               json.dumps([str(p) for p in paths])], timeout=60)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_a_learner_cannot_read_a_classmate_or_the_instructor(journey):
    hub, course = journey["hub"], journey["course"]
    right, partly_wrong = hub.learners
    exchange = hub.class_dir / "exchange" / "mha-course"
    submission = sorted((exchange / "inbound").glob(f"{right}+{ASSIGNMENT}+*"))
    released_feedback = sorted((exchange / "feedback").glob("*.html"))
    assert submission and len(released_feedback) == 2
    classmate = [
        exchange / "inbound",  # the exchange: nobody lists the submissions ...
        exchange / "feedback",  # ... or the returned feedback
        *[p for p in submission[0].rglob("*") if p.is_file()],  # even knowing the path
        hub.home(right) / ASSIGNMENT / f"{NOTEBOOK}.ipynb",  # the classmate's own files
        *(hub.home(right) / ASSIGNMENT / "feedback").glob(f"*/{NOTEBOOK}.html"),
    ]
    instructor = [
        course / "source" / ASSIGNMENT / f"{NOTEBOOK}.ipynb",  # solutions, hidden tests
        course / "gradebook.db",
        course / "submitted" / right / ASSIGNMENT / f"{NOTEBOOK}.ipynb",
        course / "feedback" / right / ASSIGNMENT / f"{NOTEBOOK}.html",
        course / "exports" / f"{ASSIGNMENT}.csv",
    ]
    seen = _readable_by(hub, partly_wrong, classmate + instructor)
    assert all(what == "PermissionError" for what in seen.values()), seen
    # What the exchange hands out to everyone holds no solutions and no hidden tests.
    released = (exchange / "outbound" / ASSIGNMENT / f"{NOTEBOOK}.ipynb").read_text()
    assert "BEGIN SOLUTION" not in released and "BEGIN HIDDEN TESTS" not in released
    # Fetching feedback through the exchange gave each learner their own page only.
    assert (journey["seen"][right].totals != journey["seen"][partly_wrong].totals)
    # The instructor's group, not the learners, owns what was submitted.
    assert _readable_by(hub, hub.instructor, submission)[str(submission[0])] == "read"


def test_the_formgrader_is_the_instructors_only(journey, hub_browser):
    hub = journey["hub"]
    _context, learner_page = journey["contexts"][hub.learners[0]]
    response = learner_page.goto(f"{hub.url}/user/{hub.learners[0]}/formgrader")
    assert response.status == 404
    context = hub_browser.new_context()
    try:
        page = context.new_page()
        hub_pages.log_in(page, hub.url, hub.instructor, hub.passwords[hub.instructor])
        page.goto(f"{hub.url}/user/{hub.instructor}/formgrader")
        names = page.locator("#main-table td.name")
        names.first.wait_for(timeout=60_000)
        assert ASSIGNMENT in names.all_inner_texts()
    finally:
        context.close()
