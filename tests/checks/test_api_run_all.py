"""``needs`` (demo cells) and how a failed check is shown: what lets Run All reach the end."""

from __future__ import annotations

import pytest

from mhalib.checks import CheckFailed, check
from mhalib.checks.api import needs
from mhalib.checks.report import as_text


def split_heads(x, num_heads):
    # YOUR CODE HERE
    raise NotImplementedError()


def multi_head_attention(x):
    return split_heads(x, 2)


def test_needs_says_in_one_line_which_exercise_is_unwritten(capsys):
    with needs(multi_head_attention):
        multi_head_attention(1)
        raise AssertionError("not reached")
    said = capsys.readouterr().out.strip()
    assert said.startswith("This cell runs your `split_heads`, which is not written yet")
    assert len(said.splitlines()) == 1


def test_needs_lets_other_errors_through():
    def unrelated():
        raise NotImplementedError("torch has no kernel for this")

    with pytest.raises(NotImplementedError, match="no kernel"), needs(multi_head_attention):
        unrelated()
    with pytest.raises(ValueError), needs(multi_head_attention):
        raise ValueError("a real bug")


def test_an_unwritten_exercise_gets_a_one_line_verdict():
    with pytest.raises(CheckFailed) as failure:
        check("split_heads", split_heads, quiet=True)
    assert "not written yet" in str(failure.value)


def test_outside_a_kernel_a_failed_check_raises_with_its_report(capsys):
    with pytest.raises(CheckFailed) as failure:
        check("split_heads", split_heads)
    report = failure.value.report
    assert report.startswith("NOT YET -- split_heads is not written yet")
    assert len(report.splitlines()) == 1
    rendered = failure.value._render_traceback_()
    assert len(rendered) == 1 and "split_heads is not written yet" in rendered[0]


def test_a_report_lists_the_details_of_a_wrong_answer():
    from mhalib.checks.verdict import Verdict

    verdict = Verdict("f", False, 0.0, "f: forgot the scale", details=["case 1: off by 2"],
                      cases_total=3, cases_passed=1)
    assert as_text(verdict).splitlines() == ["NOT YET -- f: forgot the scale",
                                            "1 of 3 checks passed.", "  - case 1: off by 2"]
