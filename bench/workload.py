"""The functions every system runs: trivial on purpose, so what is measured is overhead."""

from __future__ import annotations

from typing import TypeVar

T = TypeVar("T")


def inc(x: int) -> int:
    return x + 1


def echo(value: T) -> T:
    """Returns its argument: a large array travels there and back."""
    return value


def noop() -> None:
    return None
