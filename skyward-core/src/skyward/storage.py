"""Where a ``sky.Volume``'s bucket lives: an S3-compatible object store and its keys.

Every preset is an :class:`S3Compatible` with the store's endpoint filled in, because
every store named here speaks S3's API: Amazon S3, Google Cloud Storage (with HMAC keys,
its "interoperability" API), Cloudflare R2, Wasabi, Backblaze B2 and DigitalOcean Spaces.
One client on the node (rclone's ``s3`` backend) then mounts or syncs them all.

The keys are :class:`~skyward.secrets.Secret` values. Given as ``None`` they are read from
the client's environment when the storage is declared (each preset names its variables),
so a missing key fails there, before anything is provisioned. They reach a node the way
a secret does, after the handshake on the pool's encrypted channel, and there they go to
rclone on a pipe: never into user-data, a file on the node, a process's environment or
command line, a log or an event.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from skyward.errors import ConfigurationError
from skyward.secrets import Secret

_ENDPOINT = re.compile(r"^https?://[A-Za-z0-9.\-]+(:[0-9]{1,5})?(/[^\s]*)?$")
_REGION = re.compile(r"^[a-z0-9\-]{0,40}$")
_RCLONE_PROVIDER = re.compile(r"^[A-Za-z]{1,30}$")


@dataclass(frozen=True)
class S3Compatible:
    """Any store with S3's API at ``endpoint`` (MinIO, Ceph, a preset below).

    ``access_key_id`` / ``secret_access_key``: the keys, as a ``Secret`` or a string; left
    ``None``, read now from the variables ``key_env`` names (unset is an error)."""

    endpoint: str
    """The store's S3 endpoint, ``https://...`` (``http://`` for a store on a private network)."""
    access_key_id: Secret | str | None = field(default=None, repr=False)
    """The access key id; ``None``: read from ``key_env[0]``. A ``Secret`` once constructed."""
    secret_access_key: Secret | str | None = field(default=None, repr=False)
    """The secret key; ``None``: read from ``key_env[1]``. A ``Secret`` once constructed."""
    region: str = ""
    """The region S3 requests are signed for (``""``: the store does not care)."""
    provider: str = "Other"
    """rclone's name for the store (its ``s3`` backend adapts a few requests to each)."""
    key_env: tuple[str, str] = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
    """The client's environment variables the keys are read from when not given."""
    name: str = "s3-compatible"
    """What errors and the display call the store."""

    def __post_init__(self) -> None:
        if not isinstance(self.endpoint, str) or not _ENDPOINT.match(self.endpoint):
            raise ConfigurationError(
                f"storage endpoint={self.endpoint!r} is not an http(s) URL such as 'https://s3.example.com'"
            )
        if not isinstance(self.region, str) or not _REGION.match(self.region):
            raise ConfigurationError(
                f"storage region={self.region!r}: lowercase letters, digits and '-' (e.g. 'us-east-1')"
            )
        if not isinstance(self.provider, str) or not _RCLONE_PROVIDER.match(self.provider):
            raise ConfigurationError(
                f"storage provider={self.provider!r}: one of rclone's s3 providers, such as 'Other'"
            )
        names = ("access_key_id", "secret_access_key")
        for attribute, variable in zip(names, self.key_env, strict=True):
            object.__setattr__(self, attribute, _key(self.name, attribute, getattr(self, attribute), variable))

    def __repr__(self) -> str:
        return f"storage.{self.name}(endpoint={self.endpoint!r})"

    @property
    def keys(self) -> tuple[Secret, Secret]:
        """The access key id and the secret key (both resolved at construction)."""
        key, secret = self.access_key_id, self.secret_access_key
        assert isinstance(key, Secret) and isinstance(secret, Secret)
        return key, secret

    def rclone_section(self) -> dict[str, str]:
        """The keys of an rclone ``[remote]`` section for this store (secrets revealed:
        only a node's agent reads it, on rclone's stdin)."""
        key, secret = self.keys
        section = {
            "type": "s3",
            "provider": self.provider,
            "env_auth": "false",  # never the node's own credentials (an instance role, a stray variable)
            "access_key_id": key.value,
            "secret_access_key": secret.value,
            "endpoint": self.endpoint,
            "no_check_bucket": "true",  # a key scoped to one bucket may not create or list buckets
        }
        if self.region:
            section["region"] = self.region
        return section


def _key(store: str, attribute: str, value: Secret | str | None, variable: str) -> Secret:
    if value is None:
        try:
            value = Secret.from_env(variable)
        except ConfigurationError as error:
            raise ConfigurationError(f"storage.{store}({attribute}=None): {error}; or pass {attribute}=...") from None
    if isinstance(value, str):
        value = Secret(value, "literal")
    if isinstance(value, Secret):
        if not value.value or any(c in value.value for c in "\r\n"):
            raise ConfigurationError(f"storage.{store}({attribute}=...): a key is one non-empty line")
        return value
    raise ConfigurationError(
        f"storage.{store}({attribute}=...): give a string or a sky.Secret, not {type(value).__name__}"
    )


def _region(store: str, region: str) -> str:
    if not isinstance(region, str) or not region or not _REGION.match(region):
        raise ConfigurationError(f"storage.{store}(region={region!r}): a region name such as the store lists")
    return region


def _regional(
    name: str, region: str, endpoint: str, provider: str, key_env: tuple[str, str],
    key: Secret | str | None, secret: Secret | str | None,
) -> S3Compatible:  # fmt: skip
    """A store whose endpoint names its region (``endpoint`` holds ``{region}``)."""
    region = _region(name, region)
    return S3Compatible(endpoint.format(region=region), key, secret, region, provider, key_env, name)


def S3(  # reads as the type it returns, as every preset here does
    region: str = "us-east-1", access_key_id: Secret | str | None = None, secret_access_key: Secret | str | None = None
) -> S3Compatible:
    """Amazon S3 with access keys (``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY``).
    On an AWS pool, ``S3Volume`` mounts with the pool's IAM role instead: no keys."""
    return _regional(
        "S3",
        region,
        "https://s3.{region}.amazonaws.com",
        "AWS",
        ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"),
        access_key_id,
        secret_access_key,
    )


def GCS(access_key_id: Secret | str | None = None, secret_access_key: Secret | str | None = None) -> S3Compatible:
    """Google Cloud Storage through its S3-interoperable XML API, with an HMAC key
    (``GCS_ACCESS_KEY_ID`` / ``GCS_SECRET_ACCESS_KEY``; Cloud Storage > Settings >
    Interoperability)."""
    return S3Compatible(
        "https://storage.googleapis.com", access_key_id, secret_access_key, "auto", "Other",
        ("GCS_ACCESS_KEY_ID", "GCS_SECRET_ACCESS_KEY"), "GCS",
    )  # fmt: skip


def R2(
    account_id: str, access_key_id: Secret | str | None = None, secret_access_key: Secret | str | None = None
) -> S3Compatible:
    """Cloudflare R2 of account ``account_id`` (``R2_ACCESS_KEY_ID`` / ``R2_SECRET_ACCESS_KEY``)."""
    if not isinstance(account_id, str) or not re.fullmatch(r"[0-9a-f]{32}", account_id):
        raise ConfigurationError(
            f"storage.R2(account_id={account_id!r}): the 32 hexadecimal digits of your Cloudflare account id"
        )
    return S3Compatible(
        f"https://{account_id}.r2.cloudflarestorage.com", access_key_id, secret_access_key, "auto", "Cloudflare",
        ("R2_ACCESS_KEY_ID", "R2_SECRET_ACCESS_KEY"), "R2",
    )  # fmt: skip


def Wasabi(
    region: str = "us-east-1", access_key_id: Secret | str | None = None, secret_access_key: Secret | str | None = None
) -> S3Compatible:
    """Wasabi in ``region`` (``WASABI_ACCESS_KEY_ID`` / ``WASABI_SECRET_ACCESS_KEY``)."""
    return _regional(
        "Wasabi",
        region,
        "https://s3.{region}.wasabisys.com",
        "Wasabi",
        ("WASABI_ACCESS_KEY_ID", "WASABI_SECRET_ACCESS_KEY"),
        access_key_id,
        secret_access_key,
    )


def Backblaze(
    region: str, access_key_id: Secret | str | None = None, secret_access_key: Secret | str | None = None
) -> S3Compatible:
    """Backblaze B2's S3 API in ``region`` (``us-west-004``: the bucket's endpoint names
    it), with an application key (``B2_APPLICATION_KEY_ID`` / ``B2_APPLICATION_KEY``)."""
    return _regional(
        "Backblaze",
        region,
        "https://s3.{region}.backblazeb2.com",
        "Other",
        ("B2_APPLICATION_KEY_ID", "B2_APPLICATION_KEY"),
        access_key_id,
        secret_access_key,
    )


def Spaces(
    region: str = "nyc3", access_key_id: Secret | str | None = None, secret_access_key: Secret | str | None = None
) -> S3Compatible:
    """DigitalOcean Spaces in ``region`` (``SPACES_ACCESS_KEY_ID`` / ``SPACES_SECRET_ACCESS_KEY``)."""
    return _regional(
        "Spaces",
        region,
        "https://{region}.digitaloceanspaces.com",
        "DigitalOcean",
        ("SPACES_ACCESS_KEY_ID", "SPACES_SECRET_ACCESS_KEY"),
        access_key_id,
        secret_access_key,
    )


PRESETS = ("s3", "gcs", "r2", "wasabi", "backblaze", "spaces", "s3-compatible")
"""The stores :func:`named` knows (``skyward doctor --storage``)."""


def named(
    name: str, region: str | None = None, account_id: str | None = None, endpoint: str | None = None
) -> S3Compatible:
    """The preset called ``name`` (one of :data:`PRESETS`), keys from its variables."""
    if name == "s3-compatible":
        if not endpoint:
            raise ConfigurationError("storage 's3-compatible' needs an endpoint (--endpoint https://...)")
        return S3Compatible(endpoint, region=region or "")
    if endpoint:
        raise ConfigurationError(f"storage {name!r} has its own endpoint; --endpoint goes with 's3-compatible'")
    if name == "r2":
        return R2(account_id or "")
    if account_id:
        raise ConfigurationError(f"storage {name!r} takes no account id; --account-id goes with 'r2'")
    if name == "gcs":
        return GCS()
    if name == "backblaze":
        return Backblaze(region or "")  # its endpoint names the region: no default
    defaults = {"s3": "us-east-1", "wasabi": "us-east-1", "spaces": "nyc3"}
    if name not in defaults:
        raise ConfigurationError(f"storage {name!r} is not known; one of {', '.join(PRESETS)}")
    regional = {"s3": S3, "wasabi": Wasabi, "spaces": Spaces}
    return regional[name](region or defaults[name])


__all__ = ["GCS", "PRESETS", "R2", "S3", "Backblaze", "S3Compatible", "Spaces", "Wasabi", "named"]
