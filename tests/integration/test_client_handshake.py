"""The client against fake agents and workers on real CURVE sockets: one handshake for
the first nodes, a replacement and a node that joins, port-mapped endpoints, lost nodes
(``@`` runs on the nodes left),
nodes that leave while work runs."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest
import zmq
from deadline_support import within

from skyward.errors import ConfigurationError, NodeLostError, ProvisioningError
from skyward.transport import security, serialize, wire
from skyward.transport.client import PoolClient
from skyward.transport.security import PoolKeys


def _two_free_ports() -> int:
    """A port P with P + 1 free too (the agent and its worker behind one port mapping)."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        try:
            with socket.socket() as a, socket.socket() as b:
                a.bind(("127.0.0.1", port))
                b.bind(("127.0.0.1", port + 1))
            return port
        except OSError:
            continue
    raise RuntimeError("no two consecutive free ports")


@dataclass
class FakeNode:
    """An agent and one worker as a real node would bind them, reached through a port
    mapping: the node says it bound ``remote_port`` (agent) and ``remote_port + 1``
    (worker); this machine reaches them at ``local_port`` and ``local_port + 1``."""

    keys: PoolKeys
    remote_port: int
    node: int = 0  # whose server key it holds (each node has its own)
    answer_pings: bool = True
    # while clear, the worker keeps the tasks it gets (as if running them) and answers them once set
    hold: threading.Event = field(default_factory=lambda: _set(threading.Event()))
    context: zmq.Context[zmq.Socket[bytes]] = field(default_factory=zmq.Context)
    received: list[int] = field(default_factory=list)

    def start(self) -> str:
        self.local_port = _two_free_ports()
        self.auth = security.start_server_auth(self.context, self.keys.client.public)
        self.agent = self.context.socket(zmq.ROUTER)
        self.worker = self.context.socket(zmq.ROUTER)
        for sock, port in ((self.agent, self.local_port), (self.worker, self.local_port + 1)):
            sock.setsockopt(zmq.LINGER, 0)
            security.configure_server(sock, self.keys.node(self.node).secret)
            sock.bind(f"tcp://127.0.0.1:{port}")
        self.running = True
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()
        return f"tcp://127.0.0.1:{self.local_port}"

    def _serve(self) -> None:
        poller = zmq.Poller()
        poller.register(self.agent, zmq.POLLIN)
        poller.register(self.worker, zmq.POLLIN)
        client: bytes | None = None
        held: list[tuple[bytes, int]] = []
        while self.running:
            if held and self.hold.is_set():
                for peer, task_id in held:
                    self._answer(peer, task_id)
                held.clear()
            if client is not None and self.answer_pings:
                self.agent.send_multipart([client, wire.PING])  # as an agent does, every second
            for sock, _ in poller.poll(50):
                frames = sock.recv_multipart()
                if sock is self.agent:
                    client = frames[0]
                if sock is self.agent and frames[1] == wire.HELLO:
                    info = {
                        "endpoints": [f"tcp://0.0.0.0:{self.remote_port + 1}"],
                        "agent_endpoint": f"tcp://0.0.0.0:{self.remote_port}",
                    }
                    self.agent.send_multipart([frames[0], wire.INFO, wire.encode_json(info)])
                elif sock is self.worker and wire.open_message(frames[1:])[0][:1] == wire.TASKS:
                    (task_id, _count, _window), *_ = wire.unpack_tasks(wire.open_message(frames[1:])[0])
                    self.received.append(task_id)
                    if self.hold.is_set():
                        self._answer(frames[0], task_id)
                    else:
                        held.append((frames[0], task_id))

    def _answer(self, peer: bytes, task_id: int) -> None:
        result = serialize.dumps("ran on the fake worker")
        reply = wire.pack_results([(task_id, wire.Status.OK, len(result), 0.0)])
        self.worker.send_multipart([peer, reply, *result])

    def stop(self) -> None:
        self.running = False
        self.thread.join(timeout=5)
        self.auth.stop()
        self.context.destroy(linger=0)


def _set(event: threading.Event) -> threading.Event:
    event.set()
    return event


@pytest.fixture
def keys() -> PoolKeys:
    return PoolKeys()


@pytest.fixture
def nodes(keys: PoolKeys) -> Iterator[list[FakeNode]]:
    made: list[FakeNode] = []
    yield made
    for node in made:
        node.stop()


def _task() -> list[serialize.Frame]:
    def fn() -> None:
        return None

    return [*serialize.dumps_function(fn), *serialize.dumps_arguments(fn, (), {})]


def test_a_replacement_behind_a_port_mapping_is_reached_at_its_mapped_worker_ports(
    keys: PoolKeys, nodes: list[FakeNode]
) -> None:
    first = FakeNode(keys, remote_port=16789)
    replacement = FakeNode(keys, remote_port=16789)
    nodes += [first, replacement]
    client = PoolClient([first.start()], keys, lambda *_: None)
    try:
        client.connect(timeout=10)
        assert client.submit(_task()).result(timeout=10) == "ran on the fake worker"
        keys.renew(0)  # as the pool does before it renders the replacement's user-data
        client.replace_node(0, replacement.start(), [wire.CLUSTER, wire.encode_json({})], timeout=10)
        assert client.submit(_task()).result(timeout=10) == "ran on the fake worker"
        assert len(replacement.received) == 1, "the task did not reach the replacement's worker"
    finally:
        client.close(RuntimeError("done"), stop_agents=False)


def test_a_computation_for_every_worker_runs_on_the_nodes_left_when_a_node_was_lost(
    keys: PoolKeys, nodes: list[FakeNode]
) -> None:
    alive, silent = FakeNode(keys, remote_port=16789), FakeNode(keys, remote_port=16789, node=1, answer_pings=False)
    nodes += [alive, silent]
    client = PoolClient([alive.start(), silent.start()], keys, lambda *_: None, node_timeout=0.5)
    try:
        client.connect(timeout=10)

        def until_lost() -> None:
            lost = threading.Event()
            while not lost.wait(0.1):  # the silent node is declared lost after node_timeout
                try:
                    client.submit_many([_task()], target=(1, 0))[0].result(timeout=5)
                except NodeLostError:
                    lost.set()

        within("waiting for the silent node to be declared lost", until_lost)
        # @ runs on every node live when it is called: the lost one is not waited for
        before = len(silent.received)
        assert within("@ on a pool with a lost node", lambda: client.run_on_all(_task())) == ["ran on the fake worker"]
        assert len(silent.received) == before
        # the other node still serves
        assert within(">> after a node was lost", lambda: client.run(_task())) == "ran on the fake worker"
    finally:
        client.close(RuntimeError("done"), stop_agents=False)


def test_a_node_that_joins_a_live_client_takes_work_and_one_that_leaves_gives_it_back(
    keys: PoolKeys, nodes: list[FakeNode]
) -> None:
    first, joining = FakeNode(keys, remote_port=16789), FakeNode(keys, remote_port=16789, node=1)
    nodes += [first, joining]
    client = PoolClient([first.start()], keys, lambda *_: None)
    try:
        client.connect(timeout=10)
        info = client.add_node(1, joining.start(), timeout=10)
        assert info["agent_endpoint"] == "tcp://0.0.0.0:16789"
        assert len(client.node_infos) == 2
        assert client.worker_endpoints(1) == [f"tcp://127.0.0.1:{joining.local_port + 1}"]
        assert within("@ on a node that joined", lambda: client.run_on_all(_task())) == ["ran on the fake worker"] * 2
        assert len(joining.received) == 1, "the broadcast did not reach the node that joined"
        with pytest.raises(ConfigurationError, match="already in the pool"):
            client.add_node(1, "tcp://127.0.0.1:9", timeout=10)  # refused before any connection

        with pytest.raises(ProvisioningError, match=r"the new node 2 .* did not answer"):
            client.add_node(2, f"tcp://127.0.0.1:{_two_free_ports()}", timeout=0.5)
        assert len(client.node_infos) == 2  # a node that never answered never joined

        client.remove_node(1, timeout=10)
        assert len(client.node_infos) == 1
        assert within("@ after a node left", lambda: client.run_on_all(_task())) == ["ran on the fake worker"]
        with pytest.raises(NodeLostError, match="no worker 0 on node 1"):
            client.submit_many([_task()], target=(1, 0))[0].result(timeout=10)
        assert client.submit(_task()).result(timeout=10) == "ran on the fake worker"  # the rest serves on
        with pytest.raises(ConfigurationError, match="not in the pool"):
            client.remove_node(1, timeout=1)
    finally:
        client.close(RuntimeError("done"), stop_agents=False)


def test_a_leaving_node_finishes_what_it_runs_and_fails_what_outlasts_its_drain(
    keys: PoolKeys, nodes: list[FakeNode]
) -> None:
    stays, leaves = FakeNode(keys, remote_port=16789), FakeNode(keys, remote_port=16789, node=1)
    nodes += [stays, leaves]
    leaves.hold.clear()
    client = PoolClient([stays.start(), leaves.start()], keys, lambda *_: None)
    try:
        client.connect(timeout=10)
        running = client.submit_many([_task()], target=(1, 0))[0]
        within("the task reaching the leaving node", lambda: _until(lambda: len(leaves.received) == 1))
        removal = threading.Thread(target=client.remove_node, args=(1, 60.0), daemon=True)
        removal.start()
        assert not running.done()  # drained, not dropped: it runs on
        leaves.hold.set()
        assert running.result(timeout=10) == "ran on the fake worker"
        within("remove_node once the node's work ended", removal.join)
        assert len(client.node_infos) == 1

        joins = FakeNode(keys, remote_port=16789, node=1)
        nodes.append(joins)
        joins.hold.clear()
        client.add_node(1, joins.start(), timeout=10)
        stuck = client.submit_many([_task()], target=(1, 0))[0]
        within("the task reaching the node that joined", lambda: _until(lambda: len(joins.received) == 1))
        client.remove_node(1, timeout=0.2)  # the drain ends before the task does
        with pytest.raises(NodeLostError, match="node 1 left the pool"):
            stuck.result(timeout=10)
    finally:
        client.close(RuntimeError("done"), stop_agents=False)


def _until(condition: Callable[[], bool]) -> None:
    while not condition():
        time.sleep(0.01)
