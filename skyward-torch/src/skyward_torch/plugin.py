"""Hook implementations of skyward-torch, loaded through the ``skyward`` entry-point group."""

from __future__ import annotations
