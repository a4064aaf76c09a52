"""Shared pieces for cloud providers: the orchestration template and the helpers under it.

:class:`CloudProvider` (and :class:`SpotCloudProvider` for a cloud with a spot market)
owns plan -> create in parallel -> poll -> handles -> events -> cleanup -> verified
terminate -> teardown; a driver supplies its API's verbs. :class:`CloudSettings` is the
config base every such cloud shares. The modules beside it hold the rules the plugins
have in common (which requests may be retried, the client's address, expiry labels).
"""

from skyward.providers.cloud.settings import CloudSettings
from skyward.providers.cloud.template import (
    CloudProvider,
    Instance,
    InstanceState,
    Labels,
    NodeRequest,
    Offer,
    PortMappedCloudProvider,
    SpotCloudProvider,
)

__all__ = [
    "CloudProvider",
    "CloudSettings",
    "Instance",
    "InstanceState",
    "Labels",
    "NodeRequest",
    "Offer",
    "PortMappedCloudProvider",
    "SpotCloudProvider",
]
