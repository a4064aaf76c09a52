"""``Verda(region=None)``: what a user writes to run a pool on Verda (formerly DataCrunch).

Credentials are never fields. They come from ``VERDA_CLIENT_ID`` and
``VERDA_CLIENT_SECRET``: the names Verda's own Python SDK and documentation use, so a
user who set them up for the SDK or CLI needs nothing more, and the secret never lands in
a pickled pool spec, a repr or an instance's startup script.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from skyward.errors import ConfigurationError
from skyward.providers.cloud import CloudSettings
from skyward.providers.cloud.settings import check_urls

CLIENT_ID_ENV = "VERDA_CLIENT_ID"
"""The environment variable the API client id is read from."""
CLIENT_SECRET_ENV = "VERDA_CLIENT_SECRET"
"""The environment variable the API client secret is read from."""
DEFAULT_API_URL = "https://api.verda.com/v1"


@dataclass(frozen=True, slots=True)
class Verda(CloudSettings):
    """Run the pool's nodes as Verda instances.

    region:            a location code (``"FIN-01"``); ``None`` picks, at pool start, a
                       location that has capacity for the chosen instance type.
    image:             OS image type; ``None`` takes the API's default image.
    ssh_key_ids:       SSH keys of yours to put on the nodes; empty: a throwaway key
                       (the deploy call requires one) whose private half is discarded.
    api_url:           the API endpoint, including ``/v1`` (plain http is refused except
                       on loopback).

    The rest is every cloud's (``skyward.providers.cloud.CloudSettings``):
    ``client_address`` (each node's host firewall admits the node ports from it only:
    Verda's API has no cloud firewall), ``grace_period``, ``bootstrap_timeout``,
    ``agent_port``, ``provision_timeout``, ``poll_interval`` (also how often spot nodes are
    checked for a reclaim), ``address_url``, ``api_timeout``, ``api_retries``,
    ``api_backoff`` and ``reap`` (instances earlier pools left: shut down, or past their
    expiry).
    """

    stopped_node_note: ClassVar[str] = "a shut-down instance and its OS volume bill"
    """A node whose client is gone can only shut down, and Verda keeps a shut-down instance's resources
    (``skyward.providers.StoppedNodesBill``)."""

    region: str | None = None
    """A location code (``"FIN-01"``); ``None`` picks, at pool start, one with capacity for the instance type."""
    image: str | None = None
    """OS image type; ``None`` takes the API's default image."""
    ssh_key_ids: Sequence[str] = ()
    """SSH keys of yours to put on the nodes; empty: a throwaway key whose private half is discarded."""
    api_url: str = DEFAULT_API_URL
    """The API endpoint, including ``/v1`` (plain http is refused except on loopback)."""

    def __post_init__(self) -> None:
        CloudSettings.__post_init__(self)
        if self.region is not None and (not isinstance(self.region, str) or not self.region.strip()):
            raise ConfigurationError(
                f"Verda(region={self.region!r}) must be a location code such as 'FIN-01', "
                "or None to pick a location with capacity"
            )
        if self.image is not None and (not isinstance(self.image, str) or not self.image.strip()):
            raise ConfigurationError(
                f"Verda(image={self.image!r}) must be an image type such as 'ubuntu-24.04-cuda-12.8'"
            )
        if not isinstance(self.ssh_key_ids, list | tuple):
            raise ConfigurationError(f"Verda(ssh_key_ids={self.ssh_key_ids!r}) takes a list of SSH key ids (strings)")
        object.__setattr__(self, "ssh_key_ids", tuple(self.ssh_key_ids))
        if not all(isinstance(k, str) and k for k in self.ssh_key_ids):
            raise ConfigurationError(f"Verda(ssh_key_ids={self.ssh_key_ids!r}) must be non-empty strings")
        check_urls("Verda", self, ("api_url",))


def credentials_from_env() -> tuple[str, str]:
    """(client id, client secret), or a ConfigurationError naming the variables."""
    client_id = os.environ.get(CLIENT_ID_ENV, "").strip()
    secret = os.environ.get(CLIENT_SECRET_ENV, "").strip()
    missing = [name for name, value in ((CLIENT_ID_ENV, client_id), (CLIENT_SECRET_ENV, secret)) if not value]
    if missing:
        raise ConfigurationError(
            f"the Verda provider needs API client credentials in {' and '.join(missing)} "
            "(create them under Keys > Cloud API credentials in the Verda console; the same variables the "
            "official verda SDK reads)"
        )
    return client_id, secret
