"""Short, anonymised examples of the code that made a mistake (the learner's answer cell).

An answer is cut down to what shows the slip: parsed and printed back with :func:`ast.unparse`,
which drops every comment (where names and notes to the instructor tend to be), docstrings are
removed, the student's id is replaced wherever it still appears (a string, a variable name), and
the result is cut at :data:`MAX_LINES` lines. An answer that does not parse keeps its lines
without comments. Two examples are picked per mistake: the shortest distinct ones, ties broken
by the students' pseudonyms (so the same class gives the same examples).
"""

from __future__ import annotations

import ast
import re

MAX_LINES = 14
MAX_LINE_CHARS = 100
PLACEHOLDER = "<student>"


class _DropDocstrings(ast.NodeTransformer):
    def _drop(self, node):
        self.generic_visit(node)
        body = node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            node.body = body[1:] or [ast.Pass()]
        return node

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = visit_Module = _drop


def _without_comments(source: str) -> str:
    try:
        tree = _DropDocstrings().visit(ast.parse(source))
        return ast.unparse(tree)
    except (SyntaxError, ValueError, RecursionError):
        lines = [re.sub(r"\s+#.*$", "", line) for line in source.splitlines()]
        return "\n".join(line for line in lines if line.strip() and
                         not line.lstrip().startswith("#"))


def anonymise(source: str, student: str) -> str:
    """``source`` without comments and docstrings, without ``student``, at most
    :data:`MAX_LINES` lines (module docstring)."""
    text = _without_comments(source)
    if student:
        text = re.sub(re.escape(student), PLACEHOLDER, text, flags=re.IGNORECASE)
    lines = [line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS - 3] + "..."
             for line in text.splitlines() if line.strip()]
    if len(lines) > MAX_LINES:
        lines = lines[:MAX_LINES] + [f"# ... {len(lines) - MAX_LINES} more line(s)"]
    return "\n".join(lines)


def pick_examples(candidates: list[tuple[str, str, str]], count: int = 2) -> list[str]:
    """Up to ``count`` distinct anonymised answers from ``candidates`` = [(pseudonym, student,
    answer source)]: the shortest answers as submitted first (ties: by pseudonym); only those
    are anonymised, so a mistake made by hundreds costs a few parses."""
    first: dict[str, tuple[int, str, str]] = {}
    for label, student, source in candidates:
        if source and (source not in first or label < first[source][1]):
            first[source] = (len(source), label, student)
    picked: list[str] = []
    for source, (_, _, student) in sorted(first.items(), key=lambda item: item[1][:2]):
        text = anonymise(source, student)
        if text and text not in picked:
            picked.append(text)
        if len(picked) == count:
            break
    return picked
