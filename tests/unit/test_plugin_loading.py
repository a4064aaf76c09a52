"""The core's own plugin loads through its entry point, like every other plugin."""

from __future__ import annotations

import subprocess
import sys

import pluggy
import pytest

from skyward.errors import ConfigurationError
from skyward.plugins import builtin, hookspecs
from skyward.plugins.registry import BUILTIN, check_builtin, distribution_of, registry


def test_the_cores_plugin_comes_from_skyward_cores_entry_point() -> None:
    plugin = registry.pm.get_plugin(BUILTIN)
    assert plugin is builtin
    assert distribution_of(registry.pm, plugin).startswith("skyward-core ")


def test_the_cores_hooks_run_after_every_other_plugins() -> None:
    """As when the registry registered it before every other plugin: the merged order,
    and so which plugin wins a catalog entry both describe, stays what it was."""
    for hook in ("skyward_providers", "skyward_accelerators", "skyward_distributed_backends"):
        impls = getattr(registry.pm.hook, hook).get_hookimpls()  # the last one runs first
        assert impls[0].plugin is builtin, hook


def test_metadata_without_the_cores_entry_point_is_told_to_install_skyward_core_again() -> None:
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    with pytest.raises(ConfigurationError, match=r"'skyward.builtin'.*Install skyward-core again"):
        check_builtin(pm)


def test_loading_the_registry_imports_no_provider() -> None:
    code = (
        "import sys\n"
        "import skyward.plugins.registry, skyward.accelerators\n"
        "print(sorted(m for m in sys.modules if m.startswith(('skyward.providers', 'skyward.api'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "[]"
