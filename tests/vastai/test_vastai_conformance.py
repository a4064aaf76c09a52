"""VastAI passes the provider conformance suite on its fake API, every node an emulated
instance reached through a port mapping (the host port is never the container port)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pytest
from fakes.vastai import API_KEY, FakeVastAI
from providers_support import World, quick_settings

from skyward.providers import ProviderSettings
from skyward.providers.cloud.marketplace import parse_pool_label
from skyward.testing.conformance import CloudUnderTest, ProviderConformance, Resource
from skyward_vastai import VastAI


@dataclass
class VastAIUnderTest:
    world: World[FakeVastAI]
    has_market: bool = True

    def config(self, **overrides: object) -> ProviderSettings:
        fake = self.world.fake
        settings: dict[str, object] = {**quick_settings(fake), **overrides}
        return VastAI(api_url=f"{fake.url}/api/v0", **settings)  # type: ignore[arg-type]

    def leftovers(self) -> Mapping[str, Sequence[str]]:
        return {k: v for k, v in self.world.fake.live().items() if v}

    def resources(self) -> Sequence[Resource]:
        with self.world.fake.lock:
            return [
                Resource.marked(f"instance {i.id}", parse_pool_label(i.label))
                for i in self.world.fake.instances.values()
            ]

    def ingress_sources(self) -> Sequence[str]:
        return []  # no firewall API: the agent admits only the pool's CURVE key

    def user_data(self) -> Sequence[str]:
        with self.world.fake.lock:
            return [i.script for i in self.world.fake.instances.values()]

    def secrets(self) -> Sequence[str]:
        return [API_KEY]

    def fail_create(self, after: int) -> None:
        self.world.fake.fail(
            "PUT", r"/api/v0/asks/\d+/", 400, {"success": False, "msg": "insufficient credit"}, after=after, times=None
        )

    def stall_boot(self) -> None:
        self.world.fake.on_running = lambda *args: None

    def is_spot(self, instance_id: str) -> bool:
        with self.world.fake.lock:
            return self.world.fake.instances[int(instance_id)].bid is not None


class TestVastAIConformance(ProviderConformance):
    @pytest.fixture
    def cloud(self, world: World[FakeVastAI], api_key: str) -> CloudUnderTest:
        return VastAIUnderTest(world)
