"""Helpers shared by the Verda tests (a module name of its own: test folders here are not
packages)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from fakes.verda import FakeVerda

from skyward.image import BootstrapContext
from skyward_verda import Verda
from skyward_verda.driver import VerdaDriver


def make_spec(provider: Verda, **kwargs: Any) -> Any:
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


def nothing_left(fake: FakeVerda) -> dict[str, list[str]]:
    return {k: v for k, v in fake.live().items() if v}


def run(driver: VerdaDriver, spec: Any, events: list[Any]) -> list[Any]:
    driver.validate(spec)
    driver.prepare(spec, events.append)
    return driver.launch(spec, fake_user_data, events.append)


def finish(driver: VerdaDriver, nodes: Sequence[Any] = ()) -> None:
    try:
        driver.terminate(nodes)
    finally:
        driver.teardown()


@dataclass
class InstanceWorld:
    """The fake API with every running instance running its startup script in the harness."""

    fake: FakeVerda
    harness: Any  # harness.EmulatedInstances
    shut_down: list[str] = field(default_factory=list)


def emulate(fake: FakeVerda, *, shutdown_time_scale: float = 1.0) -> Iterator[InstanceWorld]:
    from harness import EmulatedInstances

    world: InstanceWorld

    def shut_down(instance_id: str) -> None:
        # What Verda does when an instance powers itself off: it stays, offline.
        world.shut_down.append(instance_id)
        fake.shut_down(instance_id)

    harness = EmulatedInstances(shut_down, shutdown_time_scale=shutdown_time_scale)
    world = InstanceWorld(fake, harness)
    fake.address_for = harness.address_for

    def start(instance_id: str, script: str, ip: str) -> None:
        harness.start(instance_id, script, ip=ip)

    fake.on_running = start
    fake.on_deleted = lambda instance_id: harness.stop(instance_id, reason="deleted by the API")
    try:
        yield world
    finally:
        harness.close()
        assert not harness.errors, harness.errors
