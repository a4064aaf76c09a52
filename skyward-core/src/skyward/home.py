"""Where skyward keeps its files on this machine, and the uv it runs.

Both are read by the wheel cache, the Local provider and the ``skyward`` command; they sit
here, below all three, so none of them imports another for a path.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from uv import find_uv_bin

DEFAULT_HOME = "~/.skyward"


def skyward_home() -> Path:
    """``$SKYWARD_HOME``, or ``~/.skyward``: environments, wheels and kept keys."""
    return Path(os.environ.get("SKYWARD_HOME") or DEFAULT_HOME).expanduser()


def uv_path() -> str | None:
    """This client's uv: beside its interpreter, the uv package's, or on PATH (None: none)."""
    candidate = Path(sys.executable).parent / "uv"
    if candidate.exists():
        return str(candidate)
    try:  # the uv package is a dependency; find_uv_bin raises when its binary is missing
        return str(find_uv_bin())
    except Exception:
        return shutil.which("uv")
