"""Multiple choice across the course: the right option must not give itself away, by its length
or by its place in the bank.

If option lengths carried no information, the right option would be the longest of k options
about 1/k of the time, and its length rank would be uniform. The bank must not do worse than
that: the right option is the longest at most as often as chance would make it (rounded up), at
least half as often (rounded down, and at least once: "never the longest" is a tell too), and on
average it sits no higher than the middle of its question's lengths.

Options are shown shuffled per learner, but the bank's own order ships in the package (and is
what a learner sees where shuffling is off). Over the course the right option must sit at each
position about as often as chance would put it there: no position holds more than its fair share
plus a small margin, so "always pick the option at position p" scores at most chance plus that
margin.
"""

from __future__ import annotations

import math
from collections import Counter

from mhalib.quiz.question import MultipleChoice
from tests.quiz.banks import all_items

CHOICES = [(qid, question, key) for _, qid, question, key, _ in all_items()
           if isinstance(question, MultipleChoice)]


def _rank(lengths: list[int], index: int) -> float:
    """0 for the shortest option, 1 for the longest (ties share the middle)."""
    below = sum(length < lengths[index] for length in lengths)
    ties = sum(length == lengths[index] for length in lengths) - 1
    return (below + ties / 2) / (len(lengths) - 1)


def _longest() -> list[str]:
    return [qid for qid, q, key in CHOICES
            if len(q.options[key.answer]) >= max(len(o) for o in q.options)]


def _margin() -> int:
    """The slack allowed over a fair share: 10% of the questions, and at least 2."""
    return max(2, math.ceil(0.1 * len(CHOICES)))


def test_there_are_enough_questions_to_measure():
    assert len(CHOICES) >= 10


def test_right_option_is_not_the_longest_more_often_than_chance():
    longest = _longest()
    expected = sum(1 / len(q.options) for _, q, _ in CHOICES)
    assert len(longest) <= math.ceil(expected), (
        f"the right option is the longest in {len(longest)} of {len(CHOICES)} questions "
        f"(chance: {expected:.1f}): {longest}")


def test_right_option_is_not_never_the_longest():
    longest = _longest()
    expected = sum(1 / len(q.options) for _, q, _ in CHOICES)
    floor = max(1, math.floor(expected / 2))
    assert len(longest) >= floor, (
        f"the right option is the longest in only {len(longest)} of {len(CHOICES)} questions "
        f"(chance: {expected:.1f}, at least {floor} wanted): shortness gives it away")


def test_right_option_length_rank_is_not_above_the_middle():
    ranks = [_rank([len(o) for o in q.options], key.answer) for _, q, key in CHOICES]
    assert sum(ranks) / len(ranks) <= 0.5 + 0.1, f"mean rank {sum(ranks) / len(ranks):.2f}"


def test_right_option_position_is_spread_over_the_bank():
    counts = Counter(key.answer for _, _, key in CHOICES)
    widest = max(len(q.options) for _, q, _ in CHOICES)
    for position in range(widest):
        fair = sum(1 / len(q.options) for _, q, _ in CHOICES if position < len(q.options))
        assert counts[position] <= fair + _margin(), (
            f"the right option sits at position {position} in {counts[position]} of "
            f"{len(CHOICES)} questions (fair share {fair:.1f}, margin {_margin()}): "
            f"{dict(sorted(counts.items()))}")


def test_always_picking_one_position_scores_no_better_than_chance():
    chance = sum(1 / len(q.options) for _, q, _ in CHOICES) / len(CHOICES)
    widest = max(len(q.options) for _, q, _ in CHOICES)
    for position in range(widest):
        score = sum(key.answer == position for _, _, key in CHOICES) / len(CHOICES)
        assert score <= chance + _margin() / len(CHOICES), (
            f"always answering the option at position {position} scores {score:.0%} "
            f"(chance {chance:.0%})")


def test_no_length_rank_holds_the_right_option_more_than_its_fair_share():
    """"Always pick the second- (third-, ...) longest option" scores at most chance plus two
    questions: the rank is the number of options strictly longer than the right one."""
    held = Counter(sum(len(o) > len(q.options[key.answer]) for o in q.options)
                   for _, q, key in CHOICES)
    for rank, count in sorted(held.items()):
        fair = sum(1 / len(q.options) for _, q, _ in CHOICES if rank < len(q.options))
        assert count <= fair + 2, (
            f"the right option has exactly {rank} longer option(s) in {count} of "
            f"{len(CHOICES)} questions (chance: {fair:.1f})")
