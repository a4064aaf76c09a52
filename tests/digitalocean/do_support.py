"""Helpers for the DigitalOcean tests: the shared provider helpers (tests/providers_support),
bound to the fake DigitalOcean API (a module name of its own: test folders here are not
packages)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from fakes.digitalocean import FakeDigitalOcean
from providers_support import World, client_script, finish, make_spec, run
from providers_support import emulate as emulate_on

from skyward_digitalocean.naming import COMMON_TAG

__all__ = ["CLIENT", "DropletWorld", "emulate", "finish", "make_spec", "nothing_left", "run"]

DropletWorld = World[FakeDigitalOcean]

CLIENT = client_script("skyward_digitalocean", "DigitalOcean", 'region="tor1", api_url=sys.argv[1], ')
"""A client that opens a one-node pool on the fake DigitalOcean and waits to be killed."""


def nothing_left(fake: FakeDigitalOcean) -> dict[str, list[str]]:
    live = fake.live()
    live["tags"] = [t for t in live["tags"] if t != COMMON_TAG]  # shared by every pool; never deleted
    return {k: v for k, v in live.items() if v}


def emulate(
    fake: FakeDigitalOcean, *, shutdown_time_scale: float = 1.0, extra_stubs: Mapping[str, str] | None = None
) -> Iterator[DropletWorld]:
    # A droplet that shuts itself down is off, and DigitalOcean still bills it.
    yield from emulate_on(fake, fake.power_off, shutdown_time_scale=shutdown_time_scale, extra_stubs=extra_stubs)
