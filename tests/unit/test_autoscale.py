"""The autoscaler's policy (skyward.api.autoscale.desired_nodes), a pure function: its
rules hold for any load, any bounds and any moment."""

from __future__ import annotations

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from skyward.api.autoscale import AutoscaleSettings, Demand, desired_nodes
from skyward.errors import ConfigurationError
from skyward.scaling import Nodes


@st.composite
def _bounds(draw: st.DrawFn) -> Nodes:
    ceiling = draw(st.integers(1, 40))
    desired = draw(st.integers(0, ceiling))
    floor = draw(st.integers(0, desired))
    return Nodes(desired=desired, max=ceiling, min=floor)


_demands = st.builds(
    Demand,
    queued=st.integers(0, 500),
    running=st.integers(0, 500),
    slots_per_node=st.integers(1, 16),
    idle=st.lists(st.floats(0, 1000, allow_nan=False), max_size=40),
)
_settings = st.builds(
    AutoscaleSettings, cooldown=st.floats(0, 120, allow_nan=False), idle_timeout=st.floats(0, 600, allow_nan=False)
)


@settings(max_examples=500, deadline=None)
@given(_demands, _bounds(), _settings, st.integers(0, 40), st.floats(0, 1000, allow_nan=False))
def test_the_policy_never_leaves_the_bounds(
    demand: Demand, bounds: Nodes, policy: AutoscaleSettings, desired: int, since: float
) -> None:
    desired = min(desired, bounds.ceiling)
    new = desired_nodes(demand, desired=desired, bounds=bounds, settings=policy, since_change=since)
    assert bounds.floor <= new <= bounds.ceiling


@settings(max_examples=500, deadline=None)
@given(_demands.filter(lambda d: d.queued > 0), _bounds(), _settings, st.floats(0, 1000, allow_nan=False))
def test_the_policy_never_shrinks_while_tasks_wait(
    demand: Demand, bounds: Nodes, policy: AutoscaleSettings, since: float
) -> None:
    desired = bounds.desired
    new = desired_nodes(demand, desired=desired, bounds=bounds, settings=policy, since_change=since)
    assert new >= desired


@settings(max_examples=500, deadline=None)
@given(_demands, _bounds(), _settings, st.floats(0, 1, exclude_max=True))
def test_the_policy_never_changes_inside_the_cooldown(
    demand: Demand, bounds: Nodes, policy: AutoscaleSettings, share: float
) -> None:
    since = policy.cooldown * share
    assume(since < policy.cooldown)  # strictly inside the cooldown
    assert desired_nodes(demand, desired=bounds.desired, bounds=bounds, settings=policy, since_change=since) == (
        bounds.desired
    )


@settings(max_examples=500, deadline=None)
@given(_demands.filter(lambda d: d.queued > 0), _bounds(), _settings)
def test_a_scale_up_gives_every_waiting_task_a_slot_in_one_step(
    demand: Demand, bounds: Nodes, policy: AutoscaleSettings
) -> None:
    new = desired_nodes(demand, desired=bounds.desired, bounds=bounds, settings=policy, since_change=policy.cooldown)
    assert new >= min(demand.needed, bounds.ceiling)
    assert new * demand.slots_per_node >= demand.queued + demand.running or new == bounds.ceiling


@settings(max_examples=500, deadline=None)
@given(_demands.filter(lambda d: d.queued == 0), _bounds(), _settings)
def test_a_scale_down_keeps_a_slot_for_every_running_task_and_removes_only_long_idle_nodes(
    demand: Demand, bounds: Nodes, policy: AutoscaleSettings
) -> None:
    desired = bounds.ceiling
    new = desired_nodes(demand, desired=desired, bounds=bounds, settings=policy, since_change=policy.cooldown)
    idle_long = sum(1 for s in demand.idle if s >= policy.idle_timeout)
    assert new >= desired - idle_long
    assert new >= min(-(-demand.running // demand.slots_per_node), desired)


def test_a_burst_on_an_empty_pool_starts_the_nodes_its_queue_needs() -> None:
    bounds = Nodes(desired=0, max=16)
    demand = Demand(queued=20, running=0, slots_per_node=4)
    assert desired_nodes(demand, desired=0, bounds=bounds, settings=AutoscaleSettings(), since_change=60.0) == 5


def test_a_burst_past_the_ceiling_stops_at_the_ceiling() -> None:
    demand = Demand(queued=1000, running=8, slots_per_node=2)
    new = desired_nodes(demand, desired=2, bounds=Nodes(2, max=6), settings=AutoscaleSettings(), since_change=60.0)
    assert new == 6


def test_idle_nodes_are_removed_only_after_the_idle_timeout_and_never_below_the_floor() -> None:
    bounds, policy = Nodes(desired=4, max=8, min=1), AutoscaleSettings(cooldown=10.0, idle_timeout=60.0)
    quiet = Demand(queued=0, running=0, slots_per_node=1, idle=(59.0, 59.0, 59.0))
    assert desired_nodes(quiet, desired=4, bounds=bounds, settings=policy, since_change=100.0) == 4
    idle = Demand(queued=0, running=0, slots_per_node=1, idle=(61.0, 61.0, 61.0, 61.0))
    assert desired_nodes(idle, desired=4, bounds=bounds, settings=policy, since_change=100.0) == 1


def test_a_pool_with_min_zero_scales_to_zero_when_idle() -> None:
    bounds = Nodes(desired=2, max=4, min=0)
    idle = Demand(queued=0, running=0, slots_per_node=1, idle=(120.0, 120.0))
    assert desired_nodes(idle, desired=2, bounds=bounds, settings=AutoscaleSettings(), since_change=100.0) == 0


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"cooldown": -1}, "autoscale_cooldown=-1"),
        ({"cooldown": float("nan")}, "autoscale_cooldown=nan"),
        ({"idle_timeout": "60"}, "autoscale_idle_timeout='60'"),
        ({"idle_timeout": True}, "autoscale_idle_timeout=True"),
        ({"replace_lost": 1}, "replace_lost_nodes=1"),
    ],
)
def test_bad_autoscale_settings_are_refused_naming_the_parameter(kwargs: dict[str, object], named: str) -> None:
    with pytest.raises(ConfigurationError, match=f"ComputePool\\({named}\\)"):
        AutoscaleSettings(**kwargs)  # type: ignore[arg-type]
