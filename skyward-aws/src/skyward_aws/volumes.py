"""``S3Volume``: an S3 bucket (or a prefix of it) mounted as a directory on every node.

Mounted by Mountpoint for Amazon S3 (``mount-s3``), AWS's maintained FUSE client, which
the bootstrap installs from AWS's release bucket when the image lacks it. Access comes
from the node's instance profile (the pool's IAM role, scoped to the bucket and prefix);
no key ever reaches a node. ``read_only=True`` mounts with ``--read-only`` and the role
grants reads only; otherwise Mountpoint may create, overwrite and delete objects.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any

from skyward.errors import ConfigurationError
from skyward.providers import buckets

MOUNTPOINT_RELEASE = "https://s3.amazonaws.com/mountpoint-s3-release/latest/{arch}/mount-s3.deb"


@dataclass(frozen=True, slots=True)
class S3Volume:
    """Mount ``s3://bucket/prefix`` at ``mount_path`` on every node of the pool."""

    mount_path: str
    """Where the bucket appears on every node: an absolute path that hides no system directory (``/data``)."""
    bucket: str
    """The S3 bucket's name (no ``s3://``)."""
    prefix: str = ""
    """The key prefix mounted (``"datasets/"``); ``""``: the whole bucket."""
    read_only: bool = True
    """Mount read-only (default); ``False`` lets the nodes write to the bucket."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "mount_path", buckets.mount_path("S3Volume(mount_path={!r})", self.mount_path))
        buckets.bucket_name("S3Volume(bucket={!r})", self.bucket)
        object.__setattr__(self, "prefix", buckets.key_prefix("S3Volume(prefix={!r})", self.prefix))
        if not isinstance(self.read_only, bool):
            raise ConfigurationError(f"S3Volume(read_only={self.read_only!r}) must be True or False")


def mount_script(volume: S3Volume) -> str:
    """The bootstrap lines that mount ``volume`` (idempotent: an existing mount stays)."""
    path = shlex.quote(volume.mount_path)
    flags = ["--allow-other"]
    if volume.read_only:
        flags.append("--read-only")
    else:
        flags += ["--allow-overwrite", "--allow-delete"]
    if volume.prefix:
        flags.append(f"--prefix {shlex.quote(volume.prefix)}")
    url = MOUNTPOINT_RELEASE.format(arch="$MOUNT_S3_ARCH")
    return f"""if ! command -v mount-s3 >/dev/null 2>&1; then
  case "$(uname -m)" in aarch64|arm64) MOUNT_S3_ARCH=arm64 ;; *) MOUNT_S3_ARCH=x86_64 ;; esac
  curl -fsSL --retry 5 -o /tmp/mount-s3.deb "{url}" || fail "could not download Mountpoint for Amazon S3"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q /tmp/mount-s3.deb || fail "could not install mount-s3"
fi
mkdir -p {path}
if ! mountpoint -q {path}; then
  mount-s3 {" ".join(flags)} {shlex.quote(volume.bucket)} {path} \\
    || fail "could not mount s3://{volume.bucket}/{volume.prefix} at {volume.mount_path} (check the pool's IAM role)"
fi"""


def partition(region: str) -> str:
    if region.startswith("cn-"):
        return "aws-cn"
    if region.startswith("us-gov-"):
        return "aws-us-gov"
    return "aws"


def policy_statements(volume: S3Volume, region: str) -> list[dict[str, Any]]:
    """IAM statements giving a node exactly the access ``volume`` needs."""
    arn = f"arn:{partition(region)}:s3:::{volume.bucket}"
    listing: dict[str, Any] = {"Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": arn}
    if volume.prefix:
        listing["Condition"] = {"StringLike": {"s3:prefix": [f"{volume.prefix}*"]}}
    actions = ["s3:GetObject"]
    if not volume.read_only:
        actions += ["s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload"]
    objects = {"Effect": "Allow", "Action": actions, "Resource": f"{arn}/{volume.prefix}*"}
    return [listing, objects]
