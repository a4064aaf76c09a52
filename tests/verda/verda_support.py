"""Helpers for the Verda tests: the shared provider helpers (tests/providers_support),
bound to the fake Verda API (a module name of its own: test folders here are not
packages)."""

from __future__ import annotations

from collections.abc import Iterator

from fakes.verda import FakeVerda
from providers_support import World, client_script, finish, make_spec, run
from providers_support import emulate as emulate_on

__all__ = ["CLIENT", "InstanceWorld", "emulate", "finish", "make_spec", "nothing_left", "run"]

InstanceWorld = World[FakeVerda]


def nothing_left(fake: FakeVerda) -> dict[str, list[str]]:
    return {k: v for k, v in fake.live().items() if v}


def emulate(fake: FakeVerda, *, shutdown_time_scale: float = 1.0) -> Iterator[InstanceWorld]:
    # An instance that powers itself off stays, offline (and with its disk, still billed).
    yield from emulate_on(fake, fake.shut_down, shutdown_time_scale=shutdown_time_scale)


CLIENT = client_script("skyward_verda", "Verda", 'api_url=sys.argv[1] + "/v1", ')
"""A client that opens a one-node pool on the fake Verda and waits to be killed."""
