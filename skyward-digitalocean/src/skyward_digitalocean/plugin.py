"""Hook implementations of skyward-digitalocean, loaded through the ``skyward`` entry-point group."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from skyward.providers import ProviderPlugin, ProviderTools, deferred_driver, hookimpl
from skyward_digitalocean.config import DigitalOcean

# pluggy imports this module in every process that reads the plugin registry, each worker
# on each node included, so the driver is imported when a pool is built on this provider
# and the CLI tools by the hook that returns them. Measured after the registry is loaded:
# the driver adds 42-43 modules and ~15 ms (cryptography, through the throwaway SSH key),
# the tools 4-6 modules and ~5 ms.
# The config is free: the package's ``__init__`` has already imported it.


@hookimpl
def skyward_providers() -> Sequence[ProviderPlugin[DigitalOcean]]:
    return [
        ProviderPlugin(
            name="digitalocean",
            config_type=DigitalOcean,
            create_driver=deferred_driver(DigitalOcean, "skyward_digitalocean.driver", "DigitalOceanDriver"),
        )
    ]


@hookimpl
def skyward_exports() -> Mapping[str, object]:
    """``skyward.DigitalOcean``."""
    return {"DigitalOcean": DigitalOcean}


@hookimpl
def skyward_provider_tools() -> Sequence[ProviderTools]:
    """``skyward ls``, ``down``, ``offers`` and ``doctor`` for this provider."""
    from skyward_digitalocean.tools import TOOLS  # noqa: PLC0415  # ~5 ms, see top

    return [TOOLS]
