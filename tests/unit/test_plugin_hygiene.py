"""Plugins are checked when they load: a misspelled hook fails loudly, and two plugins
cannot both own one provider name."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pluggy
import pytest

from skyward.errors import ConfigurationError
from skyward.plugins import hookspecs
from skyward.plugins.contributions import ProviderPlugin
from skyward.plugins.hookspecs import hookimpl
from skyward.plugins.registry import check_hooks, registry
from skyward.providers.local import LocalDriver


class _Misspelled:
    @hookimpl
    def skyward_provider(self) -> Sequence[ProviderPlugin]:  # the hook is skyward_providers
        return []


@dataclass(frozen=True)
class _Impostor:
    pass


class _SecondLocal:
    @hookimpl
    def skyward_providers(self) -> Sequence[ProviderPlugin]:
        return [ProviderPlugin(name="local", config_type=_Impostor, create_driver=LocalDriver)]


def test_a_misspelled_hook_is_refused_when_the_plugin_is_registered() -> None:
    plugin = _Misspelled()
    with pytest.raises(
        ConfigurationError, match=r"misspelled-plugin.*unknown hook 'skyward_provider'.*skyward_providers"
    ):
        registry.register(plugin, name="misspelled-plugin")
    assert not registry.pm.is_registered(plugin)  # not kept half-loaded


def test_a_misspelled_hook_fails_the_plugin_manager_check() -> None:
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    pm.register(_Misspelled(), name="from-an-entry-point")
    with pytest.raises(ConfigurationError, match="skyward_provider"):
        check_hooks(pm)


def test_two_plugins_registering_one_provider_name_are_refused_naming_both() -> None:
    plugin = _SecondLocal()
    registry.register(plugin, name="second-local")
    try:
        with pytest.raises(
            ConfigurationError, match=r"provider 'local'.*(skyward-core.*second-local|second-local.*skyward-core)"
        ):
            registry.providers()
    finally:
        registry.unregister(plugin)
    assert "local" in {p.name for p in registry.providers()}
