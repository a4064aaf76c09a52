"""The file exchange itself (``skyward.files.sender`` against ``receiver``) over real
zmq sockets, without a pool: the window that bounds memory, progress, and refusals."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import zmq

from skyward.errors import ProvisioningError
from skyward.events import Notice
from skyward.files import sender
from skyward.files.manifest import CHUNK, build_manifest
from skyward.files.receiver import FileReceiver
from skyward.transport import wire


class _Agent:
    """A ROUTER answering with a FileReceiver, as the supervisor does; ``hold`` makes it
    read everything waiting before it answers anything (how many chunks arrived unanswered)."""

    def __init__(self, context: zmq.Context[zmq.Socket[bytes]], endpoint: str, home: Path, work: Path) -> None:
        self.socket = context.socket(zmq.ROUTER)
        self.socket.bind(endpoint)
        self.receiver = FileReceiver(home, work)
        self.most_unanswered = 0
        self.hold = threading.Event()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            if not self.socket.poll(20):
                continue
            if self.hold.is_set():
                self.stop.wait(0.3)  # let the client send all it may before any answer
            batch = []
            while True:
                try:
                    batch.append(self.socket.recv_multipart(zmq.NOBLOCK))
                except zmq.Again:
                    break
            self.most_unanswered = max(self.most_unanswered, sum(f[1] == wire.BLOB for f in batch))
            for frames in batch:
                self.socket.send_multipart([frames[0], *self.receiver.handle(frames[1:])])


@pytest.fixture
def link(tmp_path: Path) -> Iterator[Callable[[], tuple[zmq.Socket[bytes], _Agent]]]:
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    agents: list[_Agent] = []
    sockets: list[zmq.Socket[bytes]] = []

    def make() -> tuple[zmq.Socket[bytes], _Agent]:
        endpoint = f"ipc://{tmp_path}/agent-{len(agents)}.sock"
        agent = _Agent(context, endpoint, tmp_path / "home", tmp_path / f"work-{len(agents)}")
        client = context.socket(zmq.DEALER)
        client.connect(endpoint)
        agents.append(agent)
        sockets.append(client)
        return client, agent

    yield make
    for agent in agents:
        agent.stop.set()
        agent.thread.join()
        agent.socket.close(linger=0)
    for sock in sockets:
        sock.close(linger=0)
    context.term()


def _project(root: Path, sizes: dict[str, int]) -> list[str]:
    for index, (name, size) in enumerate(sizes.items()):
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(bytes([index % 251]) * size)
    return sorted(sizes)


def test_no_more_than_the_window_of_chunks_is_ever_unanswered_and_progress_is_told(
    tmp_path: Path, link: Callable[[], tuple[zmq.Socket[bytes], _Agent]], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "proj"
    paths = _project(root, {"big.bin": 6 * CHUNK + 5, "small.txt": 10, "empty": 0})
    manifest = build_manifest(root, paths)
    client, agent = link()
    agent.hold.set()
    notices: list[Notice] = []
    monkeypatch.setattr(sender, "PROGRESS_MIN_BYTES", CHUNK)
    shipment = sender.FileShipment(manifest, root, notices.append, window=3)
    shipment([client], [{"hostname": "h"}], [0])
    assert 1 <= agent.most_unanswered <= 3
    for entry in manifest.entries:
        assert (tmp_path / "work-0" / entry.path).read_bytes() == (root / entry.path).read_bytes()
    stats = shipment.stats()
    assert (stats.sent_bytes, stats.sent_blobs) == (manifest.total_bytes, 3)
    said = [n.message for n in notices]
    assert said[0].startswith("files: 0.0 of 6.0 MiB sent to node(s) 0 (0%)") and said[-1].endswith("(100%)")


def test_nodes_on_one_host_are_served_in_turn_so_the_second_is_sent_nothing(
    tmp_path: Path, link: Callable[[], tuple[zmq.Socket[bytes], _Agent]]
) -> None:
    root = tmp_path / "proj"
    manifest = build_manifest(root, _project(root, {"a.txt": 100, "b/c.txt": 2 * CHUNK}))
    (first, _), (second, _) = link(), link()
    shipment = sender.FileShipment(manifest, root, lambda _n: None)
    shipment([first, second], [{"hostname": "same"}, {"hostname": "same"}], [0, 1])
    assert shipment.stats().sent_bytes == manifest.total_bytes  # once, though two nodes got it
    assert (tmp_path / "work-1" / "b" / "c.txt").read_bytes() == (root / "b" / "c.txt").read_bytes()


def test_a_file_changed_after_the_manifest_is_refused_by_the_node_naming_it(
    tmp_path: Path, link: Callable[[], tuple[zmq.Socket[bytes], _Agent]]
) -> None:
    root = tmp_path / "proj"
    manifest = build_manifest(root, _project(root, {"data/x.csv": 50}))
    (root / "data" / "x.csv").write_bytes(b"y" * 50)  # same size, other bytes
    client, _agent = link()
    shipment = sender.FileShipment(manifest, root, lambda _n: None)
    with pytest.raises(ProvisioningError, match=r"node 3 could not take .*data/x.csv: did it change"):
        shipment([client], [{}], [3])


def test_a_silent_node_fails_the_exchange_naming_it(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    manifest = build_manifest(root, _project(root, {"a": 1}))
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    client = context.socket(zmq.DEALER)
    client.connect(f"ipc://{tmp_path}/nobody.sock")
    now = [0.0]

    def clock() -> float:
        now[0] += 1.0
        return now[0]

    try:
        shipment = sender.FileShipment(manifest, root, lambda _n: None, silence=5.0, clock=clock)
        with pytest.raises(ProvisioningError, match=r"node\(s\) 7 said nothing for 5 s"):
            shipment([client], [{}], [7])
    finally:
        client.close(linger=0)
        context.term()
