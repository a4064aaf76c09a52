"""Hook implementations of skyward-gcp, loaded through the ``skyward`` entry-point group."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from skyward.providers import ProviderPlugin, ProviderTools, deferred_driver, hookimpl
from skyward_gcp.config import GCP

# pluggy imports this module in every process that reads the plugin registry, workers on
# every node included; Google's clients (google-cloud-compute alone is hundreds of
# modules) load only with the driver, when a pool is built on this provider, and the
# tools, when the command asks for them. The config imports nothing of Google's.


@hookimpl
def skyward_providers() -> Sequence[ProviderPlugin[GCP]]:
    return [
        ProviderPlugin(
            name="gcp",
            config_type=GCP,
            create_driver=deferred_driver(GCP, "skyward_gcp.driver", "GCPDriver"),
        )
    ]


@hookimpl
def skyward_exports() -> Mapping[str, object]:
    """``skyward.GCP``."""
    return {"GCP": GCP}


@hookimpl
def skyward_provider_tools() -> Sequence[ProviderTools]:
    """``skyward ls``, ``down``, ``offers`` and ``doctor`` for this provider."""
    from skyward_gcp.tools import TOOLS  # noqa: PLC0415  # Google's clients, see top

    return [TOOLS]
