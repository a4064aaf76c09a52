"""The actuator of an elastic, self-healing pool (skyward.api.scaler, skyward.api.node_changes)
against a fake client (``NodeLink``) and a fake provider with ``ElasticNodes``: what it asks
of each, in which order, and what it says."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar, cast

import cloudpickle
import pytest

from skyward.api import failover
from skyward.api.autoscale import AutoscaleSettings
from skyward.api.fleet import Fleet
from skyward.api.fleet_state import FleetState
from skyward.api.launcher import elastic_rules
from skyward.api.node_changes import DRAIN_TIMEOUT, NodeChanges, open_when_ready
from skyward.api.scaler import Scaler, client_healing
from skyward.api.spec import PoolSpec
from skyward.errors import (
    BootstrapTimeoutError,
    CapacityError,
    ConfigurationError,
    PoolClosedError,
    ProvisioningError,
    VersionMismatchError,
)
from skyward.events import (
    BootstrapCompleted,
    Error,
    NodeAdded,
    NodeRemoved,
    Notice,
    PoolResized,
    SkywardEvent,
)
from skyward.image import CLIENT_PYTHON, BootstrapContext, Image
from skyward.providers.protocol import EventSink, NodeHandle, UserDataFactory
from skyward.scaling import Nodes
from skyward.transport import wire
from skyward.transport.handshake import NodeIdentity
from skyward.transport.links import NodeInfo

_ids = itertools.count()
_INFO = {"python": CLIENT_PYTHON + ".0", "cloudpickle": cloudpickle.__version__, "bootstrap_steps": []}


def _handle(node: int, price: float = 0.0) -> NodeHandle:
    return NodeHandle(
        node=node, instance_id=f"i-{next(_ids)}", endpoint=f"ipc://n{node}", instance_type="t", price_on_demand=price
    )


@dataclass(frozen=True)
class _Load:
    queued: int = 0
    running: int = 0
    per_node: Mapping[int, int] = field(default_factory=dict)
    slots: int = 0
    idle_since: Mapping[int, float] = field(default_factory=dict)


class _Link:
    """The pool's client as far as the fleet sees it, recorded."""

    def __init__(self) -> None:
        self.calls: list[tuple[object, ...]] = []
        self.load_now = _Load()
        self.refuse: set[int] = set()  # nodes whose handshake fails
        self.info: NodeInfo = cast(NodeInfo, dict(_INFO))

    def drain_node(self, index: int) -> None:
        self.calls.append(("drain", index))

    def replace_node(
        self, index: int, endpoint: str, cluster: list[bytes], timeout: float, identity: NodeIdentity | None = None
    ) -> NodeInfo:
        raise AssertionError("an elastic provider's nodes are replaced by remove + add")

    def add_node(
        self,
        index: int,
        endpoint: str,
        timeout: float,
        cluster: list[bytes] | None = None,
        identity: NodeIdentity | None = None,
    ) -> NodeInfo:
        self.calls.append(("add", index, endpoint, timeout, identity))
        if index in self.refuse:
            raise BootstrapTimeoutError(f"node {index} did not answer within {timeout:g} s")
        return self.info

    def remove_node(self, index: int, timeout: float) -> None:
        self.calls.append(("remove", index, timeout))

    def fail_node(self, index: int, reason: str) -> None:
        self.calls.append(("fail", index, reason))

    def fail_waiting(self, reason: str) -> None:
        self.calls.append(("fail_waiting", reason))

    def load(self) -> _Load:
        return self.load_now


class _Elastic:
    """A provider with ``ElasticNodes`` (and ``NodeWatch``)."""

    name = "fake"
    node_poll_interval = 0.01

    def __init__(self) -> None:
        self.added: list[list[int]] = []
        self.removed: list[NodeHandle] = []
        self.terminated: list[NodeHandle] = []
        self.rendered: list[int] = []
        self.fails: BaseException | None = None
        self.gone_now: dict[str, str] = {}
        self.price = 0.0

    def validate(self, spec: PoolSpec) -> None: ...

    def prepare(self, spec: PoolSpec, emit: EventSink) -> str:
        return "here"

    def launch(self, spec: PoolSpec, user_data: UserDataFactory, emit: EventSink) -> list[NodeHandle]:
        return []

    def terminate(self, nodes: Sequence[NodeHandle]) -> None:
        self.terminated.extend(nodes)

    def teardown(self) -> None: ...

    def add_nodes(
        self, spec: PoolSpec, indices: Sequence[int], user_data: UserDataFactory, emit: EventSink
    ) -> list[NodeHandle]:
        if self.fails is not None:
            raise self.fails
        self.added.append(list(indices))
        for index in indices:
            user_data(index, "ipc://x", BootstrapContext(), run_dir="/tmp/x")
            self.rendered.append(index)
        return [_handle(i, self.price) for i in indices]

    def remove_nodes(self, nodes: Sequence[NodeHandle]) -> None:
        self.removed.extend(nodes)

    def gone(self, nodes: Sequence[NodeHandle]) -> dict[str, str]:
        return {h.instance_id: why for h in nodes if (why := self.gone_now.get(h.instance_id))}


class _Identities:
    def __init__(self) -> None:
        self.renewed: list[int] = []

    def identity(self, node: int) -> NodeIdentity:
        return NodeIdentity("pool", node, f"id-{node}")

    def renew(self, node: int) -> None:
        self.renewed.append(node)


def _user_data(node: int, bind: str, context: BootstrapContext, **_: object) -> str:
    return f"node {node}"


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class _Pool:
    fleet: Fleet
    scaler: Scaler
    link: _Link
    driver: _Elastic
    events: list[SkywardEvent]
    clock: _Clock
    identities: _Identities


def _pool(
    bounds: Nodes,
    *,
    replace_lost: bool = True,
    active: bool = True,
    elastic: bool = True,
    state: Callable[[list[NodeHandle]], FleetState] | None = None,
    settings: AutoscaleSettings | None = None,
) -> _Pool:
    events: list[SkywardEvent] = []
    driver = _Elastic()
    link = _Link()
    clock = _Clock()
    identities = _Identities()
    handles = [_handle(i) for i in range(bounds.desired)]
    fleet = Fleet(
        spec=PoolSpec(provider=object(), image=Image(), nodes=bounds.desired, scaling=bounds, concurrency=2),
        driver=driver,
        provider_name="fake",
        region="here",
        handles=handles,
        user_data=_user_data,
        bootstrap_timeout=7.0,
        emit=events.append,
        active=lambda: active,
        identities=identities,
        state=state(handles) if state is not None else None,
        clock=clock,
    )
    fleet.attach(link)
    fleet.set_cluster([wire.CLUSTER, b"{}"])
    fleet.start_timer(3600, lambda: None)
    fleet.stop_watching()  # the timer only; the clock starts the cost ledger
    changes = NodeChanges(fleet, driver) if elastic else None
    policy = settings or AutoscaleSettings(cooldown=30.0, idle_timeout=60.0, replace_lost=replace_lost)
    scaler = Scaler(fleet, changes, bounds, policy, clock=clock, spawn=lambda run, name: run())
    return _Pool(fleet, scaler, link, driver, events, clock, identities)


E = TypeVar("E")


def _of(events: list[SkywardEvent], kind: type[E]) -> list[E]:
    return [e for e in events if isinstance(e, kind)]


# -- growing ------------------------------------------------------------------------------


def test_queued_work_grows_the_pool_by_what_the_queue_needs_through_the_provider_and_the_handshake() -> None:
    pool = _pool(Nodes(desired=1, max=8))
    pool.clock.now += 31  # past the cooldown
    pool.link.load_now = _Load(queued=6, running=2)  # 2 slots per node: 4 nodes in all
    pool.scaler.tick()
    assert pool.scaler.desired == 4
    assert _of(pool.events, PoolResized) == [PoolResized(desired=4, current=1, reason="scale-up")]
    assert pool.driver.added == [[1, 2, 3]]  # fresh indices, one call
    adds = [c for c in pool.link.calls if c[0] == "add"]
    assert [(c[1], c[3], c[4]) for c in adds] == [(i, 7.0, NodeIdentity("pool", i, f"id-{i}")) for i in (1, 2, 3)]
    assert pool.identities.renewed == [1, 2, 3]  # each new node its own key
    assert pool.fleet.state.indices == (0, 1, 2, 3) and not pool.fleet.state.joining
    added = _of(pool.events, NodeAdded)
    assert sorted((e.node, e.reason) for e in added) == [(1, "scale-up"), (2, "scale-up"), (3, "scale-up")]
    assert len(_of(pool.events, BootstrapCompleted)) == 3


def test_a_pool_born_empty_starts_a_node_for_its_first_task_at_once() -> None:
    pool = _pool(Nodes(desired=0, max=8))
    pool.link.load_now = _Load(queued=1)
    pool.scaler.tick()  # right after the start: the first decision waits for no cooldown
    assert pool.driver.added == [[0]] and pool.fleet.state.indices == (0,)


def test_the_pool_does_not_grow_again_inside_the_cooldown() -> None:
    pool = _pool(Nodes(desired=1, max=8))
    pool.link.load_now = _Load(queued=4)  # 2 slots a node: 2 nodes
    pool.scaler.tick()
    assert pool.scaler.desired == 2
    pool.clock.now += 29
    pool.link.load_now = _Load(queued=10, running=4)
    pool.scaler.tick()
    assert pool.scaler.desired == 2 and pool.driver.added == [[1]]
    pool.clock.now += 2
    pool.scaler.tick()
    assert pool.scaler.desired == 7


def test_a_node_that_does_not_answer_is_removed_and_the_others_join() -> None:
    pool = _pool(Nodes(desired=1, max=8))
    pool.link.refuse = {2}
    pool.scaler.resize(3)
    pool.scaler.tick()
    assert pool.fleet.state.indices == (0, 1) and not pool.fleet.state.joining
    assert [h.node for h in pool.driver.removed] == [2]
    (error,) = _of(pool.events, Error)
    assert "node 2 could not join the pool" in error.message and "did not answer" in error.message


def test_a_node_with_another_python_is_refused_and_removed() -> None:
    pool = _pool(Nodes(desired=1, max=4))
    pool.link.info = cast(NodeInfo, {**_INFO, "python": "3.1.1"})
    pool.scaler.resize(2)
    with pytest.raises(VersionMismatchError):
        pool.scaler.tick()
    assert pool.fleet.state.indices == (0,)
    assert [h.node for h in pool.driver.removed] == [1]
    assert ("remove", 1, 0.0) in pool.link.calls
    assert "runs Python 3.1.1" in _of(pool.events, Error)[0].message


def test_a_pool_born_empty_that_cannot_get_a_node_fails_what_waits_with_the_reason() -> None:
    pool = _pool(Nodes(desired=0, max=4))
    pool.driver.fails = CapacityError("no capacity for t in here")
    pool.clock.now += 31
    pool.link.load_now = _Load(queued=3)
    with pytest.raises(CapacityError):
        pool.scaler.tick()
    (failed,) = [c for c in pool.link.calls if c[0] == "fail_waiting"]
    assert "no node and could not start one" in str(failed[1]) and "no capacity" in str(failed[1])
    assert not pool.fleet.state.joining  # the reserved indices were given up


# -- shrinking ----------------------------------------------------------------------------


def test_idle_nodes_are_drained_then_deleted_highest_index_first() -> None:
    pool = _pool(Nodes(desired=4, max=8, min=1))
    pool.clock.now += 100
    # nodes 1 and 3 idle for 70 s, node 0 and 2 busy
    pool.link.load_now = _Load(running=3, idle_since={1: pool.clock.now - 70, 3: pool.clock.now - 70})
    pool.scaler.tick()
    assert pool.scaler.desired == 2
    assert [c for c in pool.link.calls if c[0] == "remove"] == [
        ("remove", 3, DRAIN_TIMEOUT),
        ("remove", 1, DRAIN_TIMEOUT),
    ]
    assert [h.node for h in pool.driver.removed] == [3, 1]
    assert [(e.node, e.reason) for e in _of(pool.events, NodeRemoved)] == [(3, "scale-down"), (1, "scale-down")]
    assert pool.fleet.state.indices == (0, 2)


def test_a_busy_pool_is_not_shrunk() -> None:
    pool = _pool(Nodes(desired=3, max=8, min=1))
    pool.clock.now += 100
    pool.link.load_now = _Load(queued=1, running=4, idle_since={2: pool.clock.now - 500})
    pool.scaler.tick()
    assert pool.driver.removed == [] and pool.scaler.desired == 3


def test_resize_within_the_bounds_shrinks_idle_nodes_before_busy_ones() -> None:
    pool = _pool(Nodes(desired=3, max=4, min=1))
    pool.scaler.resize(1)
    pool.link.load_now = _Load(running=2, idle_since={0: pool.clock.now})
    pool.scaler.tick()
    assert _of(pool.events, PoolResized) == [PoolResized(desired=1, current=3, reason="resize")]
    assert [h.node for h in pool.driver.removed] == [0, 2]
    assert {e.reason for e in _of(pool.events, NodeRemoved)} == {"resize"}
    assert pool.fleet.state.indices == (1,)


@pytest.mark.parametrize("count", [0, 5, -1, 2.0, True])
def test_resize_outside_the_bounds_is_refused_naming_them(count: object) -> None:
    pool = _pool(Nodes(desired=2, max=4, min=1))
    with pytest.raises(ConfigurationError, match=r"pool.resize\(.*from 1 to 4"):
        pool.scaler.resize(count)  # type: ignore[arg-type]


def test_a_fixed_pool_cannot_be_resized() -> None:
    pool = _pool(Nodes(desired=2))
    with pytest.raises(ConfigurationError, match="fixed at 2 nodes"):
        pool.scaler.resize(3)


# -- healing ------------------------------------------------------------------------------


def test_a_lost_node_is_removed_and_a_replacement_takes_its_index() -> None:
    pool = _pool(Nodes(desired=2))  # a fixed pool heals too
    lost = pool.fleet.handles[1]
    pool.scaler.node_lost(1, "its agent stopped answering")
    assert ("remove", 1, 0.0) in pool.link.calls
    assert pool.driver.removed == [lost]
    assert pool.driver.added == [[1]]
    assert pool.fleet.state.indices == (0, 1) and pool.fleet.handles[1] != lost
    assert [(e.node, e.reason) for e in _of(pool.events, NodeRemoved)] == [(1, "lost")]
    assert [(e.node, e.reason) for e in _of(pool.events, NodeAdded)] == [(1, "replacement")]


def test_a_node_reported_lost_twice_is_replaced_once() -> None:
    pool = _pool(Nodes(desired=2))
    runs: list[Callable[[], None]] = []
    pool.scaler._spawn = lambda run, name: runs.append(run)  # both reports arrive before either heals
    pool.scaler.node_lost(1, "liveness window passed")
    pool.scaler.node_lost(1, "the provider says it is gone")
    pool.scaler.node_lost(7, "never a member")
    for run in runs:
        run()
    assert pool.driver.added == [[1]]
    assert len(_of(pool.events, NodeRemoved)) == 1


def test_a_scaler_tick_during_a_healing_does_not_add_a_second_node() -> None:
    pool = _pool(Nodes(desired=2))
    lost = pool.fleet.handles[1]
    pool.fleet.change(lambda s: s.interrupt(lost.instance_id))
    NodeChanges(pool.fleet, pool.driver).forget_lost(1, lost, "lost", replace=True)
    assert pool.fleet.state.size == 2  # the replacement's index is reserved in the same step
    pool.scaler.tick()
    assert pool.driver.added == []


def test_with_replace_lost_nodes_off_a_lost_node_is_removed_and_not_replaced() -> None:
    pool = _pool(Nodes(desired=1), replace_lost=False)
    pool.scaler.node_lost(0, "agent gone")
    assert pool.driver.added == [] and pool.fleet.state.indices == ()
    (failed,) = [c for c in pool.link.calls if c[0] == "fail_waiting"]
    assert "replaces no lost node" in str(failed[1])
    pool.scaler.tick()
    assert pool.driver.added == []  # the fixed pool goes on with one node fewer


def test_a_lost_node_that_cannot_be_replaced_fails_what_waits_when_no_node_is_left() -> None:
    pool = _pool(Nodes(desired=1))
    pool.driver.fails = CapacityError("no capacity")
    pool.scaler.node_lost(0, "host failure")
    (failed,) = [c for c in pool.link.calls if c[0] == "fail_waiting"]
    assert "node 0 was lost (host failure) and could not be replaced: no capacity" in str(failed[1])
    assert not pool.fleet.state.joining


def test_a_spot_notice_drains_then_removes_and_replaces_the_node() -> None:
    pool = _pool(Nodes(desired=2))
    handle = pool.fleet.handles[0]
    pool.fleet.on_interruption(0, handle, "spot capacity reclaimed")
    assert pool.link.calls[0] == ("drain", 0)
    assert ("remove", 0, DRAIN_TIMEOUT) in pool.link.calls  # its running tasks may finish
    assert [(e.node, e.reason) for e in _of(pool.events, NodeRemoved)] == [(0, "reclaimed")]
    assert [(e.node, e.reason) for e in _of(pool.events, NodeAdded)] == [(0, "replacement")]


def test_the_node_watch_fails_a_node_its_provider_says_is_gone() -> None:
    pool = _pool(Nodes(desired=2))
    gone = pool.fleet.handles[1]
    pool.driver.gone_now = {gone.instance_id: "process exited with -9"}
    checks = iter([True, True, False])  # one poll, then the pool closes
    pool.scaler._running = lambda: next(checks)  # type: ignore[method-assign]
    pool.scaler._watch_nodes(pool.driver)
    assert ("fail", 1, "process exited with -9") in pool.link.calls


def test_a_provider_without_elastic_nodes_says_once_that_it_cannot_replace_a_lost_node() -> None:
    pool = _pool(Nodes(desired=2), elastic=False)
    pool.scaler.start()
    pool.scaler.stop()
    pool.scaler.node_lost(1, "agent gone")
    notices = [e.message for e in _of(pool.events, Notice)]
    assert len(notices) == 1 and "cannot replace a lost node" in notices[0] and "ElasticNodes" in notices[0]
    assert pool.fleet.state.indices == (0, 1)  # still a member, terminated with the pool


# -- the start and the cost ---------------------------------------------------------------


def test_the_pool_opens_once_its_ready_nodes_answered_and_the_others_join_later() -> None:
    pool = _pool(Nodes(desired=3, max=3, min=2), state=FleetState.launched_all)
    pool.link.refuse = {2}
    handles = list(pool.fleet.state.starting)
    open_when_ready(pool.fleet, NodeChanges(pool.fleet, pool.driver), handles, ready=2)
    assert set(pool.fleet.state.indices) >= {0, 1}


def test_a_start_with_too_few_nodes_answering_is_a_failover_reason() -> None:
    pool = _pool(Nodes(desired=2, max=2, min=2), state=FleetState.launched_all)
    pool.link.refuse = {1}
    handles = list(pool.fleet.state.starting)
    with pytest.raises(BootstrapTimeoutError, match="1 of the 2 nodes launched answered"):
        open_when_ready(pool.fleet, NodeChanges(pool.fleet, pool.driver), handles, ready=2)
    assert [h.node for h in pool.driver.removed] == [1]


def test_a_node_silent_past_the_bootstrap_timeout_moves_the_start_on_and_a_failed_bootstrap_does_not() -> None:
    silent = BootstrapTimeoutError("node 1 did not answer within 600 s of starting")
    assert failover.moves_on(silent) is silent and silent.reason == "bootstrap timeout"
    assert failover.moves_on(ProvisioningError("bootstrap failed at step deps: no such package")) is None


def test_each_node_is_billed_for_exactly_the_time_it_lived() -> None:
    pool = _pool(Nodes(desired=1, max=4))
    pool.driver.price = 36.0  # 0.01 USD a second
    pool.clock.now += 100  # node 0 (price 0) alone for 100 s
    pool.scaler.resize(2)
    pool.scaler.tick()  # node 1 from t=100
    pool.clock.now += 50
    pool.scaler.resize(1)
    pool.link.load_now = _Load(idle_since={1: pool.clock.now})
    pool.scaler.tick()  # node 1 removed at t=150
    pool.clock.now += 1000
    final = pool.fleet.cost_final()
    assert final.total_cost == pytest.approx(0.5)  # 50 s of node 1, nothing after its removal
    assert final.total_seconds == pytest.approx(1150.0)
    assert (final.provider, final.region) == ("fake", "here")


def test_nodes_that_finish_starting_after_the_pool_stopped_are_deleted_not_left_running() -> None:
    pool = _pool(Nodes(desired=1, max=4))
    started: list[NodeHandle] = []
    add = pool.driver.add_nodes

    def slow_add(
        spec: PoolSpec, indices: Sequence[int], user_data: UserDataFactory, emit: EventSink
    ) -> list[NodeHandle]:
        pool.fleet.terminate()  # the pool stops while the provider boots the nodes
        started.extend(add(spec, indices, user_data, emit))
        return started

    pool.driver.add_nodes = slow_add  # type: ignore[method-assign]
    pool.scaler.resize(3)
    with pytest.raises(PoolClosedError, match="stopped while"):
        pool.scaler.tick()
    assert pool.driver.removed == started and len(started) == 2
    assert not [c for c in pool.link.calls if c[0] == "add"]


def test_stopping_terminates_nodes_still_starting_too() -> None:
    pool = _pool(Nodes(desired=2, max=2, min=1), state=FleetState.launched_all)
    pool.fleet.terminate()
    assert len(pool.driver.terminated) == 2


# -- what is refused and how the client heals -----------------------------------------------


class _Fixed:
    name = "fixed"


def test_an_elastic_pool_on_a_provider_without_elastic_nodes_is_refused_at_construction() -> None:
    spec = PoolSpec(provider=object(), image=Image(), nodes=2, scaling=Nodes(2, max=6))
    with pytest.raises(ConfigurationError, match=r"ComputePool\(nodes=Nodes\(desired=2, max=6.*ElasticNodes"):
        elastic_rules("fixed", _Fixed(), spec)  # type: ignore[arg-type]
    elastic_rules("fixed", _Fixed(), PoolSpec(provider=object(), image=Image(), nodes=2, scaling=Nodes(2)))  # type: ignore[arg-type]
    elastic_rules("fake", _Elastic(), spec)


def test_the_client_waits_for_nodes_only_where_the_pool_can_get_one() -> None:
    fixed = PoolSpec(provider=object(), image=Image(), nodes=2, scaling=Nodes(2))
    on, off = AutoscaleSettings(), AutoscaleSettings(replace_lost=False)
    assert client_healing(fixed, _Elastic(), on) == client_healing(fixed, _Elastic(), on).__class__(True, True)
    assert (client_healing(fixed, _Fixed(), on).rerun_lost, client_healing(fixed, _Fixed(), on).wait_for_nodes) == (
        True,
        False,
    )
    assert (
        client_healing(fixed, _Elastic(), off).rerun_lost,
        client_healing(fixed, _Elastic(), off).wait_for_nodes,
    ) == (
        False,
        False,
    )
