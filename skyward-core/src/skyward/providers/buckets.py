"""The rules every bucket-backed volume shares (``sky.Volume``, AWS's ``S3Volume``): where
it may be mounted, what a bucket's name and a key prefix may be. One home, so both
volume types refuse the same input with the same words."""

from __future__ import annotations

import re

from skyward.errors import ConfigurationError

BUCKET_NAME = re.compile(r"^[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]$")
"""S3's bucket naming rules (3 to 63 lowercase letters, digits, '.' and '-', starting and
ending with a letter or digit), which every S3-compatible store (GCS, R2, Wasabi, B2,
Spaces) accepts as well."""

SYSTEM_PATHS = frozenset(
    {"/", "/bin", "/boot", "/dev", "/etc", "/lib", "/lib64", "/proc", "/root", "/run", "/sbin", "/sys", "/usr",
     "/var", "/tmp", "/home", "/opt"}
)  # fmt: skip
"""Directories a mount would hide: the system's, and ``/tmp``, ``/home`` and ``/opt`` where
the node's environment and Skyward's own files live."""


def mount_path(owner: str, path: object) -> str:
    """``path`` normalized (``/data/``: ``/data``), or ConfigurationError naming ``owner``
    (``"Volume(mount=...)"``) when it is not absolute or would hide a system directory."""
    if not isinstance(path, str) or not path.startswith("/") or "\n" in path or "\0" in path:
        raise ConfigurationError(f"{owner.format(path)} must be an absolute path such as '/data'")
    parts = [p for p in path.split("/") if p]
    normalized = "/" + "/".join(parts)
    if normalized in SYSTEM_PATHS or ".." in parts or "." in parts:
        raise ConfigurationError(
            f"{owner.format(path)} would hide a system directory; choose a path of its own such as '/data'"
        )
    return normalized


def bucket_name(owner: str, bucket: object) -> str:
    """``bucket`` when it is a bucket's name, else ConfigurationError (``s3://x`` included)."""
    if not isinstance(bucket, str) or not BUCKET_NAME.match(bucket) or ".." in bucket:
        hint = "; give the name alone, without 's3://'" if isinstance(bucket, str) and "://" in bucket else ""
        raise ConfigurationError(
            f"{owner.format(bucket)} is not a bucket name (3-63 lowercase letters, digits, '.' and '-'){hint}"
        )
    return bucket


def key_prefix(owner: str, prefix: object) -> str:
    """``prefix`` with a trailing ``/`` (``""`` stays ``""``: the whole bucket), or
    ConfigurationError when it starts with ``/`` or holds a newline."""
    if not isinstance(prefix, str) or prefix.startswith("/") or "\n" in prefix or "\0" in prefix:
        raise ConfigurationError(f"{owner.format(prefix)} must be a key prefix such as 'datasets/'")
    return prefix if not prefix or prefix.endswith("/") else prefix + "/"
