"""End to end: ComputePool(provider=Verda(...)) on the fake API, each instance's startup
script run by the emulated-instance harness (tests/harness)."""

from __future__ import annotations

import providers_support as shared
import pytest
from fakes.verda import FakeVerda
from providers_support import vanish_client, wait_until
from verda_support import CLIENT, InstanceWorld, emulate, nothing_left

from skyward import ComputePool
from skyward_verda import Verda, reap
from skyward_verda.naming import parse_description

pytestmark = pytest.mark.cloud


def test_pool_runs_on_emulated_instances_and_deletes_them(instances: InstanceWorld, verda_config: Verda) -> None:
    fake, harness = instances.fake, instances.harness
    seen: list[object] = []
    with ComputePool(
        provider=verda_config, nodes=2, display="quiet", on_event=seen.append, spot="if-available"
    ) as pool:
        ids = [n.instance_id for n in pool.nodes]
        assert all(harness.is_running(i) for i in ids)
        assert all(n.spot for n in pool.nodes)  # spot capacity was there
        # The startup scripts the instances really got (the whole bootstrap, agent start
        # included) carry neither API credential.
        scripts = [fake.scripts[fake.instances[i].startup_script_id or ""]["script"] for i in ids]
        assert all("# Skyward bootstrap for image" in s and "-m skyward.agent" in s for s in scripts)
        assert not any(fake.client_id in s or fake.client_secret in s for s in scripts)
        shared.check_every_operator(pool)
    shared.check_all_deleted(instances, seen, ids, lambda i: fake.instances[i], lambda: nothing_left(fake))


def test_a_pool_that_fails_halfway_leaves_nothing(instances: InstanceWorld, verda_config: Verda) -> None:
    fake = instances.fake
    fake.fail("POST", "/v1/instances", 400, {"code": "invalid_request", "message": "Quota exceeded"}, after=1)
    shared.check_a_half_made_pool_leaves_nothing(
        verda_config, "Quota exceeded", lambda: fake.instances, lambda: nothing_left(fake)
    )


@pytest.mark.slow
def test_a_vanished_client_leaves_a_shut_down_instance_that_the_next_pool_deletes(
    fake_verda: FakeVerda, verda_config: Verda
) -> None:
    """The node's TTL can only shut it down, and a shut-down instance (and its disk) still
    bills: the next pool start (the reaper) must delete both."""
    world_iter = emulate(fake_verda, shutdown_time_scale=0.1)  # "shutdown -h +2" fires ~12 s in
    world = next(world_iter)
    try:
        instance_id = vanish_client(CLIENT, fake_verda.url)  # nobody will delete its instance
        instance = fake_verda.instances[instance_id]
        wait_until(lambda: instance.status == "offline", timeout=60)
        assert instance.status == "offline" and world.stopped == [instance_id]
        assert fake_verda.volumes[instance.os_volume_id] == "attached"  # still billed
        with ComputePool(provider=verda_config, nodes=1, display="quiet") as pool:
            assert (shared.where(4) >> pool)[0] == 16
            assert instance.status == "deleted"
        assert fake_verda.volumes[instance.os_volume_id] == "deleted"
        mark = parse_description(instance.description)
        assert mark is not None
        left = nothing_left(fake_verda)
        assert set(left) == {"scripts", "ssh_keys"}  # the dead pool's; free, and gone at its expiry
        result = reap(verda_config, now=mark.expires + 1)
        assert (len(result.scripts), len(result.ssh_keys), result.failures) == (1, 1, ())
        assert nothing_left(fake_verda) == {}
        assert fake_verda.violations == []
    finally:
        next(world_iter, None)
