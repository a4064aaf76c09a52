"""Hook implementations of skyward-sklearn, loaded through the ``skyward`` entry-point group."""

from __future__ import annotations
