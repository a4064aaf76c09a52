"""AWS on the cloud template: its settings are every cloud's, and its verbs answer the
template's questions (pure: fakes of boto3's session and clients, no moto)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from skyward.errors import CapacityError, ConfigurationError, ProvisioningError
from skyward.providers.cloud import CloudSettings, InstanceState, SpotCloudProvider
from skyward.spot import Market
from skyward_aws import AWS
from skyward_aws.driver import AWSDriver
from skyward_aws.launch import launch_in_zones


class _Paginator:
    def __init__(self, ec2: FakeEC2) -> None:
        self.ec2 = ec2

    def paginate(self, **request: Any) -> Iterator[dict[str, Any]]:
        self.ec2.requests.append(request)
        wanted = set(request["Filters"][0]["Values"])
        yield {"Reservations": [{"Instances": [i for i in self.ec2.listed if i["InstanceId"] in wanted]}]}


class FakeEC2:
    def __init__(self) -> None:
        self.listed: list[dict[str, Any]] = []
        self.requests: list[dict[str, Any]] = []

    def terminate_instances(self, InstanceIds: list[str]) -> dict[str, Any]:
        self.listed = [i for i in self.listed if i["InstanceId"] not in InstanceIds]
        return {}

    def get_paginator(self, operation: str) -> _Paginator:
        assert operation == "describe_instances"
        return _Paginator(self)


class FakeSession:
    def __init__(self, ec2: FakeEC2) -> None:
        self.ec2 = ec2

    def client(self, service: str, **options: Any) -> Any:
        return self.ec2 if service == "ec2" else object()


def test_aws_takes_the_settings_every_cloud_has_under_the_same_names() -> None:
    provider = AWS(provision_timeout=120, poll_interval=1.5, agent_port=20000, api_retries=3, reap=False)
    assert isinstance(provider, CloudSettings)
    assert (provider.provision_timeout, provider.poll_interval, provider.agent_port) == (120, 1.5, 20000)
    assert (provider.api_retries, provider.reap) == (3, False)
    with pytest.raises(ConfigurationError, match=r"AWS\(api_retries=0\)"):
        AWS(api_retries=0)
    with pytest.raises(ConfigurationError, match=r"AWS\(poll_interval=-1\)"):
        AWS(poll_interval=-1)


def test_client_cidr_still_works_and_says_it_is_deprecated() -> None:
    with pytest.warns(DeprecationWarning, match=r"AWS\(client_address=\.\.\.\)"):
        provider = AWS(client_cidr="198.51.100.0/24")
    assert provider.ingress_cidr == "198.51.100.0/24"
    assert AWS(client_address="198.51.100.7").ingress_cidr == "198.51.100.7/32"


def test_the_aws_driver_is_the_template_with_ec2_verbs() -> None:
    driver = AWSDriver(AWS())
    assert isinstance(driver, SpotCloudProvider)
    # the orchestration is the template's own, not a copy of it
    for verb in ("launch", "teardown", "replace", "reclaimed"):
        assert getattr(type(driver), verb) is getattr(SpotCloudProvider, verb), verb


def test_an_instance_ec2_does_not_list_yet_is_pending_and_one_that_vanished_is_gone() -> None:
    # EC2's API is eventually consistent: a just-launched instance may be missing from
    # DescribeInstances for a moment; one that was listed and no longer is has gone.
    ec2 = FakeEC2()
    driver = AWSDriver(AWS(), session=FakeSession(ec2))
    assert driver.describe(["i-new"])["i-new"].state is InstanceState.PENDING
    ec2.listed.append(
        {
            "InstanceId": "i-new",
            "State": {"Name": "running"},
            "PublicIpAddress": "198.51.100.4",
            "PrivateIpAddress": "172.31.0.4",
            "Placement": {"AvailabilityZone": "us-east-1b"},
            "InstanceLifecycle": "spot",
        }
    )
    driver.spot_prices = {"us-east-1a": 0.2, "us-east-1b": 0.3}
    running = driver.describe(["i-new"])["i-new"]
    assert (running.state, running.ip, running.private_ip) == (InstanceState.RUNNING, "198.51.100.4", "172.31.0.4")
    assert running.price_spot == 0.3  # the price of its own zone
    assert ("zone", "us-east-1b") in running.extra
    ec2.listed.clear()
    assert "i-new" not in driver.describe(["i-new"])  # gone: the template treats a missing id as deleted
    assert ec2.requests[0] == {"Filters": [{"Name": "instance-id", "Values": ["i-new"]}]}


@pytest.mark.parametrize(
    ("state", "expected"),
    [("pending", InstanceState.PENDING), ("stopped", InstanceState.STOPPED), ("shutting-down", InstanceState.GONE)],
)
def test_ec2_states_map_to_the_templates(state: str, expected: InstanceState) -> None:
    ec2 = FakeEC2()
    ec2.listed.append({"InstanceId": "i-1", "State": {"Name": state}, "StateReason": {"Message": "Spot reclaim"}})
    instance = AWSDriver(AWS(), session=FakeSession(ec2)).describe(["i-1"])["i-1"]
    assert instance.state is expected
    if expected is not InstanceState.PENDING:
        assert instance.status == f"{state}: Spot reclaim"


def _refusing(codes: dict[str, str]) -> Any:
    from botocore.exceptions import ClientError

    tried: list[str] = []

    def run(zone: str) -> dict[str, Any]:
        tried.append(zone)
        if zone in codes:
            raise ClientError({"Error": {"Code": codes[zone], "Message": "no"}}, "RunInstances")
        return {"InstanceId": f"i-{zone}"}

    run.tried = tried  # type: ignore[attr-defined]
    return run


def test_one_round_tries_every_zone_from_the_nodes_own_and_says_capacity_when_all_refuse() -> None:
    zones = ["a", "b", "c"]
    run = _refusing({"b": "InsufficientInstanceCapacity", "c": "Unsupported"})
    instance, zone = launch_in_zones(1, Market.SPOT, zones, run)
    assert instance == {"InstanceId": "i-a"}
    assert (zone, run.tried) == ("a", ["b", "c", "a"])  # node 1 starts at the second zone
    run = _refusing(dict.fromkeys(zones, "InsufficientInstanceCapacity"))
    with pytest.raises(CapacityError, match="node 0: no spot capacity over 3 zones") as raised:
        launch_in_zones(0, Market.SPOT, zones, run)
    assert (raised.value.node, raised.value.market) == (0, "spot")
    run = _refusing({"a": "InvalidParameterCombination"})
    with pytest.raises(ProvisioningError, match="node 0: EC2 refused") as fatal:
        launch_in_zones(0, Market.ON_DEMAND, zones, run)
    assert not isinstance(fatal.value, CapacityError)  # not retried: retrying will not help


def test_an_instance_terminated_before_ec2_listed_it_counts_as_gone() -> None:
    # a failed launch deletes what it created, perhaps before any describe saw it: once
    # TerminateInstances accepted the id, EC2 knows it, and its absence means gone
    driver = AWSDriver(AWS(), session=FakeSession(FakeEC2()))
    driver.delete(["i-early"])
    assert "i-early" not in driver.describe(["i-early"])


def test_describing_for_reclaims_is_a_backstop_behind_ec2s_two_minute_notice() -> None:
    assert AWSDriver(AWS()).reclaim_poll_interval == 30.0  # not every poll_interval (3 s)
    assert AWSDriver(AWS(poll_interval=60)).reclaim_poll_interval == 60
