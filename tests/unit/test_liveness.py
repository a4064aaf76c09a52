"""Liveness without agents: a silent node is lost once, a node whose word waits unread is
not, and the pool's callback cannot break the I/O thread."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import zmq

from skyward.errors import ConfigurationError
from skyward.transport.ledger import TaskLedger
from skyward.transport.links import Links, NodeLink, node_info
from skyward.transport.liveness import NODE_TIMEOUT, Liveness


@pytest.fixture
def links() -> Iterator[Links]:
    made = Links(keys=None)
    yield made
    made.context.destroy(linger=0)


def _node(links: Links) -> tuple[NodeLink, zmq.Socket[bytes]]:
    """Node 0, and the agent's end of its socket."""
    address = f"inproc://agent-{id(links)}"
    ours = links.context.socket(zmq.PAIR)
    ours.bind(address)
    agent = links.context.socket(zmq.PAIR)
    agent.connect(address)
    node = NodeLink(0, address, ours, node_info({"endpoints": []}, "node 0"))
    links.nodes[0] = node
    return node, agent


def test_a_silent_node_is_lost_once_but_not_while_its_word_waits_unread(links: Links) -> None:
    node, agent = _node(links)
    told: list[tuple[int, str]] = []
    liveness = Liveness(TaskLedger(), links, NODE_TIMEOUT, lambda index, why: told.append((index, why)))
    node.last_heard = 0.0
    agent.send(b"a ping this client was too busy to read")
    liveness.heartbeat(now=100.0)
    assert not node.lost and told == []
    node.socket.recv()
    liveness.heartbeat(now=100.0)
    assert node.lost and told == [(0, "node 0 stopped answering for 5 s")]
    liveness.heartbeat(now=200.0)
    liveness.fail_node(0, "the provider says it is gone")
    assert len(told) == 1, "told once per node"


def test_a_callback_that_raises_does_not_stop_the_client(links: Links, capsys: pytest.CaptureFixture[str]) -> None:
    node, _agent = _node(links)

    def broken(index: int, why: str) -> None:
        raise RuntimeError("the pool's handler is broken")

    Liveness(TaskLedger(), links, NODE_TIMEOUT, broken).fail_node(0, "gone")
    assert node.lost
    assert "on_node_lost(0) raised RuntimeError: the pool's handler is broken" in capsys.readouterr().err


@pytest.mark.parametrize("bad", [0, -1.0, True, "5"])
def test_the_liveness_window_must_be_a_positive_number_of_seconds(links: Links, bad: object) -> None:
    with pytest.raises(ConfigurationError, match="node_timeout must be a positive number of seconds"):
        Liveness(TaskLedger(), links, bad)  # type: ignore[arg-type]
