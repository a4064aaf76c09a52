"""Fixtures for the elastic end-to-end tests: the emulated clouds' worlds, borrowed from
their own test folders (DigitalOcean's fake API with droplets run by the harness; moto
with EC2 instances run by the harness), and the guard that keeps ``cloud`` tests inside
an isolated network namespace."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

_TESTS = Path(__file__).resolve().parents[1]
for _path in (_TESTS, _TESTS / "digitalocean"):  # `fakes`, `harness`, `providers_support`, `do_support`
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from aws.conftest import aws, emulate, emulated, moto_server  # noqa: E402, F401  (fixtures, shared)
from do_fixtures import do_config, fake_do  # noqa: E402, F401  (fixtures, shared)
from do_support import DropletWorld  # noqa: E402
from do_support import emulate as emulate_droplets  # noqa: E402
from fakes.digitalocean import FakeDigitalOcean  # noqa: E402
from providers_support import fail_cloud_test_outside_isolation  # noqa: E402


def pytest_runtest_setup(item: pytest.Item) -> None:
    fail_cloud_test_outside_isolation(item, "elastic")


@pytest.fixture
def droplets(fake_do: FakeDigitalOcean) -> Iterator[DropletWorld]:  # noqa: F811 (the fixture imported above)
    yield from emulate_droplets(fake_do)
