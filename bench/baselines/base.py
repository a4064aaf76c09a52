"""What every measured system offers: one blocking call, a batch, and close."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

WORKERS = 2  # every system runs this many worker processes, Skyward included


class System(Protocol):
    """A warm pool of worker processes. ``call`` is one round trip; ``map`` submits every
    item at once and waits for all results, in order."""

    name: str

    def call(self, fn: Callable[..., Any], *args: Any) -> Any: ...

    def map(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]: ...

    def close(self) -> None: ...


Starter = Callable[[], System]
