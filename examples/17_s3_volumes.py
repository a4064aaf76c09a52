"""S3 volumes on AWS: a bucket (or a prefix of one) mounted on every node.

``S3Volume(mount_path="/data", bucket=..., prefix=..., read_only=True)``; the nodes reach
the bucket through an instance profile, so no credential travels to them. AWS only; on
Local this validates the pool without provisioning (dry run).

Run it with:  .venv/bin/python examples/17_s3_volumes.py   (SKYWARD_PROVIDER=aws and
S3_BUCKET=<your bucket> to run it)
"""

from __future__ import annotations

import os

from _provider import cloud_provider, dry_run_unless_cloud, provider_name

import skyward as sky


@sky.compute
def list_data() -> list[str]:
    return sorted(os.listdir("/data"))[:10]


def main() -> None:
    if provider_name() not in ("local", "aws"):
        print(f"S3 volumes are mounted by the AWS provider only; {provider_name()} mounts none (skipped)")
        return
    volume = sky.S3Volume(mount_path="/data", bucket=os.environ.get("S3_BUCKET", "my-datasets"), prefix="imagenet/")
    pool = sky.ComputePool(provider=cloud_provider(), volume=[volume], display="quiet")
    try:
        sky.S3Volume(mount_path="/usr", bucket="b")
    except sky.ConfigurationError as error:
        print(f"refused: {error}")
    if dry_run_unless_cloud(pool):
        with pool:
            print(list_data() >> pool)


if __name__ == "__main__":
    main()
