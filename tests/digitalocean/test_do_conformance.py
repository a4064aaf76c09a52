"""DigitalOcean passes the provider conformance suite (skyward.testing.conformance) on its
fake API with emulated droplets."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pytest
from do_support import DropletWorld, nothing_left
from fakes.digitalocean import TOKEN
from providers_support import quick_settings

from skyward.providers import ProviderSettings
from skyward.testing.conformance import CloudUnderTest, ProviderConformance, Resource
from skyward_digitalocean import DigitalOcean
from skyward_digitalocean.naming import parse_pool_tag, parse_resource_name, pool_mark


@dataclass
class DigitalOceanUnderTest:
    world: DropletWorld
    has_market: bool = False

    def config(self, **overrides: object) -> ProviderSettings:
        fake = self.world.fake
        settings: dict[str, object] = {**quick_settings(fake), **overrides}
        return DigitalOcean(region="tor1", api_url=fake.url, **settings)  # type: ignore[arg-type]

    def leftovers(self) -> Mapping[str, Sequence[str]]:
        return nothing_left(self.world.fake)

    def resources(self) -> Sequence[Resource]:
        fake = self.world.fake
        with fake.lock:
            found = []
            for droplet in fake.droplets.values():
                if droplet.status != "deleted":
                    mark = pool_mark(droplet.tags)
                    found.append(Resource.marked(f"droplet {droplet.name}", mark))
            for firewall in fake.firewalls.values():
                mark = parse_resource_name(str(firewall["name"]))
                found.append(Resource.marked(f"firewall {firewall['name']}", mark))
            for key in fake.ssh_keys.values():
                mark = parse_resource_name(str(key["name"]))
                found.append(Resource.marked(f"SSH key {key['name']}", mark))
            for tag in fake.tags:
                if tag != "skyward":
                    mark = parse_pool_tag(tag)
                    found.append(Resource.marked(f"tag {tag}", mark))
        return found

    def ingress_sources(self) -> Sequence[str]:
        with self.world.fake.lock:
            rules = [r for f in self.world.fake.firewalls.values() for r in f["inbound_rules"]]
        return [address for rule in rules for address in rule["sources"].get("addresses", [])]

    def user_data(self) -> Sequence[str]:
        with self.world.fake.lock:
            return [d.user_data for d in self.world.fake.droplets.values()]

    def secrets(self) -> Sequence[str]:
        return [TOKEN]

    def fail_create(self, after: int) -> None:
        error = {"id": "unprocessable_entity", "message": "Region is unavailable"}
        self.world.fake.fail("POST", "/v2/droplets", 422, error, after=after)

    def stall_boot(self) -> None:
        self.world.fake.on_running = lambda *args: None

    def is_spot(self, instance_id: str) -> bool:
        return False


class TestDigitalOceanConformance(ProviderConformance):
    @pytest.fixture
    def cloud(self, droplets: DropletWorld, do_token: str) -> CloudUnderTest:
        return DigitalOceanUnderTest(droplets)
