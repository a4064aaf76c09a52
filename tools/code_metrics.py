#!/usr/bin/env python3
"""Counts that say how the code is shaped, read from its syntax trees (no import runs).

python3 tools/code_metrics.py            # every package's src/
python3 tools/code_metrics.py --list     # also name each function-level import

- explicit ``Any``: each mention of ``Any`` (``Any``, ``typing.Any``, or inside a string
  annotation) outside import statements. A grep counts comments and words in docstrings too.
- function-level imports: ``import`` statements inside a function or class body, leaving
  out ``if TYPE_CHECKING:`` blocks (they never run) and counting how many carry a
  ``# noqa: PLC0415`` (kept on purpose: a cycle or a heavy optional import, said beside it).
- the largest classes by lines (``class`` line to the last line of its body).
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def sources() -> Iterator[Path]:
    for src in sorted(ROOT.glob("skyward-*/src")):
        yield from sorted(src.rglob("*.py"))


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def nested_imports(tree: ast.Module) -> Iterator[ast.Import | ast.ImportFrom]:
    """Imports under a ``def`` or ``class``, not counting ``if TYPE_CHECKING:`` blocks."""

    def walk(node: ast.AST, nested: bool) -> Iterator[ast.Import | ast.ImportFrom]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for other in child.orelse:
                    yield from walk(other, nested)
                continue
            if isinstance(child, ast.Import | ast.ImportFrom):
                if nested:
                    yield child
                continue
            inner = nested or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda)
            yield from walk(child, inner)

    yield from walk(tree, False)


def any_mentions(tree: ast.Module) -> int:
    count = 0
    for node in ast.walk(tree):
        if (isinstance(node, ast.Name) and node.id == "Any") or (
            isinstance(node, ast.Attribute) and node.attr == "Any"
        ):
            count += 1
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and "Any" in node.value:
            try:  # a string annotation ("dict[str, Any]"); prose in a docstring does not parse
                inner = ast.parse(node.value, mode="eval")
            except SyntaxError:
                continue
            count += sum(isinstance(n, ast.Name) and n.id == "Any" for n in ast.walk(inner))
    return count


def main(argv: list[str]) -> int:
    any_total = 0
    nested: list[tuple[str, int, bool]] = []
    classes: list[tuple[int, str]] = []
    for path in sources():
        text = path.read_text()
        tree = ast.parse(text)
        lines = text.splitlines()
        rel = str(path.relative_to(ROOT))
        any_total += any_mentions(tree)
        for node in nested_imports(tree):
            nested.append((rel, node.lineno, "PLC0415" in lines[node.lineno - 1]))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                classes.append(((node.end_lineno or node.lineno) - node.lineno + 1, f"{rel}:{node.name}"))
    kept = sum(1 for *_, noqa in nested if noqa)
    print(f"explicit Any: {any_total}")
    print(f"function-level imports: {len(nested)} ({kept} marked noqa: PLC0415)")
    print("largest classes (lines):")
    for size, name in sorted(classes, reverse=True)[:10]:
        print(f"  {size:5d}  {name}")
    if "--list" in argv:
        for rel, line, noqa in nested:
            print(f"  {rel}:{line}{'  (noqa)' if noqa else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
