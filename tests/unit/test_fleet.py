"""The fleet's bookkeeping (skyward.api.fleet_state), without sockets or threads: node
indices stay unique and never come back, and the member set stays consistent under any
sequence of adds, drains, removals, replacements and interruptions."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from skyward.api.fleet import Fleet, bootstrap_events
from skyward.api.fleet_state import FleetState, NodeStatus
from skyward.api.spec import PoolSpec
from skyward.events import (
    BootstrapCompleted,
    BootstrapProgress,
    Error,
    InstanceInterrupted,
    LogLine,
    Notice,
    SkywardEvent,
)
from skyward.image import BootstrapContext, Image
from skyward.providers.protocol import EventSink, NodeHandle, UserDataFactory
from skyward.transport import wire

_ids = itertools.count()


def _handle(node: int, spot: bool = False) -> NodeHandle:
    return NodeHandle(node=node, instance_id=f"i-{next(_ids)}", endpoint=f"ipc://n{node}", instance_type="t", spot=spot)


def test_a_launched_fleet_has_its_nodes_live_in_index_order() -> None:
    handles = [_handle(0), _handle(1), _handle(2)]
    state = FleetState.of(handles)
    assert state.handles == state.live == tuple(handles)
    assert state.indices == (0, 1, 2) and state.next_index == 3


def test_launched_nodes_out_of_order_are_refused() -> None:
    with pytest.raises(ValueError, match="launched node 0 has index 1"):
        FleetState.of([_handle(1), _handle(0)])


def test_a_node_added_while_work_runs_gets_a_fresh_index_and_joins_live() -> None:
    state = FleetState.of([_handle(0), _handle(1)])
    state, index = state.reserve()
    assert index == 2 and state.indices == (0, 1)  # reserved, not a member yet
    new = _handle(index)
    state = state.join(new)
    assert state.member(2).handle == new and state.member(2).status is NodeStatus.LIVE
    assert not state.joining


def test_an_index_is_never_given_again_after_its_node_left() -> None:
    state = FleetState.of([_handle(0), _handle(1)])
    state, _ = state.remove(1)
    state, index = state.reserve()
    assert index == 2
    state = state.abandon(index)  # its launch failed
    state, index = state.reserve()
    assert index == 3


def test_a_node_joining_on_an_index_nobody_reserved_is_refused() -> None:
    with pytest.raises(ValueError, match="not reserved"):
        FleetState.of([_handle(0)]).join(_handle(5))


def test_a_drained_node_takes_no_new_work_but_stays_billed() -> None:
    state = FleetState.of([_handle(0), _handle(1)]).drain(0)
    assert [h.node for h in state.live] == [1]
    assert [h.node for h in state.handles] == [0, 1]


def test_a_replacement_is_addressed_from_its_launch_and_becomes_the_node_once_it_answered() -> None:
    old = _handle(1, spot=True)
    state = FleetState.of([_handle(0), old]).drain(1)
    new = _handle(1, spot=True)
    state = state.begin_replace(1, new)
    assert state.member(1).addressed == new and state.member(1).handle == old  # still billed as old
    state, replaced = state.finish_replace(1)
    assert replaced == old
    assert state.member(1).handle == new and state.member(1).status is NodeStatus.LIVE


def test_a_replacement_that_failed_its_handshake_leaves_the_node_as_it_was() -> None:
    old = _handle(1)
    state = FleetState.of([_handle(0), old]).begin_replace(1, _handle(1))
    state, dropped = state.cancel_replace(1)
    assert dropped is not None and state.member(1).addressed == old


def test_a_replacement_launched_under_another_index_is_refused() -> None:
    with pytest.raises(ValueError, match="launched as node 0"):
        FleetState.of([_handle(0), _handle(1)]).begin_replace(1, _handle(0))


def test_an_instance_takes_the_interruption_path_once() -> None:
    handle = _handle(0, spot=True)
    state = FleetState.of([handle])
    state, first = state.interrupt(handle.instance_id)
    state, again = state.interrupt(handle.instance_id)
    assert (first, again) == (True, False)
    assert state.unreported_spot() == ()


def test_the_reclaim_watch_asks_only_about_spot_nodes_not_yet_interrupted() -> None:
    spot, other, on_demand = _handle(0, spot=True), _handle(1, spot=True), _handle(2)
    state, _ = FleetState.of([spot, other, on_demand]).interrupt(spot.instance_id)
    assert state.unreported_spot() == (other,)


class _Cloud:
    """A driver as far as ``bootstrap_events`` looks: one that cannot follow a boot."""


class _Followed:
    follows_bootstrap = True


def test_a_cloud_nodes_steps_come_from_its_hello_then_its_completion() -> None:
    handle = _handle(0)
    events = bootstrap_events(_Cloud(), handle, {"bootstrap_steps": ["uv", "deps"]})  # type: ignore[arg-type]
    assert events == [
        BootstrapProgress(instance_id=handle.instance_id, step="uv"),
        BootstrapProgress(instance_id=handle.instance_id, step="deps"),
        BootstrapCompleted(instance_id=handle.instance_id),
    ]


def test_a_node_whose_driver_followed_its_bootstrap_reports_only_its_completion() -> None:
    handle = _handle(0)
    events = bootstrap_events(_Followed(), handle, {"bootstrap_steps": ["uv"]})  # type: ignore[arg-type]
    assert events == [BootstrapCompleted(instance_id=handle.instance_id)]


# -- the fleet's wiring, with a fake client and a fake provider ------------------------------


class _Link:
    """What the fleet asks of the pool's client, recorded; ``fails`` makes a replacement's
    handshake fail."""

    def __init__(self, fails: bool = False) -> None:
        self.drained: list[int] = []
        self.replaced: list[tuple[int, str, list[bytes], float]] = []
        self.fails = fails

    def drain_node(self, index: int) -> None:
        self.drained.append(index)

    def replace_node(
        self, index: int, endpoint: str, cluster: list[bytes], timeout: float, identity: object = None
    ) -> dict[str, object]:
        if self.fails:
            raise TimeoutError(f"the replacement of node {index} did not answer")
        self.replaced.append((index, endpoint, cluster, timeout))
        return {"bootstrap_steps": ["uv"]}


class _SpotDriver:
    """A provider that replaces reclaimed spot nodes (``SpotReplacement``)."""

    name = "fake"

    def __init__(self, replaces: bool = True) -> None:
        self.replaces = replaces
        self.replacements: list[NodeHandle] = []
        self.terminated: list[NodeHandle] = []

    def validate(self, spec: PoolSpec) -> None: ...

    def prepare(self, spec: PoolSpec, emit: EventSink) -> str:
        return "here"

    def launch(self, spec: PoolSpec, user_data: UserDataFactory, emit: EventSink) -> list[NodeHandle]:
        return []

    def terminate(self, nodes: list[NodeHandle]) -> None:
        self.terminated.extend(nodes)

    def teardown(self) -> None: ...

    def replaces_interrupted(self, spec: PoolSpec) -> bool:
        return self.replaces

    def replace(self, spec: PoolSpec, handle: NodeHandle, user_data: UserDataFactory, emit: EventSink) -> NodeHandle:
        user_data(handle.node, "ipc://x", BootstrapContext(), run_dir="/tmp/x")
        new = _handle(handle.node, spot=True)
        self.replacements.append(new)
        return new


def _user_data(node: int, bind: str, context: BootstrapContext, **_: object) -> str:
    return f"node {node}"


def _fleet(
    link: _Link, events: list[SkywardEvent], active: bool = True, nodes: int = 2, replaces: bool = True
) -> tuple[Fleet, _SpotDriver]:
    driver = _SpotDriver(replaces)
    fleet = Fleet(
        spec=PoolSpec(provider=object(), image=Image(), nodes=nodes),
        driver=driver,  # type: ignore[arg-type]
        provider_name="fake",
        region="here",
        handles=[_handle(i, spot=True) for i in range(nodes)],
        user_data=_user_data,
        bootstrap_timeout=7.0,
        emit=events.append,
        active=lambda: active,
    )
    fleet.attach(link)  # type: ignore[arg-type]  # the spot path needs only drain_node and replace_node
    fleet.set_cluster([wire.CLUSTER, b"{}"])
    return fleet, driver


def test_an_interrupted_node_is_drained_once_however_often_it_is_reported() -> None:
    events: list[SkywardEvent] = []
    link = _Link()
    fleet, _ = _fleet(link, events, replaces=False)  # Spot.IfAvailable: no replacement
    handle = fleet.handles[1]
    fleet.on_interruption(1, handle, "notice")
    fleet.on_interruption(1, handle, "reclaimed")
    assert [(e.node, e.reason) for e in events if isinstance(e, InstanceInterrupted)] == [(1, "notice")]
    assert link.drained == [1]
    assert fleet.state.member(1).status is NodeStatus.DRAINING


def test_a_replacement_that_answered_becomes_the_node_under_its_index() -> None:
    events: list[SkywardEvent] = []
    link = _Link()
    fleet, driver = _fleet(link, events)
    old = fleet.handles[1]
    fleet.drain_node(1)
    fleet.replace_node(driver, 1, old)
    (new,) = driver.replacements
    assert fleet.handles == (fleet.handles[0], new)
    assert fleet.state.member(1).status is NodeStatus.LIVE
    assert link.replaced == [(1, new.endpoint, [wire.CLUSTER, b"{}"], 7.0)]
    assert BootstrapCompleted(instance_id=new.instance_id) in events
    assert Notice(message=f"node 1 replaced: {old.instance_id} -> {new.instance_id}") in events
    assert {p.instance_id for p in fleet.priced()} == {fleet.handles[0].instance_id, new.instance_id}


def test_a_replacement_that_never_answered_leaves_the_node_drained_and_says_why() -> None:
    events: list[SkywardEvent] = []
    fleet, driver = _fleet(_Link(fails=True), events)
    old = fleet.handles[1]
    fleet.drain_node(1)
    fleet.replace_node(driver, 1, old)
    member = fleet.state.member(1)
    assert (member.handle, member.incoming, member.status) == (old, None, NodeStatus.DRAINING)
    errors = [e for e in events if isinstance(e, Error)]
    assert len(errors) == 1 and "could not be replaced" in errors[0].message and "did not answer" in errors[0].message


def test_a_replacement_that_arrives_after_the_pool_stopped_is_not_installed() -> None:
    events: list[SkywardEvent] = []
    link = _Link()
    fleet, driver = _fleet(link, events, active=False)
    old = fleet.handles[1]
    fleet.replace_node(driver, 1, old)
    assert link.replaced == [] and fleet.handles[1] == old


def test_a_nodes_log_lines_carry_its_instance_and_a_departed_nodes_are_dropped() -> None:
    events: list[SkywardEvent] = []
    fleet, _ = _fleet(_Link(), events)
    handle = fleet.handles[0]
    fleet.on_node_message(0, wire.LOG, {"lines": ["hi"], "ts": 1.5})
    fleet.on_node_message(9, wire.LOG, {"lines": ["late"], "ts": 2.0})
    assert events == [LogLine(node=0, instance_id=handle.instance_id, line="hi", timestamp=1.5)]


def test_terminating_the_fleet_terminates_every_member() -> None:
    fleet, driver = _fleet(_Link(), [], nodes=3)
    fleet.terminate()
    assert driver.terminated == list(fleet.handles)


# -- any sequence of changes ----------------------------------------------------------------


@dataclass
class _Model:
    """What a fleet must look like, kept the obvious way beside it."""

    members: dict[int, NodeHandle] = field(default_factory=dict)
    ever_given: set[int] = field(default_factory=set)
    joining: set[int] = field(default_factory=set)


_OPS = st.lists(
    st.tuples(
        st.sampled_from(
            [
                "reserve",
                "join",
                "abandon",
                "drain",
                "remove",
                "replace",
                "finish",
                "cancel",
                "interrupt",
                "launch",
                "again",
            ]
        ),
        st.integers(0, 12),
        st.booleans(),
    ),
    max_size=60,
)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 4), _OPS)
@example(0, [("reserve", 0, False), ("launch", 0, False), ("join", 0, False), ("again", 0, False)])
@example(1, [("remove", 0, False), ("again", 0, False), ("launch", 0, False), ("abandon", 0, False)])
def test_indices_stay_unique_and_the_member_set_consistent_under_any_changes(
    start: int, ops: list[tuple[str, int, bool]]
) -> None:
    state = FleetState.of([_handle(i, spot=i % 2 == 0) for i in range(start)])
    model = _Model(members={h.node: h for h in state.handles}, ever_given=set(range(start)))
    for op, pick, spot in ops:
        members = sorted(model.members)
        target = members[pick % len(members)] if members else None
        if op == "reserve":
            state, index = state.reserve()
            assert index not in model.ever_given  # never given twice
            model.ever_given.add(index)
            model.joining.add(index)
        elif op == "launch" and model.joining:
            index = sorted(model.joining)[pick % len(model.joining)]
            state = state.launched(_handle(index, spot))
        elif op == "again":
            departed = sorted(model.ever_given - set(model.members) - model.joining)
            if departed:
                index = departed[pick % len(departed)]
                state = state.reserve_again(index)  # a replacement takes a departed node's index
                model.joining.add(index)
            elif model.members:
                with pytest.raises(ValueError, match="cannot be reserved again"):
                    state.reserve_again(sorted(model.members)[0])
        elif op in ("join", "abandon") and model.joining:
            index = sorted(model.joining)[pick % len(model.joining)]
            model.joining.discard(index)
            if op == "join":
                handle = _handle(index, spot)
                state = state.join(handle)
                model.members[index] = handle
            else:
                state = state.abandon(index)
        elif op == "drain" and target is not None:
            state = state.drain(target)
            assert target not in {h.node for h in state.live}
        elif op == "remove" and target is not None:
            state, removed = state.remove(target)
            assert removed == model.members.pop(target)
        elif op == "replace" and target is not None and state.member(target).incoming is None:
            state = state.begin_replace(target, _handle(target, spot))
        elif op in ("finish", "cancel") and target is not None and state.member(target).incoming is not None:
            if op == "finish":
                incoming = state.member(target).incoming
                state, replaced = state.finish_replace(target)
                assert replaced == model.members[target]
                assert incoming is not None
                model.members[target] = incoming
            else:
                state, _ = state.cancel_replace(target)
        elif op == "interrupt" and target is not None:
            instance = model.members[target].instance_id
            before = instance in state.interrupted
            state, first = state.interrupt(instance)
            assert first is not before
        # the invariants, after every change
        assert state.indices == tuple(sorted(model.members))  # unique, in order, the expected set
        assert all(m.handle.node == m.index for m in state.members)
        assert all(m.incoming is None or m.incoming.node == m.index for m in state.members)
        assert {m.handle for m in state.members} == set(model.members.values())
        assert state.joining == frozenset(model.joining)
        assert not state.joining & set(state.indices)
        assert state.next_index == max(model.ever_given, default=-1) + 1
        assert set(state.live) <= set(state.handles)
        assert all(h.spot and h.instance_id not in state.interrupted for h in state.unreported_spot())
        assert {h.node for h in state.starting} <= state.joining  # started, not joined: still reserved
        assert len({h.node for h in state.starting}) == len(state.starting)
        assert set(state.handles) | set(state.starting) <= set(state.everything)
        reclaimed = [
            m for m in state.members if m.status.value == "draining" and m.handle.instance_id in state.interrupted
        ]
        assert state.size == len(state.live) + len(state.joining) + len(reclaimed)  # a reclaim awaits its replacement
