"""The sentence audit (tests/checks/heldout/sentence_audit.py): the key's single edits run as
learners' answers, grouped by the mistake model or reading that named them."""

from tests.checks.heldout.sentence_audit import audit, groups, show


def test_the_keys_edits_are_grouped_by_what_named_them():
    found = audit("crossover_seq_len")
    assert found and all(set(item) == {"mutant", "flags", "diagnosis"} for item in found)
    grouped = groups({"crossover_seq_len": found})
    named = {flags for _, flags in grouped}
    assert ("mistake:crossover_d_model",) in named  # `2 * d_model` computed as `d_model`
    assert not any(f.startswith("mutant:") for flags in named for f in flags)
    said = show({"crossover_seq_len": found}, {"crossover_seq_len"})
    assert "computed as `positive_int('d_model', d_model)`" in said
