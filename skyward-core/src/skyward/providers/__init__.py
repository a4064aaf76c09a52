"""Providers: where nodes come from. Local is in core; clouds are plugins.

This module is the provider contract, everything a provider plugin imports:

- :class:`Provider` (the generic base class of a driver) and :class:`ProviderDriver`
  (what the pool calls), :class:`NodeHandle`, :class:`UserDataFactory`, ``EventSink``;
- :class:`ProviderSettings`, the base of every provider config (grace period, bootstrap
  timeout, client address), and ``NODE_TTL_MARGIN``;
- the optional abilities, each a runtime-checkable Protocol: :class:`SpotMarket`,
  :class:`SpotReplacement`, :class:`InterruptionNotices`, :class:`ReclaimWatch`,
  :class:`PortMapping`, :class:`VolumeMounts`, :class:`FollowsBootstrap`;
- the notices drop box (:func:`notices_dir`, :class:`NoticeKind`);
- :class:`PoolSpec`, the validated pool request every driver method receives.

Cloud drivers build on :class:`skyward.providers.cloud.CloudProvider` (the template);
``skyward.testing`` checks any provider against the contract. See docs/plugins.md.
"""

from skyward.agent.notices import NoticeKind, notices_dir
from skyward.providers.protocol import (
    EventSink,
    FollowsBootstrap,
    InterruptionNotices,
    NodeHandle,
    PortMapping,
    Provider,
    ProviderDriver,
    ReclaimWatch,
    SpotMarket,
    SpotReplacement,
    UserDataFactory,
    VolumeMounts,
)
from skyward.providers.settings import NODE_TTL_MARGIN, ProviderSettings, settings_of
from skyward.providers.spec import PoolSpec

__all__ = [
    "NODE_TTL_MARGIN",
    "EventSink",
    "FollowsBootstrap",
    "InterruptionNotices",
    "NodeHandle",
    "NoticeKind",
    "PoolSpec",
    "PortMapping",
    "Provider",
    "ProviderDriver",
    "ProviderSettings",
    "ReclaimWatch",
    "SpotMarket",
    "SpotReplacement",
    "UserDataFactory",
    "VolumeMounts",
    "notices_dir",
    "settings_of",
]
