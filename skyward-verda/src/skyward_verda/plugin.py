"""Hook implementations of skyward-verda, loaded through the ``skyward`` entry-point group."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from skyward.providers import ProviderPlugin, ProviderTools, hookimpl

if TYPE_CHECKING:  # the config class, for the record's type; the hooks import it when called
    from skyward_verda.config import Verda


@hookimpl
def skyward_providers() -> Sequence[ProviderPlugin[Verda]]:
    from skyward_verda.config import Verda
    from skyward_verda.driver import VerdaDriver

    return [ProviderPlugin(name="verda", config_type=Verda, create_driver=VerdaDriver)]


@hookimpl
def skyward_exports() -> Mapping[str, object]:
    """``skyward.Verda``."""
    from skyward_verda.config import Verda

    return {"Verda": Verda}


@hookimpl
def skyward_provider_tools() -> Sequence[ProviderTools]:
    """``skyward ls``, ``down``, ``offers`` and ``doctor`` for this provider."""
    from skyward_verda.tools import TOOLS

    return [TOOLS]
