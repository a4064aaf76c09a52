"""The container marketplaces' shared driver base (skyward.providers.cloud.marketplace_driver)
against a listing in memory: what VastAI and RunPod each wrote before, checked once."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from ipaddress import IPv4Address
from typing import Any

from skyward.api.spec import build_spec
from skyward.events import Notice
from skyward.providers import PoolSpec
from skyward.providers.cloud import ChosenOffer, CloudSettings, InstanceState
from skyward.providers.cloud.http import APIError
from skyward.providers.cloud.marketplace import pool_label
from skyward.providers.cloud.marketplace_driver import MarketplaceProvider
from skyward.providers.protocol import PortMapping, ReclaimWatch, SpotReplacement
from skyward.spot import NodePlan, SpotNever

AGENT = 16789


@dataclass(frozen=True, slots=True)
class Shelf(CloudSettings):
    agent_port: int = AGENT


class ShelfDriver(MarketplaceProvider[Shelf]):
    """A marketplace whose listing is a list of dicts: ``host``, ``ports``, ``status``."""

    name = "shelf"
    instance_noun = "crate"
    label_key = "tag"
    removal_hint = "throw them out with `shelf rm <id>`"

    def __init__(self, listing: list[dict[str, Any]], *, sweep_fails: bool = False) -> None:
        super().__init__(Shelf(), clock=lambda: 1000.0, sleep=lambda _: None)
        self.listing = listing
        self.removed: list[str] = []
        self.swept: list[tuple[float, str]] = []
        self.sweep_fails = sweep_fails

    def containers(self) -> list[dict[str, Any]]:
        return self.listing

    def read(self, raw: Mapping[str, Any]) -> tuple[str, dict[int, int], str]:
        return str(raw.get("host") or ""), dict(raw.get("ports") or {}), str(raw["status"])

    @staticmethod
    def state_of(raw: Mapping[str, Any], mapped: bool) -> InstanceState:
        if raw["status"] == "stopped":
            return InstanceState.STOPPED
        return InstanceState.RUNNING if raw["status"] == "up" and mapped else InstanceState.PENDING

    def remove(self, instance_id: str) -> None:
        self.removed.append(instance_id)

    def reap_leftovers(self, now: float, own_pool: str) -> list[str]:
        if self.sweep_fails:
            raise APIError("Shelf", "list boxes", 503, "busy")
        self.swept.append((now, own_pool))
        return [f"threw out box 9 of an earlier pool (swept at {now:g})"]

    def client_address(self) -> IPv4Address:
        return IPv4Address("203.0.113.7")

    def choose_offer(self, spec: PoolSpec, plans: Sequence[NodePlan], emit: Any) -> ChosenOffer:
        return ChosenOffer(instance_type="box", region="shelf", price_on_demand=1.0)


def _spec() -> PoolSpec:
    return build_spec(
        provider=Shelf(), image=None, pip=None, nodes=2, machine=None, accelerator=None, cpu=None, memory=None,
        volume=None, spot=None, timeout=600, env=None, concurrency=1, display="quiet", collect_metrics=False,
    )  # fmt: skip


def test_a_container_runs_for_the_pool_only_once_its_agent_port_is_mapped_to_an_address() -> None:
    driver = ShelfDriver([
        {"id": 1, "host": "198.51.100.1", "ports": {AGENT: 40001}, "status": "up"},
        {"id": 2, "host": "198.51.100.2", "ports": {}, "status": "up"},  # agent port not mapped yet
        {"id": 3, "host": "", "ports": {AGENT: 40003}, "status": "up"},  # no address yet
        {"id": 4, "host": "198.51.100.4", "ports": {AGENT: 40004}, "status": "stopped"},
        {"id": 5, "host": "198.51.100.5", "ports": {AGENT: 40005}, "status": "up"},  # not asked about
    ])  # fmt: skip
    found = driver.describe(["1", "2", "3", "4", "6"])
    assert sorted(found) == ["1", "2", "3", "4"]  # 6 is not listed: gone
    assert found["1"].state is InstanceState.RUNNING and found["1"].ip == "198.51.100.1"
    assert found["1"].ports == {AGENT: 40001} and found["1"].status == "up"
    assert found["2"].state is InstanceState.PENDING and found["3"].state is InstanceState.PENDING
    assert found["3"].ip is None  # "" is no address
    assert found["4"].state is InstanceState.STOPPED


def test_a_pool_lists_only_its_own_labelled_containers_and_none_before_prepare() -> None:
    spec = _spec()
    listing: list[dict[str, Any]] = [
        {"id": 1, "tag": pool_label(spec.pool_id, 1_800_000_000, 0)},
        {"id": 2, "tag": pool_label("other-pool", 1_800_000_000, 0)},
        {"id": 3, "tag": "somebody-elses-box"},
        {"id": 4},
    ]
    driver = ShelfDriver(listing)
    assert driver.listed() == []
    events: list[object] = []
    driver.prepare(spec, events.append)
    assert driver.listed() == ["1"]
    assert driver.instance_name(spec, 3).startswith(f"skyward-{spec.pool_id}-") and driver.instance_name(
        spec, 3
    ).endswith("-3")


def test_prepare_sweeps_earlier_pools_and_a_failed_sweep_is_only_a_notice() -> None:
    spec = _spec()
    events: list[object] = []
    driver = ShelfDriver([])
    driver.prepare(spec, events.append)
    assert driver.swept == [(1000.0, spec.pool_id)]
    assert [e.message for e in events if isinstance(e, Notice)] == [
        "threw out box 9 of an earlier pool (swept at 1000)"
    ]
    events.clear()
    ShelfDriver([], sweep_fails=True).prepare(spec, events.append)
    notices = [e.message for e in events if isinstance(e, Notice)]
    assert len(notices) == 1 and notices[0].startswith("could not look for crates earlier pools left behind")


def test_a_marketplace_deletes_one_container_per_call_and_says_how_to_by_hand() -> None:
    driver = ShelfDriver([])
    driver.delete(["7", "8"])
    assert driver.removed == ["7", "8"]
    assert driver.cleanup_hint(["7", "8"]) == "throw them out with `shelf rm <id>` or `skyward down` (7, 8)"


def test_a_marketplace_sells_spot_only_when_asked_and_maps_ports() -> None:
    driver = ShelfDriver([])
    assert isinstance(driver.default_spot(), SpotNever)
    assert isinstance(driver, PortMapping) and isinstance(driver, ReclaimWatch) and isinstance(driver, SpotReplacement)
