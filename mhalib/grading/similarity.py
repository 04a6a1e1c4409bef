"""Which submissions look copied: shared quick-check seeds and near-identical answer cells.

Two signals, both read from the submitted notebooks (nothing is re-run), for an instructor to
read, never a score change:

- **a shared seed.** A learner without a known student id answers the per-learner quick checks
  under ``seed:<n>``, drawn once from 10^12 values; two students recording the same one almost
  certainly share one notebook.
- **near-identical answers.** The answer cells (nbgrader ``solution`` cells) are fingerprinted as
  MOSS does (Schleimer, Wilkerson and Aiken, SIGMOD 2003): Python tokens with comments, layout,
  names and string contents normalised away, hashed k-grams, winnowed; fingerprints that the
  released notebook's own cells already have are dropped, so the template never counts. The
  similarity of two notebooks is the share of the smaller one's fingerprints found in the
  other; pairs over ``threshold`` with at least ``min_fingerprints`` are listed.
"""

from __future__ import annotations

import csv
import hashlib
import html
import io
import json
import keyword
import tokenize
from dataclasses import asdict, dataclass, field
from itertools import combinations
from pathlib import Path

from mhalib.quiz.record import cell_grade_id, recorded_answers

K_GRAM = 8  # tokens per fingerprinted k-gram
WINDOW = 4  # winnowing window: any shared run of K_GRAM + WINDOW - 1 tokens is seen
THRESHOLD = 0.9
MIN_FINGERPRINTS = 20  # fewer is too little code to tell copying from the obvious answer


@dataclass
class Pair:
    students: tuple[str, str]
    notebook: str
    reason: str  # "shared_seed" or "similar_answers"
    similarity: float  # 1.0 for a shared seed
    detail: str


@dataclass
class SimilarityReport:
    assignment: str
    compared: int  # notebooks compared
    pairs: list[Pair] = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps({"assignment": self.assignment, "compared": self.compared,
                           "pairs": [asdict(p) for p in self.pairs]}, indent=1)


def _tokens(source: str) -> list[str]:
    """Normalised tokens of ``source``: names -> ``N`` (keywords and attributes kept: renaming a
    variable changes nothing, ``np.sum`` vs ``np.max`` still does), strings -> ``S``, no
    comments, no layout. Unparsable text falls back to whitespace-split words."""
    out: list[str] = []
    previous = ""
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT,
                              tokenize.DEDENT, tokenize.ENDMARKER):
                continue
            text = token.string
            if token.type == tokenize.NAME and not keyword.iskeyword(text) and previous != ".":
                text = "N"
            elif token.type == tokenize.STRING:
                text = "S"
            out.append(text)
            previous = token.string
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return source.split()
    return out


def fingerprints(source: str) -> set[int]:
    """Winnowed hashes of the k-grams of ``source``'s normalised tokens."""
    tokens = _tokens(source)
    hashes = [int.from_bytes(hashlib.blake2b(" ".join(tokens[i:i + K_GRAM]).encode(),
                                             digest_size=8).digest(), "big")
              for i in range(max(len(tokens) - K_GRAM + 1, 0))]
    if len(hashes) <= WINDOW:
        return set(hashes)
    return {min(hashes[i:i + WINDOW]) for i in range(len(hashes) - WINDOW + 1)}


def _answer_cells(notebook: dict, answer_ids: set[str]) -> str:
    cells = notebook.get("cells", []) if isinstance(notebook, dict) else []
    parts = []
    for cell in cells if isinstance(cells, list) else []:
        if isinstance(cell, dict) and cell_grade_id(cell) in answer_ids:
            source = cell.get("source", "")
            parts.append("".join(source) if isinstance(source, list) else str(source))
    return "\n".join(parts)


def _seeds(notebook: dict, question_ids) -> set[str]:
    return {found.variant for found in recorded_answers(notebook, question_ids).values()
            if (found.variant or "").startswith("seed:")}


def _answer_ids(release: dict) -> set[str]:
    ids = set()
    for cell in release.get("cells", []):
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("solution") and cell.get("cell_type") == "code":
            ids.add(str(meta.get("grade_id", "")))
    return ids - {""}


def compare_notebooks(notebook: str, release: dict, question_ids,
                      submitted: dict[str, dict], threshold: float = THRESHOLD,
                      min_fingerprints: int = MIN_FINGERPRINTS) -> list[Pair]:
    """Suspicious pairs among ``submitted`` (student -> notebook JSON) of one notebook."""
    answer_ids = _answer_ids(release)
    template = fingerprints(_answer_cells(release, answer_ids))
    prints = {student: fingerprints(_answer_cells(nb, answer_ids)) - template
              for student, nb in submitted.items()}
    seeds = {student: _seeds(nb, question_ids) for student, nb in submitted.items()}
    pairs = []
    for a, b in combinations(sorted(submitted), 2):
        shared = seeds[a] & seeds[b]
        if shared:
            pairs.append(Pair((a, b), notebook, "shared_seed", 1.0,
                              f"both answered the quick checks under {sorted(shared)[0]} "
                              "(one draw in 10^12 each)"))
        smaller = min(len(prints[a]), len(prints[b]))
        if smaller >= min_fingerprints:
            similarity = len(prints[a] & prints[b]) / smaller
            if similarity >= threshold:
                pairs.append(Pair((a, b), notebook, "similar_answers", round(similarity, 3),
                                  f"{len(prints[a] & prints[b])} of {smaller} fingerprints of "
                                  "the answer cells shared (names, comments, layout ignored)"))
    return pairs


def similarity_report(assignment: str, models, notebooks: dict[str, dict[str, bytes | None]]
                      ) -> SimilarityReport:
    """``notebooks``: student -> {notebook file name -> submitted bytes (None: missing)}."""
    report = SimilarityReport(assignment, 0)
    for model in models:
        submitted = {}
        for student, files in notebooks.items():
            data = files.get(model.notebook)
            try:
                submitted[student] = json.loads(data) if data else None
            except (ValueError, UnicodeDecodeError):
                submitted[student] = None
        submitted = {s: nb for s, nb in submitted.items() if isinstance(nb, dict)}
        report.compared += len(submitted)
        report.pairs += compare_notebooks(model.notebook, model.release,
                                          model.questions, submitted)
    report.pairs.sort(key=lambda p: (-p.similarity, p.students))
    return report


def write_similarity(report: SimilarityReport, folder: Path) -> list[Path]:
    """``<assignment>.json``, ``.csv`` and ``.html`` under ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    stem = folder / report.assignment
    paths = [stem.with_suffix(".json"), stem.with_suffix(".csv"), stem.with_suffix(".html")]
    paths[0].write_text(report.to_json())
    with paths[1].open("w", newline="") as out:
        rows = csv.writer(out, lineterminator="\n")
        rows.writerow(["student_a", "student_b", "notebook", "reason", "similarity", "detail"])
        rows.writerows([*p.students, p.notebook, p.reason, p.similarity, p.detail]
                       for p in report.pairs)
    rows = "".join(
        f"<tr><td>{html.escape(p.students[0])}</td><td>{html.escape(p.students[1])}</td>"
        f"<td>{html.escape(p.notebook)}</td><td>{html.escape(p.reason)}</td>"
        f"<td>{p.similarity:.0%}</td><td>{html.escape(p.detail)}</td></tr>" for p in report.pairs)
    body = (f"<table><caption>Pairs to look at</caption><tr><th>student</th><th>student</th>"
            f"<th>notebook</th><th>why</th><th>similarity</th><th>detail</th></tr>{rows}</table>"
            if report.pairs else "<p>No pair stands out.</p>")
    paths[2].write_text(
        f"<!doctype html><html lang='en'><meta charset='utf-8'><title>Similarity: "
        f"{html.escape(report.assignment)}</title><body><h1>Similarity of submissions: "
        f"{html.escape(report.assignment)}</h1><p>{report.compared} notebook(s) compared. A "
        f"listed pair is a reason to read both notebooks, not proof of copying: short "
        f"exercises have few ways to be right, and the template's own code is never counted."
        f"</p>{body}</body></html>")
    return paths
