"""Charts: valid SVG, with text alternatives and a colour-blind-safe palette."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from mhalib.classroom.report.charts import BLUE, ORANGE, bar_chart, histogram

SVG = "{http://www.w3.org/2000/svg}"
OKABE_ITO = {"#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7",
             "#000000"}


def test_bar_chart_speaks_its_values_and_marks_the_key_without_colour():
    svg = bar_chart("c1", "Answers to qc_x", [("axis=0", 6, True), ("axis=-1", 3, False),
                                              ("whole <array>", 1, False)], 10)
    root = ET.fromstring(svg)
    assert root.get("role") == "img" and root.get("aria-labelledby") == "c1-t c1-d"
    assert root.find(f"{SVG}title").text == "Answers to qc_x"
    desc = root.find(f"{SVG}desc").text
    assert desc == ("Out of 10 students. axis=0 (key): 6 students (60%); axis=-1: 3 students "
                    "(30%); whole <array>: 1 students (10%).")
    texts = [t.text for t in root.iter(f"{SVG}text")]
    assert "axis=0 (key)" in texts and "6 (60%)" in texts  # the key is said, not only coloured
    fills = [r.get("fill") for r in root.iter(f"{SVG}rect")]
    assert "url(#c1-hatch)" in fills and ORANGE in fills  # hatched key, orange distractors
    widths = [float(r.get("width")) for r in root.iter(f"{SVG}rect") if r.get("height") == "16"]
    assert widths[0] == 2 * widths[1]  # bars proportional to counts


def test_histogram_lists_every_bin():
    svg = histogram("c2", "Scores", [(0, 1, 2), (1, 2, 0), (2, 3, 5)])
    root = ET.fromstring(svg)
    assert root.find(f"{SVG}desc").text == ("Number of students per range of points: 0 to "
                                            "under 1: 2; 1 to under 2: 0; 2 to 3: 5.")
    assert BLUE in [r.get("fill") for r in root.iter(f"{SVG}rect")]


def test_only_okabe_ito_colours():
    svg = bar_chart("c3", "t", [("a", 1, True), ("b", 2, False)], 3) + histogram(
        "c4", "t", [(0, 1, 1)])
    colours = set(re.findall(r'fill="(#[0-9A-Fa-f]{6})"', svg)) - {"#ffffff", "#222222"}
    assert colours <= OKABE_ITO, colours - OKABE_ITO
