"""Whether each node is still there: heartbeats both ways, and what a silent node costs.

Every agent pings the client each second and the client pings back (the agent stops its
workers when its client goes quiet). A node not heard from for ``node_timeout`` seconds
is lost: what ran or waited on it fails with ``NodeLostError``, its workers' generations
move on so direct callers waiting on them give up, and ``@`` refuses at once while it
is gone. Runs on the I/O thread (the heartbeat is called from its loop).
"""

from __future__ import annotations

from skyward.errors import ConfigurationError, NodeLostError
from skyward.transport import wire
from skyward.transport.dispatcher import Dispatcher
from skyward.transport.ledger import TaskLedger
from skyward.transport.links import Links

__all__ = ["Liveness"]


class Liveness:
    """Pings every live node and fails the ones that went silent."""

    def __init__(self, ledger: TaskLedger, links: Links, node_timeout: float) -> None:
        if node_timeout <= 0:
            raise ConfigurationError(f"node_timeout must be a positive number of seconds, got {node_timeout!r}")
        self._ledger = ledger
        self._links = links
        self.node_timeout = node_timeout

    def heartbeat(self, now: float) -> None:
        """Once a second, on the I/O thread: ping every live node, then fail the silent."""
        nodes = self._links.ordered()
        for node in nodes:
            if not node.lost:
                node.socket.send(wire.PING)
        for node in nodes:
            if not node.lost and now - node.last_heard > self.node_timeout:
                self.fail_node(node.index, f"node {node.index} stopped answering for {self.node_timeout:g} s")

    def fail_node(self, index: int, reason: str) -> None:
        """Mark a node lost and fail what ran or waited on it (I/O thread only)."""
        node = self._links.nodes.get(index)
        if node is None:
            return  # it left the pool meanwhile
        node.lost = True
        for worker in node.workers:
            worker.last_death = reason
            worker.generation += 1

        def lost(dispatcher: Dispatcher) -> list[tuple[int, BaseException]]:
            return [(f.task_id, NodeLostError(f.reason)) for f in dispatcher.node_lost(index, reason)]

        self._ledger.fail_where(lost)
