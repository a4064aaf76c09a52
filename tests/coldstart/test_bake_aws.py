"""Image(bake=True) on AWS (moto, emulated instances): the first pool bakes an AMI from
a bootstrapped node, the next one starts from it and skips the environment steps, and a
stale bake is never used."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from aws.conftest import CLIENT_ADDRESS, AwsWorld, Emulation
from bake_support import ENVIRONMENT_STEPS, fresh_image, start_pool
from typer.testing import CliRunner

import skyward
from skyward.events import Notice
from skyward.providers.baking import LABEL_BASE, LABEL_ENV_KEY, LABEL_IMAGE_HASH, LABEL_VERSION
from skyward_aws.infra import TAG_MANAGED, TAG_POOL

pytestmark = pytest.mark.cloud


def _start(emulated: Emulation, image: skyward.Image) -> tuple[list[Any], str, list[str]]:
    provider = skyward.AWS(client_address=CLIENT_ADDRESS, bootstrap_timeout=120, endpoint_resolver=emulated.endpoints)
    return start_pool(provider, image, spot="never")


def _tags(image: dict[str, Any]) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in image.get("Tags", [])}


def _baked(aws: AwsWorld, image: skyward.Image) -> list[dict[str, Any]]:
    filters = [{"Name": f"tag:{LABEL_IMAGE_HASH}", "Values": [image.content_hash()]}]
    return list(aws.ec2.describe_images(Owners=["self"], Filters=filters)["Images"])


def _launched_from(aws: AwsWorld, instance_id: str) -> str:
    reservations = aws.ec2.describe_instances(InstanceIds=[instance_id])["Reservations"]
    return str(reservations[0]["Instances"][0]["ImageId"])


def test_a_baked_ami_is_made_once_and_the_next_pool_starts_from_it_skipping_the_environment(
    aws: AwsWorld, emulated: Emulation
) -> None:
    image = fresh_image()
    events, first_node, steps = _start(emulated, image)
    assert ENVIRONMENT_STEPS & set(steps) and "baked" not in steps
    (baked,) = _baked(aws, image)
    tags = _tags(baked)
    assert tags[LABEL_VERSION] == skyward.__version__
    assert tags[LABEL_ENV_KEY].startswith(image.content_hash())
    assert tags[LABEL_BASE] == _launched_from(aws, first_node)
    assert tags[TAG_MANAGED] == "skyward" and TAG_POOL not in tags  # outlives its pool: no pool id, no expiry
    (create,) = aws.proxy.actions("CreateImage")
    assert create.params["InstanceId"] == first_node and create.params["NoReboot"] == "true"
    assert any(isinstance(e, Notice) and "per GB-month" in e.message for e in events)

    events, second_node, steps = _start(emulated, image)
    assert _launched_from(aws, second_node) == baked["ImageId"]
    assert emulated.moto.restored[second_node] == first_node
    assert "baked" in steps and not ENVIRONMENT_STEPS & set(steps)
    # the copied disk held the first node's TTL marker once; the new node arms its own TTL
    calls = [list(map(str, c["argv"])) for c in emulated.harness.calls(second_node)]  # type: ignore[call-overload]
    assert any(argv[:2] == ["shutdown", "-h"] and argv[2].startswith("+") for argv in calls if len(argv) > 2)
    assert len(aws.proxy.actions("CreateImage")) == 1  # nothing baked again
    assert any(isinstance(e, Notice) and f"starting from baked image {baked['ImageId']}" in e.message for e in events)


def test_a_baked_ami_of_another_skyward_version_is_never_used(aws: AwsWorld, emulated: Emulation) -> None:
    image = fresh_image()
    _start(emulated, image)
    (fresh,) = _baked(aws, image)
    # the same environment, baked by another skyward: relabel the AMI as if
    aws.ec2.create_tags(Resources=[fresh["ImageId"]], Tags=[{"Key": LABEL_VERSION, "Value": "0.0.0-old"}])

    _, second_node, steps = _start(emulated, image)
    assert _launched_from(aws, second_node) != fresh["ImageId"]
    assert second_node not in emulated.moto.restored
    assert "baked" not in steps and "deps" in steps
    versions = sorted(_tags(i)[LABEL_VERSION] for i in _baked(aws, image))
    assert versions == sorted(["0.0.0-old", skyward.__version__])  # a fresh bake replaces the stale one's use


def test_skyward_ls_lists_baked_amis_and_only_down_baked_deletes_them_with_their_snapshots(aws: AwsWorld) -> None:
    from skyward.cli.app import make_app
    from skyward.providers.baking import BakeKey
    from skyward_aws.baking import _snapshots, create_baked

    reservation = aws.ec2.run_instances(ImageId=aws.images[0].image_id, InstanceType="t3.micro", MinCount=1, MaxCount=1)
    instance_id = reservation["Instances"][0]["InstanceId"]
    key = BakeKey(uuid.uuid4().hex[:12], "env", skyward.__version__, aws.images[0].image_id)
    made = create_baked(aws.ec2, instance_id, key, "p1")
    snapshots = _snapshots(aws.ec2, made.id)
    runner = CliRunner()

    listed = runner.invoke(make_app(), ["ls", "--json", "--provider", "aws"])
    assert listed.exit_code == 0, listed.output
    (baked,) = [r for r in json.loads(listed.stdout)["resources"] if r["id"] == made.id]
    assert baked["pool_id"] == "baked" and baked["kind"] == "baked-image" and baked["expires_at"] is None
    assert key.image_hash in baked["name"]

    assert runner.invoke(make_app(), ["down", "--expired", "--provider", "aws"]).exit_code == 0
    assert aws.ec2.describe_images(ImageIds=[made.id])["Images"]  # never expires: --expired leaves it

    down = runner.invoke(make_app(), ["down", "baked", "--provider", "aws"])
    assert down.exit_code == 0, down.output
    assert not [i for i in aws.ec2.describe_images(Owners=["self"])["Images"] if i["ImageId"] == made.id]
    left = aws.ec2.describe_snapshots(OwnerIds=["self"])["Snapshots"]
    assert snapshots and not {s["SnapshotId"] for s in left} & set(snapshots)  # what billed is gone
    aws.ec2.terminate_instances(InstanceIds=[instance_id])
