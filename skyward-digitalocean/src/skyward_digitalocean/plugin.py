"""Hook implementations of skyward-digitalocean, loaded through the ``skyward`` entry-point group."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from skyward.providers import ProviderPlugin, ProviderTools, hookimpl

if TYPE_CHECKING:  # the config class, for the record's type; the hooks import it when called
    from skyward_digitalocean.config import DigitalOcean


@hookimpl
def skyward_providers() -> Sequence[ProviderPlugin[DigitalOcean]]:
    from skyward_digitalocean.config import DigitalOcean
    from skyward_digitalocean.driver import DigitalOceanDriver

    return [ProviderPlugin(name="digitalocean", config_type=DigitalOcean, create_driver=DigitalOceanDriver)]


@hookimpl
def skyward_exports() -> Mapping[str, object]:
    """``skyward.DigitalOcean``."""
    from skyward_digitalocean.config import DigitalOcean

    return {"DigitalOcean": DigitalOcean}


@hookimpl
def skyward_provider_tools() -> Sequence[ProviderTools]:
    """``skyward ls``, ``down``, ``offers`` and ``doctor`` for this provider."""
    from skyward_digitalocean.tools import TOOLS

    return [TOOLS]
