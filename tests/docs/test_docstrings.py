"""Every public member the reference pages render has a docstring.

mkdocstrings renders each ``::: path`` of docs/reference/ with its public members (names
without a leading underscore; a module's ``__all__``), and shows a member without a
docstring as a bare signature: a field named ``spot`` of type ``bool`` says nothing about
what it is for. This walks what the pages render, as mkdocstrings finds it (griffe, from the
source), and lists every member without one.

``undocumented_members.txt`` holds the members still waiting for one, per page: the test
fails on a member missing from it (a new public name without a docstring) and on a listed
member that now has one (so the list only shrinks). The goal is an empty file.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import griffe
import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = ("providers.md", "events.md", "pool.md", "image.md")
PENDING_FILE = Path(__file__).with_name("undocumented_members.txt")
_DIRECTIVE = re.compile(r"^:::\s+([\w.]+)\s*$", re.MULTILINE)


@functools.cache
def _loader() -> griffe.GriffeLoader:
    """One loader for every page: griffe parses each package once."""
    return griffe.GriffeLoader(search_paths=[str(p) for p in sorted(ROOT.glob("skyward-*/src"))])


def _walk(obj: griffe.Object | griffe.Alias, found: list[str]) -> None:
    if isinstance(obj, griffe.Alias):
        obj = obj.final_target
    if not obj.docstring:
        found.append(obj.path)
    if not (obj.is_module or obj.is_class):
        return
    exports = obj.exports if obj.is_module else None
    for name, member in obj.members.items():
        if name.startswith("_") or (obj.is_module and (exports is None or name not in exports)):
            continue  # what mkdocstrings leaves out: private names; a module's non-exports
        _walk(member, found)


def undocumented(page: str, loader: griffe.GriffeLoader | None = None) -> list[str]:
    """The dotted paths of what ``docs/reference/<page>`` renders without a docstring."""
    loader = loader or _loader()
    found: list[str] = []
    for directive in _DIRECTIVE.findall((ROOT / "docs" / "reference" / page).read_text(encoding="utf-8")):
        loader.load(directive.partition(".")[0])
        _walk(loader.modules_collection[directive], found)
    return found


def pending() -> dict[str, set[str]]:
    lists: dict[str, set[str]] = {page: set() for page in PAGES}
    for line in PENDING_FILE.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            page, _, member = line.partition(" ")
            lists[page].add(member.strip())
    return lists


@pytest.mark.parametrize("page", PAGES)
def test_every_member_a_reference_page_renders_has_a_docstring(page: str) -> None:
    missing = set(undocumented(page))
    waiting = pending()[page]
    new = sorted(missing - waiting)
    assert not new, f"docs/reference/{page} renders these without a docstring; write one:\n" + "\n".join(new)
    done = sorted(waiting - missing)
    assert not done, f"these have a docstring now; remove them from {PENDING_FILE.name}:\n" + "\n".join(done)


def test_a_member_without_a_docstring_is_found(tmp_path: Path) -> None:
    package = tmp_path / "sample_pkg"
    package.mkdir()
    (package / "__init__.py").write_text(
        '"""A package."""\n__all__ = ["Thing"]\n\n\nclass Thing:\n    """A thing."""\n\n'
        '    size: int = 1\n    """How big."""\n    colour: str = "red"\n    _hidden: int = 0\n',
        encoding="utf-8",
    )
    loader = griffe.GriffeLoader(search_paths=[str(tmp_path)])
    loader.load("sample_pkg")
    found: list[str] = []
    _walk(loader.modules_collection["sample_pkg"], found)
    assert found == ["sample_pkg.Thing.colour"]
