"""No code block of the site is wider than the column it is shown in, so nothing is cut at
the right edge.

``COLUMNS = 80``: on a wide screen, Material shows both sidebars and the content column is
61rem (the grid) - 2 x 12.1rem (the sidebars) - 2 x 1.2rem (its margins) = 34.4rem = 688 px
at Material's 20 px root size; code is 0.85 x 0.8rem = 13.6 px Roboto Mono, 8.16 px a
character, inside 2 x 16 px of padding: (688 - 32) / 8.16 = 80.4 characters. Narrower
windows drop a sidebar first and give the column more room; a phone scrolls. Screenshots
of the built site in headless Chromium at 1440 px show 80-character lines ending inside
the block, a few characters short of its edge.

Both sides are checked: the Markdown (every fenced block of docs/, where a long line is
fixed) and the built HTML (every ``<pre>``, which also holds what mkdocstrings renders:
signatures and code in docstrings).
"""

from __future__ import annotations

import html
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
COLUMNS = 80
_FENCE = re.compile(r"^\s*(```+|~~~+)")


def wide_lines_in_markdown(text: str) -> list[tuple[int, str]]:
    """(line number, line) of every line of a fenced block longer than ``COLUMNS``."""
    wide, fence = [], None
    for number, line in enumerate(text.splitlines(), 1):
        marker = _FENCE.match(line)
        if marker and (fence is None or marker.group(1) == fence):
            fence = None if fence else marker.group(1)
        elif fence and len(line) > COLUMNS:
            wide.append((number, line))
    return wide


def wide_lines_in_html(page: str) -> list[str]:
    """The lines of the page's ``<pre>`` blocks longer than ``COLUMNS``, as shown."""
    wide = []
    for block in re.findall(r"<pre[^>]*>(.*?)</pre>", page, re.DOTALL):
        text = html.unescape(re.sub(r"<[^>]+>", "", block))
        wide += [line for line in text.splitlines() if len(line) > COLUMNS]
    return wide


@pytest.mark.parametrize("page", sorted((ROOT / "docs").rglob("*.md")), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_code_block_in_the_markdown_is_wider_than_the_column(page: Path) -> None:
    wide = wide_lines_in_markdown(page.read_text(encoding="utf-8"))
    assert not wide, f"{page.relative_to(ROOT)}: wrap these at {COLUMNS} columns: " + "".join(
        f"\n  {n}: {line}" for n, line in wide
    )


def test_a_wide_line_is_found_in_either_form() -> None:
    long = "x" * (COLUMNS + 1)
    assert wide_lines_in_markdown(f"text {long}\n```text\n{'y' * COLUMNS}\n{long}\n```\n") == [(4, long)]
    assert wide_lines_in_html(f"<p>{long}</p><pre><code><span>{'a' * 40}</span>{'b' * 41}\nok</code></pre>") == [
        "a" * 40 + "b" * 41
    ]
    assert wide_lines_in_html(f"<pre>{'&lt;' * COLUMNS}</pre>") == []  # as shown, not as written


@pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None, reason="needs the site's tools (mkdocs)")
def test_no_code_block_in_the_built_site_is_wider_than_the_column(tmp_path: Path) -> None:
    site = tmp_path / "site"
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        env=dict(os.environ, NO_MKDOCS_2_WARNING="1"),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    pages = sorted(site.rglob("*.html"))
    assert len(pages) > 30
    wide = {
        str(p.relative_to(site)): lines for p in pages if (lines := wide_lines_in_html(p.read_text(encoding="utf-8")))
    }
    assert not wide, f"code blocks wider than {COLUMNS} columns on the site: {wide}"
    # and no Sphinx role left as text in front of a name (":class: Provider")
    roles = [str(p.relative_to(site)) for p in pages if re.search(r":(?:class|func|mod|meth):<code", p.read_text())]
    assert not roles, f"a docstring's Sphinx role shows as text on: {roles}"
