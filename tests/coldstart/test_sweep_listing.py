"""The start-of-pool sweep (and ``skyward ls``) asks EC2 only for instances that still
live: a terminated one stays listed for about an hour, and every start read them all."""

from __future__ import annotations

from typing import Any

import pytest
from aws.conftest import REGION, AwsWorld

from skyward_aws.infra import TAG_POOL
from skyward_aws.pricing import shipped_catalog
from skyward_aws.resources import list_instances

pytestmark = pytest.mark.cloud


def test_the_sweep_listing_leaves_terminated_instances_out_of_ec2s_answer(aws: AwsWorld) -> None:
    def launch(pool: str) -> str:
        tags = [{"ResourceType": "instance", "Tags": [{"Key": TAG_POOL, "Value": pool}]}]
        made = aws.ec2.run_instances(
            ImageId=aws.images[0].image_id, InstanceType="t3.micro", MinCount=1, MaxCount=1, TagSpecifications=tags
        )
        return str(made["Instances"][0]["InstanceId"])

    finished, live = launch("sweep-old"), launch("sweep-live")
    aws.ec2.terminate_instances(InstanceIds=[finished])
    answered: list[str] = []

    def record(parsed: dict[str, Any], **_: Any) -> None:
        answered.extend(i["InstanceId"] for r in parsed.get("Reservations", []) for i in r["Instances"])

    aws.ec2.meta.events.register("after-call.ec2.DescribeInstances", record)
    try:
        listed = {r.id for r in list_instances(aws.ec2, REGION, shipped_catalog())}
    finally:
        aws.ec2.meta.events.unregister("after-call.ec2.DescribeInstances", record)
        aws.ec2.terminate_instances(InstanceIds=[live])
    assert live in listed and live in answered
    assert finished not in answered  # it was in the answer, and parsed, before
