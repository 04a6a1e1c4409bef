"""Showing hints: ``hint`` in a cell, the button under a failed check, the record beside them in
an assessed release, and the check that offers them."""

from __future__ import annotations

import pytest

from mhalib.checks import api
from mhalib.hints import hint, ladder
from mhalib.hints.ledger import HintLedger, current
from mhalib.hints.record import MIME
from mhalib.hints.show import HintButton, after_check
from tests.hints.conftest import release


def test_hint_shows_the_next_hint_each_time(lesson_folder, capsys):
    rungs = ladder("softmax")
    for number in range(1, len(rungs) + 2):
        hint("softmax")
        said = capsys.readouterr().out
        shown = min(number, len(rungs))
        assert said.startswith(f"Hint {shown} of {len(rungs)} for softmax: {rungs[shown - 1]}")
        last = "That was the last hint." in said
        assert last == (shown == len(rungs))
    hint("softmax", 2)
    assert capsys.readouterr().out.startswith(f"Hint 2 of {len(rungs)} for softmax")


def test_hint_without_a_name_lists_the_lessons_exercises(lesson_folder, capsys):
    hint("attention")
    hint()
    said = capsys.readouterr().out.splitlines()[-1]
    assert said == ('hint("name") shows the next hint of an exercise. Exercises with hints: '
                    "softmax (0 of 4 seen), attention (1 of 4 seen).")


def test_the_button_climbs_the_ladder_one_press_at_a_time():
    ledger = HintLedger()
    button = HintButton("split_heads", ledger)
    rungs = ladder("split_heads")
    assert button.button.description == "Show a hint (1 of 3)"
    assert "mhalib-hint-button" in button.button._dom_classes
    for number in (1, 2, 3):
        button.button.click()
        shown = [o["data"]["text/markdown"] for o in button.text.outputs]
        assert len(shown) == number and rungs[number - 1] in shown[-1]
        assert shown[-1].startswith(f"**Hint {number} of 3 for split_heads.**")
        assert "again shows" not in shown[-1]  # the button's label says what comes next
    assert button.button.description == "All 3 hints shown" and button.button.disabled
    assert ledger.seen == {"split_heads": 3}


def test_a_new_button_continues_where_the_learner_is(lesson_folder):
    hint("merge_heads")  # hint 1 seen, in another cell
    button = HintButton("merge_heads", current())
    assert button.button.description == "Show a hint (2 of 3)"
    button.press()  # shows hint 1 again for context, and hint 2
    assert [o["data"]["text/plain"][:6] for o in button.text.outputs] == ["Hint 1", "Hint 2"]
    hint("merge_heads")  # hint 3, elsewhere
    button.press()
    assert len(button.text.outputs) == 3 and button.button.disabled
    again = HintButton("merge_heads", current())
    assert again.button.description == "Show the 3 hints again"
    again.press()
    assert len(again.text.outputs) == 3 and current().seen == {"merge_heads": 3}


def records(outputs) -> list[dict]:
    return [o for o in outputs if MIME in o["data"]]


def test_practice_shows_the_button_and_no_record(lesson_folder, shell_outputs):
    release(lesson_folder, "practice")
    after_check("attention", passed=False)
    assert len(shell_outputs) == 1
    assert "application/vnd.jupyter.widget-view+json" in shell_outputs[0]["data"]
    assert records(shell_outputs) == []
    after_check("attention", passed=True)
    assert len(shell_outputs) == 1


def test_an_assessed_release_keeps_one_record_up_to_date(lesson_folder, shell_outputs):
    release(lesson_folder, "assessed")
    after_check("attention", passed=False)  # the button, and the record under it
    [record] = records(shell_outputs)
    display_id = record["transient"]["display_id"]
    assert record["data"][MIME]["hints"] == {} and not record["update"]

    button = HintButton("attention", current())
    button.press()  # a press updates every record of the kernel in place
    update = records(shell_outputs)[-1]
    assert update["update"] and update["transient"]["display_id"] == display_id
    assert update["data"][MIME]["hints"] == {"attention": 1}
    assert "attention 1 of 4" in update["data"]["text/plain"]

    hint("attention")  # the hint, then the record updated and shown once more here
    hinted = [o for o in shell_outputs if "text/markdown" in o["data"]]
    assert hinted[-1]["data"]["text/markdown"].startswith("**Hint 2 of 4 for attention.**")
    assert [r["data"][MIME]["hints"] for r in records(shell_outputs)[-2:]] == [
        {"attention": 2}, {"attention": 2}]

    shell_outputs.clear()
    after_check("attention", passed=True)  # a pass after hints shows the record again
    [again] = records(shell_outputs)
    assert again["data"][MIME]["hints"] == {"attention": 2} and not again["update"]
    assert again["transient"]["display_id"] == display_id


def test_a_pass_before_any_hint_shows_nothing(lesson_folder, shell_outputs):
    release(lesson_folder, "assessed")
    after_check("attention", passed=True)
    assert shell_outputs == []


class FakeKernel:
    """What ``check`` sees of a Jupyter kernel: a shell that shows a traceback."""

    def __init__(self):
        self.shown = []

    def showtraceback(self, exc_tuple):
        self.shown.append(exc_tuple[1])


def unwritten_softmax(x, axis=-1):
    raise NotImplementedError()


@pytest.fixture
def offers(monkeypatch, lesson_folder):
    """The calls ``check`` makes to offer hints, in a (fake) kernel."""
    calls = []
    monkeypatch.setattr(api, "_kernel_shell", FakeKernel)
    monkeypatch.setattr("mhalib.hints.show.after_check", lambda *a: calls.append(a))
    return calls


def test_a_failed_check_in_a_kernel_offers_hints_under_its_verdict(offers):
    assert api.check("softmax", unwritten_softmax) is not None
    assert api.check("softmax", "not a function") is None
    assert offers == [("softmax", False), ("softmax", False)]


def test_a_passed_check_lets_the_record_follow(offers):
    import numpy as np

    def softmax(x, axis=-1):
        e = np.exp(x - np.max(x, axis=axis, keepdims=True))
        return e / np.sum(e, axis=axis, keepdims=True)

    api.check("softmax", softmax)
    assert offers == [("softmax", True)]


def test_no_hint_offer_under_nbgrader_or_outside_a_kernel(offers, monkeypatch):
    monkeypatch.setenv("NBGRADER_EXECUTION", "validate")
    api.check("softmax", unwritten_softmax)
    monkeypatch.delenv("NBGRADER_EXECUTION")
    monkeypatch.setattr(api, "_kernel_shell", lambda: None)
    with pytest.raises(api.CheckFailed):
        api.check("softmax", unwritten_softmax)
    assert offers == []
