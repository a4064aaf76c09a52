"""docs/plugins.md states the worked example provider's size: it must be the file's."""

from __future__ import annotations

import re

from .snippets import ROOT

EXAMPLE = ROOT / "tests" / "plugin_example" / "src" / "skyward_example_plugin" / "__init__.py"


def test_the_line_count_docs_give_for_the_example_provider_is_its_own() -> None:
    stated = re.search(r"\*\*(\d+) lines\*\*", (ROOT / "docs" / "plugins.md").read_text(encoding="utf-8"))
    assert stated is not None, "docs/plugins.md no longer states the example provider's size"
    actual = len(EXAMPLE.read_text(encoding="utf-8").splitlines())
    assert int(stated.group(1)) == actual, f"docs/plugins.md says {stated.group(1)} lines; the file has {actual}"
