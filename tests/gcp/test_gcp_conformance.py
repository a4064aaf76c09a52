"""Google Cloud passes the provider conformance suite (skyward.testing.conformance) on the
fake Google Cloud with emulated VMs."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import gcp_config
from fakes.gcp import FakeGCP
from providers_support import World

from skyward.providers import ProviderSettings
from skyward.testing.conformance import CloudUnderTest, ProviderConformance, Resource
from skyward_gcp.naming import mark_of, parse_firewall_name


@dataclass
class GCPUnderTest:
    world: World[FakeGCP]
    key: Path
    has_market: bool = True

    def config(self, **overrides: object) -> ProviderSettings:
        return gcp_config(self.world.fake, **{"zone": "us-central1-a", **overrides})

    def leftovers(self) -> Mapping[str, Sequence[str]]:
        return {k: v for k, v in self.world.fake.live().items() if v}

    def resources(self) -> Sequence[Resource]:
        fake = self.world.fake
        with fake.lock:
            found = [
                Resource.marked(f"instance {i.name}", mark_of(i.labels))
                for i in fake.instances.values()
                if not i.deleted
            ]
            found += [Resource.marked(f"firewall {name}", parse_firewall_name(name)) for name in fake.firewalls]
        return found

    def ingress_sources(self) -> Sequence[str]:
        with self.world.fake.lock:
            rules = list(self.world.fake.firewalls.values())
        return [cidr for rule in rules for cidr in rule.get("sourceRanges") or ()]

    def user_data(self) -> Sequence[str]:
        with self.world.fake.lock:
            return [
                str(item.get("value", ""))
                for i in self.world.fake.instances.values()
                for item in (i.body.get("metadata") or {}).get("items") or ()
            ]

    def secrets(self) -> Sequence[str]:
        info = json.loads(self.key.read_text())
        private = str(info["private_key"])
        body = "".join(line for line in private.splitlines() if "PRIVATE KEY" not in line)
        return [private, body[:64], str(info["private_key_id"])]

    def fail_create(self, after: int) -> None:
        reason = {"reason": "invalid", "message": "Invalid value", "domain": "global"}
        message = "Invalid value for field 'resource.name'"
        error = {"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT", "errors": [reason]}}
        self.world.fake.fail("POST", r"/compute/v1/projects/[^/]+/zones/[^/]+/instances", 400, error, after=after)

    def stall_boot(self) -> None:
        self.world.fake.on_running = lambda *args: None

    def is_spot(self, instance_id: str) -> bool:
        return self.world.fake.instance(instance_id.rsplit("/", 1)[-1]).spot


class TestGCPConformance(ProviderConformance):
    @pytest.fixture
    def cloud(self, gcp_world: World[FakeGCP], gcp_credentials: Path) -> CloudUnderTest:
        return GCPUnderTest(gcp_world, gcp_credentials)
