"""Hook implementations of skyward-verda, loaded through the ``skyward`` entry-point group."""

from __future__ import annotations
