"""What the pool's client is doing, in numbers: what an autoscaler decides from."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["ClientLoad"]


@dataclass(frozen=True, slots=True)
class ClientLoad:
    """A snapshot of the client's work (``PoolClient.load``), taken in one step under its lock.

    - ``queued``: tasks waiting for any worker (not yet on one). A task meant for one
      worker (``@``) is not counted: another node would not run it.
    - ``running``: tasks on a worker (sent, or a direct ``>>`` call), running or
      waiting there behind another.
    - ``per_node``: tasks each live node holds (a live node is neither lost nor
      draining; a node holding nothing appears with 0).
    - ``slots``: workers of the live nodes that can take work now (a worker whose process
      is restarting is not counted).
    - ``idle_since``: for each live node that holds nothing, the ``time.monotonic()`` at
      which it last went idle (or joined); a busy node is absent.
    """

    queued: int = 0
    running: int = 0
    per_node: Mapping[int, int] = field(default_factory=dict)
    slots: int = 0
    idle_since: Mapping[int, float] = field(default_factory=dict)

    @property
    def nodes(self) -> int:
        """How many live nodes there are."""
        return len(self.per_node)
