"""``DigitalOcean(region=...)``: what a user writes to run a pool on DigitalOcean droplets.

Only ``region`` is in the seed's signature; everything else has a default that works
against the real API and exists for networks and tests that need another value.
The API token is never a field: it comes from ``DIGITALOCEAN_TOKEN`` (the variable pydo,
doctl and the DigitalOcean docs use), so it never lands in a pickled pool spec, a repr
or a droplet's user-data.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from skyward.agent.config import DEFAULT_AGENT_PORT
from skyward.errors import ConfigurationError
from skyward.providers.cloud.settings import (
    check_attempts,
    check_flag,
    check_node_settings,
    check_port,
    check_seconds,
    check_urls,
)

TOKEN_ENV = "DIGITALOCEAN_TOKEN"
DEFAULT_API_URL = "https://api.digitalocean.com"
# Answers a plain GET with the caller's public IPv4 address and nothing else.
DEFAULT_ADDRESS_URL = "https://checkip.amazonaws.com"

REGIONS: tuple[str, ...] = ("nyc1", "nyc3", "sfo2", "sfo3", "ams3", "sgp1", "lon1", "fra1", "tor1")
"""The regions the seed API reference lists for ``DigitalOcean(region=...)``."""


@dataclass(frozen=True, slots=True)
class DigitalOcean:
    """Run the pool's nodes as DigitalOcean droplets (GPU droplets for accelerators).

    region:            one of :data:`REGIONS`.
    client_address:    the public IPv4 address the client connects from; the pool's
                       cloud firewall opens the agent port to this address only. ``None``
                       asks ``address_url`` once per pool.
    image:             droplet image slug; ``None`` picks Ubuntu for CPU sizes and
                       DigitalOcean's AI/ML-ready GPU image for GPU sizes.
    agent_port:        the TCP port each node's agent listens on (CURVE-encrypted).
    grace_period:      seconds a node's agent keeps running without hearing from the
                       client before it exits.
    bootstrap_timeout: seconds to wait for every agent to answer once droplets are active.
    provision_timeout: seconds to wait for every droplet to become active.
    poll_interval:     seconds between status polls while droplets start.
    api_url:           the API endpoint (plain http is refused except on loopback).
    address_url:       where ``client_address=None`` is discovered.
    api_timeout:       seconds one API call may take before it counts as failed.
    api_retries:       attempts per API call for rate limits (429) and, where repeating is
                       safe, server errors.
    api_backoff:       seconds of the first wait between attempts (doubling, at most 30 s)
                       when the API does not say how long to wait.
    reap:              on every pool start, delete droplets earlier skyward pools left
                       behind: powered off, or past their expiry tag (see ``reaper``).
    """

    region: str = "nyc1"
    client_address: str | None = None
    image: str | None = None
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
        if not isinstance(self.region, str) or self.region not in REGIONS:
            raise ConfigurationError(
                f"DigitalOcean(region={self.region!r}) is not a known region; use one of: {', '.join(REGIONS)}"
            )
        check_node_settings(
            "DigitalOcean",
            grace_period=self.grace_period,
            bootstrap_timeout=self.bootstrap_timeout,
            client_address=self.client_address,
        )
        if self.image is not None and (not isinstance(self.image, str) or not self.image.strip()):
            raise ConfigurationError(
                f"DigitalOcean(image={self.image!r}) must be an image slug such as 'ubuntu-24-04-x64'"
            )
        check_port("DigitalOcean", "agent_port", self.agent_port)
        check_seconds("DigitalOcean", self, ("provision_timeout", "poll_interval", "api_timeout", "api_backoff"))
        check_attempts("DigitalOcean", "api_retries", self.api_retries)
        check_urls("DigitalOcean", self, ("api_url", "address_url"))
        check_flag("DigitalOcean", "reap", self.reap)


def token_from_env() -> str:
    """The API token, or a ConfigurationError that says where it must be."""
    token = os.environ.get(TOKEN_ENV, "").strip()
    if not token:
        raise ConfigurationError(
            f"the DigitalOcean provider needs an API token in the {TOKEN_ENV} environment variable "
            "(create one under API > Tokens in the DigitalOcean control panel, with droplet, tag, "
            "firewall, ssh_key, size and region scopes)"
        )
    return token
