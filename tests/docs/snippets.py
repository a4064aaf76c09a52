"""Finding the Python code blocks of the documentation, and how each must be checked.

A ```python block runs as written on Local. A block right after the marker
``<!-- snippet: cloud -->`` (it needs a cloud account) or ``<!-- snippet: gpu -->`` (it
needs an NVIDIA GPU) is checked to construct: it runs with placeholder credentials until
its first pool would start, which is where it stops, so everything the pool validates is
validated and nothing is provisioned. Markers are HTML comments: the site does not show
them. Anything else that should not run is not Python: give it another language
(```text, ```bash).

A block followed by the marker ``<!-- output -->`` and a ```text block shows what it
prints: the test compares that text with the block's standard output, line by line (trailing
spaces and blank lines at the end aside). The pool's own log goes to standard error, so it
is not part of it. A page may show the log too, in a ```text block without the marker.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MODES = ("run", "cloud", "gpu")
_BLOCK = re.compile(
    r"(?:<!--\s*snippet:\s*(?P<mode>[a-z]+)\s*-->\s*\n)?^(?P<fence>```+|~~~+)python[^\n]*\n(?P<code>.*?)^(?P=fence)\s*$",
    re.MULTILINE | re.DOTALL,
)
_OUTPUT = re.compile(
    r"[ \t]*\n(?:[ \t]*\n)*<!--\s*output\s*-->[ \t]*\n(?P<fence>```+|~~~+)text[^\n]*\n(?P<text>.*?)^(?P=fence)\s*$",
    re.MULTILINE | re.DOTALL,
)


@dataclass(frozen=True, slots=True)
class Snippet:
    path: Path
    line: int
    mode: str
    code: str
    output: str | None = None  # what the page shows it prints, if it shows that

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def snippets_in(path: Path) -> list[Snippet]:
    text = path.read_text(encoding="utf-8")
    found = []
    for match in _BLOCK.finditer(text):
        mode = match.group("mode") or "run"
        if mode not in MODES:
            raise ValueError(f"{path}:{text.count(chr(10), 0, match.start()) + 1}: snippet mode {mode!r}, use {MODES}")
        line = text.count("\n", 0, match.start("code")) + 1
        shown = _OUTPUT.match(text, match.end())
        found.append(Snippet(path, line, mode, match.group("code"), shown.group("text") if shown else None))
    return found


def documentation_pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def printed(text: str) -> str:
    """Output as compared: trailing spaces of each line and blank lines at the end dropped."""
    return "\n".join(line.rstrip() for line in text.rstrip().splitlines())


def shown_outputs(path: Path) -> int:
    """How many ``<!-- output -->`` markers the page has (each must follow a Python block)."""
    return len(re.findall(r"<!--\s*output\s*-->", path.read_text(encoding="utf-8")))
