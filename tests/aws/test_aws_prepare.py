"""What prepare() decides and makes, against moto: the instance type, prices, the
machine image, the security group and the IAM role; and the errors before anything."""

from __future__ import annotations

from typing import Any

import pytest

import skyward
from skyward import Accelerator, ComputePool
from skyward.errors import ConfigurationError
from skyward_aws import AWS, S3Volume
from skyward_aws.driver import AWSDriver
from skyward_aws.iam import SSM_POLICY

from .conftest import CLIENT_ADDRESS, CLIENT_CIDR, AwsWorld
from .listeners import Listeners
from .specs import make_driver, make_spec

pytestmark = pytest.mark.cloud


def _prepared(provider: AWS, **options: Any) -> tuple[AWSDriver, Any, list[Any]]:
    spec = make_spec(provider, **options)
    driver = make_driver(provider, [])
    driver.validate(spec)
    events: list[Any] = []
    driver.prepare(spec, events.append)
    return driver, spec, events


def _plain(provider: AWS, **options: Any) -> tuple[AWSDriver, Any]:
    """plan() only: read-only calls, nothing made."""
    spec = make_spec(provider, **options)
    driver = make_driver(provider, [])
    driver.plan(spec, lambda e: None)
    return driver, spec


def test_security_group_opens_agent_ports_to_the_client_only(aws: AwsWorld) -> None:
    driver, spec, _ = _prepared(AWS(client_address=CLIENT_ADDRESS), accelerator="T4", concurrency=2)
    try:
        (group,) = aws.security_groups(spec.pool_id)
        assert group["GroupName"] == f"skyward-{spec.pool_id}"
        rules = group["IpPermissions"]
        assert len(rules) == 2
        client = next(r for r in rules if r["IpProtocol"] == "tcp")
        # the agent's port, one per worker (concurrency=2) after it, then each worker's data port
        assert (client["FromPort"], client["ToPort"]) == (16789, 16793)
        assert [r["CidrIp"] for r in client["IpRanges"]] == [CLIENT_CIDR]
        assert client.get("UserIdGroupPairs", []) == [] and client.get("Ipv6Ranges", []) == []
        nodes = next(r for r in rules if r["IpProtocol"] == "-1")
        assert [p["GroupId"] for p in nodes["UserIdGroupPairs"]] == [group["GroupId"]]
        assert nodes.get("IpRanges", []) == []
        every_range = [r.get("CidrIp") for rule in rules for r in rule.get("IpRanges", [])]
        assert "0.0.0.0/0" not in every_range
        assert not [r for rule in rules for r in rule.get("Ipv6Ranges", []) if r.get("CidrIpv6") == "::/0"]
    finally:
        driver.teardown()
    assert aws.security_groups(spec.pool_id) == []


def test_client_address_is_discovered_when_not_given(aws: AwsWorld) -> None:
    provider = AWS()
    spec = make_spec(provider, accelerator="T4")
    driver = AWSDriver(provider, discover_ip=lambda: "198.51.100.23/32", sleep=lambda s: None)
    driver.prepare(spec, lambda e: None)
    try:
        (group,) = aws.security_groups(spec.pool_id)
        ranges = [r["CidrIp"] for rule in group["IpPermissions"] for r in rule.get("IpRanges", [])]
        assert ranges == ["198.51.100.23/32"]
    finally:
        driver.teardown()


def test_reap_false_skips_the_sweep_of_earlier_pools_leftovers(aws: AwsWorld) -> None:
    swept = ("DescribeKeyPairs", "ListRoles")  # what only the sweep asks for
    driver, _, _ = _prepared(AWS(client_address=CLIENT_ADDRESS, reap=False), accelerator="T4", spot="never")
    driver.teardown()
    assert [a for a in swept if aws.proxy.actions(a)] == []
    driver, _, _ = _prepared(AWS(client_address=CLIENT_ADDRESS), accelerator="T4", spot="never")
    driver.teardown()
    assert [a for a in swept if aws.proxy.actions(a)] == list(swept)


def test_failed_discovery_stops_before_anything_is_made(aws: AwsWorld) -> None:
    def discover() -> str:
        raise ConfigurationError("could not discover this machine's public IP address; pass AWS(client_cidr=...)")

    provider = AWS()
    spec = make_spec(provider, accelerator="T4")
    driver = AWSDriver(provider, discover_ip=discover)
    with pytest.raises(ConfigurationError, match="client_cidr"):
        driver.prepare(spec, lambda e: None)
    assert aws.security_groups(spec.pool_id) == []
    assert aws.proxy.actions("CreateSecurityGroup") == []


@pytest.mark.parametrize(
    ("accelerator", "machine", "image"),
    [
        ("T4", "g4dn.xlarge", "ami-0d1a000000000000b"),  # the DLAMI the SSM parameter names
        ("A100", "p4d.24xlarge", "ami-0d1a000000000000b"),
        ("A100-80GB", "p4de.24xlarge", "ami-0d1a000000000000b"),
        ("H100:8", "p5.48xlarge", "ami-0d1a000000000000b"),
        ("T4:4", "g4dn.12xlarge", "ami-0d1a000000000000b"),
        ("L4", "g6.xlarge", "ami-0d1a000000000000b"),
        ("T4G", "g5g.xlarge", "ami-0d1a000000000000c"),  # arm64
        (Accelerator.AWS.Trainium(version=1), "trn1.2xlarge", "ami-0e0e000000000000b"),  # newest Neuron image by name
        (Accelerator.AWS.Inferentia(version=2), "inf2.xlarge", "ami-0e0e000000000000b"),
        ("Inferentia", "inf1.xlarge", "ami-0e0e000000000000b"),
        (None, "c5.large", "ami-0b0b000000000000a"),  # CPU-only: Ubuntu, at least 2 vCPU / 4 GiB, cheapest
    ],
)
def test_accelerator_picks_instance_and_image(aws: AwsWorld, accelerator: Any, machine: str, image: str) -> None:
    driver, _ = _plain(AWS(client_address=CLIENT_ADDRESS), accelerator=accelerator, spot="never")
    assert driver.offer is not None and driver.image is not None
    assert driver.offer.name == machine
    assert driver.image.image_id == image
    assert aws.proxy.actions("CreateSecurityGroup") == [] and aws.proxy.actions("RunInstances") == []


def test_image_comes_from_ssm_then_describe_images(aws: AwsWorld) -> None:
    gpu, _ = _plain(AWS(client_address=CLIENT_ADDRESS), accelerator="T4", spot="never")
    assert gpu.image is not None and gpu.image.how.startswith("ssm:/aws/service/deeplearning/")
    neuron, _ = _plain(AWS(client_address=CLIENT_ADDRESS), accelerator="Trainium", spot="never")
    assert neuron.image is not None
    assert neuron.image.how == "describe-images:Deep Learning AMI Neuron (Ubuntu 22.04) 20250210"
    chosen, _ = _plain(AWS(client_address=CLIENT_ADDRESS, ami="ami-0123456789abcdef0"), accelerator="T4", spot="never")
    assert chosen.image is not None and chosen.image.how == "explicit"


def test_cpu_memory_per_worker_and_machine_override(aws: AwsWorld) -> None:
    driver, _ = _plain(AWS(client_address=CLIENT_ADDRESS), cpu=4, memory="16GB", concurrency=2, spot="never")
    assert driver.offer is not None
    # 8 vCPUs and 32 GB per node: the smallest such type among the CPU families
    assert (driver.offer.instance.vcpus, driver.offer.instance.memory) >= (8, 32 * 10**9)
    assert driver.offer.name == "m5.2xlarge"  # equal sizes: the cheapest, then the name
    override, _ = _plain(AWS(client_address=CLIENT_ADDRESS), machine="g5.2xlarge", spot="never")
    assert override.offer is not None and override.offer.name == "g5.2xlarge"


def test_prices_come_from_the_catalog_and_spot_history(aws: AwsWorld) -> None:
    history = aws.ec2.describe_spot_price_history(InstanceTypes=["g4dn.xlarge"])["SpotPriceHistory"]
    moto_price = min(float(h["SpotPrice"]) for h in history)
    driver, _ = _plain(AWS(client_address=CLIENT_ADDRESS), accelerator="T4", spot="always")
    assert driver.offer is not None
    assert driver.offer.instance.on_demand_price == 0.526
    assert driver.offer.instance.spot_price == moto_price
    assert aws.proxy.actions("DescribeSpotPriceHistory")


def test_unknown_machine_and_unoffered_accelerator_fail_early(aws: AwsWorld) -> None:
    # moto, like AWS, offers trn2 in a few regions only, not in us-east-1's zones
    with pytest.raises(ConfigurationError, match=r"trn2.48xlarge .*not available"):
        _plain(AWS(client_address=CLIENT_ADDRESS), accelerator=Accelerator.AWS.Trainium(version=2), spot="never")
    with pytest.raises(ConfigurationError, match="not an EC2 instance type"):
        _plain(AWS(client_address=CLIENT_ADDRESS), machine="zz9.huge")
    with pytest.raises(ConfigurationError, match="AWS offers no instance with MI300X"):
        ComputePool(provider=AWS(client_address=CLIENT_ADDRESS), accelerator="MI300X", display="quiet")
    assert aws.proxy.actions("CreateSecurityGroup") == []


def test_a_mig_accelerator_picks_the_instance_with_its_gpus_and_a_worker_per_partition(aws: AwsWorld) -> None:
    accelerator = Accelerator.NVIDIA.A100(count=8, memory="40GB", mig="3g.20gb")
    driver, spec = _plain(AWS(client_address=CLIENT_ADDRESS), accelerator=accelerator, spot="never")
    assert driver.offer.instance.name == "p4d.24xlarge"
    assert spec.workers_per_node == 16  # 8 GPUs x 2 partitions


def test_use_ssm_opens_nothing_and_gives_nodes_the_ssm_role(aws: AwsWorld) -> None:
    listeners = Listeners()
    provider = AWS(use_ssm=True, endpoint_resolver=listeners)
    driver, spec, _ = _prepared(provider, accelerator="T4", spot="never")
    try:
        (group,) = aws.security_groups(spec.pool_id)
        assert [r["IpProtocol"] for r in group["IpPermissions"]] == ["-1"]  # node to node only
        assert driver.role is not None
        attached = aws.iam.list_attached_role_policies(RoleName=driver.role.name)["AttachedPolicies"]
        assert [p["PolicyName"] for p in attached] == [SSM_POLICY]
        handles = driver.launch(spec, _user_data, lambda e: None)
        (instance,) = aws.instances(spec.pool_id)
        assert instance["IamInstanceProfile"]["Arn"] == driver.role.arn
        # a public address for the way out only (packages, SSM): nothing comes in through it
        (call,) = aws.proxy.actions("RunInstances")
        assert call.params["NetworkInterface.1.AssociatePublicIpAddress"] == "true"
        driver.terminate(handles)
    finally:
        driver.teardown()
    assert aws.roles(spec.pool_id) == []
    assert aws.instance_profiles(spec.pool_id) == []


def test_use_ssm_needs_the_session_manager_plugin(aws: AwsWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(ConfigurationError, match="session-manager-plugin"):
        ComputePool(provider=AWS(use_ssm=True), display="quiet")


def test_s3_volume_role_is_scoped_to_bucket_and_prefix(aws: AwsWorld) -> None:
    import json

    volume = skyward.S3Volume(mount_path="/data", bucket="my-bucket", prefix="datasets", read_only=True)
    assert isinstance(volume, S3Volume) and volume.prefix == "datasets/"
    driver, spec, _ = _prepared(AWS(client_address=CLIENT_ADDRESS), volume=[volume], spot="never")
    try:
        assert driver.role is not None
        document = aws.iam.get_role_policy(RoleName=driver.role.name, PolicyName="skyward-volumes")["PolicyDocument"]
        if isinstance(document, str):
            document = json.loads(document)
        statements = document["Statement"]
        assert statements[0]["Action"] == ["s3:ListBucket"]
        assert statements[0]["Condition"] == {"StringLike": {"s3:prefix": ["datasets/*"]}}
        assert statements[1] == {
            "Effect": "Allow",
            "Action": ["s3:GetObject"],
            "Resource": "arn:aws:s3:::my-bucket/datasets/*",
        }
        tags = {t["Key"]: t["Value"] for t in aws.iam.get_role(RoleName=driver.role.name)["Role"].get("Tags", [])}
        assert tags["skyward:pool-id"] == spec.pool_id
    finally:
        driver.teardown()
    assert aws.roles(spec.pool_id) == []


def test_missing_credentials_say_what_to_do(aws: AwsWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    with pytest.raises(ConfigurationError) as raised:
        ComputePool(provider=AWS(client_address=CLIENT_ADDRESS), accelerator="T4", display="quiet")
    message = str(raised.value)
    assert "no AWS credentials found" in message and "aws configure" in message and "AWS_PROFILE" in message
    assert aws.proxy.calls == []  # nothing was asked of AWS


def _user_data(
    node: int, bind: str, context: Any, *, run_dir: str, visible_devices: Any = (), instance_id: str = ""
) -> str:
    return "#!/usr/bin/env bash\necho hi\n"
