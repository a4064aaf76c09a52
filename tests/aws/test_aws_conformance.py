"""AWS passes the provider conformance suite (skyward.testing.conformance) on moto with
emulated instances."""

from __future__ import annotations

import base64
import datetime
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from skyward.providers import ProviderSettings
from skyward.testing import decode_user_data
from skyward.testing.conformance import CloudUnderTest, ProviderConformance, Resource
from skyward_aws import AWS
from skyward_aws.infra import TAG_EXPIRES, TAG_MANAGED, TAG_POOL

from .conftest import CLIENT_ADDRESS, FIXTURE_KEY_ID, FIXTURE_SECRET, AwsWorld, Emulation

_GONE = ("shutting-down", "terminated")


def _expires(text: str | None) -> int | None:
    if not text:
        return None
    moment = datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.UTC)
    return int(moment.timestamp())


@dataclass
class AWSUnderTest:
    """moto is shared by the session: only what appeared after this test began counts."""

    aws: AwsWorld
    emulated: Emulation
    has_market: bool = True
    before: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.before = {i["InstanceId"] for i in self._instances()} | {g["GroupId"] for g in self._groups()}

    def _instances(self) -> list[dict[str, Any]]:
        filters = [{"Name": f"tag:{TAG_MANAGED}", "Values": ["skyward"]}]
        reservations = self.aws.ec2.describe_instances(Filters=filters)["Reservations"]
        return [i for r in reservations for i in r["Instances"]]

    def _groups(self) -> list[dict[str, Any]]:
        filters = [{"Name": f"tag:{TAG_MANAGED}", "Values": ["skyward"]}]
        groups: list[dict[str, Any]] = self.aws.ec2.describe_security_groups(Filters=filters)["SecurityGroups"]
        return groups

    def _new_instances(self) -> list[dict[str, Any]]:
        return [i for i in self._instances() if i["InstanceId"] not in self.before and i["State"]["Name"] not in _GONE]

    def _new_groups(self) -> list[dict[str, Any]]:
        return [g for g in self._groups() if g["GroupId"] not in self.before]

    def config(self, **overrides: object) -> ProviderSettings:
        settings: dict[str, Any] = {"bootstrap_timeout": 120.0, **overrides}
        return AWS(client_address=CLIENT_ADDRESS, endpoint_resolver=self.emulated.endpoints, **settings)

    def leftovers(self) -> Mapping[str, Sequence[str]]:
        left = {
            "instances": [i["InstanceId"] for i in self._new_instances()],
            "security groups": [g["GroupId"] for g in self._new_groups()],
        }
        return {k: v for k, v in left.items() if v}

    def resources(self) -> Sequence[Resource]:
        found = []
        for instance in self._new_instances():
            tags = {t["Key"]: t["Value"] for t in instance.get("Tags", [])}
            found.append(
                Resource(f"instance {instance['InstanceId']}", tags.get(TAG_POOL), _expires(tags.get(TAG_EXPIRES)))
            )
        for group in self._new_groups():
            tags = {t["Key"]: t["Value"] for t in group.get("Tags", [])}
            found.append(
                Resource(f"security group {group['GroupId']}", tags.get(TAG_POOL), _expires(tags.get(TAG_EXPIRES)))
            )
        return found

    def ingress_sources(self) -> Sequence[str]:
        sources = []
        for group in self._new_groups():
            for permission in group.get("IpPermissions", []):
                sources += [r["CidrIp"] for r in permission.get("IpRanges", [])]
                sources += [r["CidrIpv6"] for r in permission.get("Ipv6Ranges", [])]
        return sources

    def user_data(self) -> Sequence[str]:
        scripts = []
        for instance in self._new_instances():
            answer = self.aws.ec2.describe_instance_attribute(InstanceId=instance["InstanceId"], Attribute="userData")
            value = answer.get("UserData", {}).get("Value")
            if value:
                scripts.append(decode_user_data(base64.b64decode(value)))
        return scripts

    def secrets(self) -> Sequence[str]:
        return [FIXTURE_KEY_ID, FIXTURE_SECRET]

    def fail_create(self, after: int) -> None:
        self.aws.proxy.fail_nth("RunInstances", after + 1, "InvalidParameterCombination", "injected", status=400)

    def stall_boot(self) -> None:
        self.emulated.moto._start = lambda instance: None  # type: ignore[method-assign]

    def is_spot(self, instance_id: str) -> bool:
        (instance,) = [i for i in self._instances() if i["InstanceId"] == instance_id]
        return instance.get("InstanceLifecycle") == "spot"


@pytest.mark.cloud
class TestAWSConformance(ProviderConformance):
    @pytest.fixture
    def cloud(self, aws: AwsWorld, emulated: Emulation) -> CloudUnderTest:
        return AWSUnderTest(aws, emulated)
