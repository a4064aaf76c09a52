"""The core's own plugin: the Local provider, the ZeroMQ transport and core catalogs.

It is registered like any other plugin, so the core uses the same hooks a third party
would.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from skyward.plugins.contributions import ProviderPlugin
from skyward.plugins.hookspecs import hookimpl

if TYPE_CHECKING:  # the config class, for the record's type; the hook imports it when called
    from skyward.providers.local import Local


@hookimpl
def skyward_providers() -> Sequence[ProviderPlugin[Local]]:
    from skyward.providers.local import Local, LocalDriver

    return [ProviderPlugin(name="local", config_type=Local, create_driver=LocalDriver)]


# The core accelerator catalog (NVIDIA, AWS silicon, Google TPUs, AMD) is data contributed
# through the same hook a third-party catalog would use.
from skyward.accelerators import skyward_accelerators  # noqa: E402, F401

# The core's distributed backends (jax, keras, tensorflow), through the same hook as
# skyward-torch's torch and transformers.
from skyward.distributed.backends.plugin import skyward_distributed_backends  # noqa: E402, F401
