"""A client that heals, against real agents: nodes SIGKILLed, SIGSTOPped past the
liveness window or stopped by a signal on their host while work runs; only what the lost
node held runs again (within each function's retries), streams run again only before
their reader had a value, ``@`` runs on the live nodes, and a client with no node queues
work until one joins (or the pool gives up on it).

Tasks note each start (their index and their node's agent, the worker's parent) in a
journal, and wait on a gate file where a test needs them to be running when a node goes.
"""

from __future__ import annotations

import collections
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from agent_support import Agents, task
from deadline_support import within

import skyward as sky
from skyward.errors import NodeLostError
from skyward.transport import wire
from skyward.transport.client import PoolClient, RemoteStream


def work(index: int, journal: str, gate: str = "", seconds: float = 0.0) -> int:
    with open(journal, "a") as f:
        f.write(f"{index} {os.getppid()}\n")
    while gate and not os.path.exists(gate):
        time.sleep(0.01)
    time.sleep(seconds)
    return index * index


def count_up(journal: str, gate: str, before: int, total: int) -> Iterator[int]:
    """Yields 0 .. total - 1, waiting for the gate after the first ``before`` values."""
    with open(journal, "a") as f:
        f.write(f"stream {os.getppid()}\n")
    for value in range(total):
        if value == before:
            while not os.path.exists(gate):
                time.sleep(0.01)
        yield value


def _ignore(*_: object) -> None:
    pass


@pytest.fixture
def agents() -> Iterator[Agents]:
    made = Agents()
    yield made
    made.close()


@pytest.fixture
def journal(tmp_path: Path) -> str:
    path = tmp_path / "journal"
    path.write_text("")
    return str(path)


def _starts(journal: str) -> list[tuple[str, int]]:
    """(what started, the pid of the agent it ran under), in order."""
    lines = [line.split() for line in Path(journal).read_text().splitlines()]
    return [(what, int(pid)) for what, pid in lines]


def _until(what: str, condition: Callable[[], bool]) -> None:
    def wait() -> None:
        while not condition():
            time.sleep(0.01)

    within(what, wait)


class Client:
    """A connected PoolClient and the nodes it was told were lost."""

    def __init__(self, agents: Agents, nodes: int, **options: object) -> None:
        self.lost: list[tuple[int, str]] = []
        self.told = threading.Event()
        self.client = PoolClient(
            [agents.start(i) for i in range(nodes)], None, _ignore, on_node_lost=self._on_lost, **options
        )  # type: ignore[arg-type]
        agents.connect(self.client)

    def _on_lost(self, index: int, reason: str) -> None:
        self.lost.append((index, reason))
        self.told.set()

    def __enter__(self) -> PoolClient:
        return self.client

    def __exit__(self, *_: object) -> None:
        self.client.close(RuntimeError("the test ended"), stop_agents=False)


def _watch(agents: Agents, client: PoolClient, node: int) -> None:
    """What a provider that watches its node processes does: tell the client at once."""
    agents.on_exit(node, lambda code: client.fail_node(node, f"node {node}'s process exited ({code})"))


def test_a_sigkilled_nodes_task_runs_again_on_the_other_and_the_gather_completes(
    agents: Agents, journal: str, tmp_path: Path
) -> None:
    gate = str(tmp_path / "gate")
    with Client(agents, 2, rerun_lost=True) as client:
        _watch(agents, client, 1)
        batch = client.submit_batch([task(work, i, journal, gate) for i in range(6)])
        _until("a task running on each node", lambda: len(_starts(journal)) == 2)
        doomed = agents.processes[1].pid
        [(on_doomed, _)] = [(what, pid) for what, pid in _starts(journal) if pid == doomed]
        agents.signal(1, signal.SIGKILL)
        _until("the killed node's task back in the queue", lambda: client.load().per_node.keys() == {0})
        Path(gate).touch()
        assert within("the gather", batch.wait) == tuple(i * i for i in range(6))
    starts = collections.Counter(what for what, _ in _starts(journal))
    assert starts[on_doomed] == 2, "the task the killed node was running ran again"
    assert all(count == 1 for what, count in starts.items() if what != on_doomed), starts


def test_a_gather_of_quick_tasks_survives_a_node_killed_midway_and_only_its_tasks_run_twice(
    agents: Agents, journal: str
) -> None:
    with Client(agents, 2, rerun_lost=True) as client:
        _watch(agents, client, 1)
        count = 400
        batch = client.submit_batch([task(work, i, journal, "", 0.01) for i in range(count)])
        doomed = agents.processes[1].pid
        _until("node 1 running some", lambda: sum(pid == doomed for _, pid in _starts(journal)) >= 20)
        agents.signal(1, signal.SIGKILL)
        assert within("the gather", batch.wait) == tuple(i * i for i in range(count))
    starts = _starts(journal)
    counts = collections.Counter(what for what, _ in starts)
    on_doomed = {what for what, pid in starts if pid == doomed}
    twice = {what for what, n in counts.items() if n > 1}
    assert twice <= on_doomed, "only what the lost node held ran again"
    assert max(counts.values()) <= 2 and len(counts) == count


def test_a_node_stopped_past_the_liveness_window_is_lost_and_its_task_runs_elsewhere(
    agents: Agents, journal: str, tmp_path: Path
) -> None:
    gate = str(tmp_path / "gate")
    holder = Client(agents, 2, rerun_lost=True, node_timeout=3.0)
    with holder as client:
        futures = [client.submit(task(work, i, journal, gate)) for i in range(2)]
        _until("a task running on each node", lambda: len(_starts(journal)) == 2)
        agents.signal(1, signal.SIGSTOP)
        within("the stopped node declared lost", holder.told.wait)
        assert holder.lost == [(1, "node 1 stopped answering for 3 s")]
        Path(gate).touch()
        assert [within("a result", f.result) for f in futures] == [0, 1]
        agents.signal(1, signal.SIGCONT)  # it answers late: the first result has won
        assert (
            within("a task after the lost node resumed", lambda: client.submit(task(work, 7, journal)).result()) == 49
        )
        assert client.load().per_node.keys() == {0}
    assert holder.lost == [(1, "node 1 stopped answering for 3 s")], "told once"


def test_a_task_whose_function_runs_at_most_once_fails_and_one_run_again_too_often_fails(
    journal: str, tmp_path: Path
) -> None:
    gate = str(tmp_path / "gate")
    agents = Agents(workers=2)
    try:
        with Client(agents, 1, rerun_lost=True) as client:
            _watch(agents, client, 0)
            at_most_once = client.submit(task(work, 1, journal, gate), retries=0)
            default = client.submit(task(work, 2, journal, gate))
            _until("both running on node 0", lambda: len(_starts(journal)) == 2)
            agents.join(client, 1)
            _watch(agents, client, 1)
            agents.signal(0, signal.SIGKILL)
            with pytest.raises(NodeLostError, match=r"runs at most once \(sky\.compute\(retries=0\)\)"):
                within("the at-most-once task", at_most_once.result)
            _until("the other running again on node 1", lambda: len(_starts(journal)) == 3)
            agents.signal(1, signal.SIGKILL)
            with pytest.raises(NodeLostError, match=r"run again once already.*sky\.compute\(retries=1\)"):
                within("the task lost twice", default.result)
    finally:
        agents.close()
    started = [what for what, _ in _starts(journal)]
    assert collections.Counter(started) == {"1": 1, "2": 2} and started[-1] == "2"  # 1 never ran twice


def test_a_task_with_two_retries_survives_two_lost_nodes(agents: Agents, journal: str, tmp_path: Path) -> None:
    gate = str(tmp_path / "gate")
    with Client(agents, 1, rerun_lost=True) as client:
        future = client.submit(task(work, 5, journal, gate), retries=2)
        for node in (0, 1):
            _until(f"the task running on node {node}", lambda n=node: len(_starts(journal)) == n + 1)
            _watch(agents, client, node)
            agents.join(client, node + 1)
            agents.signal(node, signal.SIGKILL)
        _until("the task running on node 2", lambda: len(_starts(journal)) == 3)
        Path(gate).touch()
        assert within("the task", future.result) == 25
    assert [pid for _, pid in _starts(journal)] == [agents.processes[n].pid for n in (0, 1, 2)]


def test_a_direct_call_whose_node_is_lost_runs_again_elsewhere(agents: Agents, journal: str, tmp_path: Path) -> None:
    gate = str(tmp_path / "gate")
    with Client(agents, 1, rerun_lost=True) as client:
        _watch(agents, client, 0)
        answer: list[object] = []
        caller = threading.Thread(target=lambda: answer.append(client.run(task(work, 3, journal, gate))))
        caller.start()  # the only worker is idle: the call goes straight to it
        _until("the call running on node 0", lambda: len(_starts(journal)) == 1)
        agents.join(client, 1)
        agents.signal(0, signal.SIGKILL)
        _until("the call running again on node 1", lambda: len(_starts(journal)) == 2)
        Path(gate).touch()
        within("the direct call", caller.join)
    assert answer == [9]


def _stream_on_node_0_then_lose_it(
    agents: Agents, client: PoolClient, journal: str, gate: str, before: int
) -> RemoteStream[int]:
    _watch(agents, client, 0)
    stream: RemoteStream[int] = client.stream(task(count_up, journal, gate, before, 5))
    _until("the stream running on node 0", lambda: len(_starts(journal)) == 1)
    agents.join(client, 1)
    return stream


def _values_here(stream: RemoteStream[int]) -> int:
    """Values that reached this client and that the reader has not taken."""
    channel = stream._channel
    with channel.changed:
        entries = [entry for entry in channel.items if entry is not None]
    return sum(len(wire.unpack_values(frames[0])) if packed else 1 for frames, _, packed in entries)


def test_a_stream_lost_before_its_reader_had_a_value_starts_again_elsewhere(
    agents: Agents, journal: str, tmp_path: Path
) -> None:
    gate = str(tmp_path / "gate")
    with Client(agents, 1, rerun_lost=True) as client:
        stream = _stream_on_node_0_then_lose_it(agents, client, journal, gate, before=3)
        _until("three values here, unread", lambda: _values_here(stream) == 3)
        agents.signal(0, signal.SIGKILL)
        _until("the stream running again on node 1", lambda: len(_starts(journal)) == 2)
        Path(gate).touch()
        assert within("the stream", lambda: list(stream)) == [0, 1, 2, 3, 4]  # each value once


def test_a_stream_lost_after_its_reader_had_a_value_fails_saying_so(
    agents: Agents, journal: str, tmp_path: Path
) -> None:
    gate = str(tmp_path / "gate")
    with Client(agents, 1, rerun_lost=True) as client:
        stream = _stream_on_node_0_then_lose_it(agents, client, journal, gate, before=1)
        assert within("the first value", lambda: next(stream)) == 0
        agents.signal(0, signal.SIGKILL)
        with pytest.raises(NodeLostError, match=r"had delivered 1 value to its reader.*not restarted midway"):
            within("the next value", lambda: next(stream))
    assert len(_starts(journal)) == 1, "it was not run again"


def test_a_node_whose_agent_stops_unasked_is_lost_at_once(agents: Agents, journal: str, tmp_path: Path) -> None:
    gate = str(tmp_path / "gate")
    holder = Client(agents, 2, rerun_lost=True, node_timeout=600.0)
    with holder as client:
        futures = [client.submit(task(work, i, journal, gate)) for i in range(2)]
        _until("a task running on each node", lambda: len(_starts(journal)) == 2)
        agents.signal(1, signal.SIGTERM)  # the agent stops its workers and says goodbye
        within("the node that said goodbye declared lost", holder.told.wait)
        assert holder.lost[0][0] == 1 and "stopped without being asked" in holder.lost[0][1]
        Path(gate).touch()
        assert [within("a result", f.result) for f in futures] == [0, 1]


def test_at_runs_on_every_worker_of_the_nodes_live_when_it_is_called(agents: Agents, journal: str) -> None:
    with Client(agents, 2, rerun_lost=True) as client:
        assert client.broadcast_width() == 2
        assert within("@ on two nodes", lambda: client.run_on_all(task(work, 2, journal))) == [4, 4]
        client.fail_node(1, "the provider says node 1 is gone")
        _until("node 1 lost", lambda: client.broadcast_width() == 1)
        assert within("@ on the node left", lambda: client.run_on_all(task(work, 3, journal))) == [9]
        agents.join(client, 2)
        assert client.broadcast_width() == 2
        assert within("@ with the new node", lambda: client.run_on_all(task(work, 4, journal))) == [16, 16]
        assert within(
            "a stream on all", lambda: [list(s) for s in client.stream_on_all(task(count_up, journal, "", 9, 2))]
        ) == [[0, 1], [0, 1]]


def test_a_client_with_no_node_queues_work_until_one_joins(agents: Agents, journal: str) -> None:
    with Client(agents, 0, rerun_lost=True, wait_for_nodes=True) as client:
        batch = client.submit_batch([task(work, i, journal) for i in range(5)])
        load = client.load()
        assert (load.queued, load.running, load.slots, dict(load.per_node)) == (5, 0, 0, {})
        with pytest.raises(NodeLostError, match="no live node"):
            client.run_on_all(task(work, 0, journal))
        agents.join(client, 0)
        assert within("the gather on the node that joined", batch.wait) == (0, 1, 4, 9, 16)


def test_a_client_with_no_node_that_does_not_wait_refuses_work(agents: Agents, journal: str) -> None:
    with Client(agents, 0) as client:
        with pytest.raises(NodeLostError, match="the pool has no node to run it"):
            client.submit(task(work, 1, journal)).result(timeout=10)


def test_what_waits_for_a_node_fails_when_the_pool_gives_up(agents: Agents, journal: str, tmp_path: Path) -> None:
    gate = str(tmp_path / "gate")
    with Client(agents, 1, rerun_lost=True, wait_for_nodes=True) as client:
        _watch(agents, client, 0)
        futures = [client.submit(task(work, i, journal, gate)) for i in range(3)]
        _until("the first running", lambda: len(_starts(journal)) == 1)
        agents.signal(0, signal.SIGKILL)
        _until("every task waiting for a node", lambda: client.load().queued == 3)
        assert not any(f.done() for f in futures)
        client.fail_waiting("the pool could not replace node 0: no capacity")
        for future in futures:
            with pytest.raises(NodeLostError, match="could not replace node 0: no capacity"):
                future.result(timeout=10)


# -- through a pool: each function's retries reach the client --------------------------------


@sky.compute(retries=0)
def at_most_once(index: int, journal: str, gate: str) -> int:
    return work(index, journal, gate)


@sky.compute
def again_once(index: int, journal: str, gate: str) -> int:
    return work(index, journal, gate)


def test_a_pools_task_follows_its_functions_retries_when_its_node_is_killed(journal: str, tmp_path: Path) -> None:
    gate = str(tmp_path / "gate")
    with sky.ComputePool(nodes=2, display="quiet", provider=sky.Local(grace_period=10)) as pool:
        once = pool.submit(at_most_once(1, journal, gate))
        twice = pool.submit(again_once(2, journal, gate))
        _until("both running", lambda: len(_starts(journal)) == 2)
        agent = dict(_starts(journal))["1"]
        os.kill(agent, signal.SIGKILL)  # the node of the at-most-once task; its workers die with it
        with pytest.raises(NodeLostError, match=r"runs at most once \(sky\.compute\(retries=0\)\)"):
            within("the at-most-once task", once.result)
        Path(gate).touch()
        assert within("the other task", twice.result) == 4
        assert within(
            "a gather on the node left",
            lambda: sky.gather(*(again_once(i, journal, "") for i in range(10, 13))) >> pool,
        ) == (100, 121, 144)
    assert [what for what, _ in _starts(journal)].count("1") == 1
