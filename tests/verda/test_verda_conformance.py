"""Verda passes the provider conformance suite (skyward.testing.conformance) on its fake
API with emulated instances."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pytest
from fakes.verda import CLIENT_SECRET
from providers_support import quick_settings
from verda_support import InstanceWorld, nothing_left

from skyward.providers import ProviderSettings
from skyward.testing.conformance import CloudUnderTest, ProviderConformance, Resource
from skyward_verda import Verda
from skyward_verda.naming import parse_description, parse_resource_name

_HOST_FIREWALL_SOURCE = re.compile(r"iptables -I INPUT -p tcp --dport \S+ ! -s (\S+) -j DROP")


@dataclass
class VerdaUnderTest:
    world: InstanceWorld
    has_market: bool = True

    def config(self, **overrides: object) -> ProviderSettings:
        fake = self.world.fake
        settings: dict[str, object] = {**quick_settings(fake), **overrides}
        return Verda(api_url=f"{fake.url}/v1", **settings)  # type: ignore[arg-type]

    def leftovers(self) -> Mapping[str, Sequence[str]]:
        return nothing_left(self.world.fake)

    def resources(self) -> Sequence[Resource]:
        fake = self.world.fake
        with fake.lock:
            found = [
                Resource.marked(f"instance {i.hostname}", parse_description(i.description))
                for i in fake.instances.values()
                if i.status != "deleted"
            ]
            found += [
                Resource.marked(f"script {s['name']}", parse_resource_name(s["name"])) for s in fake.scripts.values()
            ]
            found += [
                Resource.marked(f"SSH key {k['name']}", parse_resource_name(k["name"])) for k in fake.ssh_keys.values()
            ]
        return found

    def ingress_sources(self) -> Sequence[str]:
        """Verda has no cloud firewall: each node's script drops the node ports' traffic
        from anyone but these sources."""
        with self.world.fake.lock:
            scripts = [s["script"] for s in self.world.fake.scripts.values()]
        return [source for script in scripts for source in _HOST_FIREWALL_SOURCE.findall(script)]

    def user_data(self) -> Sequence[str]:
        with self.world.fake.lock:
            return [s["script"] for s in self.world.fake.scripts.values()]

    def secrets(self) -> Sequence[str]:
        return [CLIENT_SECRET]

    def fail_create(self, after: int) -> None:
        self.world.fake.fail("POST", "/v1/instances", 400, {"code": "invalid_request", "message": "Quota"}, after=after)

    def stall_boot(self) -> None:
        self.world.fake.on_running = lambda *args: None

    def is_spot(self, instance_id: str) -> bool:
        with self.world.fake.lock:
            return self.world.fake.instances[instance_id].is_spot


class TestVerdaConformance(ProviderConformance):
    @pytest.fixture
    def cloud(self, instances: InstanceWorld, verda_credentials: tuple[str, str]) -> CloudUnderTest:
        return VerdaUnderTest(instances)
