"""The cloud template (skyward.providers.cloud.CloudProvider) against an in-memory API:
parallel creates, one describe per poll whatever the node count, cleanup of everything
made when any create fails, terminate verified, teardown sweeping lost creates."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from ipaddress import IPv4Address
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skyward.api.spec import build_spec
from skyward.errors import LaunchTimeoutError, PriceCapError, ProvisioningError
from skyward.events import BootstrapStarting, InstanceProvisioned, Notice
from skyward.image import BootstrapContext
from skyward.providers import PoolSpec
from skyward.providers.cloud import (
    ChosenOffer,
    CloudProvider,
    CloudSettings,
    Instance,
    InstanceState,
    Labels,
    NodeRequest,
    PortMappedCloudProvider,
    SpotCloudProvider,
)
from skyward.providers.cloud.startup import CONSOLE_TAIL_LINES, remove_local_run_dirs
from skyward.providers.protocol import ConsoleOutput, ElasticNodes, NodeWatch, PortMapping
from skyward.scaling import Nodes
from skyward.spot import Market, NodePlan, Spot, SpotNever, min_spot_nodes, normalize_spot, plan_markets


@dataclass(frozen=True, slots=True)
class Memory(CloudSettings):
    pass


class MemoryAPI:
    """A cloud API in a dict. Instances run after ``boot_polls`` describes; ``refuse`` is
    the set of create numbers (1-based) it refuses; ``sticky`` deletes need this many tries;
    ``together``: every create waits until that many are in flight at once (and is refused
    if they never are), so a test can require parallel creates without timing them."""

    def __init__(self, boot_polls: int = 1, together: int = 0) -> None:
        self.lock = threading.Lock()
        self.instances: dict[str, dict[str, Any]] = {}
        self.creates = 0
        self.describes = 0
        self.deletes: list[str] = []
        self.refuse: set[int] = set()
        self.capacity_refusals: set[int] = set()
        self.sticky = 0
        self.lose_answer: set[int] = set()
        self.boot_polls = boot_polls
        # 30 s only bounds a regression's failure (creates made one at a time), never a pass
        self.rendezvous = threading.Barrier(together, timeout=30) if together else None
        self.in_flight = self.max_in_flight = 0

    def create(self, name: str, market: Market, labels: Labels) -> str:
        with self.lock:
            self.creates += 1
            number = self.creates
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.rendezvous is not None:
                try:
                    self.rendezvous.wait()
                except threading.BrokenBarrierError:
                    raise ProvisioningError(f"{self.rendezvous.parties} creates were never in flight at once") from None
            if number in self.capacity_refusals:
                raise ProvisioningError("no capacity")
            if number in self.refuse:
                raise ProvisioningError(f"create {number} refused")
            instance_id = f"i-{number}"
            with self.lock:
                self.instances[instance_id] = {
                    "name": name, "polls": 0, "alive": True, "market": market, "pool": labels.pool_id,
                    "delete_tries": 0,
                }  # fmt: skip
            if number in self.lose_answer:
                raise ProvisioningError("504: the answer was lost")
            return instance_id
        finally:
            with self.lock:
                self.in_flight -= 1

    def describe(self, ids: Sequence[str]) -> dict[str, Instance]:
        with self.lock:
            self.describes += 1
            found = {}
            for i in ids:
                item = self.instances.get(i)
                if item is None or not item["alive"]:
                    continue
                item["polls"] += 1
                running = item["polls"] >= self.boot_polls
                state = InstanceState.RUNNING if running else InstanceState.PENDING
                found[i] = Instance(i, state, ip="127.0.0.1" if running else None, status="running")
            return found

    def delete(self, ids: Sequence[str]) -> None:
        with self.lock:
            for i in ids:
                self.deletes.append(i)
                item = self.instances[i]
                item["delete_tries"] += 1
                if item["delete_tries"] > self.sticky:
                    item["alive"] = False

    def alive(self) -> list[str]:
        with self.lock:
            return [i for i, item in self.instances.items() if item["alive"]]


class MemoryDriver(CloudProvider[Memory]):
    name = "memory"

    def __init__(self, api: MemoryAPI, sleeps: list[float] | None = None) -> None:
        recorded = sleeps if sleeps is not None else []
        super().__init__(Memory(poll_interval=0.01), clock=time.time, sleep=recorded.append)
        self.api = api
        self.infra = False

    def client_address(self) -> IPv4Address:
        return IPv4Address("203.0.113.7")

    def choose_offer(self, spec: PoolSpec, plans: Sequence[NodePlan], emit: Any) -> ChosenOffer:
        return ChosenOffer(instance_type="m1", region="mem-1", price_on_demand=1.0, price_spot=0.3)

    def create_infrastructure(self, spec: PoolSpec, offer: ChosenOffer, labels: Labels, emit: Any) -> None:
        self.infra = True

    def delete_infrastructure(self) -> list[str]:
        self.infra = False
        return []

    def bootstrap_context(self, spec: PoolSpec, market: Market, run_dir: str, node: int) -> BootstrapContext:
        return BootstrapContext(local=False)

    def create(self, spec: PoolSpec, request: NodeRequest, labels: Labels) -> str:
        return self.api.create(request.name, request.market, labels)

    def describe(self, instance_ids: Sequence[str]) -> Mapping[str, Instance]:
        return self.api.describe(instance_ids)

    def delete(self, instance_ids: Sequence[str]) -> None:
        self.api.delete(instance_ids)

    def listed(self) -> list[str]:
        return self.api.alive()


class SpotMemoryDriver(SpotCloudProvider[Memory], MemoryDriver):
    def is_capacity_refusal(self, error: Exception) -> bool:
        return "no capacity" in str(error)


def _spec(nodes: int, **kwargs: Any) -> PoolSpec:
    args: dict[str, Any] = dict(
        provider=Memory(), image=None, pip=None, nodes=nodes, machine=None, accelerator=None, cpu=None, memory=None,
        volume=None, spot=None, timeout=600, env=None, concurrency=1, display="quiet", collect_metrics=False,
    )  # fmt: skip
    args.update(kwargs)
    return build_spec(**args)


def _script(node: int, bind: str, context: BootstrapContext, *, run_dir: str, **_: Any) -> str:
    return f"#!/bin/sh\n# node {node}\n"


def _launch(driver: MemoryDriver, spec: PoolSpec, events: list[object]) -> list[Any]:
    driver.prepare(spec, events.append)
    return driver.launch(spec, _script, events.append)


def test_nodes_are_created_in_parallel() -> None:
    api = MemoryAPI(together=8)  # each create returns only once all eight are in flight
    driver = MemoryDriver(api)
    handles = _launch(driver, _spec(8), [])
    assert api.max_in_flight == 8
    assert [h.node for h in handles] == list(range(8))


@settings(max_examples=10, deadline=None)
@given(st.integers(min_value=1, max_value=24))
def test_one_describe_per_poll_whatever_the_node_count(nodes: int) -> None:
    api = MemoryAPI(boot_polls=3)
    sleeps: list[float] = []
    driver = MemoryDriver(api, sleeps)
    events: list[object] = []
    _launch(driver, _spec(nodes), events)
    assert api.describes == 3 and sleeps == [0.01, 0.01]  # the wait does not grow with N
    assert [type(e) for e in events].count(InstanceProvisioned) == nodes
    assert [type(e) for e in events].count(BootstrapStarting) == nodes


@pytest.mark.parametrize(("nodes", "failing"), [(3, 1), (3, 3), (5, 2)])
def test_a_failure_at_node_k_of_n_deletes_everything_made(nodes: int, failing: int) -> None:
    api = MemoryAPI()
    api.refuse = {failing}
    driver = MemoryDriver(api)
    with pytest.raises(ProvisioningError, match=rf"create {failing} refused.*{nodes - 1} of {nodes} instances"):
        _launch(driver, _spec(nodes), [])
    assert api.alive() == []
    driver.teardown()
    assert not driver.infra


def test_terminate_is_verified_and_retried_until_the_api_says_gone() -> None:
    api = MemoryAPI()
    api.sticky = 1  # the first delete of each instance does not take
    driver = MemoryDriver(api)
    handles = _launch(driver, _spec(2), [])
    driver.terminate(handles)
    assert api.alive() == []
    assert sorted(api.deletes) == ["i-1", "i-1", "i-2", "i-2"]


def test_terminate_names_what_still_bills_after_its_rounds() -> None:
    api = MemoryAPI()
    api.sticky = 99
    driver = MemoryDriver(api)
    handles = _launch(driver, _spec(1), [])
    with pytest.raises(ProvisioningError, match=r"could not delete these instances, which bill until deleted.*i-1"):
        driver.terminate(handles)


def test_teardown_sweeps_an_instance_whose_create_answer_was_lost() -> None:
    api = MemoryAPI()
    api.lose_answer = {1}
    driver = MemoryDriver(api)
    with pytest.raises(ProvisioningError, match="504"):
        _launch(driver, _spec(1), [])
    assert api.alive() == ["i-1"]  # the driver never heard of it
    driver.teardown()
    assert api.alive() == [] and not driver.infra


def test_spot_if_available_falls_back_to_on_demand_and_always_retries() -> None:
    api = MemoryAPI()
    api.capacity_refusals = {1}
    events: list[object] = []
    driver = SpotMemoryDriver(api)
    handles = _launch(driver, _spec(1, spot="if-available"), events)
    assert [h.spot for h in handles] == [False]
    assert any(isinstance(e, Notice) and "on-demand" in e.message for e in events)
    api2 = MemoryAPI()
    api2.capacity_refusals = {1, 2}
    sleeps: list[float] = []
    driver2 = SpotMemoryDriver(api2, sleeps)
    handles = _launch(driver2, _spec(1, spot=Spot.Always(retries=2, interval=0.5)), [])
    assert [h.spot for h in handles] == [True] and sleeps[:2] == [0.5, 0.5]


def test_a_spot_instance_the_provider_deleted_is_reported_reclaimed() -> None:
    api = MemoryAPI()
    driver = SpotMemoryDriver(api)
    handles = _launch(driver, _spec(2, spot="always"), [])
    assert driver.reclaimed(handles) == {}
    api.instances["i-2"]["alive"] = False
    gone = driver.reclaimed(handles)
    assert list(gone) == ["i-2"] and "without notice" in gone["i-2"]
    assert driver.replaces_interrupted(_spec(2, spot="always"))
    assert not driver.replaces_interrupted(_spec(2, spot="if-available"))


class MappedDriver(PortMappedCloudProvider[Memory], MemoryDriver):
    """Containers: container port p is reached at host port 40000 + p."""

    def describe(self, instance_ids: Sequence[str]) -> Mapping[str, Instance]:
        ports = {p: 40000 + p for p in range(16789, 16792)}
        return {i: replace(item, ports=ports) for i, item in self.api.describe(instance_ids).items()}


def test_a_port_mapped_node_is_reached_through_its_mapping() -> None:
    driver = MappedDriver(MemoryAPI())
    (handle,) = _launch(driver, _spec(1, concurrency=2), [])
    assert isinstance(driver, PortMapping)
    assert handle.endpoint == "tcp://127.0.0.1:56789"  # the agent's container port 16789, mapped
    assert driver.mapped_endpoint(handle, 16790) == "tcp://127.0.0.1:56790"  # a worker's
    with pytest.raises(ProvisioningError, match=r"maps no host port to container port 17000"):
        driver.mapped_endpoint(handle, 17000)
    assert not isinstance(MemoryDriver(MemoryAPI()), PortMapping)


class ZonedDriver(SpotMemoryDriver):
    """A market priced per zone (EC2's spot prices), reached without an open port (SSM)."""

    def ingress_source(self) -> str:
        return ""

    def create_infrastructure(self, spec: PoolSpec, offer: ChosenOffer, labels: Labels, emit: Any) -> None:
        self.seen_labels = labels

    def describe(self, instance_ids: Sequence[str]) -> Mapping[str, Instance]:
        described = self.api.describe(instance_ids)
        return {i: replace(item, price_spot=0.25, extra=(("zone", "mem-1b"),)) for i, item in described.items()}


def test_an_instances_own_spot_price_and_details_reach_its_handle_and_event() -> None:
    driver, events = ZonedDriver(MemoryAPI()), []
    (handle,) = _launch(driver, _spec(1, spot="always"), events)
    assert handle.price_spot == 0.25  # its zone's price, not the offer's 0.3
    assert ("zone", "mem-1b") in handle.extra and ("region", "mem-1") in handle.extra
    (provisioned,) = [e for e in events if isinstance(e, InstanceProvisioned)]
    assert provisioned.price_spot == 0.25
    assert driver.seen_labels.client_cidr == ""  # nothing admitted from outside; no address asked
    assert handle.price_on_demand == 1.0


# -- when a node does not start, and the run directory ------------------------------------


class StuckAPI(MemoryAPI):
    """Every instance is described as ``state`` (and without an address unless ``ip``)."""

    def __init__(self, state: InstanceState, ip: str | None = None) -> None:
        super().__init__()
        self.state, self.ip = state, ip

    def describe(self, ids: Sequence[str]) -> dict[str, Instance]:
        found = super().describe(ids)
        return {i: replace(found[i], state=self.state, ip=self.ip, status=self.state.value) for i in found}


class TickingDriver(MemoryDriver):
    """A MemoryDriver whose clock moves one second a reading, so provision_timeout=5
    passes after a few polls without waiting."""

    def __init__(self, api: MemoryAPI) -> None:
        ticks = iter(range(10**6))
        CloudProvider.__init__(
            self,
            Memory(poll_interval=0.01, provision_timeout=5.0),
            clock=lambda: float(next(ticks)),
            sleep=lambda s: None,
        )
        self.api = api
        self.infra = False


class ConsoleDriver(TickingDriver):
    """With the ConsoleOutput ability: each instance printed 40 numbered lines."""

    def __init__(self, api: MemoryAPI, broken: bool = False) -> None:
        super().__init__(api)
        self.broken = broken

    def console_output(self, instance_id: str) -> str:
        if self.broken:
            raise ProvisioningError("the console API said 500")
        return "".join(f"{instance_id} line {n}\n" for n in range(1, 41))


def test_an_instance_running_without_an_address_is_named_a_driver_bug_not_a_slow_start() -> None:
    driver = TickingDriver(StuckAPI(InstanceState.RUNNING))
    with pytest.raises(LaunchTimeoutError) as raised:
        _launch(driver, _spec(1), [])
    message = str(raised.value)
    assert "i-1" in message and "TickingDriver.describe reports no address" in message, message
    assert "raise Memory(provision_timeout" not in message
    assert driver.api.alive() == []  # deleted before the error left


def test_a_node_that_stops_while_starting_carries_the_tail_of_its_console() -> None:
    assert isinstance(ConsoleDriver(MemoryAPI()), ConsoleOutput)
    with pytest.raises(ProvisioningError) as raised:
        _launch(ConsoleDriver(StuckAPI(InstanceState.STOPPED)), _spec(1), [])
    message = str(raised.value)
    assert "is 'stopped' instead of starting" in message
    assert "i-1 line 40" in message and f"i-1 line {40 - CONSOLE_TAIL_LINES + 1}\n" in message
    assert f"i-1 line {40 - CONSOLE_TAIL_LINES}\n" not in message  # only the tail


def test_nodes_that_never_run_carry_their_consoles_and_an_unreadable_one_hides_nothing() -> None:
    with pytest.raises(LaunchTimeoutError) as raised:
        _launch(ConsoleDriver(StuckAPI(InstanceState.PENDING)), _spec(2), [])
    assert "i-1 line 40" in str(raised.value) and "i-2 line 40" in str(raised.value)
    with pytest.raises(ProvisioningError) as unreadable:
        _launch(ConsoleDriver(StuckAPI(InstanceState.GONE), broken=True), _spec(1), [])
    assert "disappeared while it was starting" in str(unreadable.value)
    assert "could not be read: the console API said 500" in str(unreadable.value)
    assert not isinstance(MemoryDriver(MemoryAPI()), ConsoleOutput)  # an ability, not a default


class LocalRunDirDriver(MemoryDriver):
    """Nodes on this machine: each run directory is under ``root`` (the agent makes it)."""

    def __init__(self, api: MemoryAPI, root: Path, name: str | None = None) -> None:
        super().__init__(api)
        self.root, self.fixed_name = root, name

    def run_dir(self, spec: PoolSpec, node: int) -> str:
        path = self.root / (self.fixed_name or f"skyward-{spec.pool_id}")
        path.mkdir(exist_ok=True)  # what the node's agent does
        (path / f"node-{node}-control.sock").touch()
        return str(path)


def test_teardown_removes_the_pools_run_directory_left_on_this_machine(tmp_path: Path) -> None:
    driver, spec = LocalRunDirDriver(MemoryAPI(), tmp_path), _spec(2)
    handles = _launch(driver, spec, [])
    run_dir = tmp_path / f"skyward-{spec.pool_id}"
    assert sorted(p.name for p in run_dir.iterdir()) == ["node-0-control.sock", "node-1-control.sock"]
    driver.terminate(handles)
    driver.teardown()
    assert not run_dir.exists()


def test_teardown_leaves_a_run_directory_not_named_after_the_pool(tmp_path: Path) -> None:
    driver, spec = LocalRunDirDriver(MemoryAPI(), tmp_path, name="shared-run"), _spec(1)
    driver.terminate(_launch(driver, spec, []))
    driver.teardown()
    assert (tmp_path / "shared-run" / "node-0-control.sock").exists()  # maybe another pool's too


def test_the_default_run_directory_of_a_remote_node_is_not_looked_for_here() -> None:
    driver, spec = MemoryDriver(MemoryAPI()), _spec(1)
    driver.terminate(_launch(driver, spec, []))
    assert remove_local_run_dirs([driver.run_dir(spec, 0)], spec.pool_id) == []  # absent here: nothing to do
    driver.teardown()


# -- nodes that come and go (ElasticNodes, NodeWatch) ---------------------------------------


def _elastic(nodes: int, ceiling: int, **kwargs: Any) -> PoolSpec:
    return replace(_spec(nodes, **kwargs), scaling=Nodes(desired=nodes, max=ceiling))


def test_every_cloud_driver_adds_removes_and_watches_nodes() -> None:
    driver = MemoryDriver(MemoryAPI())
    assert isinstance(driver, ElasticNodes) and isinstance(driver, NodeWatch)
    assert driver.node_poll_interval == driver.config.poll_interval


def test_nodes_added_later_get_the_pools_labels_and_are_created_in_parallel() -> None:
    api = MemoryAPI(together=3)  # the three added nodes' creates must be in flight at once
    api.rendezvous = None
    driver = MemoryDriver(api)
    spec = _elastic(2, 6)
    first = _launch(driver, spec, [])
    api.rendezvous = threading.Barrier(3, timeout=30)
    events: list[object] = []
    added = driver.add_nodes(spec, [4, 2, 3], _script, events.append)
    assert [h.node for h in added] == [4, 2, 3]  # in the order asked
    assert api.max_in_flight == 3
    assert {api.instances[h.instance_id]["pool"] for h in [*first, *added]} == {spec.pool_id}
    assert [type(e) for e in events] == [InstanceProvisioned, BootstrapStarting] * 3  # no InstanceLaunching
    assert driver.add_nodes(spec, [], _script, events.append) == []


def test_a_failed_add_deletes_what_it_created_and_nothing_else() -> None:
    api = MemoryAPI()
    driver = MemoryDriver(api)
    spec = _elastic(2, 4)
    _launch(driver, spec, [])
    api.refuse = {4}  # the second of the two added nodes
    with pytest.raises(ProvisioningError, match=r"create 4 refused.*1 of 2 instances"):
        driver.add_nodes(spec, [2, 3], _script, [].append)
    assert sorted(api.alive()) == ["i-1", "i-2"]  # the running nodes are untouched


def test_remove_nodes_deletes_exactly_those_verified_and_a_second_time_is_no_error() -> None:
    api = MemoryAPI()
    api.sticky = 1  # the first delete of each instance does not take
    driver = MemoryDriver(api)
    handles = _launch(driver, _spec(3), [])
    driver.remove_nodes([handles[1]])
    assert sorted(api.alive()) == ["i-1", "i-3"]
    driver.remove_nodes([handles[1]])
    assert api.deletes == ["i-2", "i-2"]  # the second call found it gone and sent nothing
    api.sticky = 99
    with pytest.raises(ProvisioningError, match=r"could not delete these instances.*i-3"):
        driver.remove_nodes([handles[2]])


def test_gone_names_what_the_cloud_deleted_or_stopped_in_one_describe() -> None:
    api = MemoryAPI()
    driver = MemoryDriver(api)
    handles = _launch(driver, _spec(3), [])
    assert driver.gone(handles) == {}
    api.instances["i-3"]["alive"] = False
    before = api.describes
    found = driver.gone(handles)
    assert list(found) == ["i-3"] and "memory says the instance is gone" in found["i-3"]
    assert api.describes == before + 1


def test_replace_is_remove_then_add_at_the_same_index() -> None:
    api = MemoryAPI()
    driver = SpotMemoryDriver(api)
    spec = _spec(2, spot="always")
    handles = _launch(driver, spec, [])
    new = driver.replace(spec, handles[1], _script, [].append)
    assert (new.node, new.spot) == (1, True) and new.instance_id not in {h.instance_id for h in handles}
    assert sorted(api.alive()) == ["i-1", new.instance_id]


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(["always", "if-available", "never", 0.3, 0.5, 0.8, 1.0]),
    st.integers(min_value=1, max_value=8),
    st.integers(min_value=0, max_value=12),
)
def test_a_pool_that_grows_keeps_its_spot_strategys_promise(spot: Any, nodes: int, more: int) -> None:
    driver = SpotMemoryDriver(MemoryAPI())
    spec = _elastic(nodes, nodes + more, spot=spot)
    driver.prepare(spec, [].append)
    strategy = normalize_spot(spot)
    for size in range(nodes, nodes + more + 1):
        plans = [driver.plan_for(n) for n in range(size)]
        assert [p.node for p in plans] == list(range(size))
        spot_nodes = sum(p.market is Market.SPOT for p in plans)
        assert spot_nodes >= min_spot_nodes(strategy, size)  # "at least p on spot", at every size
        if isinstance(strategy, SpotNever):
            assert spot_nodes == 0
    assert [driver.plan_for(n) for n in range(nodes)] == plan_markets(strategy, nodes)  # the start is unchanged


def test_spot_if_available_without_spot_capacity_adds_on_demand_nodes() -> None:
    driver = SpotMemoryDriver(MemoryAPI())

    def no_spot(spec: PoolSpec, plans: Sequence[NodePlan], emit: Any) -> ChosenOffer:
        return ChosenOffer(instance_type="m1", region="mem-1", price_on_demand=1.0, spot_available=False)

    driver.choose_offer = no_spot  # type: ignore[method-assign]
    driver.prepare(_elastic(1, 4, spot="if-available"), [].append)
    assert all(driver.plan_for(n).market is Market.ON_DEMAND for n in range(4))


def test_a_price_cap_holds_for_an_elastic_pool_at_its_largest() -> None:
    driver = MemoryDriver(MemoryAPI())  # $1/h a node
    driver.prepare(_spec(2, max_hourly_cost=2.5), [].append)  # 2 nodes: $2/h
    with pytest.raises(PriceCapError, match=r"x 3 nodes \(sky.Nodes\(max=\.\.\.\)\) costs \$3/h.*max_hourly_cost"):
        MemoryDriver(MemoryAPI()).prepare(_elastic(2, 3, max_hourly_cost=2.5), [].append)
