"""An S3-compatible store for volume tests: moto's S3 server on a free loopback port
(``moto.server.ThreadedMotoServer``), a fresh bucket per test, and the ``sky.storage``
that reaches it. Volume tests need what a node needs: rclone, FUSE 3 and root (Local
nodes mount in a private mount namespace each); .ci/run installs rclone and fuse3."""

from __future__ import annotations

import secrets
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto.server import ThreadedMotoServer

import skyward as sky


def needs_rclone() -> None:
    missing = [tool for tool in ("rclone", "fusermount3", "unshare") if shutil.which(tool) is None]
    if missing:
        pytest.fail(f"volume tests need {', '.join(missing)} (apt install rclone fuse3; .ci/run installs them)")


@dataclass
class Store:
    url: str
    s3: Any  # boto3's S3 client (its type is generated at run time)
    bucket: str
    key_id: str
    secret: str

    @property
    def storage(self) -> sky.storage.S3Compatible:
        return sky.storage.S3Compatible(self.url, self.key_id, sky.Secret(self.secret), region="us-east-1")

    def put(self, key: str, body: bytes) -> None:
        self.s3.put_object(Bucket=self.bucket, Key=key, Body=body)

    def get(self, key: str) -> bytes:
        body: bytes = self.s3.get_object(Bucket=self.bucket, Key=key)["Body"].read()
        return body

    def listing(self) -> list[str]:
        listing = self.s3.list_objects_v2(Bucket=self.bucket)
        return sorted(o["Key"] for o in listing.get("Contents", []))


@pytest.fixture(scope="module")
def moto_s3() -> Iterator[str]:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


@pytest.fixture
def store(moto_s3: str) -> Store:
    needs_rclone()
    key_id, secret = f"AKIA{secrets.token_hex(8).upper()}", f"sk-{secrets.token_hex(16)}"
    s3 = boto3.client(
        "s3", endpoint_url=moto_s3, aws_access_key_id=key_id, aws_secret_access_key=secret, region_name="us-east-1"
    )
    bucket = f"vol-{secrets.token_hex(6)}"
    s3.create_bucket(Bucket=bucket)
    return Store(moto_s3, s3, bucket, key_id, secret)


@pytest.fixture
def mount_dir() -> Iterator[str]:
    """A mount path of the test's own under /mnt (mount paths may not hide /tmp), removed after."""
    path = Path("/mnt") / f"skyward-test-{secrets.token_hex(6)}"
    try:
        yield str(path)
    finally:
        shutil.rmtree(path, ignore_errors=True)
