"""Multiple choice across the course: the right option must not give itself away by its length.

If option lengths carried no information, the right option would be the longest of k options
about 1/k of the time, and its length rank would be uniform. The bank must not do worse than
that: the right option is the longest at most as often as chance would make it (rounded up),
and on average it sits no higher than the middle of its question's lengths.
"""

from __future__ import annotations

import math

from mhalib.quiz.question import MultipleChoice
from tests.quiz.banks import all_items

CHOICES = [(qid, question, key) for _, qid, question, key, _ in all_items()
           if isinstance(question, MultipleChoice)]


def _rank(lengths: list[int], index: int) -> float:
    """0 for the shortest option, 1 for the longest (ties share the middle)."""
    below = sum(length < lengths[index] for length in lengths)
    ties = sum(length == lengths[index] for length in lengths) - 1
    return (below + ties / 2) / (len(lengths) - 1)


def test_there_are_enough_questions_to_measure():
    assert len(CHOICES) >= 10


def test_right_option_is_not_the_longest_more_often_than_chance():
    longest = [qid for qid, q, key in CHOICES
               if len(q.options[key.answer]) >= max(len(o) for o in q.options)]
    expected = sum(1 / len(q.options) for _, q, _ in CHOICES)
    assert len(longest) <= math.ceil(expected), (
        f"the right option is the longest in {len(longest)} of {len(CHOICES)} questions "
        f"(chance: {expected:.1f}): {longest}")


def test_right_option_length_rank_is_not_above_the_middle():
    ranks = [_rank([len(o) for o in q.options], key.answer) for _, q, key in CHOICES]
    assert sum(ranks) / len(ranks) <= 0.5 + 0.1, f"mean rank {sum(ranks) / len(ranks):.2f}"
