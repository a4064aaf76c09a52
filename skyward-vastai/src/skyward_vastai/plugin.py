"""Hook implementations of skyward-vastai, loaded through the ``skyward`` entry-point group.

pluggy imports this module in every process that loads the plugins (each worker on each
node included), so it imports only what the package's ``__init__`` already loads (the
config class). The driver (~70 modules and ~22 ms, mostly the cloud template and asyncio)
is imported when a pool is about to run on VastAI, the command line's tools (the API
client, offers and resources: ~6 modules, ~4 ms) when a command, ``sky.offers`` or
``selection="cheapest"`` asks for them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from skyward.providers import ProviderPlugin, ProviderTools, deferred_driver, hookimpl
from skyward_vastai.config import VastAI


@hookimpl
def skyward_providers() -> Sequence[ProviderPlugin[VastAI]]:
    return [
        ProviderPlugin(
            name="vastai",
            config_type=VastAI,
            create_driver=deferred_driver(VastAI, "skyward_vastai.driver", "VastAIDriver"),
        )
    ]


@hookimpl
def skyward_exports() -> Mapping[str, object]:
    """``skyward.VastAI``."""
    return {"VastAI": VastAI}


@hookimpl
def skyward_provider_tools() -> Sequence[ProviderTools]:
    """``skyward ls``, ``down``, ``offers`` and ``doctor`` for VastAI."""
    from skyward_vastai.tools import TOOLS  # noqa: PLC0415  # deferred: ~6 modules, ~4 ms; the command line only

    return [TOOLS]
