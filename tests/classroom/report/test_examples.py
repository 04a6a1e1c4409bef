"""Anonymised examples: no comments, docstrings or student ids, short, distinct, stable."""

from __future__ import annotations

from mhalib.classroom.report.examples import MAX_LINES, PLACEHOLDER, anonymise, pick_examples

ANSWER = '''def attention(q, k, v):
    """Ada Lovelace's attention (ada-correct)."""
    # TODO ask ada-correct's tutor
    scores = q @ k.T   # no scale yet, ada-correct
    label = "ada-correct"
    w = np.exp(scores)
    return w @ v, w
'''


def test_comments_docstrings_and_the_id_are_gone():
    text = anonymise(ANSWER, "ada-correct")
    assert "TODO" not in text and "#" not in text and "Lovelace" not in text
    assert "ada-correct" not in text.lower()
    assert f"label = '{PLACEHOLDER}'" in text
    assert text.splitlines()[0] == "def attention(q, k, v):"
    assert "scores = q @ k.T" in text


def test_code_that_does_not_parse_keeps_its_lines_without_comments():
    text = anonymise("def f(x:\n    return x  # by bert\n# bert was here\n", "bert")
    assert text == "def f(x:\n    return x"


def test_long_answers_are_cut():
    source = "def f(x):\n" + "".join(f"    x = x + {i}\n" for i in range(40)) + "    return x\n"
    lines = anonymise(source, "s").splitlines()
    assert len(lines) == MAX_LINES + 1 and lines[-1].startswith("# ... ")


def test_two_distinct_shortest_examples_in_a_stable_order():
    long = "def f(x):\n    y = x\n    return y\n"
    short = "def f(x):\n    return x\n"
    same_as_short = "def f(x):\n    return x  # mine\n"
    candidates = [("S003", "c", long), ("S002", "b", same_as_short), ("S001", "a", short)]
    assert pick_examples(candidates) == [anonymise(short, "a"), anonymise(long, "c")]
    assert pick_examples(list(reversed(candidates))) == pick_examples(candidates)
    assert pick_examples([("S1", "a", "")]) == []


def test_the_exercise_function_is_kept_from_a_busy_cell():
    cell = "import numpy as np\nHELPER = 3\n\ndef softmax(x, axis=-1):\n    return x\n\nprint(1)\n"
    assert anonymise(cell, "st", focus="softmax") == (  # a 2-character id is left alone
        "def softmax(x, axis=-1):\n    return x\n# + 3 other statement(s) in the cell")
    assert anonymise("def softmax(x):\n    return x\n", "ret", focus="softmax") == \
        "def softmax(x):\n    return x"
    assert anonymise(cell, "numpy", focus="attention").startswith("import <student> as np")


def test_scrub_replaces_the_id_as_a_token_only():
    from mhalib.classroom.report.examples import scrub

    text = "ann: see /home/ann/x.py, annotated by Ann"
    assert scrub(text, "ann") == "<student>: see /home/<student>/x.py, annotated by <student>"
    assert scrub(text, "an") == text
