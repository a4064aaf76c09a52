"""The dispatcher alone, no sockets: windows, cancellation, node loss, re-runs.

The state machine at the end drives it with hypothesis through interleavings of submit,
send, complete, cancel, recall answers, worker death, interruption and node loss, with
a model of the workers (each runs what it was sent in order, one at a time), and checks
after every step that no task ends twice, nothing cancelled starts, no task waits in
the queue while a worker is idle, and a worker never holds more than its window.
"""

from __future__ import annotations

from collections import deque

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

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
    d = Dispatcher([1, 1])
    d.submit(1, QUICK, rerunnable=True)
    d.submit(2, QUICK, rerunnable=True)
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
    assert sorted(d.remove_node(1)) == [1, 2]
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


def _only(sent: list[tuple[tuple[int, int], list[int]]]) -> tuple[tuple[int, int], int]:
    [(key, [task])] = sent
    return key, task


class DispatcherMachine(RuleBasedStateMachine):
    """A model of the workers around a real Dispatcher."""

    def __init__(self) -> None:
        super().__init__()
        self.d = Dispatcher([2, 1])
        self.next_id = 1
        self.clock = 0.0
        self.local: dict[tuple[int, int], deque[int]] = {k: deque() for k in self.d.workers()}
        self.dead: set[tuple[int, int]] = set()
        self.lost: set[int] = set()
        self.gone: set[int] = set()  # nodes that left the pool (elastic pools shrink and grow)
        self.open: dict[int, bytes] = {}  # submitted, not yet ended
        self.targets: dict[int, tuple[int, int] | None] = {}
        self.ended: set[int] = set()
        self.dropped: set[int] = set()
        self.started: set[int] = set()
        self.abandoned: set[int] = set()
        self.recall_inbox: dict[tuple[int, int], list[int]] = {}

    def _end(self, task_id: int) -> None:
        assert task_id not in self.ended, f"task {task_id} ended twice"
        self.ended.add(task_id)
        self.open.pop(task_id, None)

    @rule(slow=st.booleans(), where=st.sampled_from([None, None, (0, 0), (0, 1), (1, 0)]))
    def submit(self, slow: bool, where: tuple[int, int] | None) -> None:
        target = where
        task_id = self.next_id
        self.next_id += 1
        problem = self.d.submit(task_id, SLOW if slow else QUICK, target=target, rerunnable=True)
        if problem is None:
            self.open[task_id] = SLOW if slow else QUICK
            self.targets[task_id] = target
        else:
            present = {0, 1} - self.gone
            assert (target is not None and target[0] in self.lost | self.gone) or (present and present <= self.lost)

    @rule()
    def send(self) -> None:
        for key, ids in self.d.assign(self.clock):
            assert key not in self.dead and key[0] not in self.lost and key[0] not in self.gone
            for task_id in ids:
                assert task_id not in self.dropped, "a cancelled task was sent"
                target = self.targets[task_id]
                assert target is None or target == key
                self.local[key].append(task_id)
            assert len(self.local[key]) <= MAX_WINDOW
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

    @rule(node=st.sampled_from([0, 1]))
    def interrupted(self, node: int) -> None:
        if node not in self.lost and node not in self.gone:
            self.d.drain(node)

    @rule(node=st.sampled_from([0, 1]))
    def node_lost(self, node: int) -> None:
        if node in self.lost or node in self.gone:
            return
        self.lost.add(node)
        for failure in self.d.node_lost(node, "gone"):
            self._end(failure.task_id)
        for key in list(self.local):
            if key[0] == node:
                self.local[key].clear()
                self.recall_inbox.pop(key, None)

    @rule(node=st.sampled_from([0, 1]))
    def node_leaves(self, node: int) -> None:
        if node in self.gone:
            return
        self.gone.add(node)
        self.lost.discard(node)
        for task_id in self.d.remove_node(node):
            self._end(task_id)
        assert self.d.node_load(node) == 0
        assert all(key[0] != node for key in self.d.workers())
        for key in list(self.local):
            if key[0] == node:
                self.local[key].clear()
                self.recall_inbox.pop(key, None)
                self.dead.discard(key)

    @rule(node=st.sampled_from([0, 1]))
    def node_joins(self, node: int) -> None:
        if node not in self.gone:
            return
        self.gone.discard(node)
        assert self.d.set_node(node, 2 if node == 0 else 1) == []  # a new node holds nothing

    @invariant()
    def nothing_open_is_forgotten(self) -> None:
        for task_id in self.open:
            if task_id not in self.abandoned:
                assert self.d.is_pending(task_id), f"task {task_id} was dropped without an ending"

    @invariant()
    def no_task_waits_while_a_worker_is_idle(self) -> None:
        sent = self.d.assign(self.clock)
        for key, ids in sent:
            self.local[key].extend(ids)
        queued = self.d.queued()
        if queued:
            idle = [k for k in self.d.workers() if self.d.is_usable(k) and not self.d.inflight(k)]
            assert not idle, f"tasks {queued} wait while {idle} is idle"


TestDispatcherMachine = DispatcherMachine.TestCase
TestDispatcherMachine.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
