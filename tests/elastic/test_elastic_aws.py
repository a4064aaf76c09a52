"""Elastic, self-healing pools end to end on AWS (moto), each EC2 instance's user-data
run by the emulated-instance harness (real agents, real sockets).

An instance is hurt behind the pool's back through EC2's own API (terminated or stopped
by someone else); the pool's ``NodeWatch`` sees it at its next describe and replaces it.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from typing import Any

import pytest
from aws.conftest import CLIENT_ADDRESS, AwsWorld, Emulation
from elastic_support import EventLog, instance_at, live_count, running, until

import skyward as sky

pytestmark = pytest.mark.cloud

_TAG_SKIP = ("Name", "skyward:node")  # each instance its own name and index; every other tag is the pool's


@sky.compute
def held(x: int, release: str) -> int:
    """x + 1 once the file ``release`` exists (the test says when)."""
    import os
    import time

    while not os.path.exists(release):
        time.sleep(0.02)
    return x + 1


def described(aws: AwsWorld, instance_id: str) -> dict[str, Any]:
    reservations = aws.ec2.describe_instances(InstanceIds=[instance_id])["Reservations"]
    return dict(reservations[0]["Instances"][0])


def pool_tags(instance: dict[str, Any]) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in instance.get("Tags", []) if t["Key"] not in _TAG_SKIP}


def groups(instance: dict[str, Any]) -> set[str]:
    """The security groups of the instance's network interfaces (the driver launches
    with an interface spec, so moto lists them there, not on the instance)."""
    found = {g["GroupId"] for g in instance.get("SecurityGroups", [])}
    for interface in instance.get("NetworkInterfaces", []):
        found |= {g["GroupId"] for g in interface.get("Groups", [])}
    return found


def elastic(emulated: Emulation, nodes: int | tuple[int, int], log: EventLog) -> sky.ComputePool:
    provider = sky.AWS(client_address=CLIENT_ADDRESS, bootstrap_timeout=120, endpoint_resolver=emulated.endpoints)
    return sky.ComputePool(
        provider=provider,
        nodes=nodes,
        accelerator="T4",
        spot="never",
        display="quiet",
        on_event=log,
        autoscale_cooldown=0.2,
        autoscale_idle_timeout=0.5,
    )


def test_an_elastic_ec2_pool_grows_under_a_burst_with_the_pool_s_tags_and_group_and_shrinks_when_idle(
    aws: AwsWorld, emulated: Emulation
) -> None:
    log = EventLog()
    release = emulated.harness.root / "release"
    try:
        with elastic(emulated, (1, 2), log) as pool:
            pool_id = pool.spec.pool_id
            first = instance_at(pool, 0)
            futures = [pool.submit(held(i, str(release))) for i in range(6)]
            # the node joins the pool, then NodeAdded is said: wait for both
            until("the burst to grow the pool to 2 instances", lambda: live_count(pool) == 2 and bool(log.added()))
            added = instance_at(pool, 1)
            assert [e.reason for e in log.added()] == ["scale-up"]
            new, old = described(aws, added), described(aws, first)
            assert pool_tags(new) == pool_tags(old) and pool_tags(new)["skyward:pool-id"] == pool_id
            assert {t["Key"]: t["Value"] for t in new["Tags"]}["skyward:node"] == "1"
            assert groups(new) == groups(old) == {g["GroupId"] for g in aws.security_groups(pool_id)}
            assert new["InstanceType"] == old["InstanceType"]
            release.touch()
            assert [f.result(timeout=120) for f in futures] == [i + 1 for i in range(6)]
            until("the idle pool to shrink to 1 instance", lambda: live_count(pool) == 1 and len(log.removed()) == 1)
            assert [(e.instance_id, e.reason) for e in log.removed()] == [(added, "scale-down")]
            until(
                "the removed instance to be terminated in EC2",
                lambda: aws.states(pool_id)[added] in ("shutting-down", "terminated"),
            )
            assert aws.states(pool_id)[first] == "running"
    finally:
        release.touch()
    assert set(aws.states(pool_id).values()) <= {"shutting-down", "terminated"}
    assert aws.security_groups(pool_id) == []


@pytest.mark.parametrize("how", ["terminate", "stop"])
def test_an_instance_lost_behind_the_pool_s_back_is_noticed_and_replaced_while_a_gather_completes(
    aws: AwsWorld, emulated: Emulation, how: str
) -> None:
    log = EventLog()
    release = emulated.harness.root / "release"
    try:
        with elastic(emulated, 2, log) as pool:
            pool_id = pool.spec.pool_id
            victim = instance_at(pool, 1)
            answer: Future[tuple[int, ...]] = Future()

            def gather() -> None:
                try:
                    answer.set_result(sky.gather(*(held(i, str(release)) for i in range(6))) >> pool)
                except BaseException as error:
                    answer.set_exception(error)

            threading.Thread(target=gather, daemon=True).start()
            until("a task on each instance", lambda: running(pool) == 2)
            if how == "terminate":
                aws.ec2.terminate_instances(InstanceIds=[victim])
            else:
                aws.ec2.stop_instances(InstanceIds=[victim])
            until("the lost instance to be noticed", lambda: len(log.removed("lost")) == 1)
            assert log.removed("lost")[0].instance_id == victim
            until("its replacement", lambda: len(log.added("replacement")) == 1 and live_count(pool) == 2)
            replacement = instance_at(pool, 1)
            assert replacement != victim
            assert pool_tags(described(aws, replacement)) == pool_tags(described(aws, instance_at(pool, 0)))
            release.touch()
            assert answer.result(timeout=120) == tuple(i + 1 for i in range(6))  # the gather was in flight
            until(
                "the lost instance to be terminated",
                lambda: aws.states(pool_id)[victim] in ("shutting-down", "terminated"),
            )
    finally:
        release.touch()
    assert set(aws.states(pool_id).values()) <= {"shutting-down", "terminated"}
    assert aws.security_groups(pool_id) == []
