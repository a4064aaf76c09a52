"""The example plugin passes the provider conformance suite (skyward.testing.conformance),
with ProcessCloud as the fake of its API."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import pytest
from skyward_example_plugin import Delayed, ProcessCloud

from skyward.providers import ProviderSettings
from skyward.providers.cloud.naming import RUN_DIR_PREFIX
from skyward.testing.conformance import CloudUnderTest, ProviderConformance, Resource


@dataclass
class ExampleUnderTest:
    has_market: bool = False
    uses_no_credential: Literal[True] = True  # ProcessCloud has no API key

    def config(self, **overrides: object) -> ProviderSettings:
        settings: dict[str, object] = {"poll_interval": 0.05, "bootstrap_timeout": 120.0, **overrides}
        return Delayed(**settings)  # type: ignore[arg-type]

    def leftovers(self) -> Mapping[str, Sequence[str]]:
        left = {
            "instances": [i for cloud in ProcessCloud.opened for i in cloud.running()],
            "directories": [cloud.root for cloud in ProcessCloud.opened if os.path.exists(cloud.root)],
            # the nodes' run directories: on this machine, which outlives them
            "run directories": [
                path
                for cloud in ProcessCloud.opened
                for path in (f"{RUN_DIR_PREFIX}{pool}" for pool in cloud.pools)
                if os.path.exists(path)
            ],
        }
        return {k: v for k, v in left.items() if v}

    def resources(self) -> Sequence[Resource]:
        found = []
        for cloud in ProcessCloud.opened:
            for instance_id, labels in cloud.labels().items():
                found.append(
                    Resource(f"instance {instance_id}", labels.get("pool"), int(labels.get("expires", 0)) or None)
                )
        return found

    def ingress_sources(self) -> Sequence[str]:
        """No firewall: the agents' CURVE handshake is the gate (the suite checks it)."""
        return []

    def user_data(self) -> Sequence[str]:
        return [script for cloud in ProcessCloud.opened for script in cloud.scripts()]

    def secrets(self) -> Sequence[str]:
        return []  # none: declared by uses_no_credential

    def fail_create(self, after: int) -> None:
        ProcessCloud.refuse_after = after

    def stall_boot(self) -> None:
        ProcessCloud.stall = True

    def is_spot(self, instance_id: str) -> bool:
        return False


@pytest.fixture
def example() -> Iterator[ExampleUnderTest]:
    ProcessCloud.opened.clear()
    try:
        yield ExampleUnderTest()
    finally:
        ProcessCloud.refuse_after, ProcessCloud.stall = None, False
        ProcessCloud.opened.clear()


class TestExampleConformance(ProviderConformance):
    @pytest.fixture
    def cloud(self, example: ExampleUnderTest) -> CloudUnderTest:
        return example
