"""Elastic, self-healing pools end to end on DigitalOcean's fake API, each droplet's
user-data run by the emulated-instance harness (real agents, real sockets).

A droplet is hurt behind the pool's back the way it happens on the real cloud: deleted
through the API (someone's cleanup script, the console) or powered off (its host); the
pool's ``NodeWatch`` sees it at its next describe and replaces it.
"""

from __future__ import annotations

import threading
import urllib.request
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path

import pytest
from do_support import DropletWorld, nothing_left
from elastic_support import EventLog, instance_at, live_count, running, until
from fakes.digitalocean import TOKEN, FakeDigitalOcean

import skyward as sky
from skyward_digitalocean import DigitalOcean

pytestmark = pytest.mark.cloud


@sky.compute
def held(x: int, release: str) -> int:
    """x + 1 once the file ``release`` exists (the test says when)."""
    import os
    import time

    while not os.path.exists(release):
        time.sleep(0.02)
    return x + 1


def elastic(config: DigitalOcean, nodes: int | tuple[int, int], log: EventLog) -> sky.ComputePool:
    return sky.ComputePool(
        provider=config,
        nodes=nodes,
        display="quiet",
        on_event=log,
        autoscale_cooldown=0.2,
        autoscale_idle_timeout=0.5,
    )


def release_file(world: DropletWorld) -> Path:
    """A file both this process and the droplets see (each droplet has its own /tmp)."""
    return world.harness.root / "release"


def test_an_elastic_droplet_pool_grows_under_a_burst_with_the_pool_s_tags_and_shrinks_when_idle(
    droplets: DropletWorld, do_config: DigitalOcean
) -> None:
    fake = droplets.fake
    log = EventLog()
    release = release_file(droplets)
    try:
        with elastic(do_config, (1, 2), log) as pool:
            first = instance_at(pool, 0)
            futures = [pool.submit(held(i, str(release))) for i in range(6)]
            # the node joins the pool, then NodeAdded is said: wait for both
            until("the burst to grow the pool to 2 droplets", lambda: live_count(pool) == 2 and bool(log.added()))
            added = instance_at(pool, 1)
            assert [e.reason for e in log.added()] == ["scale-up"]
            new, old = fake.droplets[int(added)], fake.droplets[int(first)]
            assert new.tags == old.tags and (new.region, new.size["slug"]) == (old.region, old.size["slug"])
            (firewall,) = fake.firewalls.values()
            assert set(firewall["tags"]) <= set(new.tags)  # the pool's firewall covers it
            assert droplets.harness.is_running(added)
            release.touch()
            assert [f.result(timeout=120) for f in futures] == [i + 1 for i in range(6)]
            until("the idle pool to shrink to 1 droplet", lambda: live_count(pool) == 1 and len(log.removed()) == 1)
            assert [(e.instance_id, e.reason) for e in log.removed()] == [(added, "scale-down")]
            until("the removed droplet to be deleted at the fake", lambda: new.status == "deleted")
            assert old.status == "active"
    finally:
        release.touch()
    until("nothing left at the fake", lambda: nothing_left(fake) == {})


def _delete_through_the_api(fake: FakeDigitalOcean, world: DropletWorld, droplet_id: str) -> None:
    request = urllib.request.Request(
        f"{fake.url}/v2/droplets/{droplet_id}", method="DELETE", headers={"Authorization": f"Bearer {TOKEN}"}
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        assert answer.status == 204


def _power_off(fake: FakeDigitalOcean, world: DropletWorld, droplet_id: str) -> None:
    fake.power_off(droplet_id)  # DO keeps it, status "off"; its machine is down
    world.harness.stop(droplet_id, reason="powered off by its host")


@pytest.mark.parametrize("hurt", [_delete_through_the_api, _power_off], ids=["deleted", "powered-off"])
def test_a_droplet_lost_behind_the_pool_s_back_is_noticed_and_replaced_while_a_gather_completes(
    droplets: DropletWorld,
    do_config: DigitalOcean,
    hurt: Callable[[FakeDigitalOcean, DropletWorld, str], None],
) -> None:
    fake = droplets.fake
    log = EventLog()
    release = release_file(droplets)
    try:
        with elastic(do_config, 2, log) as pool:
            victim = instance_at(pool, 1)
            answer: Future[tuple[int, ...]] = Future()

            def gather() -> None:
                try:
                    answer.set_result(sky.gather(*(held(i, str(release)) for i in range(6))) >> pool)
                except BaseException as error:
                    answer.set_exception(error)

            threading.Thread(target=gather, daemon=True).start()
            until("a task on each droplet", lambda: running(pool) == 2)
            hurt(fake, droplets, victim)
            until("the lost droplet to be noticed", lambda: len(log.removed("lost")) == 1)
            assert log.removed("lost")[0].instance_id == victim
            until("its replacement", lambda: len(log.added("replacement")) == 1 and live_count(pool) == 2)
            replacement = instance_at(pool, 1)
            assert replacement != victim
            assert fake.droplets[int(replacement)].tags == fake.droplets[int(instance_at(pool, 0))].tags
            release.touch()
            assert answer.result(timeout=120) == tuple(i + 1 for i in range(6))  # the gather was in flight
            until("the lost droplet to be deleted at the fake", lambda: fake.droplets[int(victim)].status == "deleted")
    finally:
        release.touch()
    until("nothing left at the fake", lambda: nothing_left(fake) == {})
