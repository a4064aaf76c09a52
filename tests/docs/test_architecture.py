"""docs/architecture.md's module map names files that exist where it puts them.

The map is the page's first code block: a line starting (two spaces in) with ``dir/``
places the ``*.py`` names on it, and on the more deeply indented lines after it, in that
directory; a line starting with a file name places its names at the package's top level.
It once put spot.py, instances.py and units.py under accelerators/.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_FILE = re.compile(r"\b\w+\.py\b")


def mapped_files(page: str) -> tuple[Path, list[str]]:
    """(the package directory, the files the map names, relative to it)."""
    block = page.split("```", 2)[1].strip("\n").splitlines()
    package = ROOT / block[0].strip()
    files: list[str] = []
    directory = ""
    for line in block[1:]:
        if not line.startswith("   "):  # a new entry, two spaces in
            first = line.split()[0]
            directory = first if first.endswith("/") else ""
        files += [directory + name for name in _FILE.findall(line)]
    return package, files


def test_the_module_map_names_files_where_they_are() -> None:
    package, files = mapped_files((ROOT / "docs" / "architecture.md").read_text(encoding="utf-8"))
    assert len(files) > 30
    missing = [f for f in files if not (package / f).is_file()]
    assert not missing, f"docs/architecture.md places these where they are not: {missing}"


def test_a_file_put_in_the_wrong_directory_is_caught() -> None:
    page = "```\nskyward-core/src/skyward/\n  accelerators/ spot.py instances.py\n  units.py\n```\n"
    package, files = mapped_files(page)
    assert files == ["accelerators/spot.py", "accelerators/instances.py", "units.py"]
    assert not (package / "accelerators" / "spot.py").exists()
