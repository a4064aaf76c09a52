"""A node that sends what the client cannot read, on a real Local pool: the client names
the worker on stderr, its node restarts it, what it held fails at once with a clear
error, and the pool goes on. Before, the message killed the client's I/O thread and every
later call waited for ever.

The fault is injected from inside a task: it finds its worker (the one ``Worker`` of the
process) and sends a message that breaks the wire's layout on the socket the task came
from, as a bug or bad memory on a node would.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

import skyward as sky
from skyward.errors import PoolClosedError, WorkerDiedError
from skyward.transport import wire

GARBAGE = {
    "results": wire.RESULTS + b"\x01\x02",  # a results header cut short
    "packed": wire.PACKED + b"\xff\xff\xff\xff",  # a packed message claiming 4 billion parts
}


@sky.compute
def spoil(kind: str, linger: float = 60) -> str:
    import gc

    from skyward.agent.worker import Worker

    worker = next(o for o in gc.get_objects() if isinstance(o, Worker))
    worker.tasks.send_multipart([worker.running_client, GARBAGE[kind]])
    time.sleep(linger)  # the restart ends it: a result sent now could beat the restart and complete the task
    return "sent"


@sky.compute
def inc(x: int) -> int:
    return x + 1


@pytest.fixture
def one_node() -> Iterator[sky.ComputePool]:
    with sky.ComputePool(nodes=1, display="quiet", provider=sky.Local(grace_period=10)) as pool:
        yield pool


@pytest.mark.parametrize("kind", sorted(GARBAGE))
def test_a_gather_fails_at_once_the_worker_is_restarted_and_the_next_gather_runs(
    one_node: sky.ComputePool, kind: str, capfd: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(WorkerDiedError, match=r"sent a message the client cannot read \(struct\.error: "):
        sky.gather(spoil(kind), inc(1)) >> one_node
    assert "skyward: worker 0 on node 0 sent a message this client cannot read" in capfd.readouterr().err
    assert sky.gather(inc(2), inc(3)) >> one_node == (3, 4)


def test_a_call_on_the_callers_own_socket_fails_and_the_next_call_runs(one_node: sky.ComputePool) -> None:
    with pytest.raises(WorkerDiedError, match="cannot read"):
        spoil("results") >> one_node
    assert inc(1) >> one_node == 2


def test_a_broadcast_fails_and_the_next_broadcast_reaches_every_worker() -> None:
    with sky.ComputePool(nodes=2, display="quiet", provider=sky.Local(grace_period=10)) as pool:
        # the first death ends the call: the other worker's message may stay unread, so
        # its copy lingers 3 s, not 60, before that worker takes the next call
        with pytest.raises(WorkerDiedError, match="cannot read"):
            spoil("packed", 3) @ pool
        assert list(inc(1) @ pool) == [2, 2]


def test_a_failure_of_the_io_thread_fails_what_waits_rather_than_leaving_it_waiting(
    one_node: sky.ComputePool, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert inc(0) >> one_node == 1
    loop = one_node._launcher.client._loop  # type: ignore[union-attr]  # the pool is open

    def broken() -> None:
        raise RuntimeError("a bug in the dispatch")

    monkeypatch.setattr(loop, "_dispatch", broken)
    with pytest.raises(PoolClosedError, match=r"I/O thread stopped \(RuntimeError: a bug in the dispatch\)"):
        sky.gather(inc(1), inc(2), inc(3)) >> one_node
