"""The client's node table without a network: what an agent's INFO must hold, plain tcp
refused, node order with gaps (nodes that left)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import zmq

from skyward.errors import ProvisioningError
from skyward.transport.links import Links, NodeLink, WorkerLink, node_info


@pytest.fixture
def links() -> Iterator[Links]:
    made = Links(keys=None)
    yield made
    made.context.destroy(linger=0)


def _node(links: Links, index: int) -> NodeLink:
    sock = links.context.socket(zmq.DEALER)
    node = NodeLink(index, f"ipc:///tmp/agent-{index}", sock, node_info({"endpoints": []}, "test"))
    node.workers.append(WorkerLink((index, 0), f"ipc:///tmp/worker-{index}"))
    links.nodes[index] = node
    return node


def test_an_agents_info_must_list_its_workers_endpoints() -> None:
    info = node_info({"endpoints": ["tcp://0.0.0.0:16790"], "agent_endpoint": "tcp://0.0.0.0:16789"}, "node 0")
    assert info["endpoints"] == ["tcp://0.0.0.0:16790"]
    with pytest.raises(ProvisioningError, match=r"the agent of node 3 .* without a list of worker endpoints"):
        node_info({"workers": 1}, "node 3 (tcp://10.0.0.5:16789)")
    with pytest.raises(ProvisioningError, match="malformed agent_endpoint"):
        node_info({"endpoints": [], "agent_endpoint": 16789}, "node 0")


def test_a_tcp_connection_without_the_pools_keys_is_refused(links: Links) -> None:
    with pytest.raises(ProvisioningError, match=r"unencrypted tcp connection to tcp://127\.0\.0\.1:9"):
        links.socket(zmq.DEALER, "tcp://127.0.0.1:9", None)


def test_nodes_come_in_index_order_whatever_joined_or_left(links: Links) -> None:
    for index in (4, 0, 2):
        _node(links, index)
    del links.nodes[2]
    assert [n.index for n in links.ordered()] == [0, 4]
    assert links.find_worker((2, 0)) is None
    assert links.find_worker((4, 1)) is None
    assert links.find_worker((4, 0)) is links.worker((4, 0))
