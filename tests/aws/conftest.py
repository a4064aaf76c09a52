"""Fixtures for the AWS provider: moto in server mode, emulated instances, isolation.

Every test here that talks to moto is marked ``cloud`` and must run in a network
namespace with only loopback up (``python3 tasks.py test`` arranges it); the guard below
fails it otherwise, before it can reach anything.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/ for `harness`

from harness import EmulatedInstances
from harness.netns import isolation_problem

from .emulator import HarnessEndpoints, MotoInstances
from .faults import FaultProxy
from .moto_world import MotoServer, PublicImage, seed_public_images

REGION = "us-east-1"
# Recognisable fake credentials: tests search user-data, node logs and our logs for them.
FIXTURE_KEY_ID = "AKIASKYWARDFIXTURE7Q"
FIXTURE_SECRET = "skywardFixtureSecret/NeverOnANode+0123456789ab"
CLIENT_ADDRESS = "203.0.113.7"  # TEST-NET-3: documentation addresses, never routed
CLIENT_CIDR = f"{CLIENT_ADDRESS}/32"  # what the security group admits


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("cloud") is not None:
        problem = isolation_problem()
        if problem is not None:
            pytest.fail(f"cloud test outside an isolated network namespace: {problem}", pytrace=False)


@pytest.fixture(scope="session")
def moto_server() -> Iterator[MotoServer]:
    """One moto for the session, seeded once. Tests share it (moto's state is per
    process) and keep to their own pool's resources, found by the pool-id tag; a fresh
    EC2 backend per test would cost most of a second of moto's start-up each time."""
    problem = isolation_problem()
    if problem is not None:
        pytest.fail(f"refusing to start moto outside an isolated network namespace: {problem}", pytrace=False)
    server = MotoServer()
    server.images = seed_public_images(REGION)
    yield server
    server.stop()


@dataclass
class AwsWorld:
    moto_url: str
    proxy: FaultProxy
    images: list[PublicImage]
    ec2: Any  # clients straight to moto: the test's own view, not recorded by the proxy
    iam: Any
    ssm: Any

    def instances(self, pool_id: str) -> list[dict[str, Any]]:
        filters = [{"Name": "tag:skyward:pool-id", "Values": [pool_id]}]
        reservations = self.ec2.describe_instances(Filters=filters)["Reservations"]
        return [i for r in reservations for i in r["Instances"]]

    def states(self, pool_id: str) -> dict[str, str]:
        return {i["InstanceId"]: i["State"]["Name"] for i in self.instances(pool_id)}

    def roles(self, pool_id: str) -> list[str]:
        return [r["RoleName"] for r in self.iam.list_roles()["Roles"] if r["RoleName"] == f"skyward-{pool_id}"]

    def instance_profiles(self, pool_id: str) -> list[str]:
        profiles = self.iam.list_instance_profiles()["InstanceProfiles"]
        return [p["InstanceProfileName"] for p in profiles if p["InstanceProfileName"] == f"skyward-{pool_id}"]

    def security_groups(self, pool_id: str) -> list[dict[str, Any]]:
        return self.ec2.describe_security_groups(Filters=[{"Name": "tag:skyward:pool-id", "Values": [pool_id]}])[
            "SecurityGroups"
        ]


def _client(service: str, url: str) -> Any:
    import boto3

    return boto3.client(
        service,
        region_name=REGION,
        endpoint_url=url,
        aws_access_key_id=FIXTURE_KEY_ID,
        aws_secret_access_key=FIXTURE_SECRET,
    )


@pytest.fixture
def aws(moto_server: MotoServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[AwsWorld]:
    """The moto world with AWS's public images, reached through a recording proxy of this
    test's own; boto3 in this process finds the fixture's credentials and nothing else."""
    images = moto_server.images
    proxy = FaultProxy(moto_server.url)
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_ROLE_ARN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.url)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", FIXTURE_KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", FIXTURE_SECRET)
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    world = AwsWorld(
        moto_url=moto_server.url,
        proxy=proxy,
        images=images,
        ec2=_client("ec2", moto_server.url),
        iam=_client("iam", moto_server.url),
        ssm=_client("ssm", moto_server.url),
    )
    yield world
    proxy.close()


@dataclass
class Emulation:
    harness: EmulatedInstances
    moto: MotoInstances
    endpoints: HarnessEndpoints


EmulationFactory = Callable[..., Emulation]


@pytest.fixture
def emulate(aws: AwsWorld) -> Iterator[EmulationFactory]:
    """Make the emulation (once per test): ``emulate(extra_stubs=..., shutdown_time_scale=...)``.
    Every instance moto runs becomes an emulated instance; the endpoints seam points at them."""
    made: list[Emulation] = []

    def make(**options: Any) -> Emulation:
        assert not made, "one emulation per test"
        box: dict[str, MotoInstances] = {}

        def terminate(instance_id: str) -> None:  # what EC2 does when the instance powers off
            box["moto"].terminate_from_inside(instance_id)

        harness = EmulatedInstances(terminate, **options)
        box["moto"] = MotoInstances(aws.ec2, harness)
        made.append(Emulation(harness=harness, moto=box["moto"], endpoints=HarnessEndpoints(harness)))
        return made[0]

    yield make
    for emulation in made:
        emulation.moto.close()
        emulation.harness.close()
        assert not emulation.moto.errors, emulation.moto.errors
        assert not emulation.harness.errors, emulation.harness.errors


@pytest.fixture
def emulated(emulate: EmulationFactory) -> Emulation:
    """The emulation with default settings."""
    return emulate()
