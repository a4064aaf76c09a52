"""The ``skyward`` command and the pool-start sweep against moto (AWS)."""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest
from aws.conftest import CLIENT_ADDRESS, CLIENT_CIDR, AwsWorld, Emulation
from aws.specs import make_driver, make_spec
from providers_support import vanish_client
from typer.testing import CliRunner

from skyward.cli.app import make_app
from skyward.events import Notice
from skyward_aws import AWS
from skyward_aws.iam import PoolRole, RolePlan
from skyward_aws.infra import create_security_group, expiry, pool_tags
from skyward_aws.resources import parse_expiry

pytestmark = pytest.mark.cloud

runner = CliRunner()
PAST = datetime.datetime(2020, 1, 1, tzinfo=datetime.UTC)


def left_by_a_dead_pool(aws: AwsWorld, pool_id: str, *, expired: bool, instance: str | None) -> dict[str, str]:
    """What a client that died leaves: its group, key pair, role and instance profile, and
    an instance that is ``"running"``, ``"terminated"`` (its TTL ended it) or none."""
    moment = PAST if expired else datetime.datetime.now(datetime.UTC)
    tags = pool_tags(pool_id, expiry(moment, 3600), name=f"skyward-{pool_id}")
    vpc = aws.ec2.describe_vpcs(Filters=[{"Name": "is-default", "Values": ["true"]}])["Vpcs"][0]["VpcId"]
    group = create_security_group(
        aws.ec2, pool_id=pool_id, vpc_id=vpc, client_cidr=CLIENT_CIDR, ports=(16789, 16789), tags=tags
    )
    aws.ec2.create_key_pair(
        KeyName=f"skyward-{pool_id}", TagSpecifications=[{"ResourceType": "key-pair", "Tags": tags}]
    )
    PoolRole.create(
        aws.iam,
        f"skyward-{pool_id}",
        RolePlan(statements=({"Effect": "Allow", "Action": "s3:GetObject", "Resource": "*"},)),
        tags,
    )
    made = {"group": group}
    if instance is not None:
        reservation = aws.ec2.run_instances(
            ImageId=aws.images[0].image_id,
            InstanceType="t3.micro",
            MinCount=1,
            MaxCount=1,
            SecurityGroupIds=[group],
            TagSpecifications=[{"ResourceType": "instance", "Tags": tags}],
        )
        made["instance"] = reservation["Instances"][0]["InstanceId"]
        if instance == "terminated":
            aws.ec2.terminate_instances(InstanceIds=[made["instance"]])
    return made


def what_is_left(aws: AwsWorld, pool_id: str) -> dict[str, Any]:
    keys = aws.ec2.describe_key_pairs(Filters=[{"Name": "tag:skyward:pool-id", "Values": [pool_id]}])["KeyPairs"]
    live = {i: s for i, s in aws.states(pool_id).items() if s != "terminated"}
    found = {
        "groups": [g["GroupId"] for g in aws.security_groups(pool_id)],
        "keys": [k["KeyName"] for k in keys],
        "roles": aws.roles(pool_id),
        "profiles": aws.instance_profiles(pool_id),
        "instances": live,
    }
    return {k: v for k, v in found.items() if v}


def pool_id() -> str:
    return f"sky-{uuid.uuid4().hex[:8]}"


def start_a_pool(events: list[Any]) -> Any:
    """What a pool start does first: the driver's prepare (it sweeps, then makes its own)."""
    provider = AWS(client_address=CLIENT_ADDRESS)
    spec = make_spec(provider, accelerator="T4")
    driver = make_driver(provider, [])
    driver.validate(spec)
    driver.prepare(spec, events.append)
    return driver


def test_a_pool_start_removes_what_a_dead_pool_left_past_its_expiry_and_nothing_else(aws: AwsWorld) -> None:
    dead, ended, alive = pool_id(), pool_id(), pool_id()
    left_by_a_dead_pool(aws, dead, expired=True, instance="terminated")  # its TTL ended the node
    dead_tags = pool_tags(dead, expiry(PAST, 3600))
    loose = aws.ec2.create_volume(
        AvailabilityZone="us-east-1a", Size=8, TagSpecifications=[{"ResourceType": "volume", "Tags": dead_tags}]
    )["VolumeId"]
    still_running = left_by_a_dead_pool(aws, ended, expired=True, instance="running")
    left_by_a_dead_pool(aws, alive, expired=False, instance="running")
    vpc = aws.ec2.describe_vpcs(Filters=[{"Name": "is-default", "Values": ["true"]}])["Vpcs"][0]["VpcId"]
    foreign = aws.ec2.create_security_group(GroupName=f"web-{dead}", Description="not skyward's", VpcId=vpc)["GroupId"]
    events: list[Any] = []
    driver = start_a_pool(events)
    try:
        assert what_is_left(aws, dead) == {}
        assert aws.ec2.describe_volumes(Filters=[{"Name": "volume-id", "Values": [loose]}])["Volumes"] == []
        # an expired node still running is terminated; its group goes once EC2 lets go of it
        assert what_is_left(aws, ended) == {
            "groups": [still_running["group"]],
            "keys": [f"skyward-{ended}"],
            "roles": [f"skyward-{ended}"],
            "profiles": [f"skyward-{ended}"],
        }
        assert set(what_is_left(aws, alive)) == {"groups", "keys", "roles", "profiles", "instances"}
        assert aws.ec2.describe_security_groups(GroupIds=[foreign])["SecurityGroups"]
        notices = [e.message for e in events if isinstance(e, Notice)]
        assert any(f"left by pool {dead}" in m and "security-group" in m for m in notices)
    finally:
        driver.teardown()
    second = start_a_pool([])  # the next start takes the rest of the ended pool
    second.teardown()
    assert what_is_left(aws, ended) == {}
    assert set(what_is_left(aws, alive)) == {"groups", "keys", "roles", "profiles", "instances"}
    aws.ec2.delete_security_group(GroupId=foreign)
    runner.invoke(make_app(), ["down", alive, "--provider", "aws"])


def test_ls_and_down_a_pool_on_aws(aws: AwsWorld) -> None:
    pool = pool_id()
    made = left_by_a_dead_pool(aws, pool, expired=False, instance="running")
    other = pool_id()
    left_by_a_dead_pool(aws, other, expired=False, instance=None)
    listed = runner.invoke(make_app(), ["ls", "--json", "--provider", "aws"])
    assert listed.exit_code == 0, listed.output
    mine = [r for r in json.loads(listed.stdout)["resources"] if r["pool_id"] == pool]
    kinds = sorted(r["kind"] for r in mine)
    assert kinds == ["instance", "instance-profile", "key-pair", "role", "security-group"]
    (node,) = [r for r in mine if r["kind"] == "instance"]
    assert node["id"] == made["instance"] and node["hourly_price"] > 0 and node["expired"] is False
    down = runner.invoke(make_app(), ["down", pool, "--provider", "aws"])
    assert down.exit_code == 0, down.output
    assert "aws: found 5, removed 5, left 0" in down.stdout
    assert what_is_left(aws, pool) == {}
    assert set(what_is_left(aws, other)) == {"groups", "keys", "roles", "profiles"}
    assert runner.invoke(make_app(), ["down", other, "--provider", "aws"]).exit_code == 0


def test_down_expired_as_a_real_process_with_the_clock_past_the_expiry(aws: AwsWorld) -> None:
    """The console script itself, in a subprocess, with boto3 finding moto through the
    environment the fixture set."""
    pool = pool_id()
    left_by_a_dead_pool(aws, pool, expired=False, instance="running")
    skyward = Path(sys.executable).parent / "skyward"
    env = dict(os.environ)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(skyward), *args], check=False, env=env, capture_output=True, text=True, timeout=300)

    listed = run("ls", "--json", "--provider", "aws")
    assert listed.returncode == 0, listed.stderr
    assert {r["kind"] for r in json.loads(listed.stdout)["resources"] if r["pool_id"] == pool} == {
        "instance", "security-group", "key-pair", "role", "instance-profile"
    }  # fmt: skip
    later = datetime.datetime.now(datetime.UTC).timestamp() + 3 * 3600
    swept = run("--now", str(later), "down", "--expired", "--provider", "aws")
    assert swept.returncode == 0, swept.stderr
    assert what_is_left(aws, pool) == {}
    unknown = run("down", pool, "--provider", "aws")
    assert unknown.returncode == 1 and "Traceback" not in unknown.stderr
    assert unknown.stderr.strip().startswith(
        f"skyward: no resources of pool {pool!r} on aws, and no pool of that name recorded here (recorded: "
    )


def test_doctor_checks_aws_credentials_with_one_read(aws: AwsWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    result = runner.invoke(
        make_app(configs={"aws": AWS(client_address=CLIENT_ADDRESS)}), ["doctor", "--json", "-p", "aws"]
    )
    report = json.loads(result.stdout)
    (entry,) = report["providers"]
    assert entry["credentials_valid"] is True and entry["client_address"] == CLIENT_CIDR
    assert result.exit_code == 0, result.output
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    none = runner.invoke(make_app(), ["ls", "-p", "aws"])
    assert none.exit_code == 2 and "Traceback" not in none.output
    assert none.stderr.strip().splitlines()[-1].startswith("skyward: no provider has usable credentials (aws: ")


def test_offers_lists_aws_t4_types_cheapest_first(aws: AwsWorld) -> None:
    result = runner.invoke(make_app(), ["offers", "T4", "--nodes", "2", "--json", "-p", "aws"])
    assert result.exit_code == 0, result.output
    offers = json.loads(result.stdout)["offers"]
    assert offers and all(o["accelerator"].startswith("T4") and o["provider"] == "aws" for o in offers)
    prices = [o["on_demand_hourly"] for o in offers]
    assert prices == sorted(prices)
    assert offers[0]["pool_hourly"] == pytest.approx(2 * offers[0]["on_demand_hourly"])


AWS_CLIENT = """
import pathlib, sys, time
import skyward as sky
from skyward_aws.endpoints import NodeAddress


class FileEndpoints:
    '''The test writes each emulated instance's loopback endpoint into a file.'''

    def __init__(self, folder):
        self.folder = pathlib.Path(folder)

    def resolve(self, instance):
        path = self.folder / instance["InstanceId"]
        deadline = time.monotonic() + 60
        while not path.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        ip, endpoint = path.read_text().split()
        return NodeAddress(endpoint=endpoint, ip=ip, private_ip=ip)

    def close(self):
        return None


config = sky.AWS(
    client_address="203.0.113.7", bootstrap_timeout=120, grace_period=60.0, endpoint_resolver=FileEndpoints(sys.argv[1])
)
pool = sky.ComputePool(provider=config, nodes=1, accelerator="T4", spot="never", timeout=60, display="quiet")
pool.open()
print("OPEN", *[n.instance_id for n in pool.nodes], flush=True)
time.sleep(3600)  # the test kills this process: a laptop closing mid-pool
"""


@pytest.mark.slow
def test_a_killed_clients_instance_and_group_are_listed_and_down_expired_removes_them(
    aws: AwsWorld, emulated: Emulation, tmp_path: Path
) -> None:
    """Cost safety on AWS: the client is SIGKILLed once its node is up; ``skyward ls``
    shows the instance and its security group, and ``down --expired`` (the clock past
    the expiry tag) leaves nothing."""
    stop = threading.Event()

    def publish() -> None:  # the child's endpoint seam reads these
        while not stop.is_set():
            for instance_id in list(emulated.moto.user_data):
                path = tmp_path / instance_id
                if not path.exists():
                    endpoint = emulated.harness.endpoint_for(instance_id)
                    path.write_text(f"{endpoint.ip} {endpoint.endpoint}")
            stop.wait(0.05)

    publisher = threading.Thread(target=publish, daemon=True)
    publisher.start()
    try:
        instance_id = vanish_client(AWS_CLIENT, str(tmp_path))
    finally:
        stop.set()
        publisher.join()
    (node,) = aws.ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"]
    tags = {t["Key"]: t["Value"] for t in node["Tags"]}
    pool = tags["skyward:pool-id"]
    assert node["State"]["Name"] == "running" and emulated.harness.is_running(instance_id)
    listed = runner.invoke(make_app(), ["ls", "--json", "-p", "aws"])
    assert listed.exit_code == 0, listed.output
    mine = [r for r in json.loads(listed.stdout)["resources"] if r["pool_id"] == pool]
    assert sorted(r["kind"] for r in mine) == ["instance", "security-group"]
    expires = parse_expiry(tags["skyward:expires-at"])
    assert expires is not None
    down = runner.invoke(make_app(clock=lambda: expires + 1), ["down", "--expired", "-p", "aws"])
    assert down.exit_code == 0, down.output
    assert "aws: found 2, removed 2, left 0" in down.stdout
    assert aws.states(pool) == {instance_id: "terminated"} and aws.security_groups(pool) == []
    emulated.moto.wait_stopped([instance_id])


def test_credentials_that_may_not_read_iam_still_get_the_ec2_sweep(aws: AwsWorld) -> None:
    dead = pool_id()
    made = left_by_a_dead_pool(aws, dead, expired=True, instance=None)
    iam_listings = ("ListRoles", "ListInstanceProfiles")
    aws.proxy.rules.append(lambda a, _p, _n: (403, "AccessDenied", "not allowed") if a in iam_listings else None)
    events: list[Any] = []
    driver = start_a_pool(events)
    driver.teardown()
    assert what_is_left(aws, dead) == {"roles": [f"skyward-{dead}"], "profiles": [f"skyward-{dead}"]}
    notices = [e.message for e in events if isinstance(e, Notice)]
    assert any("(IAM)" in m for m in notices)
    assert any(made["group"] in m and "expired" in m for m in notices)
    aws.proxy.rules.clear()
    assert runner.invoke(make_app(), ["down", dead, "--provider", "aws"]).exit_code == 0


def test_spot_offers_carry_ec2s_spot_price_in_few_calls(aws: AwsWorld) -> None:
    before = len(aws.proxy.actions("DescribeSpotPriceHistory"))
    result = runner.invoke(make_app(), ["offers", "T4", "--spot", "--json", "-p", "aws"])
    assert result.exit_code == 0, result.output
    offers = json.loads(result.stdout)["offers"]
    assert offers and all(o["spot_hourly"] is not None and o["spot_hourly"] > 0 for o in offers)
    assert [o["spot_hourly"] for o in offers] == sorted(o["spot_hourly"] for o in offers)
    assert len(aws.proxy.actions("DescribeSpotPriceHistory")) - before == 1  # one batch, not one per type
