"""A third-party plugin, installed from tests/plugin_example, adds a provider and a backend."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import pytest

import skyward as sky
from skyward.errors import ProvisioningError
from skyward.providers.cloud.naming import RUN_DIR_PREFIX


@sky.compute
def double(x: int) -> int:
    return 2 * x


@sky.compute
@sky.distributed.tagged(tag="blue")
def tagged() -> str:
    import os

    return os.environ["SKYWARD_EXAMPLE_TAG"]


def test_the_plugin_is_discovered_through_entry_points() -> None:
    names = {ep.name for ep in importlib.metadata.entry_points(group="skyward")}
    assert "example" in names
    from skyward.plugins.registry import registry

    assert "delayed" in {p.name for p in registry.providers()}


def test_a_third_party_provider_runs_computations() -> None:
    with sky.ComputePool(provider=sky.Delayed(seconds=0.1), nodes=2, display="quiet") as pool:
        assert pool.provider_name == "delayed"
        assert (double(21) >> pool) == 42
        assert (double(1) @ pool) == (2, 2)
        assert (tagged() >> pool) == "blue"
        run_dir = Path(f"{RUN_DIR_PREFIX}{pool.spec.pool_id}")
        assert run_dir.is_dir()  # its nodes' agents made it on this machine, which outlives them
    assert not run_dir.exists()  # and the template removed it with the nodes


def test_a_provider_failing_to_launch_leaves_nothing() -> None:
    pool = sky.ComputePool(provider=sky.Delayed(fail=True), nodes=2, display="quiet")
    with pytest.raises(ProvisioningError, match="told to fail"):
        pool.open()
    assert not pool.is_active
    assert pool._driver.api is None  # type: ignore[attr-defined]  # its "cloud" removed, with every instance


def test_unknown_distributed_backend_lists_the_available_ones() -> None:
    with pytest.raises(AttributeError, match=r"no backend 'nonexistent'.*tagged"):
        _ = sky.distributed.nonexistent


@pytest.mark.parametrize(
    ("plugin", "statement", "hint"),
    [
        ("sklearn", "from skyward.integrations import ScikitLearnPool", "pip install 'skyward[sklearn]'"),
        ("torch", "from skyward.distributed import torch", "pip install 'skyward[torch]'"),
        ("vastai", "from skyward import VastAI", "pip install 'skyward[vastai]'"),
        ("runpod", "from skyward import RunPod", "pip install 'skyward[runpod]'"),
    ],
)
def test_every_plugin_name_imported_without_its_plugin_says_what_to_install(
    plugin: str, statement: str, hint: str
) -> None:
    import subprocess
    import sys

    probe = (
        "from skyward.plugins.registry import registry\n"
        f"registry.unregister(registry.pm.get_plugin({plugin!r}))  # as if it were not installed\n"
        "try:\n"
        f"    {statement}\n"
        "except ImportError as exc:\n"
        "    print(type(exc).__name__, exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.startswith("PluginMissingError") and hint in out, out


def test_importing_a_name_whose_plugin_is_missing_keeps_the_install_hint() -> None:
    import subprocess
    import sys

    probe = (
        "import skyward\n"
        "from skyward.plugins.registry import registry\n"
        "registry.unregister(registry.pm.get_plugin('aws'))  # as if skyward-aws were not installed\n"
        "try:\n"
        "    from skyward import AWS\n"
        "except ImportError as exc:\n"
        "    print('import:', type(exc).__name__, exc)\n"
        "print('hasattr:', hasattr(skyward, 'AWS'))\n"
        "try:\n"
        "    skyward.AWS\n"
        "except AttributeError as exc:\n"
        "    print('attribute:', exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    hint = "pip install 'skyward[aws]'"
    lines = out.splitlines()
    assert lines[0].startswith("import: PluginMissingError") and hint in lines[0]
    assert lines[1] == "hasattr: False"  # hasattr and getattr still get an AttributeError
    assert lines[2].startswith("attribute:") and hint in lines[2]
