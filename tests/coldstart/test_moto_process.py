"""bench/moto_process.py: moto's EC2 in a process of its own for the cloud-start
benchmark, seeded with AWS's public images, gone when the benchmark is done."""

from __future__ import annotations

import socket
import sys
import urllib.parse
from pathlib import Path

import pytest
from aws.conftest import REGION, _client
from aws.moto_world import ACCOUNT, public_images

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout, for `bench`

from bench.moto_process import moto_process

pytestmark = pytest.mark.cloud


def test_moto_serves_from_another_process_with_the_public_images_and_stops_after(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from moto.ec2.models import ec2_backends

    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    with moto_process(REGION) as url:
        ec2 = _client("ec2", url)
        seeded = {i.image_id for i in public_images()}
        found = {i["ImageId"] for i in ec2.describe_images(ImageIds=sorted(seeded))["Images"]}
        made = ec2.run_instances(ImageId=sorted(seeded)[0], InstanceType="t3.micro", MinCount=1, MaxCount=1)
        instance_id = made["Instances"][0]["InstanceId"]
        port = urllib.parse.urlparse(url).port
    assert found == seeded
    # the instance lives in the child's moto, not in this interpreter's
    assert instance_id not in {i.id for i in ec2_backends[ACCOUNT][REGION].all_instances()}
    with pytest.raises(OSError):  # the child is gone with its port
        socket.create_connection(("127.0.0.1", port or 0), timeout=2).close()
