"""Elastic, self-healing pools end to end on Local: real node processes, real sockets.

A node is hurt from outside as a host would be: its whole process group SIGKILLed (the
host died) or SIGSTOPped past the liveness window (it froze). Scaling uses short
cooldowns (``autoscale_cooldown=0.2``, ``autoscale_idle_timeout=0.5``) so a test sees
several decisions in a second or two; every wait is a condition with a deadline.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path

import pytest
from deadline_support import within
from elastic_support import (
    EventLog,
    group_alive,
    indices,
    instance_ids,
    kill_group,
    live_count,
    node_group,
    results_ok,
    running,
    until,
)

import skyward as sky
from skyward.display.state import DisplayState, reduce
from skyward.errors import ConfigurationError, NodeLostError
from skyward.events import CostFinal, SkywardEvent

COOLDOWN = 0.2
IDLE = 0.5


@sky.compute
def inc(x: int) -> int:
    return x + 1


@sky.compute
def held(x: int, release: str) -> int:
    """Waits until the file ``release`` exists (the test says when), then returns x + 1:
    work that keeps every node busy for exactly as long as the test needs."""
    import os
    import time

    while not os.path.exists(release):
        time.sleep(0.02)
    return x + 1


@sky.compute
def inc_marking(x: int, at: int, marker: str) -> int:
    """x + 1; task ``at`` also creates ``marker`` (the test's cue that the gather is under way)."""
    if x == at:
        open(marker, "w").close()
    return x + 1


@sky.compute
def node_of_caller() -> int:
    return sky.instance_info().node


@sky.compute(retries=0)
def held_at_most_once(release: str) -> int:
    import os
    import time

    while not os.path.exists(release):
        time.sleep(0.02)
    return 1


PATIENT = 600.0
"""An idle timeout no test reaches: a pool resized by hand stays at that size (the
autoscaler would otherwise shrink an idle pool back to its floor after ``IDLE``)."""


def elastic_pool(nodes: sky.Nodes | tuple[int, int] | int, log: EventLog, **kw: object) -> sky.ComputePool:
    return sky.ComputePool(
        provider=sky.Local(grace_period=10),
        nodes=nodes,
        display="quiet",
        on_event=log,
        **{"autoscale_cooldown": COOLDOWN, "autoscale_idle_timeout": IDLE, **kw},  # type: ignore[arg-type]
    )


def draining(pool: sky.ComputePool) -> int:
    fleet = pool._fleet
    return 0 if fleet is None else len(fleet.state.members) - len(fleet.state.live)


def display_of(events: list[SkywardEvent]) -> DisplayState:
    state = DisplayState()
    for event in events:
        state = reduce(state, event)
    return state


@pytest.fixture
def release(tmp_path: Path) -> Iterator[Path]:
    """A file whose creation lets every ``held`` task finish; created at the end in any
    case so no worker spins on after a failed test."""
    path = tmp_path / "release"
    yield path
    path.touch()


# -- growing and shrinking -----------------------------------------------------------------


def test_a_burst_grows_an_elastic_pool_to_its_max_and_idleness_shrinks_it_back(release: Path) -> None:
    log = EventLog()
    with elastic_pool((1, 3), log) as pool:
        assert live_count(pool) == 1
        futures = [pool.submit(held(i, str(release))) for i in range(9)]
        until("the burst to grow the pool to 3 nodes", lambda: live_count(pool) == 3 and len(log.added()) == 2)
        assert {e.reason for e in log.added()} == {"scale-up"}
        assert any(e.desired == 3 and e.reason == "scale-up" for e in log.resized())
        shown = display_of(log.all())
        assert (shown.ready_nodes, shown.desired) == (3, 3)  # the display's "3/3 nodes"
        assert pool.desired_nodes == 3
        release.touch()
        assert [f.result(timeout=60) for f in futures] == [i + 1 for i in range(9)]

        until("the idle pool to shrink back to 1 node", lambda: live_count(pool) == 1 and len(log.removed()) == 2)
        assert {e.reason for e in log.removed()} == {"scale-down"}
        assert any(e.desired == 1 and e.reason == "scale-down" for e in log.resized())
        shown = display_of(log.all())
        assert (shown.ready_nodes, shown.desired) == (1, 1)
        assert indices(pool) == [0]  # the highest indices went first
        assert (sky.gather(*(inc(i) for i in range(50))) >> pool) == tuple(i + 1 for i in range(50))


def test_a_scale_down_of_busy_nodes_loses_no_task(release: Path) -> None:
    # a re-runnable task on a node being drained goes back to the queue and runs on a node
    # that stays; the result is the same
    log = EventLog()
    with elastic_pool(sky.Nodes(desired=3, max=3, min=1), log) as pool:
        until("all 3 nodes", lambda: live_count(pool) == 3)
        futures = [pool.submit(held(i, str(release))) for i in range(3)]
        until("the three tasks to run, one per node", lambda: running(pool) == 3)
        pool.resize(1)
        until("the scale-down", lambda: len(log.removed()) == 2)
        release.touch()
        assert [f.result(timeout=60) for f in futures] == [1, 2, 3]
        assert {e.reason for e in log.removed()} <= {"resize", "scale-down"}  # by hand, or the idle policy first
        assert live_count(pool) == 1


def test_a_scale_down_waits_for_the_at_most_once_tasks_a_node_runs(release: Path) -> None:
    # a task that may not run again is never taken from its node: the node is removed
    # only once it finished (drained), and nothing fails with NodeLostError
    log = EventLog()
    with elastic_pool(sky.Nodes(desired=3, max=3, min=1), log) as pool:
        until("all 3 nodes", lambda: live_count(pool) == 3)
        futures = [pool.submit(held_at_most_once(str(release))) for _ in range(3)]
        until("the three tasks to run, one per node", lambda: running(pool) == 3)
        pool.resize(1)
        until("the scaler to drain a node", lambda: draining(pool) >= 1)
        time.sleep(0.5)  # a few scaler ticks: a node that did not wait would be gone by now
        assert log.removed() == []  # still running what it may not hand on
        release.touch()
        assert [f.result(timeout=60) for f in futures] == [1, 1, 1]
        until("the drained nodes to go", lambda: live_count(pool) == 1 and len(log.removed()) == 2)
        assert {e.reason for e in log.removed()} <= {"resize", "scale-down"}  # by hand, or the idle policy first


def test_resize_within_the_bounds_grows_and_shrinks_and_outside_them_is_refused() -> None:
    log = EventLog()
    with elastic_pool(sky.Nodes(desired=1, max=3, min=1), log, autoscale_idle_timeout=PATIENT) as pool:
        pool.resize(3)
        until("resize(3) to reach 3 nodes", lambda: live_count(pool) == 3)
        assert [e.reason for e in log.resized()][:1] == ["resize"]
        assert sorted(set(node_of_caller() @ pool)) == [0, 1, 2]
        for bad in (0, 4, -1, 2.5, True):
            with pytest.raises(ConfigurationError, match=r"pool\.resize\(.*from 1 to 3"):
                pool.resize(bad)  # type: ignore[arg-type]
        assert live_count(pool) == 3
        pool.resize(2)
        until("resize(2) to reach 2 nodes", lambda: live_count(pool) == 2)
        assert indices(pool) == [0, 1]
    with elastic_pool(2, EventLog()) as fixed:
        with pytest.raises(ConfigurationError, match=r"pool\.resize\(3\): this pool is fixed at 2 nodes"):
            fixed.resize(3)


def test_a_pool_that_may_scale_to_zero_does_so_when_idle_and_wakes_on_the_next_task() -> None:
    log = EventLog()
    with elastic_pool(sky.Nodes(desired=1, max=2, min=0), log) as pool:
        assert (inc(1) >> pool) == 2
        until("the idle pool to scale to zero", lambda: live_count(pool) == 0 and pool.desired_nodes == 0)
        until("the display to say 0 nodes desired", lambda: display_of(log.all()).desired == 0)
        assert within("a task on a pool at zero", lambda: inc(41) >> pool, 120) == 42
        # a new node woke the pool; its NodeAdded event may reach the log after the result
        until("the node that woke the pool to be reported", lambda: log.added()[-1].node == 1)


def test_a_pool_at_zero_wakes_again_and_again() -> None:
    """Indices are never reused, so the third wake starts node 2 on a pool of max=2:
    Local places it in a free device slot, not at its index."""
    log = EventLog()
    with elastic_pool(sky.Nodes(desired=1, max=2, min=0), log) as pool:
        for n in range(3):  # indices 0, 1, 2: the third is past max=2
            until(f"the idle pool to scale to zero ({n})", lambda: live_count(pool) == 0 and pool.desired_nodes == 0)
            assert within(f"a task on a pool at zero ({n})", lambda: inc(n) >> pool, 120) == n + 1  # noqa: B023


def test_a_scale_down_racing_a_stream_of_submissions_loses_nothing() -> None:
    log = EventLog()
    with elastic_pool(sky.Nodes(desired=3, max=3, min=1), log) as pool:
        until("all 3 nodes", lambda: live_count(pool) == 3)
        futures: list[Future[int]] = []
        stop = threading.Event()

        def submit_forever() -> None:
            i = 0
            while not stop.is_set():
                futures.append(pool.submit(inc(i)))
                i += 1
                time.sleep(0.001)

        submitter = threading.Thread(target=submit_forever, daemon=True)
        submitter.start()
        try:
            until("some work to flow", lambda: len(futures) > 200)
            pool.resize(1)
            # the autoscaler may grow the pool again under this load: what counts is that
            # two nodes left while tasks kept coming
            until(
                "the scale-down under load",
                lambda: len([e for e in log.removed() if e.reason in ("resize", "scale-down")]) >= 2,
            )
            count = len(futures)
            until("more work after the scale-down", lambda: len(futures) > count + 200)
        finally:
            stop.set()
            submitter.join()
        results = within("every submitted task", lambda: [f.result(timeout=120) for f in futures], 180)
        assert results == [i + 1 for i in range(len(futures))]
        assert not log.removed("lost")


# -- healing -------------------------------------------------------------------------------


def test_a_node_killed_mid_gather_of_20000_tasks_is_replaced_and_every_result_is_right(tmp_path: Path) -> None:
    log = EventLog()
    marker = tmp_path / "under way"
    count = 20_000
    with elastic_pool(2, log) as pool:
        victim = node_group(pool, 1)
        victim_id = next(h.instance_id for h in pool.nodes if h.node == 1)

        def kill_when_under_way() -> None:
            until("the gather to get under way", marker.exists)
            kill_group(victim)

        killer = threading.Thread(target=kill_when_under_way, daemon=True)
        killer.start()
        results = within(
            "the gather with a node killed",
            lambda: sky.gather(*(inc_marking(i, 3000, str(marker)) for i in range(count))) >> pool,
            240,
        )
        killer.join()
        assert results_ok(results, count)
        until("the lost node's replacement", lambda: len(log.added("replacement")) == 1 and live_count(pool) == 2)
        lost = log.removed("lost")
        assert [(e.node, e.instance_id) for e in lost] == [(1, victim_id)]
        assert log.added("replacement")[0].node == 1
        assert victim_id not in instance_ids(pool)
        assert not group_alive(victim)
        assert sorted(set(node_of_caller() @ pool)) == [0, 1]  # the replacement serves


def test_pool_submit_of_20000_tasks_with_a_node_killed_gets_every_result(tmp_path: Path) -> None:
    log = EventLog()
    marker = tmp_path / "under way"
    count = 20_000
    with elastic_pool(2, log) as pool:
        victim = node_group(pool, 0)
        futures = [pool.submit(inc_marking(i, 3000, str(marker))) for i in range(count)]
        until("the work to get under way", marker.exists)
        kill_group(victim)
        results = within("every future", lambda: [f.result(timeout=200) for f in futures], 240)
        assert results_ok(results, count)
        until("the lost node's replacement", lambda: len(log.added("replacement")) == 1 and live_count(pool) == 2)
        assert [e.node for e in log.removed("lost")] == [0]


def test_a_frozen_node_is_declared_lost_after_the_liveness_window_and_replaced(release: Path) -> None:
    log = EventLog()
    with elastic_pool(2, log) as pool:
        victim = node_group(pool, 1)
        victim_id = next(h.instance_id for h in pool.nodes if h.node == 1)
        futures = [pool.submit(held(i, str(release))) for i in range(2)]
        until("a task on each node", lambda: running(pool) == 2)
        os.killpg(victim, signal.SIGSTOP)
        try:
            until("the frozen node to be declared lost", lambda: len(log.removed("lost")) == 1)
            release.touch()
            assert [f.result(timeout=60) for f in futures] == [1, 2]  # its task ran again elsewhere
            until("the frozen node's replacement", lambda: len(log.added("replacement")) == 1 and live_count(pool) == 2)
            assert log.removed("lost")[0].instance_id == victim_id
        finally:
            if group_alive(victim):
                os.killpg(victim, signal.SIGCONT)
        until("the frozen node's processes to be gone", lambda: not group_alive(victim))
        assert (sky.gather(*(inc(i) for i in range(100))) >> pool) == tuple(i + 1 for i in range(100))


def test_an_at_most_once_task_on_a_lost_node_raises_node_lost_error(release: Path) -> None:
    log = EventLog()
    with elastic_pool(1, log) as pool:
        victim = node_group(pool, 0)
        future = pool.submit(held_at_most_once(str(release)))
        until("the task to run", lambda: running(pool) == 1)
        kill_group(victim)
        with pytest.raises(NodeLostError):
            future.result(timeout=60)
        until("the replacement", lambda: len(log.added("replacement")) == 1)
        assert (inc(1) >> pool) == 2


def test_without_replace_lost_nodes_a_lost_node_ends_its_work_with_node_lost_error_as_before(release: Path) -> None:
    log = EventLog()
    with elastic_pool(1, log, replace_lost_nodes=False) as pool:
        victim = node_group(pool, 0)
        future = pool.submit(held(0, str(release)))
        until("the task to run", lambda: running(pool) == 1)
        kill_group(victim)
        with pytest.raises(NodeLostError):
            future.result(timeout=60)
        time.sleep(1.0)  # the scaler's ticks: a replacement would have started by now
        assert not log.added("replacement")


def test_broadcast_on_a_changing_pool_runs_on_the_nodes_live_at_the_call() -> None:
    log = EventLog()
    with elastic_pool(sky.Nodes(desired=1, max=3, min=1), log, autoscale_idle_timeout=PATIENT) as pool:
        assert node_of_caller() @ pool == (0,)
        pool.resize(3)
        until("3 nodes", lambda: live_count(pool) == 3)
        assert sorted(node_of_caller() @ pool) == [0, 1, 2]
        pool.resize(2)
        until("2 nodes", lambda: live_count(pool) == 2)
        assert sorted(node_of_caller() @ pool) == [0, 1]


def test_cost_final_bills_a_removed_node_only_until_its_removal() -> None:
    log = EventLog()
    with elastic_pool(sky.Nodes(desired=2, max=2, min=1), log) as pool:
        until("both nodes", lambda: live_count(pool) == 2)
        pool.resize(1)
        until("the scale-down", lambda: len(log.removed()) == 1)
        removed = log.removed()[0].instance_id
        fleet = pool._fleet
        assert fleet is not None
        ledger = fleet._ledger
        intervals = {b.instance.instance_id: b for b in ledger.intervals}
        assert intervals[removed].stopped_at is not None
        stopped_at = intervals[removed].stopped_at
        until("the pool to age past the removal", lambda: fleet._now() > stopped_at + 0.5)
    finals = log.of(CostFinal)
    assert len(finals) == 1
    final_ledger = fleet._ledger
    bills = {b.instance.instance_id: b for b in final_ledger.intervals}
    assert bills[removed].stopped_at == stopped_at  # its seconds stopped at its removal
    kept = next(i for i in bills if i != removed)
    assert bills[kept].seconds(finals[0].total_seconds) > bills[removed].seconds(finals[0].total_seconds)


# -- refused at construction ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"nodes": (3, 2)}, r"nodes=\(3, 2\)"),
        ({"nodes": -1}, r"nodes=-1"),
        ({"nodes": (-1, 2)}, r"desired=-1"),
        ({"nodes": "2"}, r"nodes='2'"),
        ({"nodes": 2.5}, r"nodes=2\.5"),
        ({"nodes": ("2", 4)}, r"desired='2'"),
        ({"autoscale_cooldown": -1}, r"autoscale_cooldown"),
        ({"autoscale_idle_timeout": -1}, r"autoscale_idle_timeout"),
    ],
)
def test_bad_sizes_are_refused_at_construction_naming_the_parameter_and_nothing_is_provisioned(
    kwargs: dict[str, object], named: str
) -> None:
    log = EventLog()
    with pytest.raises(ConfigurationError, match=named):
        sky.ComputePool(provider=sky.Local(), display="quiet", on_event=log, **kwargs)  # type: ignore[arg-type]
    assert log.all() == []


def test_nodes_with_a_min_above_desired_is_refused_naming_min() -> None:
    with pytest.raises(ConfigurationError, match=r"sky\.Nodes\(desired=2, min=3\)"):
        sky.Nodes(desired=2, min=3)
    with pytest.raises(ConfigurationError, match=r"sky\.Nodes\(desired=-2\)"):
        sky.Nodes(desired=-2)
