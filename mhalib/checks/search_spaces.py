"""Search spaces of the count exercises (issue 22): the answer key with one factor changed.

A count (FLOPs, parameters, bytes, an intensity) is a product of the case's sizes and a few
constants. Its single-step alternatives are the same count with one factor dropped or one too
many: one of the case's int arguments (``num_layers``, ``batch_size``, ``num_heads``,
``bytes_per_element``...), the constant 2 (keys and values, a multiply-add), 8 (bits) or
2**20 / 10**6 (MiB against MB). For a dict of counts (``{"scores": ..., "output": ...}``) the
factor may change one entry or all of them.

Each change is a :class:`~mhalib.checks.search.Change` whose ``compute(case)`` scales the answer
key's output (shape: an int/float, or a dict of them); its message names the argument and its
value in the case, in the words of :data:`ARGUMENT_WORDS`. The judge evaluates them only on
failing cases (see :func:`mhalib.checks.search.search_changes`).
"""

from __future__ import annotations

from fractions import Fraction

from mhalib.checks.search import Change

# what a size in a count stands for, for the message ("a factor of num_layers=...: ...")
ARGUMENT_WORDS = {
    "num_layers": "every layer keeps (or computes) its own copy",
    "batch_size": "every sequence of the batch counts",
    "num_heads": "every query head counts",
    "num_kv_heads": "every K/V head counts (query heads of a group share one)",
    "head_dim": "each head's vectors have head_dim values",
    "bytes_per_element": "bytes, not elements: each element takes bytes_per_element bytes",
    "seq_len": "every token counts",
    "kv_lora_rank": "the latent holds kv_lora_rank values per token",
    "rope_head_dim": "the RoPE key holds rope_head_dim values per token",
}
CONSTANTS = (
    (2, "a factor 2"),
    (8, "a factor 8"),
)
# what a constant factor usually is, by what the exercise counts (a name part of the exercise)
CONSTANT_WORDS = {
    "flops": {2: "a multiply-add is 2 FLOPs"},
    "intensity": {2: "a multiply-add is 2 FLOPs, and the cache holds both keys and values"},
    "bytes": {2: "a cache holds both keys and values, or a 16-bit value's 2 bytes counted "
                 "again where bytes_per_element already holds them", 8: "bits instead of bytes"},
    "param": {2: "a coefficient of a term or a part counted twice, or the parameters' size in "
                 "bytes (2 bytes each in fp16 or bf16) where their number is asked"},
}


def _scaled(value, factor: Fraction, key=None):
    """``value`` (a number or a dict of numbers) times ``factor``; only ``value[key]`` when
    ``key`` is given."""
    def scale(v):
        out = v * factor.numerator / factor.denominator
        return int(out) if isinstance(v, int) and out == int(out) else out
    if isinstance(value, dict):
        return {k: (scale(v) if key is None or k == key else v) for k, v in value.items()}
    return scale(value)


def _factors(named: dict[str, int], exercise_name: str = "") -> list[tuple[str, str]]:
    """``(name, what it stands for)`` of each factor a count may miss or repeat: the case's
    int sizes above 1, then the constants (named by their value, and by what such a constant
    usually is in a count of this exercise's kind, or as a coefficient of a term)."""
    found = [(name, ARGUMENT_WORDS.get(name, f"the size {name}"))
             for name, value in named.items() if isinstance(value, int) and value > 1]
    usual = next((words for part, words in CONSTANT_WORDS.items() if part in exercise_name), {})
    return found + [(str(v), f"{words}: {usual[v]}" if v in usual else
                     f"{words} (a coefficient of a term, or a part counted twice or left out)")
                    for v, words in CONSTANTS]


def _value(exercise, case, name: str) -> int:
    from mhalib.checks.case_inputs import sizes

    return int(name) if name.isdigit() else sizes(exercise, case)[name]


def count_changes(exercise, case) -> list[Change]:
    """The single-factor changes of ``exercise``'s count, named from ``case``'s sizes (one per
    factor, direction and dict entry); each change reads the factor's value from the case it is
    evaluated on. Messages say which factor is missing or one too many."""
    from mhalib.checks.case_inputs import sizes

    right = exercise.expected(case)
    keys = [None, *right] if isinstance(right, dict) else [None]
    changes = []
    for name, words in _factors(sizes(exercise, case), exercise.name):
        for sign, power in (("missing", -1), ("one too many", 1)):
            for key in keys:
                where = f"the {key!r} count" if key is not None else "the count"
                size = "too small" if power < 0 else "too large"
                message = f"{where} is exactly {name} times {size}: {words}."
                if "intensity" in exercise.name:  # a ratio: either side may hold the slip
                    lost, twice = ("FLOPs", "bytes") if power < 0 else ("bytes", "FLOPs")
                    message = (f"the intensity (FLOPs / bytes) is exactly {name} times {size}: "
                               f"the {lost} leave {name} out, or the {twice} count it once too "
                               f"often ({words}).")

                def compute(c, name=name, power=power, key=key):
                    value = _value(exercise, c, name)
                    factor = Fraction(value) if power > 0 else Fraction(1, value)
                    return _scaled(exercise.expected(c), factor, key)
                changes.append(Change(f"{sign.replace(' ', '_')}:{name}"
                                      + (f"@{key}" if key else ""), message, compute))
    mib = Fraction(2**20, 10**6)
    for factor, text in ((mib, "MB (10**6 bytes) where MiB (2**20) is meant"),
                         (1 / mib, "MiB (2**20 bytes) where MB (10**6) is meant")):
        changes.append(Change(f"units:{factor}", f"the count is in {text}.",
                              lambda c, f=factor: _scaled(exercise.expected(c), f)))
    return changes


class CountSearch:
    """Mixin for a count exercise: ``search_space_for(case)`` gives :func:`count_changes`."""

    def search_space_for(self, case):
        return count_changes(self, case)
