"""Shared pieces for cloud providers: the orchestration template and the helpers under it.

:class:`CloudProvider` (and :class:`SpotCloudProvider` for a cloud with a spot market,
:class:`PortMappedCloudProvider` for containers behind a port mapping) owns plan ->
create in parallel -> poll -> handles -> events -> cleanup -> verified terminate ->
teardown; a driver supplies its API's verbs (``choose_offer`` returns a
:class:`ChosenOffer`, ``create`` gets a :class:`NodeRequest` and the pool's
:class:`Labels`, ``describe`` answers :class:`Instance` values). :class:`CloudSettings`
is the config base every such cloud shares, and :func:`cloud_bootstrap_context` what
every node installs by default (a single-tenant VM: it powers off when its agent exits;
see :mod:`skyward.providers.contexts`).

The modules beside it hold the rules the plugins have in common, each importable by a
plugin: ``addresses`` (the client's address, the firewall source), ``naming`` (expiry
labels, the run directory), ``retry`` and ``http`` (which requests may be retried, a
bearer-key JSON client), ``sizing`` (the per-node request), ``removal`` and ``reaping``
(deleting and verifying leftovers), ``sshkey``, ``marketplace`` and
``marketplace_driver`` (container marketplaces).
"""

from skyward.providers.cloud.bootstrap import cloud_bootstrap_context
from skyward.providers.cloud.settings import CloudSettings
from skyward.providers.cloud.template import (
    ChosenOffer,
    CloudProvider,
    Instance,
    InstanceState,
    Labels,
    NodeRequest,
    PortMappedCloudProvider,
    SpotCloudProvider,
)

__all__ = [
    "ChosenOffer",
    "CloudProvider",
    "CloudSettings",
    "Instance",
    "InstanceState",
    "Labels",
    "NodeRequest",
    "PortMappedCloudProvider",
    "SpotCloudProvider",
    "cloud_bootstrap_context",
]
