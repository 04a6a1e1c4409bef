"""Which attention weights did a head score average? Read back from one coded case (issue 22).

``previous_token_score`` and ``induction_score`` average some entries of ``weights (H, N, N)``.
In the coded case entry ``(i, j)`` of head 0 holds ``2 ** (i * N + j - OFFSET)`` (head 1 the
same code counted from the other end): a sum of distinct entries is exact in float64 and its
binary digits say which entries were summed (a score computed in float32 keeps its larger
digits: each entry is read in the head whose code for it is large).
The learner's score times a divisor m is such a sum when m is the count it divided by, so the
smallest m whose sums name the same entries in both heads reads back both the entries the code
averaged and what it divided by; compared with the contract's entries that names the slip:
another offset from the diagonal, another range of queries, a whole block instead of a
diagonal, transposed indices, or the right entries divided by another count.
"""

from __future__ import annotations

import numpy as np

OFFSET = 40  # keeps every coded weight below 1
FLOAT32_ROUNDING = 2.0 ** -20  # a float32 score's relative error, with room for its sum
CODED_LABEL = "float64, weights coded by position (two heads, N = 6)"


def coded_weights(n: int) -> np.ndarray:
    """(2, N, N) float64: head 0's entry (i, j) is 2 ** (k - OFFSET) with k = i * N + j, head
    1's the same with k counted from the other end (N * N <= 48). Two codes: a set of entries
    that explains both scores is no coincidence of one sum's digits."""
    if n * n > 48:
        raise ValueError(f"n={n} is too large for exact coding (n * n must be <= 48)")
    codes = np.arange(n * n, dtype=np.float64).reshape(n, n)
    return np.exp2(np.stack([codes, n * n - 1 - codes]) - OFFSET)


def _entries(score: float, m: int, n: int) -> list[int] | None:
    """The codes summed into ``score * m``, or None when that is not an exact sum of codes."""
    total = score * m * 2.0 ** OFFSET
    whole = round(total)
    if whole <= 0 or whole >= 2 ** (n * n) or abs(total - whole) > 1e-6 * total:
        return None
    return [k for k in range(n * n) if (whole >> k) & 1]


def _rounded_entries(score: float, m: int, n: int) -> tuple[set, int] | None:
    """``(codes, lowest)``: the codes summed into ``score * m`` when the score was computed in
    float32 (a learner's code often is, and casts back): read only down to code ``lowest``,
    above what float32's rounding can reach; or None."""
    total = score * m * 2.0 ** OFFSET
    if not np.isfinite(total) or total <= 0 or total >= 2.0 ** (n * n):
        return None
    lowest = max(0, int(np.ceil(np.log2(8 * total * FLOAT32_ROUNDING))))
    whole = round(total / 2.0 ** lowest)
    return {k + lowest for k in range(n * n - lowest) if (whole >> k) & 1}, lowest


def _read_rounded(scores, m: int, n: int) -> set | None:
    """The entries both heads' rounded sums agree on, or None: each code
    is read in the head where it is large enough to survive the rounding, and every code one
    head reads must not be missing where the other head reads it too."""
    first, second = _rounded_entries(scores[0], m, n), _rounded_entries(scores[1], m, n)
    if first is None or second is None:
        return None
    (codes, low), (mirrored, low_mirrored) = first, second
    highest = n * n - 1 - low_mirrored  # head 1 reads head 0's codes up to this one
    if low > highest + 1:
        return None  # some codes are below the rounding in both heads
    entries = codes | {n * n - 1 - k for k in mirrored}
    for k in entries:
        if (k >= low and k not in codes) or (k <= highest and n * n - 1 - k not in mirrored):
            return None
    for score, own in ((scores[0], entries), (scores[1], {n * n - 1 - k for k in entries})):
        mean = sum(2.0 ** (k - OFFSET) for k in own) / m  # (both scores, within the rounding)
        if abs(score - mean) > 4 * FLOAT32_ROUNDING * mean:
            return None
    return {(k // n, k % n) for k in entries}


def read_positions(scores, n: int, exact: bool = True) -> tuple[set, int] | None:
    """``(entries, divisor)`` such that each head's score is the sum of its coded entries over
    ``divisor``, the same entries for both heads; or None. Two reads can fit exactly (a row
    of six over 7 is also two entries over 2): one in a shape code has (a diagonal over one
    run of queries, a block) is taken before a scatter of entries, which only an exact mean
    of its own entries may give. Scores computed in float32 (not ``exact``) are read in shape
    only."""
    if len(scores) != 2 or not all(np.isfinite(s) and s > 0 for s in scores):
        return None
    exact = list(_exact_reads(scores, n)) if exact else []
    shaped = next((read for read in exact if _in_shape(read[0], n)), None)
    if shaped is not None:
        return shaped
    for m in range(1, n * n + 1):  # a score computed in float32, read in shape only
        entries = _read_rounded(scores, m, n)
        if entries is not None and len(entries) == m and _in_shape(entries, n):
            return entries, m
    # a scatter of entries only as an exact mean of its own entries
    return exact[0] if exact and len(exact[0][0]) == exact[0][1] else None


def _exact_reads(scores, n: int):
    """``(entries, m)`` read exactly (float64): means over their own entries first, then over
    another divisor (larger, or smaller: a sum divided by a count of something else, round
    Y's H - 1 heads where N - 1 queries belong)."""
    for exact in (True, False):
        for m in range(1, n * n + 1):
            first, second = _entries(scores[0], m, n), _entries(scores[1], m, n)
            if first is None or second is None or len(first) != len(second):
                continue
            if sorted(first) != sorted(n * n - 1 - k for k in second):
                continue
            if len(first) == m if exact else len(first) != m:
                yield {(k // n, k % n) for k in first}, m


def _in_shape(entries: set, n: int) -> bool:
    rows = sorted({i for i, _ in entries})
    return _shaped(entries, n) is not None and rows == list(range(rows[0], rows[-1] + 1))


def _say(entries: set, n: int = 0) -> str:
    """Entries in words: one diagonal over a range of queries, a block, or a list."""
    if not entries:
        return "no entries"
    shaped = _shaped(entries, n)
    if shaped is not None:
        return shaped
    listed = ", ".join(f"({i}, {j})" for i, j in sorted(entries)[:6])
    return f"the entries {listed}{' ...' if len(entries) > 6 else ''}"


def _shaped(entries: set, n: int = 0) -> str | None:
    """Entries in words when they form one diagonal over a range of queries (wrapping around
    or not) or a whole block; else None."""
    offsets = {j - i for i, j in entries}
    rows = sorted({i for i, _ in entries})
    cols = sorted({j for _, j in entries})
    if len(offsets) == 1 and len(rows) == len(entries):
        k = offsets.pop()
        key = "i" if k == 0 else f"i {'+' if k > 0 else '-'} {abs(k)}"
        return f"key {key} for queries i = {rows[0]}..{rows[-1]}"
    wrapped = {(j - i) % n for i, j in entries} if n else set()
    if len(wrapped) == 1 and len(rows) == len(entries):
        k = wrapped.pop() - n
        return (f"key i - {abs(k)} for queries i = {rows[0]}..{rows[-1]}, where i - {abs(k)} < 0 "
                "wraps around to the last keys (a negative index counts from the end)")
    if len(entries) == len(rows) * len(cols) and rows == list(range(rows[0], rows[-1] + 1)) \
            and cols == list(range(cols[0], cols[-1] + 1)):
        return (f"the whole block of queries {rows[0]}..{rows[-1]} x keys {cols[0]}..{cols[-1]}, "
                "every entry, not one key per query")
    return None


def diagnose_positions(right: set, scores, n: int, exact: bool = True) -> tuple[str, str] | None:
    read = read_positions(scores, n, exact)
    if read is None:
        return None
    entries, divisor = read
    if entries == right and divisor == len(right):
        return None
    if entries == right:
        return ("readback:divisor", f"read back from your output, the score sums the right "
                f"weights ({_say(right)}) but divides by {divisor} instead of {len(right)}, "
                "their number: average over exactly those queries")
    transposed = {(j, i) for i, j in right}
    if entries == transposed:
        return ("readback:entries", "read back from your output, the score averages "
                f"weights[h, j, i] where the contract has weights[h, i, j] ({_say(right)}): "
                "the first index is the query, the second the key")
    extra = "" if divisor == len(entries) else f", divided by {divisor}"
    return ("readback:entries", f"read back from your output, the score averages "
            f"{_say(entries, n)}{extra}; the contract averages {_say(right)}")


def _scores(output) -> list[float] | None:
    if isinstance(output, np.ndarray) and output.shape == (2,) and output.dtype in (
            np.float64, np.float32):  # (float32: a score cast with .float(), read in shape)
        return [float(v) for v in output]
    return None


def previous_token_readback(exercise, case, output):
    if case.label != CODED_LABEL or _scores(output) is None:
        return None
    n = case.args[0].shape[-1]
    return diagnose_positions({(i, i - 1) for i in range(1, n)}, _scores(output), n,
                              output.dtype == np.float64)


def induction_readback(exercise, case, output):
    if case.label != CODED_LABEL or _scores(output) is None:
        return None
    n = case.args[0].shape[-1]
    period = int(case.kwargs.get("period", case.args[1] if len(case.args) > 1 else 0))
    right = {(i, i - period + 1) for i in range(period, 2 * period)}
    return diagnose_positions(right, _scores(output), n, output.dtype == np.float64)


READERS = {"previous_token_score": previous_token_readback,
           "induction_score": induction_readback}
