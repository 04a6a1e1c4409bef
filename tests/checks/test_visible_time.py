"""The visible suite's time limit for the judge (mhalib.checks.judge.VISIBLE_JUDGE_S): what has
not answered by then is skipped, so a learner waits a bounded time; the grading suite has no
limit. The rest of the suite lifts the limit (tests/conftest.py), so that what it checks does
not depend on the machine's load; these tests set it."""

from mhalib.checks import judge
from tests.checks import lesson_harness as h
from tests.checks.answers import lesson07 as answers


def test_no_time_left_gives_the_plain_failure_and_the_grading_suite_still_names(monkeypatch):
    monkeypatch.setenv(judge.VISIBLE_JUDGE_VARIABLE, "0")
    quick = h.verdict_of("online_softmax_attention", answers.no_rescale, seed=0,
                         suite="visible")
    assert not quick.passed and quick.flags == []  # no model asked, no reading tried
    assert "wrong result on the case" in quick.diagnosis
    graded = h.verdict_of("online_softmax_attention", answers.no_rescale, seed=0)
    assert "mistake:no_rescale" in graded.flags


def test_with_time_the_visible_suite_names_the_same_answer(monkeypatch):
    monkeypatch.setenv(judge.VISIBLE_JUDGE_VARIABLE, "10")
    verdict = h.verdict_of("online_softmax_attention", answers.no_rescale, seed=0,
                           suite="visible")
    assert "mistake:no_rescale" in verdict.flags


def test_a_model_is_skipped_when_the_slowest_so_far_would_run_past_the_limit(monkeypatch):
    now = [0.0]
    monkeypatch.setattr(judge.time, "perf_counter", lambda: now[0])

    def slow(*_):
        now[0] += 0.1
        return False

    clock = judge._Clock(until=0.25)
    assert not clock.late()
    clock.timed(slow)  # 0.1 s: the next would end at 0.2, within the limit
    assert not clock.late()
    clock.timed(slow)  # at 0.2 s, a third would end at 0.3
    assert clock.late()
    assert not judge._Clock(until=None).late()


def test_a_limit_that_is_not_a_number_falls_back_to_the_default(monkeypatch):
    monkeypatch.setenv(judge.VISIBLE_JUDGE_VARIABLE, "soon")
    assert judge._visible_judge_s() == judge.VISIBLE_JUDGE_S
    monkeypatch.setenv(judge.VISIBLE_JUDGE_VARIABLE, "1e9")
    assert judge._visible_judge_s() == 10.0
