"""Which skips are a broken install: ``pytest.importorskip`` of a package the test
requirements pin must fail the run, not skip quietly (tests/conftest.py applies it)."""

from __future__ import annotations

import re

# Distributions whose import name differs from their requirement name.
_IMPORT_NAMES = {"tensorflow-cpu": "tensorflow", "scikit-learn": "sklearn", "types-requests": "", "types-psutil": ""}
_COULD_NOT_IMPORT = re.compile(r"could not import '([\w.]+)'")


def required_imports(requirements: str) -> frozenset[str]:
    """Top-level import names of what ``requirements`` (requirements-dev.txt) pins, plus
    the example plugin tasks.py installs: modules a test may not skip for lacking."""
    names = {"skyward_example_plugin"}
    for line in requirements.splitlines():
        text = line.split("#", 1)[0].strip()
        if not text or text.startswith("-"):
            continue
        requirement = re.split(r"[\[<>=!~;\s]", text, maxsplit=1)[0].lower()
        names.add(_IMPORT_NAMES.get(requirement, requirement.replace("-", "_")))
    names.discard("")
    return frozenset(names)


def required_import_skipped(reason: str, required: frozenset[str]) -> str | None:
    """The module, when ``reason`` is ``pytest.importorskip``'s for a required module."""
    match = _COULD_NOT_IMPORT.search(reason)
    if match is None:
        return None
    module = match[1].split(".")[0]
    return module if module in required else None
