"""Large buffers across machines go sealed with AES-256-GCM on each worker's data port
(``skyward.transport.sealed``, ``skyward.transport.data_channel``), their keys on the
CURVE connection: on a tcp pool both ways arrive whole and equal; on a real data port, a
forged, tampered or replayed chunk is refused while the real transfer completes; a data
port that never answers is named, and nothing waits on it."""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import psutil
import pytest
import zmq
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

import skyward as sky
from skyward.errors import TransferError, WorkerDiedError
from skyward.transport import chunked, serialize, wire
from skyward.transport.bulk import BULK_CHUNK, BULK_MIN, BulkFrames
from skyward.transport.data_channel import DataChannel
from skyward.transport.sealed import HEADER, new_transfer, seal_chunk, sealed_size

_WAIT = 30.0  # a bound for what must happen, never a measured time


def _until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + _WAIT
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} within {_WAIT:g} s")
        time.sleep(0.01)


@sky.compute
def echo(value: Any) -> Any:
    return value


@pytest.fixture(scope="module")
def tcp_pool() -> Iterator[sky.ComputePool]:
    # shared memory off: on a Local pool it would carry these buffers instead of the socket
    with sky.ComputePool(nodes=1, provider=sky.Local(transport="tcp", shared_memory=False), display="quiet") as pool:
        yield pool


def test_a_large_array_goes_and_comes_back_sealed_on_the_data_connection(tcp_pool: sky.ComputePool) -> None:
    links = tcp_pool._client._links  # type: ignore[union-attr]
    data = links.data
    assert data is not None, "a tcp pool has data connections"
    worker = links.worker((0, 0))
    assert worker.data_endpoint is not None and worker.data_endpoint.startswith("tcp://127.0.0.1:")
    _until(lambda: data.ready(worker.data_endpoint) is not None, "the worker's data port answered")
    value = np.random.default_rng(5).random(3 * BULK_MIN // 8 + 77)  # a short last chunk
    sent, received = data.sent, data.received
    got = echo(value) >> tcp_pool
    assert got.dtype == value.dtype and np.array_equal(got, value)
    assert (data.sent - sent, data.received - received) == (1, 1), "both ways sealed, one transfer each"
    got[0] = 1.0  # the receiver's own writable buffer
    small = np.arange(1000)
    assert np.array_equal(echo(small) >> tcp_pool, small)
    assert (data.sent - sent, data.received - received) == (1, 1), "a small buffer stays on the CURVE socket"


def test_large_arguments_of_a_broadcast_reach_every_worker_sealed() -> None:
    with sky.ComputePool(nodes=2, provider=sky.Local(transport="tcp", shared_memory=False), display="quiet") as pool:
        data = pool._client._links.data  # type: ignore[union-attr]
        endpoints = [pool._client._links.worker((n, 0)).data_endpoint for n in (0, 1)]  # type: ignore[union-attr]
        _until(lambda: all(data.ready(e) is not None for e in endpoints), "both data ports answered")
        value = os.urandom(BULK_MIN + 5)
        sent, received = data.sent, data.received
        results = echo(value) @ pool
        assert [bytes(r) for r in results] == [value, value]
        assert (data.sent - sent, data.received - received) == (2, 2), "sealed to each worker and back"


@pytest.fixture
def data_port() -> Iterator[tuple[DataChannel, DataChannel, str]]:
    """A worker's data channel on a real bound ROUTER, and a client's connected to it."""
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    router = context.socket(zmq.ROUTER)
    for option, value in ((zmq.ROUTER_MANDATORY, 1), (zmq.LINGER, 0)):
        router.setsockopt(option, value)
    port = router.bind_to_random_port("tcp://127.0.0.1")
    worker = DataChannel(context, router)
    client = DataChannel(context)
    endpoint = f"tcp://127.0.0.1:{port}"
    client.connect(endpoint)
    _until(lambda: client.ready(endpoint) is not None, "the data port answered the client's HELLO")
    yield worker, client, endpoint
    client.close()
    worker.close()
    context.destroy(linger=0)


def test_forged_tampered_and_replayed_chunks_on_the_data_port_are_refused(
    data_port: tuple[DataChannel, DataChannel, str],
) -> None:
    worker, client, endpoint = data_port
    payload = os.urandom(5 * BULK_CHUNK + 3)
    key = new_transfer(len(payload), BULK_CHUNK)
    inbound = worker.expect(key)  # what a SEALED_KEY on the CURVE connection does
    # the real chunk 0, as a host that copied it off the wire would have it
    scratch = memoryview(bytearray(sealed_size(key)))
    real = seal_chunk(AESGCM(key.key), key, 0, memoryview(payload)[:BULK_CHUNK], scratch)
    tampered = bytearray(real)
    tampered[HEADER.size + 100] ^= 0x80
    forged = bytes(real[: HEADER.size]) + os.urandom(len(real) - HEADER.size)
    intruder = zmq.Context.instance().socket(zmq.DEALER)
    intruder.setsockopt(zmq.LINGER, 0)
    intruder.connect(endpoint)
    try:
        intruder.send(bytes(tampered))
        intruder.send(forged)
        _until(lambda: worker.refused == 2, "the tampered and the forged chunk were refused")
        assert not inbound.complete
        chunks = [memoryview(payload)[i : i + BULK_CHUNK] for i in range(0, len(payload), BULK_CHUNK)]
        client.send(endpoint.encode(), key, chunks)  # the real transfer, from the client
        assert bytes(worker.wait(inbound)) == payload, "the real chunks went in despite the forgeries"
        intruder.send(bytes(real))  # replayed after the transfer ended
        _until(lambda: worker.refused == 3, "the replayed chunk was refused")
    finally:
        intruder.close(linger=0)


def test_a_data_port_that_never_answers_is_named_and_never_used(capfd: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as spare:
        spare.bind(("127.0.0.1", 0))
        port = spare.getsockname()[1]  # bound, never listening: connections are refused
        context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        channel = DataChannel(context, unreachable_after=0.2)
        endpoint = f"tcp://127.0.0.1:{port}"
        try:
            channel.connect(endpoint)
            _until(lambda: "did not answer" in capfd.readouterr().err, "the unreachable data port was named")
            assert channel.ready(endpoint) is None, "large buffers stay on the CURVE connection"
        finally:
            channel.close()
            context.destroy(linger=0)


class _Recorder:
    """A socket that keeps the multipart messages sent on it (the CURVE connection's side)."""

    def __init__(self) -> None:
        self.messages: list[list[bytes]] = []
        self._current: list[bytes] = []

    def send(self, frame: Any, flags: int = 0, copy: bool = True) -> None:
        self._current.append(bytes(frame))
        if not flags & zmq.SNDMORE:
            self.messages.append(self._current)
            self._current = []

    def send_multipart(self, frames: list[Any]) -> None:
        self.messages.append([bytes(f) for f in frames])


def test_a_sealed_result_whose_chunks_never_come_fails_its_task_with_a_transfer_error() -> None:
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    sender = DataChannel(context)  # connected to nothing: its chunks go nowhere, as on a lost connection
    receiver = DataChannel(context, stall=0.3)
    try:
        value = np.arange(BULK_MIN // 8 + 3, dtype=np.float64)
        result = serialize.dumps(value)
        message = wire.pack_message(
            [wire.pack_results([(7, wire.Status.OK, len(result), 0.0)]), *result], bulk=BulkFrames()
        )
        curve = _Recorder()
        chunked.send_message(curve, message, sealed=chunked.SealedPath(sender, b"tcp://127.0.0.1:9"))
        assert [m[0] for m in curve.messages[:-1]] == [wire.SEALED_KEY], "the key goes first, on the CURVE socket"
        reassembly = chunked.Reassembly(lambda: receiver)
        assert reassembly.feed(curve.messages[0], "worker") is None
        whole = reassembly.feed(curve.messages[1], "worker")
        assert whole is not None, "the message still arrives, with the stalled part marked"
        header, parts = wire.open_message(whole)
        assert wire.unpack_results(header)[0][0] == 7
        with pytest.raises(TransferError, match=r"stalled: .* did not arrive within 0\.3 s"):
            serialize.loads(parts)
    finally:
        sender.close()
        receiver.close()
        context.destroy(linger=0)


@sky.compute
def large_result_held_until(release: str, mb: int) -> np.ndarray:
    """A large result whose sealed chunks wait on the worker until ``release`` exists: its
    message reaches the client long before its parts, as on a slow link."""
    import gc

    from skyward.agent.worker import Worker

    value = np.arange(mb * 2**20 // 8, dtype=np.float64)
    if os.path.exists(release + ".sending"):
        return value  # run again (its first worker was lost): nothing held this time
    worker = next(o for o in gc.get_objects() if isinstance(o, Worker))
    channel = worker.data
    assert channel is not None, "a tcp worker has a data channel"
    forward = channel._forward

    def held(address: bytes, frame: zmq.Frame, dealers: dict[str, zmq.Socket[bytes]]) -> None:
        open(release + ".sending", "a").close()  # the chunks are sealed: the message follows at once
        while not os.path.exists(release):
            time.sleep(0.01)
        forward(address, frame, dealers)

    channel._forward = held  # type: ignore[method-assign]  # the data thread's next chunk waits
    return value


@sky.compute
def large_then_small(mb: int) -> Iterator[Any]:
    yield np.full(mb * 2**20 // 8, 1.0)
    yield "small"
    yield np.full(mb * 2**20 // 8, 2.0)
    yield 3


def test_a_large_result_still_arriving_holds_up_nothing_else_of_the_client(tmp_path: Any) -> None:
    # The client's I/O thread used to wait for the result's parts: no ping reached the node
    # meanwhile, and with a 2 s grace period its agent stopped before the result arrived.
    release = str(tmp_path / "release")
    provider = sky.Local(transport="tcp", shared_memory=False, grace_period=2)
    with sky.ComputePool(nodes=1, provider=provider, display="quiet") as pool:
        links = pool._client._links  # type: ignore[union-attr]
        worker = links.worker((0, 0))
        _until(lambda: links.data.ready(worker.data_endpoint) is not None, "the worker's data port answered")
        notices: list[str] = []
        pool.on(sky.Notice, lambda event: notices.append(event.message))
        future = pool.submit(large_result_held_until(release, 16))
        time.sleep(4)  # twice the grace period, the parts held on the worker
        assert not future.done()
        open(release, "w").close()
        got = future.result(timeout=_WAIT)
        assert np.array_equal(got, np.arange(16 * 2**20 // 8, dtype=np.float64))
        assert sky.gather(echo(1), echo(2)) >> pool == (1, 2)
        assert not [n for n in notices if "lost" in n or "stopped" in n], notices


def test_a_streams_large_and_small_values_arrive_in_order(tcp_pool: sky.ComputePool) -> None:
    links = tcp_pool._client._links  # type: ignore[union-attr]
    _until(lambda: links.data.ready(links.worker((0, 0)).data_endpoint) is not None, "the data port answered")
    got = list(large_then_small(6) >> tcp_pool)
    assert [type(v).__name__ for v in got] == ["ndarray", "str", "ndarray", "int"]
    assert got[0][0] == 1.0 and got[1] == "small" and got[2][0] == 2.0 and got[3] == 3


@sky.compute
def worker_pid() -> int:
    return os.getpid()


def test_a_call_whose_worker_dies_while_its_large_result_arrives_fails_with_the_death_at_once(tmp_path: Any) -> None:
    # The caller used to wait for the parts until the stall (60 s), then fail with TransferError.
    release = str(tmp_path / "never")  # never made: the result's parts never leave the worker
    with sky.ComputePool(nodes=1, provider=sky.Local(transport="tcp", shared_memory=False), display="quiet") as pool:
        links = pool._client._links  # type: ignore[union-attr]
        _until(lambda: links.data.ready(links.worker((0, 0)).data_endpoint) is not None, "the data port answered")
        pid = worker_pid() >> pool
        outcome: list[BaseException] = []

        def call() -> None:
            try:
                large_result_held_until(release, 16) >> pool
            except BaseException as error:
                outcome.append(error)

        caller = threading.Thread(target=call)
        caller.start()
        _until(lambda: os.path.exists(release + ".sending"), "the worker sealed the result")
        time.sleep(0.5)  # its message, sent right after, reaches the caller
        os.kill(pid, signal.SIGKILL)
        caller.join(_WAIT)
        assert not caller.is_alive(), f"the caller still waited {_WAIT:g} s after its worker died"
        assert len(outcome) == 1 and isinstance(outcome[0], WorkerDiedError), outcome
        assert echo(1) >> pool == 1, "the restarted worker serves the next call"


def test_a_node_lost_while_its_large_result_arrives_is_replaced_and_nothing_waits_for_its_parts(
    tmp_path: Any,
) -> None:
    release = str(tmp_path / "never")  # never made: the lost worker's parts never leave it
    with sky.ComputePool(nodes=1, provider=sky.Local(transport="tcp", shared_memory=False), display="quiet") as pool:
        links = pool._client._links  # type: ignore[union-attr]
        _until(lambda: links.data.ready(links.worker((0, 0)).data_endpoint) is not None, "the data port answered")
        agent = psutil.Process(worker_pid() >> pool).ppid()
        future = pool.submit(large_result_held_until(release, 16))
        _until(lambda: os.path.exists(release + ".sending"), "the worker sealed the result")
        time.sleep(0.5)  # its message, sent right after, reaches the client's I/O thread
        os.kill(agent, signal.SIGKILL)
        # the task runs again on the node that replaces it, and the client's wait for the
        # lost worker's parts ends with that worker's socket
        assert np.array_equal(future.result(timeout=_WAIT), np.arange(16 * 2**20 // 8, dtype=np.float64))
        _until(
            lambda: not [t for t in threading.enumerate() if t.name == "skyward-sealed"],
            "the wait for the lost worker's parts ended",
        )
