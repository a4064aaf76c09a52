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

from skyward.agent.config import DEFAULT_AGENT_PORT
from skyward.errors import ConfigurationError
from skyward.providers.cloud.settings import (
    check_attempts,
    check_flag,
    check_node_settings,
    check_port,
    check_seconds,
    check_seconds_value,
    check_urls,
)

CLIENT_ID_ENV = "VERDA_CLIENT_ID"
CLIENT_SECRET_ENV = "VERDA_CLIENT_SECRET"
DEFAULT_API_URL = "https://api.verda.com/v1"
DEFAULT_ADDRESS_URL = "https://checkip.amazonaws.com"


@dataclass(frozen=True, slots=True)
class Verda:
    """Run the pool's nodes as Verda instances.

    region:            a location code (``"FIN-01"``); ``None`` picks, at pool start, a
                       location that has capacity for the chosen instance type.
    client_address:    the public IPv4 address the client connects from; each node's
                       host firewall admits the agent port from this address only
                       (Verda's API has no cloud firewall). ``None``: discovered once per
                       pool from ``address_url``.
    image:             OS image type; ``None`` takes the API's default image.
    ssh_key_ids:       SSH keys of yours to put on the nodes; empty: a throwaway key
                       (the deploy call requires one) whose private half is discarded.
    agent_port:        the TCP port each node's agent listens on (CURVE-encrypted).
    grace_period:      seconds an agent keeps running without hearing from the client.
    bootstrap_timeout: seconds to wait for every agent to answer once instances run.
    provision_timeout: seconds to wait for every instance to be running.
    poll_interval:     seconds between status polls while instances start.
    api_url:           the API endpoint, including ``/v1`` (plain http is refused except
                       on loopback).
    address_url:       where ``client_address=None`` is discovered.
    api_timeout:       seconds one API call may take before it counts as failed.
    api_retries:       attempts per API call for rate limits (429) and, where repeating is
                       safe, server errors.
    api_backoff:       seconds of the first wait between attempts (doubling, at most 30 s)
                       when the API does not say how long to wait.
    reap:              on every pool start, delete instances earlier skyward pools left
                       behind: shut down, or past their expiry (see ``reaper``).
    """

    region: str | None = None
    client_address: str | None = None
    image: str | None = None
    ssh_key_ids: Sequence[str] = ()
    agent_port: int = DEFAULT_AGENT_PORT
    grace_period: float = 30.0
    bootstrap_timeout: float = 900.0
    provision_timeout: float = 900.0
    poll_interval: float = 3.0
    api_url: str = DEFAULT_API_URL
    address_url: str = DEFAULT_ADDRESS_URL
    api_timeout: float = 60.0
    api_retries: int = 8
    api_backoff: float = 0.5
    reap: bool = True

    def __post_init__(self) -> None:
        if self.region is not None and (not isinstance(self.region, str) or not self.region.strip()):
            raise ConfigurationError(
                f"Verda(region={self.region!r}) must be a location code such as 'FIN-01', "
                "or None to pick a location with capacity"
            )
        check_node_settings(
            "Verda",
            grace_period=self.grace_period,
            bootstrap_timeout=self.bootstrap_timeout,
            client_address=self.client_address,
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
        check_port("Verda", "agent_port", self.agent_port)
        check_seconds("Verda", self, ("provision_timeout", "poll_interval", "api_timeout"))
        backoff = self.api_backoff
        if isinstance(backoff, bool) or not isinstance(backoff, int | float) or backoff != 0:  # 0: retry at once
            check_seconds_value("Verda", "api_backoff", self.api_backoff)
        check_attempts("Verda", "api_retries", self.api_retries)
        check_urls("Verda", self, ("api_url", "address_url"))
        check_flag("Verda", "reap", self.reap)


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
