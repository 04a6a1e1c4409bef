"""Format benchmark rows as Markdown tables, one per case."""

from __future__ import annotations

from mhalib.bench.runner import Row

HEADER = ("implementation", "median ms", "peak MiB", "TFLOP/s", "x SDPA", "x nn.MHA", "max |diff|")


def format_rows(rows: list[Row]) -> str:
    """One table per (suite, case), in the order the cases were run."""
    blocks = []
    groups: dict[tuple, list[Row]] = {}
    for row in rows:
        groups.setdefault((row.suite, row.case), []).append(row)
    for (suite, case), group in groups.items():
        title = f"### {suite}: {case.describe()}"
        blocks.append(title + "\n\n" + _table(group))
    return "\n\n".join(blocks) + "\n"


def _table(rows: list[Row]) -> str:
    body = [HEADER]
    notes = []
    for row in rows:
        if row.seconds is None:
            body.append((row.impl, "-", "-", "-", "-", "-", "-"))
            notes.append(f"- {row.impl}: {row.note}")
            continue
        if row.note:
            notes.append(f"- {row.impl}: {row.note}")
        check = _num(row.max_abs_diff, "{:.1e}") + ("" if row.ok else " MISMATCH")
        body.append(
            (
                row.impl,
                f"{row.seconds * 1e3:.1f}",
                _num(None if row.peak_bytes is None else row.peak_bytes / 2**20, "{:.1f}"),
                _num(row.tflops_per_s, "{:.3f}"),
                _num(row.vs_sdpa, "{:.2f}"),
                _num(row.vs_torch_module, "{:.2f}"),
                check,
            )
        )
    widths = [max(len(line[i]) for line in body) for i in range(len(HEADER))]
    lines = [_line(body[0], widths), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    lines += [_line(line, widths) for line in body[1:]]
    return "\n".join(lines + ([""] + notes if notes else []))


def _line(cells, widths) -> str:
    return "| " + " | ".join(cell.ljust(width) for cell, width in zip(cells, widths)) + " |"


def _num(value, fmt: str) -> str:
    return "-" if value is None else fmt.format(value)
