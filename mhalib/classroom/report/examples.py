"""Short, anonymised examples of the code that made a mistake (the learner's answer cell).

An answer is cut down to what shows the slip: parsed and printed back with :func:`ast.unparse`,
which drops every comment (where names and notes to the instructor tend to be); docstrings are
removed; when the cell defines the exercise's function among other code, only that function
is kept, with a count of the statements left out; the student's id is replaced wherever it
still appears as a token (a string, part of a variable name); the result is cut at
:data:`MAX_LINES` lines. An answer that does not parse keeps its lines without comments. Two
examples are picked per mistake: the shortest distinct ones, ties broken by the students'
pseudonyms (so the same class gives the same examples).
"""

from __future__ import annotations

import ast
import re

MAX_LINES = 14
OTHERS_MARK = "mhalib-report-others:"
MAX_LINE_CHARS = 100
PLACEHOLDER = "<student>"
MIN_ID_CHARS = 3  # shorter ids are not replaced (they would match ordinary names: x, s, ab)


class _DropDocstrings(ast.NodeTransformer):
    def _drop(self, node):
        self.generic_visit(node)
        body = node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            node.body = body[1:] or [ast.Pass()]
        return node

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = visit_Module = _drop


def _focused(tree: ast.Module, focus: str | None) -> ast.Module:
    """Only the definition of ``focus`` when the cell defines it among other statements, with
    a comment saying how many were left out."""
    found = [node for node in tree.body if isinstance(node, (ast.FunctionDef,
                                                              ast.AsyncFunctionDef))
             and node.name == focus]
    if not found or len(tree.body) == 1:
        return tree
    others = len(tree.body) - 1
    tree.body = [found[-1], ast.Expr(ast.Constant(f"{OTHERS_MARK} {others} other statement(s) "
                                                  "in the cell"))]
    return tree


def _without_comments(source: str, focus: str | None) -> str:
    try:
        tree = _focused(_DropDocstrings().visit(ast.parse(source)), focus)
        text = ast.unparse(tree)
        return re.sub(rf"^'{OTHERS_MARK} (.*)'$", r"# + \1", text, flags=re.MULTILINE)
    except (SyntaxError, ValueError, RecursionError):
        lines = [re.sub(r"\s+#.*$", "", line) for line in source.splitlines()]
        return "\n".join(line for line in lines if line.strip() and
                         not line.lstrip().startswith("#"))


def scrub(text: str, student: str) -> str:
    """``text`` with the student's id replaced by :data:`PLACEHOLDER` wherever it stands as a
    token ("ann" stays in "annotate"; ids shorter than :data:`MIN_ID_CHARS` are left)."""
    if len(student) < MIN_ID_CHARS:
        return text
    return re.sub(rf"(?<![A-Za-z0-9]){re.escape(student)}(?![A-Za-z0-9])", PLACEHOLDER, text,
                  flags=re.IGNORECASE)


def anonymise(source: str, student: str, focus: str | None = None,
              max_lines: int = MAX_LINES) -> str:
    """``source`` without comments and docstrings, without ``student``, at most ``max_lines``
    lines; with ``focus`` (the exercise), only the function of that name when the cell also
    holds other code (module docstring)."""
    text = scrub(_without_comments(source, focus), student)
    lines = [line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS - 3] + "..."
             for line in text.splitlines() if line.strip()]
    if len(lines) > max_lines:
        lines = lines[:max_lines] + [f"# ... {len(lines) - max_lines} more line(s)"]
    return "\n".join(lines)


def pick_examples(candidates: list[tuple[str, str, str]], count: int = 2,
                  focus: str | None = None) -> list[str]:
    """Up to ``count`` distinct anonymised answers from ``candidates`` = [(pseudonym, student,
    answer source)]: the shortest answers as submitted first (ties: by pseudonym); only those
    are anonymised, so a mistake made by hundreds costs a few parses."""
    first: dict[str, tuple[int, str, str]] = {}
    for label, student, source in candidates:
        if source and (source not in first or label < first[source][1]):
            first[source] = (len(source), label, student)
    picked: list[str] = []
    for source, (_, _, student) in sorted(first.items(), key=lambda item: item[1][:2]):
        text = anonymise(source, student, focus)
        if text and text not in picked:
            picked.append(text)
        if len(picked) == count:
            break
    return picked
