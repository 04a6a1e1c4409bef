"""The ledger: the ladder climbed one hint at a time, recorded only in an assessed release, and
taken back from the saved notebook by a new kernel."""

from __future__ import annotations

import pytest

from mhalib.hints import ladder
from mhalib.hints.ledger import HintLedger, current
from mhalib.hints.record import bundle
from tests.hints.conftest import release, save_notebook


def test_each_take_gives_the_next_hint_then_the_last_again():
    ledger = HintLedger()
    rungs = ladder("attention")
    taken = [ledger.take("attention") for _ in range(len(rungs) + 2)]
    assert [number for number, _ in taken] == [1, 2, 3, 4, 4, 4]
    assert [text for _, text in taken[:4]] == list(rungs)
    assert ledger.seen == {"attention": 4} and ledger.next_rung("attention") == 4


def test_a_seen_hint_can_be_read_again_but_none_can_be_skipped():
    ledger = HintLedger()
    ledger.take("softmax")
    assert ledger.take("softmax", 1) == (1, ladder("softmax")[0])
    assert ledger.take("softmax", 2)[0] == 2 and ledger.seen == {"softmax": 2}
    assert ledger.take("softmax", 1)[0] == 1 and ledger.seen == {"softmax": 2}
    for bad in (4, 0, "2", True, 2.0):
        with pytest.raises(ValueError, match=f"rung={bad!r}: softmax has hints 1 to 4, and you "
                                             r"can read hints 1 to 3 now"):
            ledger.take("softmax", bad)
    with pytest.raises(ValueError, match=r"rung=2: .* you can read hint 1 now"):
        HintLedger().take("softmax", 2)


def test_the_record_lists_every_exercise_seen_with_its_total():
    ledger = HintLedger(recording=True)
    ledger.take("attention")
    ledger.take("split_heads")
    assert ledger.record() == bundle({"attention": 1, "split_heads": 1},
                                     {"attention": 4, "split_heads": 3})


def test_practice_and_no_release_do_not_record(lesson_folder):
    assert not current().recording
    release(lesson_folder, "practice")
    assert not current().recording


def test_an_assessed_release_records(lesson_folder):
    release(lesson_folder, "assessed")
    assert current().recording
    assert current() is current()  # one ledger per kernel


def test_without_a_release_file_the_notebook_metadata_says_assessed(lesson_folder, monkeypatch):
    save_notebook(lesson_folder, monkeypatch, [], {"mhalib": {"quick_checks": "assessed"}})
    assert current().recording
    save_notebook(lesson_folder, monkeypatch, [], {"mhalib": {"quick_checks": "practice"}})
    assert not current().recording


def test_a_new_kernel_starts_from_the_saved_counts(lesson_folder, monkeypatch):
    release(lesson_folder, "assessed")
    saved = bundle({"attention": 2, "not_an_exercise": 3}, {})
    save_notebook(lesson_folder, monkeypatch, [{"cell_type": "code", "metadata": {}, "outputs": [
        {"output_type": "display_data", "data": saved, "metadata": {}}]}])
    ledger = current()
    assert ledger.recording and ledger.seen == {"attention": 2}
    assert ledger.take("attention")[0] == 3
