"""The fleet's bookkeeping (skyward.api.fleet_state), without sockets or threads: node
indices stay unique and never come back, and the member set stays consistent under any
sequence of adds, drains, removals, replacements and interruptions."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skyward.api.fleet import bootstrap_events
from skyward.api.fleet_state import FleetState, NodeStatus
from skyward.events import BootstrapCompleted, BootstrapProgress
from skyward.providers.protocol import NodeHandle

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


# -- any sequence of changes ----------------------------------------------------------------


@dataclass
class _Model:
    """What a fleet must look like, kept the obvious way beside it."""

    members: dict[int, NodeHandle] = field(default_factory=dict)
    ever_given: set[int] = field(default_factory=set)
    joining: set[int] = field(default_factory=set)


_OPS = st.lists(
    st.tuples(
        st.sampled_from(["reserve", "join", "abandon", "drain", "remove", "replace", "finish", "cancel", "interrupt"]),
        st.integers(0, 12),
        st.booleans(),
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 4), _OPS)
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
