"""Helpers the measures share: rotation for interleaving, result checks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")


def rotated(items: Sequence[T], round_index: int) -> list[T]:
    """``items`` started at a different one each round, so no system is always first
    (or always right after a noisy one)."""
    if not items:
        return []
    shift = round_index % len(items)
    return [*items[shift:], *items[:shift]]


class WrongResultError(AssertionError):
    """A system returned something other than what the workload computes."""


def check(system: str, got: object, want: object) -> None:
    if got != want:
        raise WrongResultError(f"{system} returned {got!r:.200}, expected {want!r:.200}")
