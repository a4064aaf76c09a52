"""Spot interruption, the AWS side: the node's watcher reads the notice from its
metadata service (served by the harness) and drops it for the agent; the driver
replaces a reclaimed node under Spot.Always.

How the agent forwards the notice and the pool retries in-flight tasks is core work,
proposed in /tmp/proposals (see skyward_aws.interruption for the drop-box contract).
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from skyward import ComputePool, Spot, compute
from skyward.events import InstanceInterrupted, LogLine, Notice
from skyward.providers import notices_dir
from skyward_aws import AWS
from skyward_aws.driver import node_run_dir
from skyward_aws.interruption import NOTICE_FILE, REBALANCE_FILE

from .conftest import CLIENT_ADDRESS, AwsWorld, Emulation
from .specs import make_spec

pytestmark = pytest.mark.cloud


def _wait_for(path: Path, timeout: float = 20.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            return dict(json.loads(path.read_text()))
        time.sleep(0.1)
    raise AssertionError(f"{path} did not appear within {timeout:g} s")


def _watch_log(emulated: Emulation, instance_id: str) -> str:
    path = emulated.harness.instance(instance_id).directory / "home" / ".skyward" / "spot-watch.log"
    return path.read_text() if path.exists() else ""


def _delivered(path: Path, events: list[Any], kind: type, timeout: float = 20.0) -> dict[str, Any] | None:
    """The dropped notice (while no agent collects it), or ``None`` once the pool reported
    it as ``kind`` (the core's agent forwards and removes dropped notices)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            try:
                return dict(json.loads(path.read_text()))
            except FileNotFoundError:  # collected between the two calls
                pass
        if any(isinstance(e, kind) for e in events):
            return None
        time.sleep(0.05)
    raise AssertionError(f"neither {path} nor a {kind.__name__} event within {timeout:g} s")


def test_interruption_notice_is_read_from_imds_and_dropped_for_the_agent(aws: AwsWorld, emulated: Emulation) -> None:
    provider = AWS(client_address=CLIENT_ADDRESS, bootstrap_timeout=120, endpoint_resolver=emulated.endpoints)
    events: list[Any] = []
    spot = Spot.Always(retries=0)
    with ComputePool(provider=provider, nodes=2, spot=spot, display="quiet", on_event=events.append) as pool:
        pool_id = pool.spec.pool_id
        first, second = pool.nodes
        assert first.spot and second.spot

        def drop_box(node: int, instance_id: str) -> Path:
            # the run dir is under the instance's own (private) /tmp
            private_tmp = emulated.harness.instance(instance_id).directory / "tmp"
            return private_tmp / notices_dir(node_run_dir(pool_id, node), node).removeprefix("/tmp/")

        emulated.moto.recommend_rebalance(first.instance_id)
        emulated.moto.interrupt(second.instance_id, in_seconds=120)
        served = emulated.moto.imds[second.instance_id].instance_action
        assert served is not None
        notice = _delivered(drop_box(1, second.instance_id) / NOTICE_FILE, events, InstanceInterrupted)
        if notice is not None:
            assert notice["kind"] == "interruption" and notice["provider"] == "aws"
            assert notice["action"] == "terminate" and notice["time"] == served["time"]
        else:
            (event,) = [e for e in events if isinstance(e, InstanceInterrupted)]
            assert (event.instance_id, event.node) == (second.instance_id, 1) and served["time"] in event.reason
        assert f"it will terminate at {served['time']}" in _watch_log(emulated, second.instance_id)
        hint = _delivered(drop_box(0, first.instance_id) / REBALANCE_FILE, events, Notice)
        assert hint is None or hint["kind"] == "rebalance"
        assert "recommends moving work off this spot instance" in _watch_log(emulated, first.instance_id)
        assert "reclaims" not in _watch_log(emulated, first.instance_id)

        # IMDSv2 only: a token first, and every read carried a valid one
        requests = emulated.moto.imds[second.instance_id].requests
        assert requests[0] == ("PUT", "/latest/api/token", True)
        assert all(valid for method, _, valid in requests if method == "GET")
    states = aws.states(pool_id)
    assert set(states.values()) == {"terminated"}
    emulated.moto.wait_stopped(list(states))


def test_the_driver_replaces_a_reclaimed_spot_node(aws: AwsWorld, emulated: Emulation) -> None:
    provider = AWS(client_address=CLIENT_ADDRESS, bootstrap_timeout=120, endpoint_resolver=emulated.endpoints)
    events: list[Any] = []
    with ComputePool(provider=provider, nodes=2, spot=Spot.Always(retries=0), display="quiet") as pool:
        pool_id = pool.spec.pool_id
        first, second = pool.nodes
        driver = pool._driver  # type: ignore[attr-defined]
        assert driver.replaces_interrupted(pool.spec)
        aws.ec2.terminate_instances(InstanceIds=[second.instance_id])  # AWS reclaims it
        emulated.moto.wait_stopped([second.instance_id])
        replacement = driver.replace(pool.spec, second, pool._launcher.user_data, events.append)
        assert replacement.node == 1 and replacement.spot
        assert replacement.instance_id not in (first.instance_id, second.instance_id)
        assert aws.states(pool_id)[replacement.instance_id] == "running"
        # replace() returns once EC2 runs it; the pool then waits for its agent, as at start
        deadline = time.monotonic() + 30
        while not emulated.harness.is_running(replacement.instance_id):
            assert time.monotonic() < deadline, "the replacement never booted"
            time.sleep(0.1)
        assert [type(e).__name__ for e in events] == ["InstanceProvisioned", "BootstrapStarting"]
    states = aws.states(pool_id)
    assert len(states) == 3 and set(states.values()) == {"terminated"}
    emulated.moto.wait_stopped(list(states))
    assert not driver.replaces_interrupted(make_spec(provider, spot="if-available"))


@compute
def slow(i: int) -> int:
    import time

    time.sleep(6)
    return i


@compute
def traced(i: int) -> tuple[int, int]:
    import time

    import skyward

    node = skyward.instance_info().node
    print(f"traced {i} started on node {node}", flush=True)
    time.sleep(4)
    return i, node


def test_the_pool_moves_work_off_an_interrupted_node_and_replaces_it(aws: AwsWorld, emulated: Emulation) -> None:
    provider = AWS(client_address=CLIENT_ADDRESS, bootstrap_timeout=120, endpoint_resolver=emulated.endpoints)
    events: list[Any] = []
    spot = Spot.Always(retries=0)
    with ComputePool(provider=provider, nodes=2, spot=spot, display="quiet", on_event=events.append) as pool:
        futures = [pool.submit(slow(i)) for i in range(2)]
        direct: list[tuple[int, int]] = []
        caller = threading.Thread(target=lambda: direct.append(traced(9) >> pool))
        caller.start()
        started: list[str] = []
        deadline = time.monotonic() + 20
        while not started and time.monotonic() < deadline:
            started = [e.line for e in events if isinstance(e, LogLine) and "traced 9 started" in e.line]
            time.sleep(0.05)
        assert started, "the >> call never started"
        lost = int(started[0].rsplit(" ", 1)[1])  # interrupt the node that runs the >> call
        victim = pool.nodes[lost]
        emulated.moto.interrupt(victim.instance_id)
        assert sorted(f.result(timeout=60) for f in futures) == [0, 1]  # whichever run finished first
        caller.join(timeout=60)
        # the >> call ran again: on the other node, or on the replacement when it answered
        # before the other node's slow task ended (a loaded machine can go either way)
        assert [value for value, _node in direct] == [9]
        reruns = [e.line for e in events if isinstance(e, LogLine) and "traced 9 started" in e.line]
        assert len(reruns) >= 2, f"the >> call did not start again after its node was interrupted: {reruns}"

        def at_lost() -> str | None:  # the node at index ``lost`` (none while it is being replaced)
            return next((n.instance_id for n in pool.nodes if n.node == lost), None)

        deadline = time.monotonic() + 60
        while at_lost() in (victim.instance_id, None) and time.monotonic() < deadline:
            time.sleep(0.2)
        interrupted = [e for e in events if isinstance(e, InstanceInterrupted)]
        assert [(e.instance_id, e.node) for e in interrupted] == [(victim.instance_id, lost)]
        replacement = at_lost()
        assert replacement not in (victim.instance_id, None)  # replaced under Spot.Always
        deadline = time.monotonic() + 10  # the pool says "replaced" after the bootstrap events
        while not any(isinstance(e, Notice) and replacement in e.message for e in events):
            assert time.monotonic() < deadline, "no Notice of the replacement"
            time.sleep(0.05)
        booted = [
            type(e).__name__
            for e in events
            if type(e).__name__.startswith("Bootstrap") and e.instance_id == replacement
        ]
        assert booted[0] == "BootstrapStarting" and booted[-1] == "BootstrapCompleted", booted
        assert "BootstrapProgress" in booted, booted  # the replacement's steps, as for the first nodes
        # the reclaimed instance was deleted before its replacement was made (AWS would take it
        # two minutes later; a stopped spot instance may still bill its disk)
        assert aws.states(pool.spec.pool_id)[victim.instance_id] in ("shutting-down", "terminated")
        assert sorted(r for r in slow(7) @ pool) == [7, 7]  # the replacement serves
    assert set(aws.states(pool.spec.pool_id).values()) == {"terminated"}
