"""RunPod passes the provider conformance suite on its fake API, every pod an emulated
instance reached through its public port mapping (never the container's own port)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pytest
from fakes.runpod import API_KEY, FakeRunPod
from providers_support import World, quick_settings

from skyward.providers import ProviderSettings
from skyward.providers.cloud.marketplace import parse_pool_label
from skyward.testing.conformance import CloudUnderTest, ProviderConformance, Resource
from skyward_runpod import RunPod


@dataclass
class RunPodUnderTest:
    world: World[FakeRunPod]
    has_market: bool = True

    def config(self, **overrides: object) -> ProviderSettings:
        fake = self.world.fake
        settings: dict[str, object] = {**quick_settings(fake), **overrides}
        return RunPod(api_url=f"{fake.url}/graphql", **settings)  # type: ignore[arg-type]

    def leftovers(self) -> Mapping[str, Sequence[str]]:
        return {k: v for k, v in self.world.fake.live().items() if v}

    def resources(self) -> Sequence[Resource]:
        with self.world.fake.lock:
            return [Resource.marked(f"pod {p.id}", parse_pool_label(p.name)) for p in self.world.fake.pods.values()]

    def ingress_sources(self) -> Sequence[str]:
        return []  # no firewall API: the agent admits only the pool's CURVE key

    def user_data(self) -> Sequence[str]:
        with self.world.fake.lock:
            return [p.script for p in self.world.fake.pods.values()]

    def secrets(self) -> Sequence[str]:
        return [API_KEY]

    def fail_create(self, after: int) -> None:
        self.world.fake.refuse_deploys(after=after, message="insufficient balance")

    def stall_boot(self) -> None:
        self.world.fake.on_running = lambda *args: None

    def is_spot(self, instance_id: str) -> bool:
        with self.world.fake.lock:
            return self.world.fake.pods[instance_id].spot


class TestRunPodConformance(ProviderConformance):
    @pytest.fixture
    def cloud(self, world: World[FakeRunPod], api_key: str) -> CloudUnderTest:
        return RunPodUnderTest(world)
