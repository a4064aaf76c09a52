"""Helpers for the DigitalOcean tests: the shared provider helpers (tests/providers_support),
bound to the fake DigitalOcean API (a module name of its own: test folders here are not
packages)."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path

from fakes.digitalocean import FakeDigitalOcean
from providers_support import World, client_script, finish, make_spec, run
from providers_support import emulate as emulate_on

from skyward_digitalocean.naming import COMMON_TAG

__all__ = ["CLIENT", "DropletWorld", "emulate", "finish", "make_spec", "nothing_left", "run"]

DropletWorld = World[FakeDigitalOcean]


def nothing_left(fake: FakeDigitalOcean) -> dict[str, list[str]]:
    live = fake.live()
    live["tags"] = [t for t in live["tags"] if t != COMMON_TAG]  # shared by every pool; never deleted
    return {k: v for k, v in live.items() if v}


def emulate(
    fake: FakeDigitalOcean, *, shutdown_time_scale: float = 1.0, extra_stubs: Mapping[str, str] | None = None
) -> Iterator[DropletWorld]:
    """Droplets run their user-data in the harness; a snapshot copies the droplet's disk
    (its skyward home: environments, uv's cache) when it is taken, and a droplet created
    from the snapshot starts with that copy, as one created from a real snapshot would."""
    # A droplet that shuts itself down is off, and DigitalOcean still bills it.
    for world in emulate_on(fake, fake.power_off, shutdown_time_scale=shutdown_time_scale, extra_stubs=extra_stubs):
        _copy_disks_on_snapshots(fake, world)
        yield world


def _copy_disks_on_snapshots(fake: FakeDigitalOcean, world: DropletWorld) -> None:
    harness = world.harness
    disks = harness.root / "snapshots"
    start = fake.on_running
    assert start is not None

    def take(droplet_id: str, snapshot_id: str) -> None:
        source = _home(harness.instance(droplet_id).directory)
        shutil.copytree(source, disks / snapshot_id, symlinks=True, ignore=shutil.ignore_patterns("*.lock"))

    def boot(droplet_id: str, user_data: str, ip: str) -> None:
        image = fake.droplets[int(droplet_id)].image
        if image.isdigit() and (disks / image).is_dir():
            target = _home(harness.root / re.sub(r"[^\w.-]", "_", droplet_id))
            shutil.copytree(disks / image, target, symlinks=True)
        start(droplet_id, user_data, ip)

    fake.on_snapshot, fake.on_running = take, boot


def _home(directory: Path) -> Path:
    return directory / "home" / ".skyward"


CLIENT = client_script("skyward_digitalocean", "DigitalOcean", 'region="tor1", api_url=sys.argv[1], ')
"""A client that opens a one-node pool on the fake DigitalOcean and waits to be killed."""
