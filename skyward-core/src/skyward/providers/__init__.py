"""Providers: where nodes come from. Local is in core; clouds are plugins.

This module is the provider contract: everything a provider plugin imports from core,
besides ``skyward.errors`` (a test walks every plugin's imports and holds it to that).
Cloud drivers add :mod:`skyward.providers.cloud` (the template and its helpers).

The driver and the pool
    :class:`Provider` (the generic base class of a driver), :class:`ProviderDriver` (what
    the pool calls), :class:`PoolSpec` (the validated request every method receives),
    :class:`NodeHandle`, :class:`UserDataFactory`, ``EventSink`` and the events a driver
    emits (:class:`Notice`, :class:`InstanceLaunching`, :class:`InstanceProvisioned`,
    :class:`BootstrapStarting`, :class:`BootstrapProgress`).
Settings
    :class:`ProviderSettings` (the base of every config: grace period, bootstrap timeout,
    client address), ``NODE_TTL_MARGIN``, ``DEFAULT_AGENT_PORT``, :func:`node_ports` (the
    tcp ports a node listens on, which a firewall opens), :func:`settings_of`.
Optional abilities, each a runtime-checkable Protocol
    :class:`SpotMarket`, :class:`SpotReplacement`, :class:`InterruptionNotices`,
    :class:`ReclaimWatch`, :class:`ElasticNodes` (elastic pools, replacing lost nodes),
    :class:`NodeWatch`, :class:`PortMapping`, :class:`VolumeMounts`, :class:`FuseMounts`,
    :class:`FollowsBootstrap`, :class:`ConsoleOutput`, :class:`Bakes` (with its
    :class:`BakeStore` and :class:`Bakery`); :class:`StoppedNodesBill` (on a config: a
    node whose client is gone stops but bills until deleted; :func:`sweep_advice` and
    :func:`sweep_installed` decide what a kept pool says about it).
The node's bootstrap
    :class:`BootstrapContext` and :func:`local_bootstrap_context` (a node on this machine:
    never shuts it down); a cloud node's is
    :func:`skyward.providers.cloud.cloud_bootstrap_context` (powers the machine off when
    its agent exits). :mod:`skyward.providers.contexts` says what each does. The notices
    drop box: :func:`notices_dir`, :class:`NoticeKind`.
The plugin
    :class:`ProviderPlugin` (``ProviderPlugin[C]``: ``create_driver(config: C)`` returns a
    ``ProviderDriver``), :class:`VolumePlugin`, ``hookimpl``.
The ``skyward`` command's part
    :class:`ProviderTools`, :class:`ResourceSession`, :class:`Resource`, :class:`Removal`,
    :class:`CredentialCheck`, :class:`AddressSource`, the resource kinds, :func:`parse_time`,
    :func:`parse_number`; offers (:class:`Offer`, :class:`OfferQuery`, :class:`OfferSource`,
    :func:`offers_from`, :func:`fits`); a session's shared steps (:func:`config_for`,
    :func:`credential_check`, :class:`reported_as`).
Choosing a machine
    the spot plan (:class:`Market`, :class:`NodePlan`, the strategies, :func:`plan_markets`,
    :func:`normalize_spot`, :func:`min_spot_nodes`, :func:`wants_spot`); instance types
    (:class:`InstanceType`, :func:`select_instance`, :class:`NoMatchingInstanceError`);
    accelerators (:class:`Accelerator`, :class:`Catalog`, :class:`CatalogEntry`,
    :func:`current_catalog`, :func:`parse_accelerator`); sizes (``KIB`` ... ``TIB``,
    :func:`parse_memory`, :func:`format_memory`).

``skyward.testing`` checks any provider against the contract. See docs/plugins.md.
"""

from skyward.accelerators.catalog import Catalog, CatalogEntry, current_catalog
from skyward.accelerators.parse import parse_accelerator
from skyward.accelerators.spec import Accelerator
from skyward.agent.config import DEFAULT_AGENT_PORT, node_ports
from skyward.agent.notices import NoticeKind, notices_dir
from skyward.events import BootstrapProgress, BootstrapStarting, InstanceLaunching, InstanceProvisioned, Notice
from skyward.instances import InstanceType, NoMatchingInstanceError, select_instance
from skyward.plugins.contributions import ProviderPlugin, VolumePlugin
from skyward.plugins.hookspecs import hookimpl
from skyward.providers.baking import (
    BAKED_IMAGE,
    LABEL_BAKED,
    LABEL_BAKED_FROM,
    BakedImage,
    BakeKey,
    Bakery,
    Bakes,
    BakeStore,
    bake_key,
    baked_resource,
)
from skyward.providers.checks import AccountCheck, AccountChecks
from skyward.providers.contexts import BootstrapContext, local_bootstrap_context
from skyward.providers.deferred import deferred_attributes, deferred_driver
from skyward.providers.offers import Offer, OfferQuery, OfferSource, ShippedOffers, fits, offers_from
from skyward.providers.protocol import (
    ConsoleOutput,
    ElasticNodes,
    EventSink,
    FollowsBootstrap,
    FuseMounts,
    InterruptionNotices,
    NodeHandle,
    NodeWatch,
    PortMapping,
    Provider,
    ProviderDriver,
    ReclaimWatch,
    SpotMarket,
    SpotReplacement,
    UserDataFactory,
    VolumeMounts,
)
from skyward.providers.reachability import Unreachable, unreachable
from skyward.providers.resources import (
    FIREWALL,
    INSTANCE,
    INSTANCE_PROFILE,
    KEY_PAIR,
    ROLE,
    SECURITY_GROUP,
    SSH_KEY,
    STARTUP_SCRIPT,
    TAG,
    VOLUME,
    AddressSource,
    CredentialCheck,
    ProviderTools,
    Removal,
    Resource,
    ResourceSession,
    parse_number,
    parse_time,
)
from skyward.providers.sessions import NETWORK_FIX, config_for, credential_check, for_one_check, reported_as
from skyward.providers.settings import NODE_TTL_MARGIN, ProviderSettings, settings_of
from skyward.providers.spec import PoolSpec
from skyward.providers.sweeping import StoppedNodesBill, sweep_advice, sweep_installed
from skyward.spot import (
    Market,
    NodePlan,
    SpotAlways,
    SpotIfAvailable,
    SpotNever,
    SpotPercent,
    SpotStrategy,
    min_spot_nodes,
    normalize_spot,
    plan_markets,
    wants_spot,
)
from skyward.units import GIB, KIB, MIB, TIB, format_memory, parse_memory

__all__ = [
    "BAKED_IMAGE", "DEFAULT_AGENT_PORT", "FIREWALL", "GIB", "INSTANCE", "INSTANCE_PROFILE", "KEY_PAIR", "KIB",
    "LABEL_BAKED", "LABEL_BAKED_FROM", "MIB", "NODE_TTL_MARGIN", "ROLE", "SECURITY_GROUP", "SSH_KEY",
    "STARTUP_SCRIPT", "TAG", "TIB", "VOLUME",
    "AccountCheck", "AccountChecks", "Accelerator", "AddressSource", "BakeKey", "BakeStore", "BakedImage", "Bakery",
    "Bakes", "BootstrapContext",
    "BootstrapProgress", "BootstrapStarting", "Catalog", "CatalogEntry", "ConsoleOutput", "CredentialCheck",
    "ElasticNodes", "EventSink", "FollowsBootstrap", "InstanceLaunching", "InstanceProvisioned", "InstanceType",
    "InterruptionNotices", "Market", "NoMatchingInstanceError", "NodeHandle", "NodePlan", "NodeWatch", "Notice",
    "NoticeKind",
    "Offer", "OfferQuery", "OfferSource", "PoolSpec", "PortMapping", "Provider", "ProviderDriver", "ProviderPlugin",
    "ProviderSettings", "ProviderTools", "ReclaimWatch", "Removal", "Resource", "ResourceSession", "SpotAlways",
    "SpotIfAvailable", "SpotMarket", "SpotNever", "SpotPercent", "SpotReplacement", "SpotStrategy",
    "StoppedNodesBill",
    "UserDataFactory", "VolumeMounts", "VolumePlugin", "FuseMounts",
    "bake_key", "baked_resource", "config_for", "credential_check", "current_catalog", "deferred_attributes",
    "deferred_driver", "fits",
    "format_memory",
    "hookimpl", "local_bootstrap_context", "min_spot_nodes", "normalize_spot", "notices_dir", "offers_from",
    "parse_accelerator", "parse_memory", "parse_number", "parse_time", "plan_markets", "reported_as",
    "node_ports", "select_instance", "settings_of", "sweep_advice", "sweep_installed", "wants_spot",
    "NETWORK_FIX", "ShippedOffers", "Unreachable", "for_one_check", "unreachable",
]  # fmt: skip
