"""``sky.Volume``: a bucket of any S3-compatible store, on every node of every provider.

``mode="mount"`` (the default) mounts it with rclone's FUSE client, so a task reads and
writes objects as files, lazily: a 2 TB dataset costs nothing until a task opens a file.
rclone rather than Mountpoint for Amazon S3 (which AWS's ``S3Volume`` uses, with the
pool's IAM role) because one client then serves every store of :mod:`skyward.storage`,
and rather than s3fs because its VFS cache makes writes that seek or append work, which
s3fs turns into whole-object rewrites. It needs FUSE on the node: a virtual machine has
it; a container marketplace's container has no ``/dev/fuse``, so a mount there is refused
when the pool is configured. ``mode="sync"`` needs no FUSE: the prefix is downloaded into
the directory before the first task and, unless ``read_only``, uploaded back when the
node stops (``rclone copy``: nothing in the bucket is deleted).

The node's agent mounts (or downloads) once the pool has sent it the keys, after the
handshake, on the encrypted channel (see :mod:`skyward.storage`); the pool's open waits
until every node said its volumes are ready, and fails with the node's reason when one
could not.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from skyward.errors import ConfigurationError
from skyward.providers import buckets
from skyward.secrets import Secret
from skyward.storage import S3, S3Compatible

VolumeMode = Literal["mount", "sync"]
MODES: tuple[VolumeMode, ...] = ("mount", "sync")


@dataclass(frozen=True)
class Volume:
    """``bucket`` (or its ``prefix``) at ``mount`` on every node.

    ``storage``: where the bucket lives (``sky.storage.R2(...)``, ``Spaces()``, ...);
    ``None`` is Amazon S3 with the keys in ``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY``.
    """

    bucket: str
    """The bucket's name (no ``s3://``)."""
    mount: str
    """Where it appears on every node: an absolute path that hides no system directory."""
    prefix: str = ""
    """The key prefix shown at ``mount`` (``"datasets/"``); ``""``: the whole bucket."""
    read_only: bool = True
    """Writes fail (default); ``False`` writes through to the bucket."""
    storage: S3Compatible | None = None
    """The store and its keys; ``None``: ``sky.storage.S3()``."""
    mode: VolumeMode = "mount"
    """``"mount"`` (FUSE, lazy) or ``"sync"`` (download before, upload after; no FUSE)."""

    def __post_init__(self) -> None:
        buckets.bucket_name("Volume(bucket={!r})", self.bucket)
        object.__setattr__(self, "mount", buckets.mount_path("Volume(mount={!r})", self.mount))
        object.__setattr__(self, "prefix", buckets.key_prefix("Volume(prefix={!r})", self.prefix))
        if not isinstance(self.read_only, bool):
            raise ConfigurationError(f"Volume(read_only={self.read_only!r}) must be True or False")
        if self.mode not in MODES:
            raise ConfigurationError(f"Volume(mode={self.mode!r}): one of {', '.join(map(repr, MODES))}")
        if self.storage is None:
            try:
                object.__setattr__(self, "storage", S3())
            except ConfigurationError as error:
                raise ConfigurationError(
                    f"Volume(storage=None) means Amazon S3 with your access keys, but {error}. Name the store "
                    "(storage=sky.storage.R2(...), GCS(), Wasabi(), Backblaze(region), Spaces(), S3Compatible(...)), "
                    "or on an AWS pool use S3Volume, which mounts with the pool's IAM role"
                ) from None
        elif not isinstance(self.storage, S3Compatible):
            raise ConfigurationError(
                f"Volume(storage={self.storage!r}): give a sky.storage preset or sky.storage.S3Compatible(endpoint=...)"
            )

    @property
    def where(self) -> str:
        """``store:bucket/prefix``, for messages."""
        assert self.storage is not None
        return f"{self.storage.name}:{self.bucket}/{self.prefix}"

    def secrets(self) -> tuple[Secret, ...]:
        """The keys this volume sends to the nodes (redacted wherever a node's words show)."""
        assert self.storage is not None
        return self.storage.keys

    def node_spec(self) -> dict[str, object]:
        """What a node's agent needs to mount it (keys included: it travels only in the
        pool's encrypted CLUSTER message, see :mod:`skyward.agent.mounts`)."""
        assert self.storage is not None
        return {
            "bucket": self.bucket,
            "prefix": self.prefix,
            "mount": self.mount,
            "read_only": self.read_only,
            "mode": self.mode,
            "where": self.where,
            "remote": self.storage.rclone_section(),
        }


INSTALL_RCLONE = """if ! command -v rclone >/dev/null 2>&1; then
  (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q rclone fuse3) >/dev/null 2>&1 \\
    || curl -fsSL --retry 5 https://rclone.org/install.sh | bash >/dev/null 2>&1 \\
    || fail "could not install rclone (sky.Volume mounts and syncs buckets with it)"
fi"""
"""The bootstrap step a pool with a ``Volume`` runs: rclone (and FUSE 3's ``fusermount3``)
when the machine lacks them. No key is in it: the agent mounts once the keys arrive."""


def install_script(volume: Volume) -> str:
    """The bootstrap lines of ``volume``'s type (the same for every ``Volume``)."""
    return INSTALL_RCLONE


def volume_secrets(volumes: tuple[object, ...]) -> tuple[Secret, ...]:
    """Every key the pool's volumes send to the nodes."""
    return tuple(s for v in volumes if isinstance(v, Volume) for s in v.secrets())
