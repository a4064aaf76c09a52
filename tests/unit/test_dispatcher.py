"""The dispatcher alone, no sockets: windows, cancellation, node loss, re-runs.

The state machine at the end drives it with hypothesis through interleavings of submit,
send, complete, cancel, recall answers, worker death, interruption, node loss (and a lost
node answering late), nodes leaving and joining, and the pool giving up on nodes, with a
model of the workers (each runs what it was sent in order, one at a time), for pools that
re-run lost work or not and wait for nodes or not. It checks after every step that no
task ends twice (the first result wins), nothing cancelled starts, no task runs more
often than its retries allow, a lost node's tasks run again exactly when the rules say
and go to the front of the queue, only what was on a lost node fails unless no node is
left, no task waits in the queue while a worker is idle, a worker never holds more than
its window, and the load adds up.
"""

from __future__ import annotations

from collections import deque

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from skyward.transport.dispatcher import MAX_WINDOW, PREFETCH_SECONDS, CancelOutcome, Dispatcher

QUICK = b"q" * 16
SLOW = b"s" * 16


def test_a_function_never_measured_travels_one_task_at_a_time() -> None:
    d = Dispatcher([2])
    for task_id in range(1, 11):
        d.submit(task_id, QUICK)
    sent = d.assign(now=0.0)
    assert sorted(len(ids) for _, ids in sent) == [1, 1]


def test_quick_tasks_fill_the_window_once_measured() -> None:
    d = Dispatcher([1])
    d.submit(1, QUICK)
    [(key, [first])] = d.assign(0.0)
    assert d.completed(key, first, seconds=0.00005, now=0.001)
    for task_id in range(2, 100):
        d.submit(task_id, QUICK)
    [(_, ids)] = d.assign(0.002)
    assert len(ids) == MAX_WINDOW


def test_a_short_task_never_waits_behind_a_slow_one_while_a_worker_is_idle() -> None:
    """The joblib case: a 3 s task and 0.1 s tasks of one function. Once the function is
    measured slower than the prefetch budget, nothing is sent ahead of need."""
    d = Dispatcher([2])
    d.submit(1, SLOW)
    d.submit(2, SLOW)
    first = dict((ids[0], key) for key, ids in d.assign(0.0))
    assert d.completed(first[2], 2, seconds=0.1, now=0.1)  # the quick one is measured
    for task_id in range(3, 8):
        d.submit(task_id, SLOW)
    sent = d.assign(0.1)
    assert [(first[2], [3])] == sent  # the busy worker (running task 1) gets nothing more
    assert d.window(first[1], SLOW) == 1


def test_the_window_covers_about_one_prefetch_budget_of_work() -> None:
    d = Dispatcher([1])
    d.submit(1, QUICK)
    [(key, _)] = d.assign(0.0)
    d.completed(key, 1, seconds=PREFETCH_SECONDS / 4, now=0.0)
    assert d.window(key, QUICK) == 5


def test_a_cancelled_queued_task_never_runs() -> None:
    d = Dispatcher([1])
    d.submit(1, QUICK)
    d.submit(2, QUICK)
    assert d.cancel(2) is CancelOutcome.DROPPED
    d.completed(*_only(d.assign(0.0)), seconds=0.0, now=0.0)
    assert d.assign(0.0) == []
    assert d.pending() == 0


def test_a_sent_task_that_is_cancelled_is_recalled_from_its_worker() -> None:
    d = Dispatcher([1])
    d.submit(1, QUICK)
    key, task = _only(d.assign(0.0))
    assert d.cancel(task) is CancelOutcome.RECALLING
    assert d.recalls() == {key: [task]}
    assert d.recalls() == {}  # handed out once
    assert d.recalled(key, task) is True  # the worker dropped it: reported cancelled
    assert d.pending() == 0


def test_an_abandoned_task_that_had_begun_delivers_nothing() -> None:
    d = Dispatcher([1])
    d.submit(1, QUICK)
    key, task = _only(d.assign(0.0))
    d.cancel(task)
    assert d.completed(key, task, seconds=0.0, now=0.0) is False


def test_a_task_for_a_lost_node_fails_at_once() -> None:
    d = Dispatcher([1, 1])
    d.node_lost(1, "gone")
    assert d.submit(1, QUICK, target=(1, 0)) is not None
    assert d.submit(2, QUICK, target=(0, 0)) is None


def test_losing_a_node_fails_what_it_held_and_what_was_meant_for_it() -> None:
    d = Dispatcher([1, 1])
    d.submit(1, QUICK, target=(1, 0))
    d.submit(2, QUICK, target=(1, 0))
    d.assign(0.0)
    failed = d.node_lost(1, "gone")
    assert sorted(f.task_id for f in failed) == [1, 2]
    assert all(f.node_lost for f in failed)


def test_losing_the_last_node_fails_everything_queued() -> None:
    d = Dispatcher([1])
    for task_id in range(1, 5):
        d.submit(task_id, QUICK)
    d.assign(0.0)
    assert sorted(f.task_id for f in d.node_lost(0, "gone")) == [1, 2, 3, 4]
    assert d.submit(9, QUICK) is not None


def test_an_interrupted_node_gives_its_rerunnable_tasks_back_and_the_first_result_wins() -> None:
    d = Dispatcher([1, 1], rerun_lost=True)
    d.submit(1, QUICK)
    d.submit(2, QUICK)
    held = {ids[0]: key for key, ids in d.assign(0.0)}
    d.drain(held[1][0])
    assert d.assign(0.0) == []  # the other worker is busy with task 2
    d.completed(held[2], 2, 0.0, 0.0)
    [(elsewhere, [again])] = d.assign(0.0)
    assert again == 1 and elsewhere != held[1]
    assert d.completed(held[1], 1, 0.0, 0.0) is True  # the late result from the old node wins
    assert d.completed(elsewhere, 1, 0.0, 0.0) is False


def test_tasks_waiting_behind_a_long_one_are_stolen_by_an_idle_worker() -> None:
    d = Dispatcher([2])
    d.submit(1, QUICK)
    [(key, [first])] = d.assign(0.0)[:1]
    d.completed(key, first, seconds=0.00001, now=0.0)  # measured instant: window 16
    for task_id in range(2, 8):
        d.submit(task_id, QUICK)
    sent = dict(d.assign(0.0))
    busy, idle = sorted(sent, key=lambda k: -len(sent[k]))
    for task_id in sent[idle]:
        d.completed(idle, task_id, seconds=0.00001, now=0.01)
    d.steal(0.01)
    assert d.recalls() == {}  # not stuck yet
    d.steal(0.2)  # the busy worker's first task has run 0.2 s
    recalls = d.recalls()
    assert recalls == {busy: sent[busy][1:]}
    for task_id in recalls[busy]:
        assert d.recalled(busy, task_id) is False  # still wanted: back to the queue
    [(taker, stolen)] = d.assign(0.2)
    assert taker == idle and sorted(stolen) == sent[busy][1:]


def test_a_replaced_node_fails_what_the_old_one_still_held() -> None:
    d = Dispatcher([1])
    d.submit(1, QUICK, target=(0, 0))
    d.assign(0.0)
    assert d.set_node(0, 1) == [1]


def test_a_node_that_leaves_fails_what_it_held_and_its_queue_goes_to_the_others() -> None:
    d = Dispatcher([1, 1])
    d.submit(1, SLOW, target=(1, 0))
    d.submit(2, SLOW, target=(1, 0))  # waits behind task 1 on node 1 alone
    assert d.assign(0.0) == [((1, 0), [1])]
    d.drain(1)
    assert d.node_load(1) == 1  # task 1 still runs there
    assert sorted(f.task_id for f in d.remove_node(1)) == [1, 2]
    assert d.node_load(1) == 0 and d.workers() == [(0, 0)]
    assert d.submit(3, SLOW, target=(1, 0)) == "the pool has no worker 0 on node 1"
    d.submit(4, SLOW)
    assert d.assign(0.1) == [((0, 0), [4])]


def test_a_node_that_joins_takes_queued_work_at_once() -> None:
    d = Dispatcher([1])
    d.submit(1, SLOW)
    d.submit(2, SLOW)
    assert d.assign(0.0) == [((0, 0), [1])]
    assert d.set_node(1, 1) == []
    assert d.assign(0.1) == [((1, 0), [2])]


def test_a_pool_with_every_remaining_node_lost_refuses_new_work() -> None:
    d = Dispatcher([1, 1])
    d.remove_node(1)
    d.node_lost(0, "gone")
    assert d.submit(1, QUICK) == "every node of the pool is gone"


def test_a_direct_call_reserves_only_an_idle_worker() -> None:
    d = Dispatcher([1])
    key = d.reserve(0.0)
    assert key == (0, 0)
    assert d.reserve(0.0) is None
    d.release(key, QUICK, 0.001)
    assert d.reserve(0.0) == (0, 0)


def test_tasks_queued_behind_a_long_direct_call_are_stolen() -> None:
    """``slow() >> pool`` on one thread, a gather on another: the gather's tasks sent to the
    worker busy with the direct call are taken back once it has run 50 ms."""
    d = Dispatcher([2])
    d.submit(1, QUICK)
    [(first, [task])] = d.assign(0.0)
    d.completed(first, task, seconds=0.00001, now=0.0)  # measured quick: window 16
    busy = d.reserve(0.0)
    assert busy is not None
    for task_id in range(2, 6):
        d.submit(task_id, QUICK)
    sent = dict(d.assign(0.001))
    behind = sent.get(busy, [])
    assert behind, "the busy worker took some (its load is 1 of 16)"
    other = next(k for k in sent if k != busy)
    for task_id in sent[other]:
        d.completed(other, task_id, seconds=0.00001, now=0.002)
    d.steal(0.2)
    assert d.recalls() == {busy: behind}  # all of them: the direct call runs first


def test_a_lost_nodes_running_tasks_go_back_to_the_front_of_the_queue_and_run_elsewhere() -> None:
    d = Dispatcher([1, 1], rerun_lost=True)
    for task_id in range(1, 6):
        d.submit(task_id, SLOW)
    held = {key: ids for key, ids in d.assign(0.0)}
    assert held == {(0, 0): [1], (1, 0): [2]}
    assert d.node_lost(1, "node 1 stopped answering") == []
    assert d.queued() == [2, 3, 4, 5]  # in front of what waited
    d.completed((0, 0), 1, 0.1, 0.1)
    assert d.assign(0.1) == [((0, 0), [2])]


def test_a_task_whose_function_runs_at_most_once_fails_with_its_node() -> None:
    d = Dispatcher([1, 1], rerun_lost=True)
    d.submit(1, SLOW, retries=0)
    d.submit(2, SLOW, retries=0)
    d.assign(0.0)
    [failure] = d.node_lost(1, "node 1 stopped answering")
    assert failure.task_id == 2 and failure.node_lost
    assert failure.reason == (
        "node 1 stopped answering; its function runs at most once (sky.compute(retries=0)), so it was not run again"
    )
    assert d.is_pending(1)


def test_a_task_runs_again_as_many_times_as_its_retries_and_no_more() -> None:
    d = Dispatcher([1, 1, 1, 1], rerun_lost=True)
    d.submit(1, SLOW, retries=2)
    for node in range(3):
        [(key, [task])] = d.assign(float(node))
        assert key[0] == node and task == 1
        failures = d.node_lost(node, f"node {node} died")
        if node < 2:
            assert failures == [] and d.queued() == [1]
    assert [f.reason for f in failures] == [
        "node 2 died; it had been run again 2 times already, all its function allows "
        "(sky.compute(retries=2) raises that)"
    ]
    assert d.pending() == 0


def test_a_pool_that_does_not_rerun_lost_work_fails_what_the_node_ran() -> None:
    d = Dispatcher([1, 1])
    d.submit(1, SLOW)
    d.submit(2, SLOW)
    d.assign(0.0)
    [failure] = d.node_lost(1, "gone")
    assert failure.task_id == 2 and "does not run a lost node's tasks again" in failure.reason


def test_the_first_result_of_a_task_run_again_wins_even_when_it_comes_from_the_lost_node() -> None:
    d = Dispatcher([1, 1], rerun_lost=True)
    d.submit(1, SLOW)
    d.submit(2, SLOW)
    d.assign(0.0)
    d.node_lost(1, "stopped answering")  # task 2 goes back to the queue
    d.completed((0, 0), 1, 0.1, 0.1)
    assert d.assign(0.1) == [((0, 0), [2])]
    assert d.completed((1, 0), 2, 0.1, 0.2) is True  # the stopped node came back and answered first
    assert d.completed((0, 0), 2, 0.1, 0.3) is False  # the re-run's result is dropped
    assert d.pending() == 0 and d.inflight((0, 0)) == []


def test_a_lost_stream_starts_again_only_when_the_client_says_its_reader_had_nothing() -> None:
    d = Dispatcher([2, 1], rerun_lost=True)
    d.submit(1, SLOW, stream=True)
    d.submit(2, SLOW, stream=True)
    d.submit(3, SLOW)
    held = {ids[0]: key for key, ids in d.assign(0.0)}
    assert all(key[0] == 0 for key in (held[1], held[2]))
    asked: list[int] = []

    def restart(task_id: int) -> str | None:
        asked.append(task_id)
        return "the stream had delivered 3 values to its reader" if task_id == 2 else None

    failures = d.node_lost(0, "node 0 died", restart)
    assert sorted(asked) == [1, 2]
    assert [(f.task_id, f.reason) for f in failures] == [
        (2, "node 0 died; the stream had delivered 3 values to its reader")
    ]
    assert d.queued() == [1]


def test_a_drained_node_keeps_the_tasks_that_may_run_only_once_and_its_streams() -> None:
    d = Dispatcher([1, 1], rerun_lost=True)
    d.submit(1, SLOW, retries=0)
    d.submit(2, SLOW, stream=True)
    held = {ids[0]: key for key, ids in d.assign(0.0)}
    d.drain(held[1][0])
    d.drain(held[2][0])
    assert d.queued() == []
    assert d.node_load(0) == 1 and d.node_load(1) == 1  # they finish where they are


def test_with_no_node_left_work_fails_unless_the_pool_waits_for_nodes() -> None:
    strict = Dispatcher([1])
    strict.submit(1, SLOW)
    strict.submit(2, SLOW)
    strict.assign(0.0)
    failures = strict.node_lost(0, "gone")
    assert [(f.task_id, f.reason) for f in failures] == [
        (1, "gone; this pool does not run a lost node's tasks again"),
        (2, "every node of the pool is gone (gone)"),
    ]
    assert strict.submit(3, SLOW) == "every node of the pool is gone"

    waiting = Dispatcher([1], rerun_lost=True, wait_for_nodes=True)
    waiting.submit(1, SLOW)
    waiting.submit(2, SLOW, target=(0, 0))
    waiting.assign(0.0)
    assert [f.task_id for f in waiting.node_lost(0, "gone")] == [2]  # only the one meant for that node
    assert waiting.submit(3, SLOW) is None
    assert waiting.remove_node(0) == []
    assert waiting.queued() == [1, 3]
    waiting.set_node(7, 2)  # a node joins: the queued work goes there
    assert sorted(t for _, ids in waiting.assign(1.0) for t in ids) == [1, 3]


def test_a_client_born_empty_refuses_work_unless_it_waits_for_nodes() -> None:
    assert Dispatcher([]).submit(1, QUICK) == "the pool has no node to run it"
    d = Dispatcher([], wait_for_nodes=True)
    assert d.submit(1, QUICK) is None
    assert d.assign(0.0) == []
    d.set_node(0, 1)
    assert d.assign(0.1) == [((0, 0), [1])]


def test_fail_waiting_fails_only_what_waits_when_no_node_can_take_it() -> None:
    d = Dispatcher([1, 1], rerun_lost=True, wait_for_nodes=True)
    d.submit(1, SLOW)
    d.submit(2, SLOW, retries=0)  # stays on its node when drained
    d.submit(3, SLOW)
    d.submit(4, SLOW)
    assert [ids for _, ids in d.assign(0.0)] == [[1], [2]]
    d.drain(1)  # a draining node takes nothing new, but node 0 can still take it
    assert d.fail_waiting("no capacity") == []
    d.node_lost(0, "gone")
    failures = d.fail_waiting("the pool could not replace its nodes: no capacity")
    assert sorted(f.task_id for f in failures) == [1, 3, 4]  # 1 ran on node 0; 2 runs on on the draining node
    assert {f.reason for f in failures} == {"the pool could not replace its nodes: no capacity"}
    assert d.is_pending(2) and d.submit(5, SLOW) is None  # work queued later waits again


def test_the_load_counts_what_waits_and_what_runs_on_the_live_nodes() -> None:
    d = Dispatcher([2, 1, 1], rerun_lost=True)
    for task_id in range(1, 6):
        d.submit(task_id, SLOW)
    d.submit(6, SLOW, target=(2, 0))
    d.assign(1.0)  # one each (a function not yet measured): 1, 2 on node 0, 3 on node 1, 6 on node 2
    d.drain(1)  # its task 3 goes back to the queue
    d.node_lost(0, "gone")  # its tasks 1 and 2 too
    load = d.load(1.5)
    assert (load.queued, load.running, load.slots) == (5, 1, 1)
    assert load.per_node == {2: 1} and load.nodes == 1
    d.submit(7, SLOW, target=(2, 0))  # waits for that worker alone: not counted as queued
    assert d.load(1.6).queued == 5


def test_a_node_is_idle_since_the_turn_it_ran_out_of_work() -> None:
    d = Dispatcher([1, 1])
    assert d.load(0.0).idle_since == {0: 0.0, 1: 0.0}
    d.submit(1, SLOW)
    d.submit(2, SLOW)
    d.assign(1.0)
    assert d.load(1.0).idle_since == {}
    d.completed((0, 0), 1, 0.5, 1.5)
    d.assign(2.0)  # nothing more to send: node 0 idle since this turn
    assert d.load(3.0).idle_since == {0: 2.0}
    assert d.reserve(3.5) == (0, 0)  # a direct call makes it busy
    assert d.load(3.6).idle_since == {}
    d.release((0, 0))
    assert d.load(4.0).idle_since == {0: 4.0}
    d.submit(3, SLOW, target=(0, 0))  # work for it alone makes it busy before it is sent
    assert d.load(4.1).idle_since == {}


def test_at_runs_on_every_worker_of_the_nodes_neither_lost_nor_draining() -> None:
    d = Dispatcher([2, 1, 1])
    d.node_lost(1, "gone")
    d.drain(2)
    assert d.live_workers() == [(0, 0), (0, 1)]
    d.set_node(5, 1)
    assert d.live_workers() == [(0, 0), (0, 1), (5, 0)]
    assert d.reserve_all(d.live_workers(), 0.0)
    assert not d.reserve_all([(2, 0)], 0.0)  # a draining node's worker is not usable


def _only(sent: list[tuple[tuple[int, int], list[int]]]) -> tuple[tuple[int, int], int]:
    [(key, [task])] = sent
    return key, task


class DispatcherMachine(RuleBasedStateMachine):
    """A model of the workers around a real Dispatcher, for a pool drawn to re-run lost
    work or not and to wait for nodes or not. A lost node's workers may still answer
    later (a stopped machine that resumes): their late results race the re-runs."""

    def __init__(self) -> None:
        super().__init__()
        self.d = Dispatcher([2, 1])
        self.next_id = 1
        self.clock = 0.0
        self.local: dict[tuple[int, int], deque[int]] = {k: deque() for k in self.d.workers()}
        self.zombies: dict[tuple[int, int], deque[int]] = {}  # what a lost node's workers still hold
        self.dead: set[tuple[int, int]] = set()
        self.lost: set[int] = set()
        self.gone: set[int] = set()  # nodes that left the pool (elastic pools shrink and grow)
        self.draining: set[int] = set()
        self.open: dict[int, bytes] = {}  # submitted, not yet ended
        self.targets: dict[int, tuple[int, int] | None] = {}
        self.retries: dict[int, int] = {}
        self.streams: set[int] = set()
        self.delivered: set[int] = set()  # streams whose reader has had a value
        self.reruns: dict[int, int] = {}  # as the model counts them: the dispatcher must agree
        self.placed: dict[int, int] = {}  # times a task was sent and not taken back unrun
        self.ended: set[int] = set()
        self.dropped: set[int] = set()
        self.started: set[int] = set()
        self.abandoned: set[int] = set()
        self.recall_inbox: dict[tuple[int, int], list[int]] = {}

    @initialize(rerun=st.booleans(), wait=st.booleans())
    def configure(self, rerun: bool, wait: bool) -> None:
        self.d.rerun_lost = rerun
        self.d.wait_for_nodes = wait

    def _end(self, task_id: int) -> None:
        assert task_id not in self.ended, f"task {task_id} ended twice"
        self.ended.add(task_id)
        self.open.pop(task_id, None)

    def _present(self) -> set[int]:
        return {0, 1} - self.gone - self.lost

    def _record(self, sent: list[tuple[tuple[int, int], list[int]]]) -> None:
        for key, ids in sent:
            assert key not in self.dead and key[0] not in self.lost and key[0] not in self.gone
            for task_id in ids:
                assert task_id not in self.dropped, "a cancelled task was sent"
                target = self.targets[task_id]
                assert target is None or target == key
                self.local[key].append(task_id)
                self.placed[task_id] = self.placed.get(task_id, 0) + 1
                allowed = self.retries[task_id] if self.d.rerun_lost and target is None else 0
                assert self.placed[task_id] <= 1 + allowed, f"task {task_id} ran more than its retries allow"
            assert len(self.local[key]) <= MAX_WINDOW

    @rule(
        slow=st.booleans(),
        where=st.sampled_from([None, None, (0, 0), (0, 1), (1, 0)]),
        retries=st.sampled_from([0, 1, 1, 2]),
        stream=st.sampled_from([False, False, False, True]),
    )
    def submit(self, slow: bool, where: tuple[int, int] | None, retries: int, stream: bool) -> None:
        self._submit(slow, where, retries, stream)

    def _submit(self, slow: bool, where: tuple[int, int] | None, retries: int, stream: bool) -> None:
        target = where
        task_id = self.next_id
        self.next_id += 1
        problem = self.d.submit(task_id, SLOW if slow else QUICK, target=target, retries=retries, stream=stream)
        refused = (target is not None and target[0] in self.lost | self.gone) or (
            target is None and not self.d.wait_for_nodes and not self._present()
        )
        assert (problem is not None) == refused, problem
        if problem is None:
            self.open[task_id] = SLOW if slow else QUICK
            self.targets[task_id] = target
            self.retries[task_id] = retries
            if stream:
                self.streams.add(task_id)

    @rule(count=st.integers(2, 6), retries=st.sampled_from([0, 1, 2]))
    def gather(self, count: int, retries: int) -> None:
        """Several tasks at once: a backlog waits in the queue."""
        for _ in range(count):
            self._submit(slow=True, where=None, retries=retries, stream=False)

    @rule()
    def send(self) -> None:
        self._record(self.d.assign(self.clock))
        for key, ids in self.d.recalls().items():
            self.recall_inbox.setdefault(key, []).extend(ids)

    @rule(data=st.data(), seconds=st.sampled_from([0.00001, 0.0005, 0.1]))
    def complete(self, data: st.DataObject, seconds: float) -> None:
        busy = [k for k, q in self.local.items() if q]
        if not busy:
            return
        key = data.draw(st.sampled_from(busy))
        task_id = self.local[key].popleft()
        self.started.add(task_id)
        self.clock += seconds
        wanted = self.d.completed(key, task_id, seconds, self.clock)
        if wanted:
            assert task_id not in self.abandoned
            self._end(task_id)

    @rule(data=st.data())
    def a_stream_yields(self, data: st.DataObject) -> None:
        running = [q[0] for q in self.local.values() if q and q[0] in self.streams and q[0] in self.open]
        if running:
            self.delivered.add(data.draw(st.sampled_from(running)))

    @rule(data=st.data())
    def a_lost_node_answers_late(self, data: st.DataObject) -> None:
        """A stopped node resumes and delivers what it was running: the first result wins."""
        held = [k for k, q in self.zombies.items() if q]
        if not held:
            return
        key = data.draw(st.sampled_from(held))
        task_id = self.zombies[key].popleft()
        if self.d.completed(key, task_id, 0.001, self.clock):
            assert task_id not in self.abandoned
            self._end(task_id)

    @rule(data=st.data())
    def answer_recalls(self, data: st.DataObject) -> None:
        if not self.recall_inbox:
            return
        key = data.draw(st.sampled_from(sorted(self.recall_inbox)))
        ids = set(self.recall_inbox.pop(key))
        queue = self.local[key]
        # the head of the worker's queue is running: only what waits behind it is dropped
        dropped = [t for t in list(queue)[1:] if t in ids]
        for task_id in dropped:
            queue.remove(task_id)
            self.placed[task_id] -= 1  # it never began
            if self.d.recalled(key, task_id):
                self._end(task_id)

    @rule(seconds=st.sampled_from([0.01, 0.06, 1.0]))
    def steal(self, seconds: float) -> None:
        self.clock += seconds
        self.d.steal(self.clock)
        for key, ids in self.d.recalls().items():
            self.recall_inbox.setdefault(key, []).extend(ids)

    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        if not self.open:
            return
        task_id = data.draw(st.sampled_from(sorted(self.open)))
        outcome = self.d.cancel(task_id)
        if outcome is CancelOutcome.DROPPED:
            self.dropped.add(task_id)
            self._end(task_id)
        elif outcome is CancelOutcome.RECALLING:
            self.abandoned.add(task_id)

    @precondition(lambda self: len(self.dead) < 2)
    @rule(key=st.sampled_from([(0, 0), (0, 1), (1, 0)]))
    def worker_dies(self, key: tuple[int, int]) -> None:
        if key in self.dead or key[0] in self.lost or key[0] in self.gone:
            return
        for task_id in self.d.worker_died(key):
            self._end(task_id)
        self.local[key].clear()
        self.recall_inbox.pop(key, None)
        self.dead.add(key)

    @rule(key=st.sampled_from([(0, 0), (0, 1), (1, 0)]))
    def worker_restarts(self, key: tuple[int, int]) -> None:
        if key in self.dead:
            self.dead.discard(key)
            self.d.worker_ready(key)

    def _may_run_again(self, task_id: int) -> bool:
        return (
            self.d.rerun_lost
            and self.targets[task_id] is None
            and task_id not in self.abandoned
            and task_id not in self.delivered
            and self.reruns.get(task_id, 0) < self.retries[task_id]
        )

    @rule(node=st.sampled_from([0, 1]))
    def interrupted(self, node: int) -> None:
        if node in self.lost or node in self.gone:
            return
        held = {t for key in self.d.workers() if key[0] == node for t in self.d.inflight(key)}
        self.d.drain(node)
        self.draining.add(node)
        moved = {t for t in held if t in self.d.queued()}
        for task_id in held:
            expected = self._may_run_again(task_id) and task_id not in self.streams
            assert (task_id in moved) == expected, f"drain moved {task_id}: {task_id in moved}"
        for task_id in moved:
            self.reruns[task_id] = self.reruns.get(task_id, 0) + 1

    @rule(node=st.sampled_from([0, 1]))
    def node_lost(self, node: int) -> None:
        if node in self.lost or node in self.gone:
            return
        self.lost.add(node)
        keys = [key for key in self.d.workers() if key[0] == node]
        held = [t for key in keys for t in self.d.inflight(key)]  # in worker, then send order
        pending_before = {t for t in self.open if self.d.is_pending(t)}
        queued_before = self.d.queued()
        asked: list[int] = []

        def restart(task_id: int) -> str | None:
            asked.append(task_id)
            assert task_id in self.streams, "only a stream's reader is asked"
            return "it had delivered values" if task_id in self.delivered else None

        failures = self.d.node_lost(node, "gone", restart)
        failed = {f.task_id for f in failures}
        again = [t for t in held if t not in failed and self.d.is_pending(t)]
        if self.d.wait_for_nodes or self._present():
            for task_id in held:
                may = self._may_run_again(task_id)
                assert (task_id in again) == may, f"task {task_id}: re-run {task_id in again}"
            assert self.d.queued()[: len(again)] == again, "a lost node's tasks go back to the front, in order"
            assert self.d.queued()[len(again) :] == [t for t in queued_before if t not in failed]
            on_node = set(held) | {t for t in pending_before if self.targets.get(t) and self.targets[t][0] == node}
            assert failed <= on_node, "only what was on the lost node fails"
        else:
            assert self.d.pending() == 0, "with no node left and no waiting, everything fails"
        for task_id in again:
            self.reruns[task_id] = self.reruns.get(task_id, 0) + 1
        for failure in failures:
            self._end(failure.task_id)
        for key in keys:
            self.zombies[key] = self.local[key]  # a stopped node may yet answer
            self.local[key] = deque()
            self.recall_inbox.pop(key, None)

    @rule(node=st.sampled_from([0, 1]))
    def node_leaves(self, node: int) -> None:
        if node in self.gone:
            return
        self.gone.add(node)
        self.lost.discard(node)
        self.draining.discard(node)
        failures = self.d.remove_node(node)
        for failure in failures:
            self._end(failure.task_id)
        if not self.d.wait_for_nodes and not self._present():
            assert self.d.pending() == 0
        assert self.d.node_load(node) == 0
        assert all(key[0] != node for key in self.d.workers())
        for key in list(self.local):
            if key[0] == node:
                self.local[key].clear()
                self.zombies.pop(key, None)
                self.recall_inbox.pop(key, None)
                self.dead.discard(key)

    @rule(node=st.sampled_from([0, 1]))
    def lost_node_replaced(self, node: int) -> None:
        """A new node takes a lost one's index (the pool's replacement)."""
        if node not in self.lost:
            return
        self.lost.discard(node)
        self.draining.discard(node)
        assert self.d.set_node(node, 2 if node == 0 else 1) == []  # the lost node's work was settled
        for key in list(self.local):
            if key[0] == node:
                self.zombies.pop(key, None)  # the client closed the old node's sockets
                self.recall_inbox.pop(key, None)
                self.dead.discard(key)

    @rule(node=st.sampled_from([0, 1]))
    def node_joins(self, node: int) -> None:
        if node not in self.gone:
            return
        self.gone.discard(node)
        assert self.d.set_node(node, 2 if node == 0 else 1) == []  # a new node holds nothing

    @rule()
    def the_pool_gives_up_waiting(self) -> None:
        queued = set(self.d.queued())
        failures = self.d.fail_waiting("no node will come")
        if self._present() - self.draining:
            assert failures == []
        else:
            assert {f.task_id for f in failures} == queued
        for failure in failures:
            self._end(failure.task_id)

    @invariant()
    def nothing_open_is_forgotten(self) -> None:
        for task_id in self.open:
            if task_id not in self.abandoned:
                assert self.d.is_pending(task_id), f"task {task_id} was dropped without an ending"

    @invariant()
    def the_load_adds_up(self) -> None:
        load = self.d.load(self.clock)
        live = self._present() - self.draining
        assert set(load.per_node) == live
        assert load.slots == sum(1 for k in self.d.workers() if k[0] in live and k not in self.dead)
        assert set(load.idle_since) <= {n for n, held in load.per_node.items() if held == 0}
        inflight = sum(len(self.d.inflight(k)) for k in self.d.workers())
        assert load.running == inflight
        assert load.queued == len(self.d.queued())

    @invariant()
    def no_task_waits_while_a_worker_is_idle(self) -> None:
        self._record(self.d.assign(self.clock))
        queued = self.d.queued()
        if queued:
            idle = [k for k in self.d.workers() if self.d.is_usable(k) and not self.d.inflight(k)]
            assert not idle, f"tasks {queued} wait while {idle} is idle"


TestDispatcherMachine = DispatcherMachine.TestCase
TestDispatcherMachine.settings = settings(max_examples=300, stateful_step_count=50, deadline=None)
