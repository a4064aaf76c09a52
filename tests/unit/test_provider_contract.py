"""The provider contract (skyward.providers): one settings base, abilities found by type,
rules shared by every provider, lifecycle events said in one place."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import skyward as sky
from skyward.errors import ConfigurationError
from skyward.events import BootstrapCompleted, BootstrapProgress, InstanceInterrupted, Notice
from skyward.plugins.contributions import ProviderPlugin
from skyward.plugins.hookspecs import hookimpl
from skyward.plugins.registry import registry
from skyward.providers import (
    NODE_TTL_MARGIN,
    EventSink,
    FollowsBootstrap,
    InterruptionNotices,
    NodeHandle,
    NoticeKind,
    PoolSpec,
    Provider,
    ProviderDriver,
    ProviderSettings,
    ReclaimWatch,
    SpotMarket,
    SpotReplacement,
    UserDataFactory,
    VolumeMounts,
    notices_dir,
)
from skyward.providers.local import Local, LocalDriver
from skyward.providers.rules import spot_without_market
from skyward.spot import Spot, SpotAlways, SpotIfAvailable, SpotPercent


@sky.compute
def slow_square(x: int) -> int:
    import time

    time.sleep(0.2)
    return x * x


# -- settings -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"grace_period": math.nan}, "grace_period"),
        ({"grace_period": math.inf}, "grace_period"),
        ({"grace_period": 0}, "grace_period"),
        ({"bootstrap_timeout": -1.0}, "bootstrap_timeout"),
        ({"bootstrap_timeout": True}, "bootstrap_timeout"),
        ({"client_address": 1}, "client_address"),
        ({"client_address": "0.0.0.0"}, "client_address"),
        ({"client_address": "2001:db8::1"}, "client_address"),
    ],
)
def test_every_provider_refuses_bad_shared_settings_naming_its_class_and_the_field(
    kwargs: dict[str, Any], field: str
) -> None:
    with pytest.raises(ConfigurationError, match=rf"Local\({field}="):
        Local(**kwargs)
    with pytest.raises(ConfigurationError, match=rf"ProviderSettings\({field}="):
        ProviderSettings(**kwargs)


def test_the_shared_settings_have_one_default_each_and_keep_positional_fields_in_place() -> None:
    assert Local().grace_period == ProviderSettings().grace_period == 30.0
    assert Local().bootstrap_timeout == ProviderSettings().bootstrap_timeout
    assert Local("tcp").transport == "tcp"  # the base's fields are keyword-only
    assert ProviderSettings.third_party_hosts is False and Local.third_party_hosts is False
    assert Local(client_address="203.0.113.7").client_address == "203.0.113.7"


def test_the_ttl_margin_and_the_notices_drop_box_are_defined_once() -> None:
    from skyward.api import user_data  # where each node's TTL is rendered

    assert user_data.NODE_TTL_MARGIN is NODE_TTL_MARGIN
    assert notices_dir("/tmp/skyward-p-0/", 0) == notices_dir("/tmp/skyward-p-0", 0) == "/tmp/skyward-p-0/notices-0"
    assert NoticeKind("interruption") is NoticeKind.INTERRUPTION


# -- spot without a market: one rule ----------------------------------------------------


def test_a_provider_without_a_market_runs_if_available_on_demand_and_says_why() -> None:
    message = spot_without_market("local", Spot.IfAvailable())
    assert message is not None and "no spot market" in message and "on-demand" in message
    assert spot_without_market("local", None) is None
    assert spot_without_market("local", Spot.Never) is None


@pytest.mark.parametrize("spot", ["always", 0.5, Spot.Always(retries=1), Spot.Percent(1.0)])
def test_spot_nodes_that_cannot_exist_are_refused_before_anything_is_made(spot: object) -> None:
    with pytest.raises(ConfigurationError, match=r"spot=.*no spot market.*'if-available'"):
        sky.ComputePool(spot=spot, display="quiet")  # type: ignore[arg-type]


def test_the_default_provider_accepts_if_available_and_runs_on_demand() -> None:
    events: list[object] = []
    with sky.ComputePool(spot="if-available", display="quiet", on_event=events.append) as pool:
        assert (slow_square(3) >> pool) == 9
        assert not any(n.spot for n in pool.nodes)
    notices = [e.message for e in events if isinstance(e, Notice)]
    assert any("no spot market" in m and "on-demand" in m for m in notices), notices


def test_volumes_on_a_provider_that_mounts_none_are_refused_by_the_pool() -> None:
    from skyward.providers.rules import unmounted_volumes

    with pytest.raises(ConfigurationError, match=r"volume=.*local provider.*mounts no volumes"):
        unmounted_volumes("local", [object()], mounts=False)
    unmounted_volumes("local", [], mounts=False)


# -- abilities ----------------------------------------------------------------------------


def test_abilities_are_types_not_attribute_lookups() -> None:
    driver = LocalDriver(Local())
    assert isinstance(driver, FollowsBootstrap)
    for ability in (SpotMarket, SpotReplacement, InterruptionNotices, ReclaimWatch, VolumeMounts):
        assert not isinstance(driver, ability), ability


def test_a_cloud_driver_declares_its_abilities() -> None:
    aws = pytest.importorskip("skyward_aws")
    from skyward_aws.driver import AWSDriver

    driver = AWSDriver(aws.AWS(client_address="203.0.113.7"), session=object())
    for ability in (SpotMarket, SpotReplacement, InterruptionNotices, VolumeMounts):
        assert isinstance(driver, ability), ability
    assert not isinstance(driver, FollowsBootstrap)


# -- events from one place ---------------------------------------------------------------


def test_bootstrap_completed_is_said_once_per_node_by_the_pool_after_its_steps() -> None:
    events: list[object] = []
    with sky.ComputePool(nodes=2, display="quiet", on_event=events.append) as pool:
        ids = [n.instance_id for n in pool.nodes]
    for instance_id in ids:
        mine = [e for e in events if isinstance(e, BootstrapProgress | BootstrapCompleted)]
        mine = [e for e in mine if e.instance_id == instance_id]
        completed = [i for i, e in enumerate(mine) if isinstance(e, BootstrapCompleted)]
        steps = [e.step for e in mine if isinstance(e, BootstrapProgress)]
        assert completed == [len(mine) - 1], mine  # once, and last
        assert len(steps) == len(set(steps)), steps  # Local followed them live: not repeated from the hello


# -- a reclaim without advance notice ----------------------------------------------------


@dataclass(frozen=True, slots=True)
class Reclaimable(ProviderSettings):
    """A Local-backed provider with a spot market and no advance notice (like Verda)."""

    reclaim_node: int = 1


class ReclaimableDriver(LocalDriver):
    name = "reclaimable"
    reclaim_poll_interval = 0.05

    def __init__(self, config: Reclaimable) -> None:
        super().__init__(Local(grace_period=config.grace_period, bootstrap_timeout=config.bootstrap_timeout))
        self.reclaim_node = config.reclaim_node
        self.asked = threading.Event()
        self.reclaim = threading.Event()

    def default_spot(self) -> Any:
        return Spot.Never

    def launch(self, spec: PoolSpec, user_data: UserDataFactory, emit: EventSink) -> list[NodeHandle]:
        return [replace(h, spot=True) for h in super().launch(spec, user_data, emit)]

    def reclaimed(self, nodes: Sequence[NodeHandle]) -> dict[str, str]:
        self.asked.set()
        if not self.reclaim.is_set():
            return {}
        return {n.instance_id: "the provider deleted this spot instance" for n in nodes if n.node == self.reclaim_node}


class _ReclaimablePlugin:
    @hookimpl
    def skyward_providers(self) -> Sequence[ProviderPlugin]:
        return [ProviderPlugin(name="reclaimable", config_type=Reclaimable, create_driver=ReclaimableDriver)]


@pytest.fixture
def reclaimable() -> Iterator[None]:
    plugin = _ReclaimablePlugin()
    registry.register(plugin, name="test-reclaimable")
    try:
        yield
    finally:
        registry.unregister(plugin)


def test_a_spot_node_the_provider_took_away_without_notice_is_interrupted_and_its_work_moves(
    reclaimable: None,
) -> None:
    events: list[object] = []
    pool = sky.ComputePool(
        provider=Reclaimable(), nodes=2, spot="if-available", display="quiet", on_event=events.append
    )
    driver = pool._driver
    assert isinstance(driver, ReclaimableDriver) and isinstance(driver, ReclaimWatch)
    with pool:
        assert driver.asked.wait(10)
        driver.reclaim.set()
        deadline = time.monotonic() + 10
        while not any(isinstance(e, InstanceInterrupted) for e in events) and time.monotonic() < deadline:
            time.sleep(0.05)
        results = sky.gather(*(slow_square(x) for x in range(4))) >> pool
        assert results == (0, 1, 4, 9)
    interrupted = [e for e in events if isinstance(e, InstanceInterrupted)]
    assert [(e.node, e.reason) for e in interrupted] == [(1, "the provider deleted this spot instance")]


def test_an_instance_takes_the_interruption_path_once(reclaimable: None) -> None:
    events: list[object] = []
    pool = sky.ComputePool(
        provider=Reclaimable(), nodes=2, spot="if-available", display="quiet", on_event=events.append
    )
    with pool:
        handle = pool.nodes[1]
        fleet = pool._fleet
        assert fleet is not None
        fleet.on_interruption(1, handle, "notice")  # e.g. an advance notice ...
        fleet.on_interruption(1, handle, "gone")  # ... and the reclaim watch, for the same instance
        time.sleep(0.3)
    assert [(e.node, e.reason) for e in events if isinstance(e, InstanceInterrupted)] == [(1, "notice")]


_STRATEGIES = st.one_of(
    st.none(),
    st.just(Spot.Never),
    st.just(Spot.IfAvailable()),
    st.builds(Spot.Always, retries=st.integers(0, 20), interval=st.floats(0, 60)),
    st.builds(Spot.Percent, st.floats(min_value=0.01, max_value=1.0)),
)


@given(_STRATEGIES)
def test_without_a_market_only_strategies_that_need_spot_nodes_are_refused(strategy: Any) -> None:
    needs_spot = isinstance(strategy, SpotAlways | SpotPercent)
    try:
        message = spot_without_market("local", strategy)
    except ConfigurationError:
        assert needs_spot
        return
    assert not needs_spot
    assert (message is not None) == isinstance(strategy, SpotIfAvailable)


def test_the_provider_base_class_has_a_default_for_all_but_launch_and_terminate() -> None:
    class Bare(Provider[Local]):
        name = "bare"

    driver = Bare(Local())
    spec = sky.ComputePool(display="quiet").spec
    driver.validate(spec)
    assert driver.prepare(spec, lambda event: None) == "bare"
    driver.teardown()
    with pytest.raises(NotImplementedError, match=r"Bare\.launch"):
        driver.launch(spec, lambda *a, **k: "", lambda event: None)
    with pytest.raises(NotImplementedError, match=r"Bare\.terminate"):
        driver.terminate([])
    assert isinstance(driver, ProviderDriver)
