"""What the container marketplace tests share (tests/runpod, tests/vastai, tests/marketplaces).

RunPod and VastAI are tested the same way: a fake API served on loopback, emulated
containers behind a port mapping, the key in the environment. Tests marked ``cloud`` run
only inside a network namespace where only loopback is up::

    unshare --net -- sh -c 'ip link set lo up && \\
        SKYWARD_TEST_NETNS=1 .venv/bin/python -m pytest tests/runpod tests/vastai tests/marketplaces -m cloud'
 The fixtures here (``fake``,
``config``, ``world``, ``market``) are written once; each folder's conftest imports them
and says which marketplace it is with a ``market_type`` fixture (tests/marketplaces
parametrizes it over both, so one test there runs against each real fake server).

:class:`Marketplace` is the tests' view of one fake: the few things the shared tests do
to it (add a leftover, take a spot container away) and read from it (what is live, what
was deleted), in the words both fakes understand.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar

import pytest
from fakes.portmap import FakeContainerCloud
from fakes.runpod import API_KEY as RUNPOD_KEY
from fakes.runpod import FakeRunPod
from fakes.vastai import API_KEY as VAST_KEY
from fakes.vastai import FakeVastAI
from providers_support import World, emulate, fail_cloud_test_outside_isolation, quick_settings, serve

from skyward.providers.cloud import CloudSettings
from skyward_runpod import RunPod
from skyward_vastai import VastAI

F = TypeVar("F", bound=FakeContainerCloud)


class Marketplace(Generic[F]):
    """One marketplace's fake and config, as the shared tests use them."""

    name: ClassVar[str]  # the provider's name in the ``skyward`` command
    title: ClassVar[str]
    key_env: ClassVar[str]
    api_key: ClassVar[str]
    api_path: ClassVar[str]  # the API's path on the fake's address
    provider: ClassVar[Callable[..., CloudSettings]]  # the config class, as ``sky.<Provider>``
    offer_query: ClassVar[str]  # ``skyward offers <this>``
    cheapest_offers: ClassVar[list[str]]  # its first two answers, cheapest first
    taken_node: ClassVar[int]  # which node of two the spot test takes away
    a100: ClassVar[str]  # the marketplace's name of the GPU an ``A100()`` node gets
    rtx4090: ClassVar[str]  # its name of the GPU an ``accelerator="RTX4090"`` node gets
    rtx4090_price: ClassVar[float]  # and what that node costs an hour (the cheapest that fits)
    key_type: ClassVar[Callable[[str], object]]  # the fake's key for an instance id: str, int

    def __init__(self, fake: F, config: CloudSettings) -> None:
        self.fake = fake
        self.config = config

    make_fake: ClassVar[Callable[[], FakeContainerCloud]]  # the fake's class

    def add(self, label: str, *, stopped: bool = False) -> object:
        """A container made outside the test (an earlier pool's leftover, or not skyward's)."""
        raise NotImplementedError

    def records(self) -> Mapping[Any, Any]:
        """The fake's containers by its key (``pods``, ``instances``)."""
        raise NotImplementedError

    def live(self) -> set[object]:
        """Every container the fake still holds (stopped ones too: they bill their disk)."""
        return set(self.records())

    def removed(self) -> list[object]:
        """What was deleted (terminated, destroyed), in order."""
        raise NotImplementedError

    def key(self, instance_id: str) -> object:
        """The fake's key for a node's ``instance_id``."""
        return self.key_type(instance_id)

    def record(self, instance_id: str) -> Any:
        return self.records()[self.key(instance_id)]

    def spot(self, instance_id: str) -> bool:
        raise NotImplementedError

    def take_away(self, instance_id: str) -> None:
        """The marketplace takes a spot container's GPU back (it stops, with its disk)."""
        raise NotImplementedError

    def mapped(self, instance_id: str) -> dict[int, int]:
        return dict(self.record(instance_id).mapped)

    def gpu(self, instance_id: str) -> str:
        raise NotImplementedError

    def start_command_length(self, instance_id: str) -> int:
        """How long the container's start command was, as the marketplace's limit counts it."""
        raise NotImplementedError

    first_pool: ClassVar[Mapping[str, Any]] = {}  # extra arguments of the port-mapping test's pool

    def check_first_pool(self, pool: Any) -> None:
        """What the port-mapping test checks of this marketplace alone."""


class RunPodMarket(Marketplace[FakeRunPod]):
    name, title, key_env, api_key, api_path = "runpod", "RunPod", "RUNPOD_API_KEY", RUNPOD_KEY, "/graphql"
    provider, make_fake = RunPod, FakeRunPod
    offer_query, cheapest_offers = "H100", ["1x H100 PCIe", "1x H100 SXM"]
    taken_node, a100, key_type = 0, "NVIDIA A100 80GB PCIe", str
    rtx4090, rtx4090_price = "NVIDIA GeForce RTX 4090", 0.69  # gpuTypeId (shown as "RTX 4090"), secure price
    first_pool: ClassVar[Mapping[str, Any]] = {"accelerator": "H100-SXM"}

    def add(self, label: str, *, stopped: bool = False) -> object:
        return self.fake.add_pod(label, status="EXITED" if stopped else "RUNNING")

    def records(self) -> Mapping[Any, Any]:
        return self.fake.pods

    def removed(self) -> list[object]:
        return list(self.fake.terminated)

    def spot(self, instance_id: str) -> bool:
        return bool(self.record(instance_id).spot)

    def take_away(self, instance_id: str) -> None:
        self.fake.preempt(instance_id)

    def gpu(self, instance_id: str) -> str:
        return str(self.record(instance_id).input["gpuTypeId"])

    def start_command_length(self, instance_id: str) -> int:
        return len(str(self.record(instance_id).input["dockerArgs"]))

    def check_first_pool(self, pool: Any) -> None:
        for node in pool.nodes:
            pod = self.fake.pods[node.instance_id]
            assert pod.input["gpuTypeId"] == "NVIDIA H100 80GB HBM3" and pod.input["cloudType"] == "SECURE"
        assert pool.nodes[0].price_on_demand == pytest.approx(2.99)


class VastMarket(Marketplace[FakeVastAI]):
    name, title, key_env, api_key, api_path = "vastai", "VastAI", "VAST_API_KEY", VAST_KEY, "/api/v0"
    provider, make_fake = VastAI, FakeVastAI
    offer_query, cheapest_offers = "A100", ["1x A100 PCIE", "1x A100 SXM4"]
    taken_node, a100, key_type = 1, "A100 PCIE", int  # the cheapest A100 offer
    rtx4090, rtx4090_price = "RTX 4090", 0.35  # offer 101: the cheapest verified, reliable single 4090

    def check_first_pool(self, pool: Any) -> None:
        rented = sorted(self.record(n.instance_id).offer["id"] for n in pool.nodes)
        assert rented == [101, 102]  # the two cheapest verified, reliable single-GPU offers

    def gpu(self, instance_id: str) -> str:
        return str(self.record(instance_id).offer["gpu_name"])

    def start_command_length(self, instance_id: str) -> int:
        return len(" ".join(self.record(instance_id).args))  # args, args_str and onstart together

    def spot(self, instance_id: str) -> bool:
        return self.record(instance_id).bid is not None  # a bid: interruptible

    def take_away(self, instance_id: str) -> None:
        self.fake.outbid(instance_id)

    def records(self) -> Mapping[Any, Any]:
        return self.fake.instances

    def removed(self) -> list[object]:
        return list(self.fake.destroyed)

    def add(self, label: str, *, stopped: bool = False) -> object:
        return self.fake.add_instance(label, status="exited" if stopped else "running")


def leftovers(market: Marketplace[Any]) -> tuple[object, object, object, object]:
    """Containers earlier pools (and the user) left: stopped, expired, alive, not skyward's."""
    now = int(time.time())
    stopped = market.add(f"skyward-sky-0000000a-{now + 3600}-0", stopped=True)  # stopped: bills its disk
    expired = market.add(f"skyward-sky-0000000b-{now - 60}-0")
    alive = market.add(f"skyward-sky-0000000c-{now + 3600}-1")
    foreign = market.add("my-notebook", stopped=True)
    return stopped, expired, alive, foreign


def isolated(folder: str) -> Callable[[pytest.Item], None]:
    """A conftest's ``pytest_runtest_setup``: cloud tests run only in an isolated namespace."""
    return lambda item: fail_cloud_test_outside_isolation(item, folder)


def for_market(kind: type[Marketplace[Any]]) -> tuple[Any, Callable[[pytest.Item], None]]:
    """A provider folder's conftest: its ``market_type`` fixture and ``pytest_runtest_setup``."""

    @pytest.fixture(name="market_type")
    def market_type() -> type[Marketplace[Any]]:
        return kind

    return market_type, isolated(kind.name)


# -- the fixtures (a conftest imports them and defines ``market_type``) -----------------------


@pytest.fixture
def api_key(market_type: type[Marketplace[Any]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    monkeypatch.setenv(market_type.key_env, market_type.api_key)
    monkeypatch.setenv("HOME", str(tmp_path))  # no key file of the user's is read
    return market_type.api_key


@pytest.fixture
def fake(market_type: type[Marketplace[Any]]) -> Iterator[FakeContainerCloud]:
    yield from serve(market_type.make_fake, market_type.title)


@pytest.fixture
def config(market_type: type[Marketplace[Any]], fake: FakeContainerCloud, api_key: str) -> CloudSettings:
    return market_type.provider(api_url=f"{fake.url}{market_type.api_path}", **quick_settings(fake))


@pytest.fixture
def world(fake: FakeRunPod | FakeVastAI) -> Iterator[World[FakeContainerCloud]]:
    yield from emulate(fake, fake.shut_down)


@pytest.fixture
def market(market_type: type[Marketplace[Any]], fake: FakeContainerCloud, config: CloudSettings) -> Marketplace[Any]:
    return market_type(fake, config)
