"""End to end: ComputePool(provider=AWS(...)) on moto, nodes emulated by the harness."""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path

import pytest
from harness import recorder
from lifecycle_support import lifecycle_problems

import skyward
from skyward import ComputePool, compute, gather

from .conftest import CLIENT_ADDRESS, FIXTURE_KEY_ID, FIXTURE_SECRET, AwsWorld, Emulation, EmulationFactory

pytestmark = pytest.mark.cloud


@compute
def where(x: int) -> tuple[int, str, int]:
    import os

    info = skyward.instance_info()
    return x * x, os.environ.get("SKYWARD_BIND_HOST", ""), info.node


def test_pool_runs_on_emulated_instances_and_terminates_them(aws: AwsWorld, emulated: Emulation) -> None:
    provider = skyward.AWS(client_address=CLIENT_ADDRESS, bootstrap_timeout=120, endpoint_resolver=emulated.endpoints)
    seen: list[object] = []
    with ComputePool(
        provider=provider, nodes=2, accelerator="T4", display="quiet", on_event=seen.append, spot="never"
    ) as pool:
        pool_id = pool.spec.pool_id
        assert [n.instance_type for n in pool.nodes] == ["g4dn.xlarge", "g4dn.xlarge"]
        one = where(3) >> pool
        assert one[0] == 9
        every = where(2) @ pool
        assert sorted(r[2] for r in every) == [0, 1]
        hosts = {r[1] for r in every}
        assert hosts == {emulated.harness.address_for(n.instance_id) for n in pool.nodes}
        many = gather(*(where(i) for i in range(6))) >> pool
        assert [r[0] for r in many] == [i * i for i in range(6)]
    assert lifecycle_problems(seen, nodes=2, priced=True) == []
    states = aws.states(pool_id)
    assert len(states) == 2 and set(states.values()) == {"terminated"}
    assert aws.security_groups(pool_id) == []
    emulated.moto.wait_stopped(list(states))


@compute
def read_mounted(path: str) -> str:
    with open(path) as f:
        return f.read()


def _files_under(root: Path) -> list[Path]:
    found = []
    for path in root.rglob("*"):
        if (
            path.is_file()
            and not path.is_symlink()
            and "site-packages" not in path.parts
            and path.stat().st_size < 2**20
        ):
            found.append(path)
    return found


def test_s3_volume_is_mounted_through_the_instance_profile_and_no_key_reaches_a_node(
    aws: AwsWorld, emulate: EmulationFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="skyward")
    caplog.set_level(logging.INFO)
    mount_s3 = recorder(
        sys.executable,
        "import pathlib\n"
        "target = pathlib.Path(sys.argv[-1])\n"
        "(target / 'MOUNTED').write_text(' '.join(sys.argv[1:]))\n"
        "sys.exit(0)",
    )
    emulated = emulate(extra_stubs={"mount-s3": mount_s3})
    volume = skyward.S3Volume(mount_path="/tmp/skyward-s3", bucket="skyward-test-bucket", prefix="datasets/")
    provider = skyward.AWS(client_address=CLIENT_ADDRESS, bootstrap_timeout=120, endpoint_resolver=emulated.endpoints)
    events: list[object] = []
    with ComputePool(provider=provider, volume=[volume], spot="never", display="quiet", on_event=events.append) as pool:
        pool_id = pool.spec.pool_id
        mounted = read_mounted("/tmp/skyward-s3/MOUNTED") >> pool
        (instance,) = aws.instances(pool_id)
        profile_arn = instance["IamInstanceProfile"]["Arn"]
        assert profile_arn.endswith(f"instance-profile/skyward-{pool_id}")
    assert mounted == "--allow-other --read-only --prefix datasets/ skyward-test-bucket /tmp/skyward-s3"
    instance_id = instance["InstanceId"]
    calls = [c for c in emulated.harness.calls(instance_id) if c["argv"][0] == "mount-s3"]
    (call,) = calls
    env = call["env"]
    assert isinstance(env, dict)
    assert env["AWS_REGION"] == "us-east-1"
    assert "AWS_EC2_METADATA_SERVICE_ENDPOINT" in env  # credentials come from the instance profile
    assert not {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"} & set(env)
    assert aws.roles(pool_id) == [] and aws.instance_profiles(pool_id) == []

    # the fixture's credentials reached no node, no user-data and no log
    texts = {"user-data": emulated.moto.user_data[instance_id], "our logs": caplog.text}
    texts["task output"] = "\n".join(getattr(e, "line", "") for e in events)
    for path in _files_under(emulated.harness.instance(instance_id).directory):
        texts[str(path)] = path.read_text(errors="replace")
    assert len(texts) > 5
    for where, text in texts.items():
        assert FIXTURE_KEY_ID not in text, where
        assert FIXTURE_SECRET not in text, where


def test_the_ttl_is_armed_first_and_ends_the_instance_in_ec2(aws: AwsWorld, emulate: EmulationFactory) -> None:
    # timeout=60 s: the node's TTL is 120 s ("shutdown -h +2"); at this scale it fires after 6 s
    emulated = emulate(shutdown_time_scale=0.05)
    provider = skyward.AWS(client_address=CLIENT_ADDRESS, bootstrap_timeout=120, endpoint_resolver=emulated.endpoints)
    pool = ComputePool(provider=provider, spot="never", timeout=60, display="quiet")
    with pool:
        (handle,) = pool.nodes
        deadline = time.monotonic() + 30
        while aws.states(pool.spec.pool_id)[handle.instance_id] != "terminated" and time.monotonic() < deadline:
            time.sleep(0.2)
        assert aws.states(pool.spec.pool_id)[handle.instance_id] == "terminated"
    calls = [c["argv"] for c in emulated.harness.calls(handle.instance_id)]
    assert calls[0][:3] == ["shutdown", "-h", "+2"]  # the first thing the user-data did
    assert emulated.harness.instance(handle.instance_id).stop_reason.startswith("scheduled shutdown")
    script = emulated.moto.user_data[handle.instance_id]
    assert script.index("shutdown -h +2") < script.index("# --- apt")


def test_a_failing_bootstrap_times_out_and_every_instance_is_terminated(aws: AwsWorld, emulated: Emulation) -> None:
    provider = skyward.AWS(client_address=CLIENT_ADDRESS, bootstrap_timeout=10, endpoint_resolver=emulated.endpoints)
    image = skyward.Image(pip=["skyward-no-such-package==1.0"])  # the node cannot install it
    pool = ComputePool(provider=provider, nodes=2, image=image, spot="never", display="quiet")
    # the pool's wait for the agents (bootstrap_timeout), the same on every cloud
    with pytest.raises(skyward.ProvisioningError, match="did not answer within 10 s"):
        pool.open()
    states = aws.states(pool.spec.pool_id)
    assert len(states) == 2 and set(states.values()) == {"terminated"}
    assert aws.security_groups(pool.spec.pool_id) == []
    emulated.moto.wait_stopped(list(states))
    for instance_id in states:  # what the node's console shows: why its bootstrap failed
        assert "skyward-no-such-package==1.0 (not in the image's offline mirror)" in emulated.harness.log(instance_id)
