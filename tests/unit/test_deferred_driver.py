"""A provider's driver module is imported when a pool is built on it, not when plugins load."""

from __future__ import annotations

import subprocess
import sys

import pytest

from skyward.providers import ProviderDriver, deferred_driver
from skyward.providers.local import Local, LocalDriver


def test_the_driver_is_built_from_its_path_with_the_pools_config() -> None:
    create = deferred_driver(Local, "skyward.providers.local", "LocalDriver")
    driver = create(Local())
    assert isinstance(driver, LocalDriver) and isinstance(driver, ProviderDriver)


def test_a_path_that_names_no_driver_says_which() -> None:
    with pytest.raises(TypeError, match=r"skyward\.providers\.local\.Nothing is not a driver class"):
        deferred_driver(Local, "skyward.providers.local", "Nothing")(Local())
    with pytest.raises(TypeError, match=r"builtins\.repr\(Local\) is not a ProviderDriver"):
        deferred_driver(Local, "builtins", "repr")(Local())


def test_listing_the_providers_imports_no_cloud_driver() -> None:
    """Every process that loads the plugins lists the providers (a pool looks its own up):
    none of the cloud drivers may come with that."""
    code = (
        "import sys; from skyward.plugins.registry import registry; registry.providers(); "
        "print(sorted(m for m in sys.modules if m.startswith('skyward_') and m.endswith('.driver')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
