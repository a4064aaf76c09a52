"""Fixtures for the unit tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import zmq

from skyward.accelerators.catalog import CatalogEntry
from skyward.accelerators.vendors import CORE_ENTRIES
from skyward.plugins import builtin
from skyward.plugins.hookspecs import hookimpl
from skyward.plugins.registry import registry


class _CoreCatalog:
    @hookimpl
    def skyward_accelerators(self) -> tuple[CatalogEntry, ...]:
        return CORE_ENTRIES


@pytest.fixture(scope="module")
def core_catalog() -> Iterator[None]:
    """Registers the core accelerator catalog unless the built-in plugin already does
    (modules that parse accelerators use it: ``pytestmark = pytest.mark.usefixtures(...)``)."""
    impls = [i.function for i in registry.pm.hook.skyward_accelerators.get_hookimpls()]
    if builtin.skyward_accelerators in impls:
        yield
        return
    catalog = _CoreCatalog()
    registry.register(catalog, name="test-core-accelerators")
    yield
    registry.unregister(catalog)


@pytest.fixture
def pair() -> Iterator[tuple[zmq.Socket[bytes], zmq.Socket[bytes]]]:
    """A connected (sender, receiver) of PAIR sockets over inproc, for the wire tests."""
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    address = f"inproc://pair-{id(context)}"
    receiver = context.socket(zmq.PAIR)
    receiver.bind(address)
    sender = context.socket(zmq.PAIR)
    sender.connect(address)
    yield sender, receiver
    context.destroy(linger=0)
