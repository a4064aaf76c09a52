"""Hook implementations of skyward-digitalocean, loaded through the ``skyward`` entry-point group."""

from __future__ import annotations
