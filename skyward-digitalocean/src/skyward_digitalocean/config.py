"""``DigitalOcean(region=...)``: what a user writes to run a pool on DigitalOcean droplets.

Only ``region`` is in the seed's signature; everything else has a default that works
against the real API and exists for networks and tests that need another value.
The API token is never a field: it comes from ``DIGITALOCEAN_TOKEN`` (the variable pydo,
doctl and the DigitalOcean docs use), so it never lands in a pickled pool spec, a repr
or a droplet's user-data.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import ClassVar

from skyward.errors import ConfigurationError
from skyward.providers.cloud import CloudSettings
from skyward.providers.cloud.settings import check_urls

TOKEN_ENV = "DIGITALOCEAN_TOKEN"
"""The environment variable the API token is read from."""
DEFAULT_API_URL = "https://api.digitalocean.com"

REGIONS: tuple[str, ...] = ("nyc1", "nyc3", "sfo2", "sfo3", "ams3", "sgp1", "lon1", "fra1", "tor1")
"""The regions the seed API reference lists for ``DigitalOcean(region=...)``: examples,
not the whole list. The regions a size can be created in come from the API at pool
start (``GET /v2/sizes``, each size's ``regions``): GPU droplets, for one, live in
regions this list lacks (nyc2, atl1), and DO's own OpenAPI enum of region slugs
(shared/attributes/region_slug.yml) lacks atl1 too, so no table kept here is trusted."""
_REGION_SLUG = re.compile(r"^[a-z]{3}[0-9]$")  # every slug DO has published: nyc1, atl1, blr1...


@dataclass(frozen=True, slots=True)
class DigitalOcean(CloudSettings):
    """Run the pool's nodes as DigitalOcean droplets (GPU droplets for accelerators).

    region:            a region slug (``"nyc1"``, ``"atl1"``); checked against the
                       regions DigitalOcean's API offers the chosen size in.
    image:             droplet image slug; ``None`` picks Ubuntu for CPU sizes and
                       DigitalOcean's AI/ML-ready GPU image for GPU sizes.
    api_url:           the API endpoint (plain http is refused except on loopback).

    The rest is every cloud's (``skyward.providers.cloud.CloudSettings``):
    ``client_address`` (the cloud firewall opens the node ports to it only),
    ``grace_period``, ``bootstrap_timeout``, ``agent_port``, ``provision_timeout``,
    ``poll_interval``, ``address_url``, ``api_timeout``, ``api_retries``, ``api_backoff``
    and ``reap`` (droplets earlier pools left: powered off, or past their expiry tag).
    """

    stopped_node_note: ClassVar[str] = "a powered-off droplet bills at its full rate"
    """A node whose client is gone can only power off (no token reaches it), and a powered-off droplet bills
    (``skyward.providers.StoppedNodesBill``)."""

    region: str = "nyc1"
    """A region slug (``"nyc1"``, ``"tor1"``); checked against the regions that offer the chosen size."""
    image: str | None = None
    """A droplet image slug; ``None``: Ubuntu for CPU sizes, DigitalOcean's AI/ML-ready image for GPU sizes."""
    api_url: str = DEFAULT_API_URL
    """The API endpoint (plain http is refused except on loopback)."""

    def __post_init__(self) -> None:
        CloudSettings.__post_init__(self)
        if not isinstance(self.region, str) or not _REGION_SLUG.match(self.region):
            raise ConfigurationError(
                f"DigitalOcean(region={self.region!r}) is not a region slug; use one such as: {', '.join(REGIONS)} "
                "(GPU droplets: tor1, nyc2, atl1; `skyward offers` lists what each region has)"
            )
        if self.image is not None and (not isinstance(self.image, str) or not self.image.strip()):
            raise ConfigurationError(
                f"DigitalOcean(image={self.image!r}) must be an image slug such as 'ubuntu-24-04-x64'"
            )
        check_urls("DigitalOcean", self, ("api_url",))


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
