"""When a worker reads its socket between tasks: a RECALL waiting there reaches the
tasks behind the one that ended once ``_RECALL_CHECK_SECONDS`` has passed since the last
read, and a run of quicker tasks pays no read per task (the per-task socket query cost a
gather of trivial tasks 15-20% of its throughput).

The worker runs in this process on an injected clock, its watch thread kept out of the
way (``watch_after``), so what decides is the clock alone, never the machine's speed."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import zmq

from skyward.agent import worker as worker_module
from skyward.agent.worker import Worker
from skyward.transport import serialize, wire

_NEVER = 3600.0  # the watch thread never takes the socket during these tasks


def double(x: int) -> int:
    return 2 * x


class SteppingClock:
    """Each reading is ``step`` seconds after the one before."""

    def __init__(self, step: float) -> None:
        self._times = itertools.count()
        self._step = step

    def __call__(self) -> float:
        return next(self._times) * self._step


@pytest.fixture
def make_worker(tmp_path: Path) -> Iterator[Callable[[Callable[[], float]], tuple[Worker, zmq.Socket[bytes]]]]:
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    control = context.socket(zmq.ROUTER)
    control.bind(f"ipc://{tmp_path}/control")
    made: list[Worker] = []

    def make(clock: Callable[[], float]) -> tuple[Worker, zmq.Socket[bytes]]:
        config = {
            "info": {"node": 0, "total_nodes": 1},
            "control": f"ipc://{tmp_path}/control",
            "bind": f"ipc://{tmp_path}/worker{len(made)}",
        }
        worker = Worker(config, clock=clock, watch_after=_NEVER)
        made.append(worker)
        client = context.socket(zmq.DEALER)
        client.setsockopt(zmq.LINGER, 0)
        client.connect(worker.endpoint)
        return worker, client

    yield make
    for worker in made:
        worker.close()
    context.destroy(linger=0)


def _send_tasks(client: zmq.Socket[bytes], ids: list[int]) -> None:
    fn_key, fn_bytes = serialize.dumps_function(double)
    entries: list[tuple[int, int, int]] = []
    frames: list[serialize.Frame] = []
    for task_id in ids:
        task = wire.encode_task(fn_key, fn_bytes, serialize.dumps_arguments(double, (task_id,), {}))
        entries.append((task_id, len(task), 0))
        frames.extend(task)
    wire.send_frames(client, [wire.pack_tasks(entries), *frames])


def _run_with_a_recall_waiting(worker: Worker, client: zmq.Socket[bytes]) -> dict[int, wire.Status]:
    """Ten tasks reach the worker; then, before the first begins, a RECALL of the nine
    behind the first is waiting on its socket. The worker runs its queue; what each task became."""
    ids = list(range(1, 11))
    _send_tasks(client, ids)
    assert worker.tasks.poll(5000)
    worker._receive()
    assert len(worker.pending) == 10
    client.send(wire.pack_recall(ids[1:]))
    assert worker.tasks.poll(5000), "the RECALL did not reach the worker's socket"
    worker._run_pending()
    worker._receive()  # whatever is still unread (answers RECALLED for what still waits)
    outcome: dict[int, wire.Status] = {}
    while len(outcome) < 10 and client.poll(5000):
        header, _parts = wire.open_message(wire.recv_frames(client))
        for task_id, status, _count, _seconds in wire.unpack_results(header):
            outcome.setdefault(task_id, status)
    return outcome


def test_a_recall_reaches_the_tasks_behind_one_that_ran_a_millisecond_or_more(
    make_worker: Callable[..., tuple[Worker, zmq.Socket[bytes]]],
) -> None:
    worker, client = make_worker(SteppingClock(worker_module._RECALL_CHECK_SECONDS))
    outcome = _run_with_a_recall_waiting(worker, client)
    assert outcome == {1: wire.Status.OK, **{task_id: wire.Status.RECALLED for task_id in range(2, 11)}}


def test_between_quicker_tasks_a_worker_does_not_read_its_socket(
    make_worker: Callable[..., tuple[Worker, zmq.Socket[bytes]]],
) -> None:
    """No time passes on this clock: the RECALL is read only once the queue is empty, so
    every task ran (and delivered its result, as a recalled task that began does)."""
    worker, client = make_worker(lambda: 0.0)
    outcome = _run_with_a_recall_waiting(worker, client)
    assert outcome == {task_id: wire.Status.OK for task_id in range(1, 11)}
