"""Values the measures produce and the report reads."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Measurement:
    """One number: ``metric`` of ``system`` in ``measure`` (e.g. latency / skyward / median_us)."""

    measure: str
    system: str
    metric: str
    value: float
    unit: str
    samples: int = 1
    note: str = ""

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.measure, self.system, self.metric)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def index(measurements: Iterable[Measurement]) -> dict[tuple[str, str, str], Measurement]:
    """Measurements by key; a key measured twice is a bug in a measure, not a choice."""
    by_key: dict[tuple[str, str, str], Measurement] = {}
    for m in measurements:
        if m.key in by_key:
            raise ValueError(f"measured twice: {m.key}")
        by_key[m.key] = m
    return by_key
