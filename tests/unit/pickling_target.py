"""A module-level @compute function, for the pickling test (it must be importable)."""

from __future__ import annotations

import skyward as sky


@sky.compute
def add(a: int, b: int) -> int:
    return a + b
