"""Pure logic of skyward-aws: no moto, no network beyond loopback servers of our own."""

from __future__ import annotations

import gzip
import ipaddress
import json
import math
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from skyward.accelerators import current_catalog
from skyward.agent.config import node_ports
from skyward.errors import ConfigurationError, ProvisioningError
from skyward.spot import Market, Spot, SpotAlways, SpotIfAvailable, SpotNever, SpotPercent, plan_markets
from skyward_aws import AWS, S3Volume
from skyward_aws.ami import ImageKind, image_kind
from skyward_aws.client_ip import discover_public_ip
from skyward_aws.config import parse_client_cidr
from skyward_aws.driver import USER_DATA_LIMIT, encode_user_data
from skyward_aws.endpoints import PublicAddress, plugin_command, port_forwarding_parameters
from skyward_aws.families import catalog_entry_for, devices_of, families_for
from skyward_aws.iam import plan_role
from skyward_aws.infra import expiry, ingress_permissions, pool_tags
from skyward_aws.interruption import MetadataClient, parse_instance_action, parse_rebalance, watch
from skyward_aws.launch import Refusal, classify, run_instances_request
from skyward_aws.pricing import on_demand_price_of, shipped_catalog
from skyward_aws.session import NO_CREDENTIALS, explain, require_credentials
from skyward_aws.volumes import mount_script, policy_statements

from .emulator import FakeIMDS

# -- configuration ------------------------------------------------------------------------


def test_client_cidr_is_normalised_and_never_the_internet() -> None:
    assert parse_client_cidr("203.0.113.7") == "203.0.113.7/32"
    assert parse_client_cidr("203.0.113.9/24") == "203.0.113.0/24"
    assert parse_client_cidr("2001:db8::1") == "2001:db8::1/128"
    for wide in ("0.0.0.0/0", "10.0.0.0/7", "::/0", "2001:db8::/16"):
        with pytest.raises(ConfigurationError, match="never opens it to the internet"):
            parse_client_cidr(wide)
    with pytest.raises(ConfigurationError, match="not an IP address"):
        parse_client_cidr("my-laptop")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"region": "us-east"}, "not an AWS region"),
        ({"use_ssm": "yes"}, "True or False"),
        ({"client_cidr": "0.0.0.0/0"}, "internet"),
        ({"bootstrap_timeout": 0}, "bootstrap_timeout"),
        ({"ami": "ubuntu"}, "not an image id"),
        ({"subnet_ids": "subnet-0abc1234"}, "list of subnet ids"),
        ({"subnet_ids": ["sg-123"]}, "not a subnet id"),
        ({"instance_profile": "bad name!"}, "instance profile"),
        ({"endpoint_resolver": object()}, "resolve"),
    ],
)
@pytest.mark.filterwarnings("ignore:AWS\\(client_cidr=:DeprecationWarning")
def test_bad_provider_settings_are_refused(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        AWS(**options)


def test_defaults_match_the_seed() -> None:
    provider = AWS()
    assert (provider.region, provider.use_ssm) == ("us-east-1", False)
    with pytest.warns(DeprecationWarning):
        assert AWS(region="eu-west-1", client_cidr="198.51.100.1") == AWS(
            region="eu-west-1", client_cidr="198.51.100.1/32"
        )


# -- spot strategies ----------------------------------------------------------------------


@given(nodes=st.integers(1, 64), fraction=st.floats(0.01, 1.0))
def test_percent_puts_at_least_its_share_on_spot_and_the_head_on_demand(nodes: int, fraction: float) -> None:
    plans = plan_markets(SpotPercent(fraction), nodes)
    spot = [p for p in plans if p.market is Market.SPOT]
    assert len(spot) >= fraction * nodes - 1e-9
    assert len(spot) == min(nodes, math.ceil(round(fraction * nodes, 9)))
    assert [p.node for p in plans] == list(range(nodes))
    # on-demand nodes first: spot nodes are the last ones
    assert [p.market for p in plans] == sorted((p.market for p in plans), key=lambda m: m is Market.SPOT)
    if len(spot) < nodes:
        assert plans[0].market is Market.ON_DEMAND
    assert not any(p.fallback for p in plans)


@given(nodes=st.integers(1, 64), retries=st.integers(0, 20), interval=st.floats(0, 60))
def test_always_and_if_available_and_never(nodes: int, retries: int, interval: float) -> None:
    always = plan_markets(SpotAlways(retries, interval), nodes)
    assert all(p.market is Market.SPOT and p.retries == retries and p.interval == interval for p in always)
    assert not any(p.fallback for p in always)
    maybe = plan_markets(SpotIfAvailable(), nodes)
    assert all(p.market is Market.SPOT and p.fallback and p.retries == 0 for p in maybe)
    assert all(p.market is Market.ON_DEMAND for p in plan_markets(SpotNever(), nodes))


def test_errors_are_classified() -> None:
    assert classify("InsufficientInstanceCapacity", "") is Refusal.CAPACITY
    assert classify("SpotMaxPriceTooLow", "") is Refusal.CAPACITY
    assert classify("Unsupported", "not supported in your requested Availability Zone") is Refusal.ZONE
    assert (
        classify(
            "InvalidParameterValue",
            "Value (skyward-x) for parameter iamInstanceProfile.name is invalid. Invalid IAM Instance Profile name",
        )
        is Refusal.PROPAGATING
    )
    assert classify("UnauthorizedOperation", "") is Refusal.FATAL
    assert classify("InvalidParameterValue", "bad image") is Refusal.FATAL


def test_run_instances_request() -> None:
    tags = pool_tags("sky-1", "2030-01-01T00:00:00Z")
    spot = run_instances_request(
        image_id="ami-1", instance_type="g4dn.xlarge", user_data="#!/bin/bash\n", subnet_id="subnet-1",
        group_id="sg-1", market=Market.SPOT, tags=tags, public_ip=True, instance_profile_arn="arn:profile",
    )  # fmt: skip
    assert spot["InstanceInitiatedShutdownBehavior"] == "terminate"
    assert spot["MetadataOptions"]["HttpTokens"] == "required"
    assert spot["InstanceMarketOptions"]["MarketType"] == "spot"
    assert spot["IamInstanceProfile"] == {"Arn": "arn:profile"}
    assert {t["ResourceType"] for t in spot["TagSpecifications"]} >= {"instance", "volume", "spot-instances-request"}
    assert spot["NetworkInterfaces"][0]["Groups"] == ["sg-1"]
    on_demand = run_instances_request(
        image_id="ami-1", instance_type="g4dn.xlarge", user_data="#!/bin/bash\n", subnet_id="subnet-1",
        group_id="sg-1", market=Market.ON_DEMAND, tags=tags, public_ip=False, instance_profile_arn=None,
    )  # fmt: skip
    assert "InstanceMarketOptions" not in on_demand and "IamInstanceProfile" not in on_demand
    assert on_demand["NetworkInterfaces"][0]["AssociatePublicIpAddress"] is False


# -- security group and tags ----------------------------------------------------------------


@given(
    address=st.ip_addresses(v=4).filter(lambda a: not a.is_unspecified),
    prefix=st.integers(8, 32),
    workers=st.integers(1, 16),
)
def test_ingress_is_the_client_and_the_pool_only(address: ipaddress.IPv4Address, prefix: int, workers: int) -> None:
    cidr = parse_client_cidr(f"{address}/{prefix}")
    rules = ingress_permissions("sg-1", cidr, node_ports(16789, workers))
    assert len(rules) == 2
    self_rule, client = rules
    assert self_rule["UserIdGroupPairs"][0]["GroupId"] == "sg-1" and "IpRanges" not in self_rule
    assert (client["FromPort"], client["ToPort"]) == (16789, 16789 + 2 * workers)  # agent, workers, data ports
    assert [r["CidrIp"] for r in client["IpRanges"]] == [cidr] != ["0.0.0.0/0"]


def test_ssm_ingress_opens_nothing_outside() -> None:
    assert ingress_permissions("sg-1", None, (16789, 16790)) == [
        {
            "IpProtocol": "-1",
            "UserIdGroupPairs": [{"GroupId": "sg-1", "Description": "skyward: between the pool's nodes"}],
        }
    ]


def test_tags_and_expiry() -> None:
    import datetime

    now = datetime.datetime(2030, 1, 1, 12, 0, tzinfo=datetime.UTC)
    assert expiry(now, 3600) == "2030-01-01T13:00:00Z"
    tags = {t["Key"]: t["Value"] for t in pool_tags("sky-1", "2030-01-01T13:00:00Z", name="skyward-sky-1")}
    assert tags == {
        "skyward:pool-id": "sky-1",
        "skyward:expires-at": "2030-01-01T13:00:00Z",
        "skyward:managed-by": "skyward",
        "Name": "skyward-sky-1",
    }


# -- instance types, prices, images -----------------------------------------------------------


def _moto_types() -> dict[str, Any]:
    import moto

    path = Path(moto.__file__).parent / "ec2" / "resources" / "instance_types.json.gz"
    return dict(json.loads(gzip.decompress(path.read_bytes())))


@pytest.mark.parametrize(
    ("instance_type", "variant", "count", "kind"),
    [
        ("g4dn.xlarge", "T4-16GB", 1, ImageKind.NVIDIA),
        ("g6.xlarge", "L4-24GB", 1, ImageKind.NVIDIA),  # EC2 reports 22,888 MiB
        ("g6e.xlarge", "L40S-48GB", 1, ImageKind.NVIDIA),
        ("p4d.24xlarge", "A100-40GB", 8, ImageKind.NVIDIA),
        ("p4de.24xlarge", "A100-80GB", 8, ImageKind.NVIDIA),
        ("p5.48xlarge", "H100-80GB-SXM", 8, ImageKind.NVIDIA),
        ("p5e.48xlarge", "H200-141GB", 8, ImageKind.NVIDIA),
        ("g5g.xlarge", "T4G-16GB", 1, ImageKind.NVIDIA),
        ("g4ad.xlarge", "RadeonPro-V520-8GB", 1, ImageKind.PLAIN),
        ("trn1.2xlarge", "Trainium1-32GB", 1, ImageKind.NEURON),
        ("trn2.48xlarge", "Trainium2-96GB", 16, ImageKind.NEURON),
        ("inf1.xlarge", "Inferentia1-8GB", 1, ImageKind.NEURON),
        ("inf2.xlarge", "Inferentia2-32GB", 1, ImageKind.NEURON),
        ("c7i.large", None, 0, ImageKind.PLAIN),
    ],
)
def test_ec2_devices_map_to_the_catalog(instance_type: str, variant: str | None, count: int, kind: ImageKind) -> None:
    description = _moto_types()[instance_type]
    devices = devices_of(description)
    if variant is None:
        assert devices is None
        assert image_kind(None) is kind
        return
    assert devices is not None
    _vendor, name, found, memory = devices
    entry = catalog_entry_for(name, memory, current_catalog())
    assert entry is not None and entry.variant == variant and found == count
    assert image_kind("AWS" if entry.vendor == "AWS" else entry.vendor) is kind


def test_every_family_the_provider_names_has_prices_and_exists() -> None:
    from skyward_aws.families import ACCELERATOR_FAMILIES, CPU_FAMILIES

    prices = shipped_catalog().regions["us-east-1"]
    known = {name.split(".")[0] for name in _moto_types()}
    for family in (*CPU_FAMILIES, *(f for fams in ACCELERATOR_FAMILIES.values() for f in fams)):
        assert family in known or family == "p3", family  # moto's data lacks the V100 p3 family
        assert any(name.startswith(family + ".") for name in prices), family


def test_unoffered_accelerators_say_what_aws_has() -> None:
    from skyward.accelerators import parse_accelerator

    assert families_for(parse_accelerator("A100")) == ("p4d", "p4de")
    with pytest.raises(ConfigurationError, match="AWS offers no instance with MI300X"):
        families_for(parse_accelerator("MI300X"))


def test_price_catalog_names_its_source_and_date() -> None:
    catalog = shipped_catalog()
    assert "aws.amazon.com/ec2/pricing" in catalog.source and catalog.compiled
    assert catalog.price("us-east-1", "g4dn.xlarge") == 0.526
    price, note = catalog.estimate("eu-west-1", "g4dn.xlarge")
    assert price == 0.526 and note is not None and "eu-west-1" in note


def test_price_list_documents_are_read() -> None:
    document = {
        "product": {"attributes": {"instanceType": "g5.xlarge", "operatingSystem": "Linux"}},
        "terms": {"OnDemand": {"X.JRTCKXETXF": {"priceDimensions": {"X.JRTCKXETXF.6YS6EN2CT7": {
            "unit": "Hrs", "pricePerUnit": {"USD": "1.0060000000"}}}}}},
    }  # fmt: skip
    assert on_demand_price_of(json.dumps(document)) == ("g5.xlarge", 1.006)
    document["terms"]["OnDemand"]["X.JRTCKXETXF"]["priceDimensions"]["X.JRTCKXETXF.6YS6EN2CT7"]["unit"] = "Quantity"  # type: ignore[index]
    assert on_demand_price_of(document) is None


# -- volumes and IAM ----------------------------------------------------------------------------


def test_s3_volume_validation() -> None:
    assert S3Volume("/data/", "my-bucket", "a/b").prefix == "a/b/"
    assert S3Volume("/data/", "my-bucket").mount_path == "/data"
    for bad in ({"mount_path": "data"}, {"mount_path": "/"}, {"mount_path": "/etc"}, {"bucket": "s3://b"},
                {"bucket": "My_Bucket"}, {"prefix": "/abs"}, {"read_only": "yes"}):  # fmt: skip
        options: dict[str, Any] = {"mount_path": "/data", "bucket": "my-bucket", **bad}
        with pytest.raises(ConfigurationError):
            S3Volume(**options)


def test_mount_script_honours_read_only() -> None:
    reading = mount_script(S3Volume("/data", "my-bucket", "datasets/", read_only=True))
    assert "mount-s3 --allow-other --read-only --prefix datasets/ my-bucket /data" in reading
    assert "--allow-delete" not in reading and "mountpoint-s3-release" in reading
    writing = mount_script(S3Volume("/out", "my-bucket", read_only=False))
    assert "--read-only" not in writing and "--allow-overwrite --allow-delete" in writing
    assert "AWS_ACCESS_KEY" not in reading + writing


def test_volume_policies_are_scoped() -> None:
    read = policy_statements(S3Volume("/d", "bk1", "p/"), "us-east-1")
    assert read[1] == {"Effect": "Allow", "Action": ["s3:GetObject"], "Resource": "arn:aws:s3:::bk1/p/*"}
    write = policy_statements(S3Volume("/d", "bk1", read_only=False), "cn-north-1")
    assert "s3:PutObject" in write[1]["Action"] and write[1]["Resource"] == "arn:aws-cn:s3:::bk1/*"
    assert "Condition" not in write[0]
    assert not plan_role([], False, "aws").needed
    assert plan_role([], True, "aws").managed_policies == ("arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore",)


# -- user-data -----------------------------------------------------------------------------------


def test_big_scripts_are_gzipped_and_too_big_ones_refused() -> None:
    script = "#!/usr/bin/env bash\nset -e\n# --- ttl\nshutdown -h +2\n"
    assert encode_user_data(script) == script
    big = "#!/bin/bash\n" + "echo 'a fairly repetitive line'\n" * 2000
    packed = encode_user_data(big)
    assert isinstance(packed, bytes) and len(packed) <= USER_DATA_LIMIT and gzip.decompress(packed).decode() == big
    import os

    noise = "#!/bin/bash\n# " + os.urandom(40_000).hex() + "\n"
    with pytest.raises(ProvisioningError, match="user-data limit"):
        encode_user_data(noise)


# -- endpoints, credentials, client address ---------------------------------------------------------


def test_public_address_and_ssm_plugin_command() -> None:
    address = PublicAddress().resolve(
        {"InstanceId": "i-1", "PublicIpAddress": "54.1.2.3", "PrivateIpAddress": "172.31.0.4"}
    )
    assert address.endpoint == "tcp://54.1.2.3:16789" and address.private_ip == "172.31.0.4"
    inside = PublicAddress().resolve({"InstanceId": "i-1", "PrivateIpAddress": "172.31.0.4"})
    assert inside.endpoint == "tcp://172.31.0.4:16789"
    with pytest.raises(ProvisioningError, match="no address"):
        PublicAddress().resolve({"InstanceId": "i-1"})
    parameters = port_forwarding_parameters(16789, 40001)
    session = {"SessionId": "s-1", "StreamUrl": "wss://x", "TokenValue": "t", "ResponseMetadata": {}}
    command = plugin_command("/usr/bin/session-manager-plugin", session, "us-east-1", "i-1", parameters, "https://ssm")
    assert command[0] == "/usr/bin/session-manager-plugin" and command[2:5] == ["us-east-1", "StartSession", ""]
    assert json.loads(command[1]) == {"SessionId": "s-1", "StreamUrl": "wss://x", "TokenValue": "t"}
    assert json.loads(command[5]) == {
        "Target": "i-1",
        "DocumentName": "AWS-StartPortForwardingSession",
        "Parameters": {"portNumber": ["16789"], "localPortNumber": ["40001"]},
    }


def test_credential_errors_say_what_to_do() -> None:
    from botocore.exceptions import ClientError, NoCredentialsError

    class NoCredentials:
        def get_credentials(self) -> None:
            return None

    with pytest.raises(ConfigurationError, match="aws configure"):
        require_credentials(NoCredentials())
    assert "aws configure" in NO_CREDENTIALS
    assert isinstance(explain(NoCredentialsError(), "x"), ConfigurationError)
    expired = ClientError(
        {"Error": {"Code": "ExpiredToken", "Message": "The security token included in the request is expired"}},
        "RunInstances",
    )
    assert "expired" in str(explain(expired, "launching")) and isinstance(explain(expired, "x"), ConfigurationError)
    other = ClientError({"Error": {"Code": "VcpuLimitExceeded", "Message": "quota"}}, "RunInstances")
    assert isinstance(explain(other, "x"), ProvisioningError)


class _Answer(BaseHTTPRequestHandler):
    body = b"203.0.113.99\n"

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: object) -> None:
        return None


def _serve(body: bytes) -> tuple[ThreadingHTTPServer, str]:
    handler = type("Handler", (_Answer,), {"body": body})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def test_public_ip_discovery() -> None:
    server, url = _serve(b"8.8.4.4\n")
    try:
        assert discover_public_ip(url) == "8.8.4.4/32"
    finally:
        server.shutdown()
    server, url = _serve(b"2001:db8::1\n")
    try:  # the rule every provider shares: one IPv4 address (nodes are reached over IPv4)
        with pytest.raises(ProvisioningError, match=r"IPv6.*client_address"):
            discover_public_ip(url)
    finally:
        server.shutdown()
    with pytest.raises(ProvisioningError, match=r"AWS\(client_address="):
        discover_public_ip("http://127.0.0.1:9/", timeout=1)


# -- interruption notices --------------------------------------------------------------------------


def test_instance_action_notices_are_parsed() -> None:
    notice = parse_instance_action('{"action": "terminate", "time": "2030-01-01T12:02:00Z"}')
    assert (notice.kind, notice.action, notice.time) == ("interruption", "terminate", "2030-01-01T12:02:00Z")
    for bad in ('{"action": "dance", "time": "x"}', '{"action": "stop"}', "[]"):
        with pytest.raises((ValueError, AttributeError)):
            parse_instance_action(bad)
    assert parse_rebalance('{"noticeTime": "2030-01-01T12:00:00Z"}').kind == "rebalance"


def test_watcher_reads_imdsv2_and_drops_the_notice(tmp_path: Path) -> None:
    imds = FakeIMDS("127.0.0.1", "i-1")
    try:
        client = MetadataClient(imds.url)
        assert watch(client, tmp_path, interval=0.01, max_polls=3) is None
        assert client.get("/latest/meta-data/instance-id") == "i-1"
        imds.instance_action = {"action": "terminate", "time": "2030-01-01T12:02:00Z"}
        client._token = "expired"  # a stale token is replaced after a 401
        notice = watch(client, tmp_path, interval=0.01, max_polls=3)
        assert notice is not None and notice.time == "2030-01-01T12:02:00Z"
        dropped = json.loads((tmp_path / "aws-spot-interruption.json").read_text())
        assert dropped["action"] == "terminate" and not list(tmp_path.glob(".*partial"))
        assert ("GET", "/latest/meta-data/spot/instance-action", False) in imds.requests
        assert all(valid for method, path, valid in imds.requests if method == "PUT")
    finally:
        imds.close()


def test_strategy_default_is_always() -> None:
    from skyward_aws.driver import DEFAULT_SPOT

    assert Spot.Always() == DEFAULT_SPOT
