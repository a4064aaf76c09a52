"""Helpers the HTTP cloud provider tests share (tests/digitalocean, tests/verda).

A module name of its own (test folders here are not packages); each folder's conftest puts
tests/ on the path. Each provider's ``*_support`` module binds these to its fake and driver.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import pytest
from fakes.http import FakeCloud
from harness.netns import isolation_problem

from skyward.image import BootstrapContext
from skyward.providers.protocol import ProviderDriver

F = TypeVar("F", bound=FakeCloud)


def make_spec(provider: Any, **kwargs: Any) -> Any:
    """A quiet one-node PoolSpec for ``provider``; ``kwargs`` override its fields."""
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
    """A bootstrap script that says what it was made for and does nothing."""
    return f"#!/usr/bin/env bash\n# node={node} bind={bind} run_dir={run_dir} id={instance_id}\n"


def run(driver: ProviderDriver, spec: Any, events: list[Any]) -> list[Any]:
    """validate, prepare and launch, as the pool does."""
    driver.validate(spec)
    driver.prepare(spec, events.append)
    return driver.launch(spec, fake_user_data, events.append)


def finish(driver: ProviderDriver, nodes: Sequence[Any] = ()) -> None:
    try:
        driver.terminate(nodes)
    finally:
        driver.teardown()


# -- isolation -----------------------------------------------------------------------------


def fail_cloud_test_outside_isolation(item: pytest.Item, folder: str) -> None:
    """For ``pytest_runtest_setup``: a ``cloud`` test fails (with how to run it) unless it
    runs in a network namespace where only loopback is up."""
    if item.get_closest_marker("cloud") is None:
        return
    problem = isolation_problem()
    if problem is not None:
        pytest.fail(
            f"cloud test outside an isolated network namespace: {problem}. Run it with: unshare --net -- sh -c "
            f"'ip link set lo up && SKYWARD_TEST_NETNS=1 .venv/bin/python -m pytest tests/{folder} -m cloud', "
            "or python3 tasks.py test",
            pytrace=False,
        )


def quick_settings(fake: FakeCloud) -> dict[str, Any]:
    """Provider config settings for tests on ``fake``: its "what is my address" URL, fast
    polls and retries, short timeouts."""
    return dict(
        address_url=f"{fake.url}/whoami",
        poll_interval=0.02,
        provision_timeout=20.0,
        bootstrap_timeout=120.0,
        grace_period=5.0,
        api_timeout=5.0,
        api_retries=4,
        api_backoff=0.02,
    )


def serve(make: Callable[[], F], name: str) -> Iterator[F]:
    """A started fake API (for a fixture), stopped afterwards."""
    problem = isolation_problem()
    if problem is not None:  # a fake that hands out addresses runs only where nothing else is reachable
        pytest.fail(f"refusing to start the fake {name} API outside an isolated namespace: {problem}")
    fake = make()
    fake.start()
    try:
        yield fake
        fail_on_violations(fake, name)
    finally:
        fake.stop()


def fail_on_violations(fake: Any, name: str) -> None:
    """Fail the test whose fake API recorded a violation. A fake answers what the real API
    would (a firewall open to 0.0.0.0/0 still gets 202) and records why that was wrong; a
    test that forgot to look must not pass."""
    violations = list(fake.violations)
    if violations:
        pytest.fail(f"the fake {name} API recorded violations: " + "; ".join(violations), pytrace=False)


# -- emulated machines -----------------------------------------------------------------------


@dataclass
class World(Generic[F]):
    """The fake API with every started machine running its user-data in the harness."""

    fake: F
    harness: Any  # harness.EmulatedInstances
    stopped: list[str] = field(default_factory=list)  # machines that shut themselves down (their TTL)


def emulate(
    fake: F,
    shut_down: Callable[[str], None],
    *,
    shutdown_time_scale: float = 1.0,
    extra_stubs: Mapping[str, str] | None = None,
) -> Iterator[World[F]]:
    """Attach the emulated-instance harness to ``fake``; ``shut_down(id)`` is what the
    provider does to a machine that shuts itself down."""
    from harness import EmulatedInstances

    world: World[F]

    def stopped(instance_id: str) -> None:
        world.stopped.append(instance_id)
        shut_down(instance_id)

    harness = EmulatedInstances(stopped, shutdown_time_scale=shutdown_time_scale, extra_stubs=extra_stubs)
    world = World(fake, harness)
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


def vanish_client(script: str, url: str) -> str:
    """Run ``script`` (a client that opens a one-node pool on the fake at ``url``, prints
    ``OPEN <instance id>`` and sleeps) and kill it once its pool is open, as a laptop
    closing mid-pool; returns the node's instance id."""
    child = subprocess.Popen(
        [sys.executable, "-c", script, url], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        assert line.startswith("OPEN"), (line, child.stderr.read() if child.poll() is not None else "")
        (instance_id,) = line.split()[1:]
        child.send_signal(signal.SIGKILL)  # the client is gone: nobody will delete the machine
        child.wait(timeout=10)
        return instance_id
    finally:
        if child.poll() is None:
            child.kill()


def wait_until(done: Callable[[], bool], timeout: float, interval: float = 0.1) -> None:
    """Poll ``done`` until it holds or ``timeout`` seconds pass (the caller asserts)."""
    deadline = time.monotonic() + timeout
    while not done() and time.monotonic() < deadline:
        time.sleep(interval)
