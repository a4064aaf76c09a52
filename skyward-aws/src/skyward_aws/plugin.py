"""Hook implementations of skyward-aws, loaded through the ``skyward`` entry-point group."""

from __future__ import annotations
