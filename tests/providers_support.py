"""Helpers the HTTP cloud provider tests share (tests/digitalocean, tests/verda).

A module name of its own (test folders here are not packages); each folder's conftest puts
tests/ on the path. Each provider's ``*_support`` module binds these to its fake and driver.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import pytest
from fakes.http import FakeCloud
from harness.netns import isolation_problem

import skyward
from skyward import compute, gather
from skyward.api.user_data import NodeUserData
from skyward.errors import ProvisioningError
from skyward.image import BootstrapContext
from skyward.providers import UserDataFactory, settings_of
from skyward.providers.protocol import ProviderDriver
from skyward.transport.security import PoolKeys
from skyward.wheels.cache import OfferedWheels

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


def rendered_user_data(spec: Any) -> UserDataFactory:
    """The bootstrap a node of ``spec`` gets, rendered by the pool's own factory
    (``NodeUserData``: the image's script from the context the driver gives, with the
    agent's config and the node's own keys): whatever the driver or the image put in
    reaches this script."""
    return NodeUserData(spec, settings_of(spec.provider), PoolKeys(), OfferedWheels(), steps=())


def run(driver: ProviderDriver, spec: Any, events: list[Any], user_data: UserDataFactory = fake_user_data) -> list[Any]:
    """validate, prepare and launch, as the pool does."""
    driver.validate(spec)
    driver.prepare(spec, events.append)
    return driver.launch(spec, user_data, events.append)


def finish(driver: ProviderDriver, nodes: Sequence[Any] = ()) -> None:
    try:
        driver.terminate(nodes)
    finally:
        driver.teardown()


@contextmanager
def launched(driver: ProviderDriver, spec: Any, events: list[Any]) -> Iterator[list[Any]]:
    """The nodes :func:`run` launched; terminated and torn down after, whatever happened."""
    nodes = run(driver, spec, events)
    try:
        yield nodes
    finally:
        finish(driver, nodes)


def check_slow_then_stuck_api(
    fake: Any,
    make_driver: Callable[[Any], ProviderDriver],
    config: Any,
    stuck: tuple[str, str],
    stuck_config: Any,
    failure: str,
    nothing_left: Callable[[Any], Mapping[str, Any]],
) -> None:
    """A slow API (0.1 s an answer) still starts a pool and leaves nothing; one stuck on the
    ``stuck`` call (method, path) fails ``prepare`` with ``failure`` after ``stuck_config``'s
    timeout and retries, not after the stuck answer."""
    fake.slow(0.1)
    driver = make_driver(config)
    nodes = run(driver, make_spec(config), [])
    finish(driver, nodes)
    assert nothing_left(fake) == {}
    fake.clear_faults()
    fake.slow(3.0, *stuck)
    driver = make_driver(stuck_config)
    started = time.monotonic()
    with pytest.raises(ProvisioningError, match=failure):
        driver.prepare(make_spec(stuck_config), [].append)
    assert time.monotonic() - started < 3.0 * 2
    driver.teardown()


def check_never_started_nodes_are_deleted(
    fake: Any,
    make_driver: Callable[[Any], ProviderDriver],
    config: Any,
    failure: str,
    nothing_left: Callable[[Any], Mapping[str, Any]],
) -> None:
    """Machines that never start (``config.provision_timeout`` is short) fail the launch
    with ``failure`` and are deleted."""
    fake.boot_delay = 60.0
    driver = make_driver(config)
    with pytest.raises(ProvisioningError, match=failure):
        run(driver, make_spec(config, nodes=2), [])
    driver.teardown()
    assert nothing_left(fake) == {}


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
            f"'ip link set lo up && exec .venv/bin/python -m pytest tests/{folder} -m cloud', "
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


_CLIENT = """
import sys, time
import skyward as sky
from {module} import {cls}

config = {cls}(
    {settings}address_url=sys.argv[1] + "/whoami", poll_interval=0.02, grace_period={grace}, bootstrap_timeout=120.0,
)
pool = sky.ComputePool(provider=config, nodes=1, timeout=60, display="quiet")
pool.open()
print("OPEN", *[n.instance_id for n in pool.nodes], flush=True)
time.sleep(3600)  # the test kills this process: a laptop closing mid-pool
"""


def client_script(module: str, cls: str, settings: str, grace: float = 2.0) -> str:
    """A :func:`vanish_client` script for provider ``cls`` of ``module``; ``settings``: its
    own config arguments (``'api_url=sys.argv[1], '``; ``sys.argv[1]`` is the fake's URL);
    ``grace``: seconds its node waits for the killed client before it stops itself."""
    return _CLIENT.format(module=module, cls=cls, settings=settings, grace=grace)


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


@compute
def where(x: int) -> tuple[int, str, int, int]:
    """``x * x``, the agent's bind host, the node and the node count (this module is not an
    installed distribution: the function travels to the nodes by value)."""
    info = skyward.instance_info()
    return x * x, os.environ.get("SKYWARD_BIND_HOST", ""), info.node, info.total_nodes


def check_every_operator(pool: Any) -> None:
    """``>>``, ``@`` and ``gather`` of :func:`where` on a two-node ``pool``: each node's
    agent answers at its own machine's address."""

    first = where(3) >> pool
    assert first[0] == 9 and first[3] == 2
    every = where(2) @ pool
    assert sorted(r[2] for r in every) == [0, 1]
    assert {r[1] for r in every} == {n.ip for n in pool.nodes}  # each node's agent at its machine's address
    many = gather(*(where(i) for i in range(6))) >> pool
    assert [r[0] for r in many] == [i * i for i in range(6)]


def check_all_deleted(
    world: World[Any],
    seen: Sequence[object],
    ids: Sequence[str],
    machine: Callable[[str], Any],
    nothing_left: Callable[[], Mapping[str, Any]],
) -> None:
    """After a two-node pool closed: its events in order, every machine (``machine(id)``:
    the fake's record, with ``status`` and ``history``) deleted, not merely stopped, its
    emulation ended, ``nothing_left()`` of the pool and no violation."""
    from lifecycle_support import lifecycle_problems

    assert lifecycle_problems(seen, nodes=2, priced=True) == []
    assert all(machine(i).status == "deleted" for i in ids)  # deleted, not powered off or shut down
    wait_until(lambda: not any(world.harness.is_running(i) for i in ids), timeout=10, interval=0.05)
    assert not any(world.harness.is_running(i) for i in ids)
    assert nothing_left() == {}
    assert world.fake.violations == []
    assert all(machine(i).history[-1] == "deleted" for i in ids)  # whether or not it stopped first


def check_a_half_made_pool_leaves_nothing(
    config: Any, failure: str, machines: Callable[[], Mapping[Any, Any]], nothing_left: Callable[[], Mapping[str, Any]]
) -> None:
    """A two-node pool whose second create fails (the test set that up) raises ``failure``,
    and the one machine made (``machines()``: the fake's records) is deleted with the rest."""
    from skyward import ComputePool

    with pytest.raises(ProvisioningError, match=failure):
        with ComputePool(provider=config, nodes=2, display="quiet"):
            pass
    made = list(machines().values())
    assert len(made) == 1 and all(m.status == "deleted" for m in made)
    assert nothing_left() == {}
