"""The AWS emulation (tests/aws/emulator.py) starts an instance launched after a hundred
others: moto answers DescribeInstances 100 reservations a page, and the cloud-start
benchmark's whole starts come after some hundred instances of its API runs."""

from __future__ import annotations

import pytest
from aws.conftest import AwsWorld, EmulationFactory

pytestmark = pytest.mark.cloud

EARLIER = 101  # more reservations than moto's first page holds


def test_an_instance_launched_after_a_hundred_others_still_runs(aws: AwsWorld, emulate: EmulationFactory) -> None:
    image = aws.images[0].image_id
    earlier = [
        aws.ec2.run_instances(ImageId=image, InstanceType="t3.micro", MinCount=1, MaxCount=1)["Instances"][0]
        for _ in range(EARLIER)
    ]
    aws.ec2.terminate_instances(InstanceIds=[i["InstanceId"] for i in earlier])
    emulation = emulate()
    late = aws.ec2.run_instances(
        ImageId=image, InstanceType="t3.micro", MinCount=1, MaxCount=1, UserData="#!/bin/sh\nsleep 60\n"
    )["Instances"][0]["InstanceId"]
    try:
        assert late in emulation.moto.wait_started(1, timeout=20)  # the first page alone never showed it
    finally:
        aws.ec2.terminate_instances(InstanceIds=[late])
    emulation.moto.wait_stopped([late])
    assert not emulation.harness.is_running(late)
