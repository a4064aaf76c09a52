"""Fixtures for the unit tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import skyward.accelerators.vendors as vendors
from skyward.plugins.registry import registry


@pytest.fixture(scope="module")
def core_catalog() -> Iterator[None]:
    """Registers the core accelerator catalog unless the built-in plugin already does
    (modules that parse accelerators use it: ``pytestmark = pytest.mark.usefixtures(...)``)."""
    impls = [i.function for i in registry.pm.hook.skyward_accelerators.get_hookimpls()]
    if vendors.skyward_accelerators in impls:
        yield
        return
    registry.register(vendors, name="test-core-accelerators")
    yield
    registry.unregister(vendors)
