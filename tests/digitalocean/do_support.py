"""Helpers shared by the DigitalOcean tests (a module name of its own: test folders here
are not packages)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from fakes.digitalocean import FakeDigitalOcean

from skyward.image import BootstrapContext
from skyward_digitalocean import DigitalOcean
from skyward_digitalocean.driver import DigitalOceanDriver
from skyward_digitalocean.naming import COMMON_TAG


def make_spec(provider: DigitalOcean, **kwargs: Any) -> Any:
    from skyward.api.spec import build_spec

    args: dict[str, Any] = dict(
        provider=provider, image=None, pip=None, nodes=1, machine=None, accelerator=None, cpu=None, memory=None,
        volume=None, spot=None, timeout=600, env=None, concurrency=1, display="quiet", collect_metrics=False,
    )  # fmt: skip
    args.update(kwargs)
    return build_spec(**args)


def fake_user_data(
    node: int,
    bind: str,
    context: BootstrapContext,
    *,
    run_dir: str,
    visible_devices: Sequence[str | None] = (),
    instance_id: str = "",
) -> str:
    return f"#!/usr/bin/env bash\n# node={node} bind={bind} run_dir={run_dir} id={instance_id}\n"


def nothing_left(fake: FakeDigitalOcean) -> dict[str, list[str]]:
    live = fake.live()
    live["tags"] = [t for t in live["tags"] if t != COMMON_TAG]  # shared by every pool; never deleted
    return {k: v for k, v in live.items() if v}


def run(driver: DigitalOceanDriver, spec: Any, events: list[Any]) -> list[Any]:
    driver.validate(spec)
    driver.prepare(spec, events.append)
    return driver.launch(spec, fake_user_data, events.append)


def finish(driver: DigitalOceanDriver, nodes: Sequence[Any] = ()) -> None:
    try:
        driver.terminate(nodes)
    finally:
        driver.teardown()


@dataclass
class DropletWorld:
    """The fake API with every active droplet running its user-data in the harness."""

    fake: FakeDigitalOcean
    harness: Any  # harness.EmulatedInstances
    powered_off: list[str] = field(default_factory=list)


def emulate(fake: FakeDigitalOcean, *, shutdown_time_scale: float = 1.0) -> Iterator[DropletWorld]:
    from harness import EmulatedInstances

    world: DropletWorld

    def power_off(instance_id: str) -> None:
        # What DigitalOcean does when a droplet shuts itself down: it is off, and still billed.
        world.powered_off.append(instance_id)
        fake.power_off(instance_id)

    harness = EmulatedInstances(power_off, shutdown_time_scale=shutdown_time_scale)
    world = DropletWorld(fake, harness)
    fake.address_for = harness.address_for

    def start(instance_id: str, user_data: str, ip: str) -> None:
        harness.start(instance_id, user_data, ip=ip)

    fake.on_running = start
    fake.on_deleted = lambda instance_id: harness.stop(instance_id, reason="deleted by the API")
    try:
        yield world
    finally:
        harness.close()
        assert not harness.errors, harness.errors
