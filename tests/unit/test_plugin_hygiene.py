"""Plugins are checked when they load: a misspelled hook fails loudly, and two plugins
cannot both own one provider name."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

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


def _install_misspelled_distribution(site: Path) -> None:
    """A distribution ``misspelled-plugin 1.0`` on ``site``, as pip would leave it: a module
    and a dist-info whose entry point in the ``skyward`` group names that module."""
    (site / "misspelled_plugin.py").write_text(
        textwrap.dedent(
            """
            from skyward.plugins.hookspecs import hookimpl

            @hookimpl
            def skyward_provider():  # the hook is skyward_providers
                return []
            """
        )
    )
    info = site / "misspelled_plugin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: misspelled-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[{hookspecs.ENTRY_POINT_GROUP}]\nmisspelled = misspelled_plugin\n")


def test_a_misspelled_hook_in_a_plugin_loaded_from_an_entry_point_is_refused(tmp_path: Path) -> None:
    # the real loader, in a process of its own (it builds the process's one plugin manager)
    _install_misspelled_distribution(tmp_path)
    loads = "from skyward.plugins.registry import get_plugin_manager; get_plugin_manager()"
    done = _in_a_fresh_process(loads, tmp_path)
    assert done.returncode != 0, done.stdout
    assert "ConfigurationError: misspelled-plugin 1.0:" in done.stderr, done.stderr
    assert "unknown hook 'skyward_provider'" in done.stderr and "skyward_providers" in done.stderr


def test_the_entry_point_loader_accepts_a_plugin_whose_hooks_are_all_known(tmp_path: Path) -> None:
    # the control for the test above: the same distribution, spelled right, loads
    _install_misspelled_distribution(tmp_path)
    module = tmp_path / "misspelled_plugin.py"
    module.write_text(module.read_text().replace("def skyward_provider()", "def skyward_providers()"))
    loads = (
        "from skyward.plugins.registry import get_plugin_manager; print(get_plugin_manager().has_plugin('misspelled'))"
    )
    done = _in_a_fresh_process(loads, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True"


def _in_a_fresh_process(code: str, site: Path) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a new interpreter that also sees the distributions on ``site``."""
    env = {**os.environ, "PYTHONPATH": str(site)}
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120, check=False
    )


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
