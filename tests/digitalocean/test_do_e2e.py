"""End to end: ComputePool(provider=DigitalOcean(...)) on the fake API, each droplet's
user-data run by the emulated-instance harness (tests/harness)."""

from __future__ import annotations

import os

import providers_support as shared
import pytest
from do_support import CLIENT, DropletWorld, emulate, nothing_left
from fakes.digitalocean import FakeDigitalOcean
from providers_support import vanish_client, wait_until

import skyward
from skyward import ComputePool, compute
from skyward_digitalocean import DigitalOcean

pytestmark = pytest.mark.cloud


def test_pool_runs_on_emulated_droplets_and_deletes_them(droplets: DropletWorld, do_config: DigitalOcean) -> None:
    fake, harness = droplets.fake, droplets.harness
    seen: list[object] = []
    with ComputePool(provider=do_config, nodes=2, display="quiet", on_event=seen.append) as pool:
        ids = [n.instance_id for n in pool.nodes]
        assert all(harness.is_running(i) for i in ids)
        # The user-data the droplets really got (the whole bootstrap, agent start included)
        # carries no API token.
        user_data = [fake.droplets[int(i)].user_data for i in ids]
        assert all("# Skyward bootstrap for image" in u and "-m skyward.agent" in u for u in user_data)
        assert not any(fake.token in u for u in user_data)
        shared.check_every_operator(pool)
        assert all(fake.droplets[int(i)].status == "active" for i in ids)
    shared.check_all_deleted(droplets, seen, ids, lambda i: fake.droplets[int(i)], lambda: nothing_left(fake))


def test_a_pool_that_fails_halfway_leaves_nothing(droplets: DropletWorld, do_config: DigitalOcean) -> None:
    fake = droplets.fake
    fake.capacity[("s-1vcpu-1gb", "tor1")] = 1
    failure = "no capacity for s-1vcpu-1gb in tor1"
    shared.check_a_half_made_pool_leaves_nothing(do_config, failure, lambda: fake.droplets, lambda: nothing_left(fake))


@pytest.mark.slow
def test_a_vanished_client_leaves_a_billed_droplet_that_the_next_pool_deletes(
    fake_do: FakeDigitalOcean, do_config: DigitalOcean
) -> None:
    """The node's own TTL can only power it off, and DigitalOcean bills a powered-off
    droplet: the next pool start (the reaper) must delete it."""
    from skyward_digitalocean import reap
    from skyward_digitalocean.naming import pool_mark

    # TTL of the child's pool: timeout 60 s + 60 s margin = "shutdown -h +2"; scaled so the
    # emulated machine powers off about 12 s after its bootstrap starts
    world_iter = emulate(fake_do, shutdown_time_scale=0.1)
    world = next(world_iter)
    fake = world.fake
    try:
        droplet_id = vanish_client(CLIENT, fake.url)  # nobody will delete its droplet
        droplet = fake.droplets[int(droplet_id)]
        wait_until(lambda: droplet.status == "off", timeout=60)
        # the TTL powered the droplet off; DigitalOcean keeps billing it
        assert droplet.status == "off" and world.stopped == [droplet_id]
        assert not world.harness.is_running(droplet_id)
        # the next pool from this account deletes it before it makes anything
        with ComputePool(provider=do_config, nodes=1, display="quiet") as pool:
            assert (shared.where(4) >> pool)[0] == 16
            assert droplet.status == "deleted"
        assert droplet.history == ["new", "active", "off", "deleted"]
        # its firewall and key (free) go once its pool's expiry has passed
        mark = pool_mark(droplet.tags)
        assert mark is not None
        left = nothing_left(fake)
        assert left.get("droplets") is None and len(left["firewalls"]) == 1 and len(left["ssh_keys"]) == 1
        result = reap(do_config, now=mark.expires + 1)
        assert (len(result.firewalls), len(result.ssh_keys), len(result.tags), result.failures) == (1, 1, 1, ())
        assert nothing_left(fake) == {}
        assert fake.violations == []
    finally:
        next(world_iter, None)


# nvidia-smi on an emulated H100 droplet: `-L` lists the GPU, and the MIG devices once
# `mig -cgi <profiles> -C` has created them (state kept in the instance's control folder)
NVIDIA_SMI = """
state = os.path.join(CONTROL, "mig-profiles")
args = sys.argv[1:]
if args == ["-L"]:
    print("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-5c2b0f7e-0000-4000-8000-000000000000)")
    if os.path.exists(state):
        for i, profile in enumerate(open(state).read().split(",")):
            print(f"  MIG {profile}     Device  {i}: (UUID: MIG-{i}a2b0f7e-0000-4000-8000-00000000000{i})")
elif args[:1] == ["mig"] and "-cgi" in args:
    open(state, "w").write(args[args.index("-cgi") + 1])
"""


@compute
def partition() -> tuple[int, int, str]:
    info = skyward.instance_info()
    return info.rank, info.worker, os.environ["CUDA_VISIBLE_DEVICES"]


def test_a_mig_droplet_is_partitioned_and_each_worker_gets_one_partition(
    fake_do: FakeDigitalOcean, do_config: DigitalOcean
) -> None:
    import sys
    from contextlib import contextmanager

    from harness import recorder

    with contextmanager(emulate)(fake_do, extra_stubs={"nvidia-smi": recorder(sys.executable, NVIDIA_SMI)}) as world:
        accelerator = skyward.Accelerator.NVIDIA.H100(mig="3g.40gb")
        with ComputePool(provider=do_config, accelerator=accelerator, display="quiet") as pool:
            assert pool.spec.workers_per_node == 2
            (instance_id,) = [n.instance_id for n in pool.nodes]
            results = sorted(partition() @ pool)
        calls = [c["argv"][1:] for c in world.harness.calls(instance_id) if c["argv"][0] == "nvidia-smi"]
    assert results == [
        (0, 0, "MIG-0a2b0f7e-0000-4000-8000-000000000000"),
        (1, 1, "MIG-1a2b0f7e-0000-4000-8000-000000000001"),
    ]
    assert ["-i", "0", "-mig", "1"] in calls
    assert ["mig", "-i", "0", "-cgi", "3g.40gb,3g.40gb", "-C"] in calls
