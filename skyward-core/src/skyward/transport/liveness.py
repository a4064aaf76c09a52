"""Whether each node is still there: heartbeats both ways, and what a silent node costs.

Every agent pings the client each second and the client pings back (the agent stops its
workers when its client goes quiet). A node not heard from for ``node_timeout`` seconds
is lost, as is one whose agent says goodbye unasked or that the pool reports gone
(``fail_node``): what was meant for it alone fails with ``NodeLostError``, what it was
running runs again elsewhere where it may (see ``Dispatcher.node_lost``), its workers'
generations move on so direct callers waiting on them give up or run again, and the
pool hears of it once (``on_node_lost``). Runs on the I/O thread.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import zmq

from skyward.errors import ConfigurationError, NodeLostError
from skyward.transport import wire
from skyward.transport.dispatcher import Dispatcher
from skyward.transport.ledger import TaskLedger
from skyward.transport.links import Links, NodeLink

__all__ = ["NODE_TIMEOUT", "Liveness", "NodeLost"]

NODE_TIMEOUT = 5.0
"""Seconds of silence after which a node is lost: five heartbeats.

Measured on this project's 2-core test machine, with four workers of two real agents
busy on CPU-bound tasks and then 530,000 trivial tasks through the client, while other
test runs shared the machine (load average up to 7): the longest gap between two
messages of an agent, as the client read them, was 1.5 s (median 1.01 s, p99 1.21 s,
297 gaps). Five seconds leaves more than three times that, and room on a cloud link for
a retransmitted packet or two and a virtual machine's live-migration pause, while a
dead cloud node is noticed within about six seconds (the window and at most one second
until the next check) instead of twenty. A node that merely stalls this client (a long
unpickling on the I/O thread, a C call holding the GIL) is not lost for it: a node
whose message is waiting to be read is not silent (see ``Liveness.heartbeat``)."""

NodeLost = Callable[[int, str], None]
"""(node index, why): told once for each node the client declares lost."""


class Liveness:
    """Pings every live node and fails the ones that went silent."""

    def __init__(
        self, ledger: TaskLedger, links: Links, node_timeout: float, on_node_lost: NodeLost | None = None
    ) -> None:
        if isinstance(node_timeout, bool) or not isinstance(node_timeout, int | float) or node_timeout <= 0:
            raise ConfigurationError(f"node_timeout must be a positive number of seconds, got {node_timeout!r}")
        self._ledger = ledger
        self._links = links
        self.node_timeout = float(node_timeout)
        self._on_node_lost = on_node_lost

    def heartbeat(self, now: float) -> None:
        """Once a second, on the I/O thread: ping every live node, then fail the silent.
        A node with a message waiting here is not silent: this thread was busy."""
        nodes = self._links.ordered()
        for node in nodes:
            if not node.lost:
                node.socket.send(wire.PING)
        for node in nodes:
            if not node.lost and now - node.last_heard > self.node_timeout:
                if node.socket.poll(0, zmq.POLLIN):
                    continue  # its messages wait for this thread: the loop reads them next
                self.fail_node(node.index, f"node {node.index} stopped answering for {self.node_timeout:g} s")

    def goodbye(self, node: NodeLink) -> None:
        """The node's agent said goodbye though this client did not stop it (its time to
        live passed, it lost touch with this client, or something on its host stopped it):
        its workers are gone, so it is lost at once."""
        if self._ledger.closed_reason is None and not node.lost:
            self.fail_node(
                node.index,
                f"node {node.index}'s agent stopped without being asked (a signal on its host, its time to live, "
                "or it lost touch with this client)",
            )

    def fail_node(self, index: int, reason: str) -> None:
        """Mark a node lost and settle what ran or waited on it (I/O thread only), then
        tell ``on_node_lost`` (once per node)."""
        node = self._links.nodes.get(index)
        if node is None or node.lost:
            return  # it left the pool meanwhile, or was declared lost already
        node.lost = True
        for worker in node.workers:
            worker.last_death = reason
            worker.generation += 1
        ledger = self._ledger

        def lost(dispatcher: Dispatcher) -> list[tuple[int, BaseException]]:
            return [(f.task_id, NodeLostError(f.reason)) for f in dispatcher.node_lost(index, reason, ledger.restart)]

        ledger.fail_where(lost)
        if self._on_node_lost is not None:
            try:
                self._on_node_lost(index, reason)
            except Exception as error:  # the I/O thread must go on serving the other nodes
                print(f"skyward: on_node_lost({index}) raised {type(error).__name__}: {error}", file=sys.stderr)
