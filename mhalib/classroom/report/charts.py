"""Accessible charts as inline SVG: horizontal bars and a histogram.

Each chart is an ``<svg role="img">`` whose ``<title>`` and ``<desc>`` (referenced by
``aria-labelledby``) say what it shows and list every value, so a screen reader reads the same
numbers the bars draw; the page also puts the numbers in a table next to it. Colours are from
the Okabe-Ito palette (distinguishable with the common colour-vision deficiencies) and never
the only cue: the highlighted bar (the key, the right answer) is also hatched and its label
says so, and every bar carries its value as text.

The charts are drawn directly (a few SVG elements each) rather than with matplotlib: a report
of 11 lessons has about a hundred of them, and matplotlib takes a tenth of a second or more per
figure, which would be most of the report's time budget.
"""

from __future__ import annotations

from html import escape

BLUE, ORANGE, GREY, INK = "#0072B2", "#E69F00", "#999999", "#222222"
FONT = "font-family:system-ui,sans-serif;font-size:12px"
LABEL_CHARS = 40  # about 260 px at 12 px: fits the 290 px label column


def _short(text: str, limit: int = LABEL_CHARS) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "\u2026"


def _frame(chart_id: str, width: int, height: int, title: str, description: str,
           body: list[str]) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" role="img" class="chart" '
            f'width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
            f'aria-labelledby="{chart_id}-t {chart_id}-d" style="{FONT}">'
            f'<title id="{chart_id}-t">{escape(title)}</title>'
            f'<desc id="{chart_id}-d">{escape(description)}</desc>'
            f'<defs><pattern id="{chart_id}-hatch" width="6" height="6" '
            f'patternUnits="userSpaceOnUse" patternTransform="rotate(45)">'
            f'<rect width="6" height="6" fill="{BLUE}"/>'
            f'<line x1="0" y1="0" x2="0" y2="6" stroke="#ffffff" stroke-width="2"/>'
            f'</pattern></defs>' + "".join(body) + "</svg>")


def bar_chart(chart_id: str, title: str, rows: list[tuple[str, int, bool]], total: int,
              unit: str = "students") -> str:
    """Horizontal bars: ``rows`` = [(label, count, highlighted)]; shares are of ``total``.
    Highlighted bars are blue and hatched, and their label ends with " (key)"."""
    label_width, bar_width, row_height, top = 290, 230, 24, 8
    height = top * 2 + row_height * max(1, len(rows))
    width = label_width + bar_width + 90
    largest = max([count for _, count, _ in rows] + [1])
    body, spoken = [], []
    for index, (label, count, highlighted) in enumerate(rows):
        y = top + index * row_height
        share = count / total if total else 0.0
        suffix = " (key)" if highlighted else ""
        shown = _short(label, LABEL_CHARS - len(suffix)) + suffix
        length = bar_width * count / largest
        fill = f"url(#{chart_id}-hatch)" if highlighted else ORANGE
        body.append(f'<text x="{label_width - 6}" y="{y + 16}" text-anchor="end" '
                    f'fill="{INK}">{escape(shown)}</text>')
        body.append(f'<rect x="{label_width}" y="{y + 4}" width="{length:.1f}" height="16" '
                    f'fill="{fill}" stroke="{INK if highlighted else "none"}"/>')
        body.append(f'<text x="{label_width + length + 5:.1f}" y="{y + 16}" fill="{INK}">'
                    f'{count} ({share:.0%})</text>')
        spoken.append(f"{label}{' (key)' if highlighted else ''}: {count} {unit} "
                      f"({share:.0%})")
    body.append(f'<line x1="{label_width}" y1="{top}" x2="{label_width}" '
                f'y2="{height - top}" stroke="{GREY}"/>')
    description = f"Out of {total} {unit}. " + "; ".join(spoken) + "."
    return _frame(chart_id, width, height, title, description, body)


def histogram(chart_id: str, title: str, bins: list[tuple[float, float, int]],
              unit: str = "students") -> str:
    """Vertical bars, one per bin ``(low, high, count)``, with the bin edges below."""
    left, bottom, top, plot_height = 40, 34, 10, 140
    bar = max(14, min(48, 520 // max(1, len(bins))))
    width = left + bar * len(bins) + 20
    height = top + plot_height + bottom
    largest = max([count for *_, count in bins] + [1])
    body = [f'<line x1="{left}" y1="{top + plot_height}" x2="{width - 10}" '
            f'y2="{top + plot_height}" stroke="{GREY}"/>',
            f'<text x="{left - 6}" y="{top + 10}" text-anchor="end" fill="{INK}">'
            f'{largest}</text>',
            f'<text x="{left - 6}" y="{top + plot_height}" text-anchor="end" fill="{INK}">0'
            f'</text>']
    spoken = []
    for index, (low, high, count) in enumerate(bins):
        x = left + index * bar
        h = plot_height * count / largest
        body.append(f'<rect x="{x + 1}" y="{top + plot_height - h:.1f}" width="{bar - 2}" '
                    f'height="{h:.1f}" fill="{BLUE}"/>')
        if count:
            body.append(f'<text x="{x + bar / 2:.1f}" y="{top + plot_height - h - 3:.1f}" '
                        f'text-anchor="middle" fill="{INK}">{count}</text>')
        body.append(f'<text x="{x:.1f}" y="{top + plot_height + 14}" text-anchor="middle" '
                    f'fill="{INK}">{low:g}</text>')
        last = index == len(bins) - 1
        spoken.append(f"{low:g} to {'' if last else 'under '}{high:g}: {count}")
    if bins:
        body.append(f'<text x="{left + bar * len(bins):.1f}" y="{top + plot_height + 14}" '
                    f'text-anchor="middle" fill="{INK}">{bins[-1][1]:g}</text>')
    body.append(f'<text x="{left + bar * len(bins) / 2:.1f}" y="{height - 4}" '
                f'text-anchor="middle" fill="{INK}">points</text>')
    description = f"Number of {unit} per range of points: " + "; ".join(spoken) + "."
    return _frame(chart_id, width, height, title, description, body)
