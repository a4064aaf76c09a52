"""Every plugin's imports from core go through its contract.

A provider plugin (the five clouds, and the example a third party copies) imports from
core only the provider contract, ``skyward.providers`` and ``skyward.providers.*``, and
``skyward.errors``: then a change inside core that keeps the contract breaks no provider.
The two plugins that are not providers have their own, named surfaces: skyward-torch is a
distributed backend (the backend kit under ``skyward.distributed.backends``, the worker's
``skyward.runtime.context``, the hook records), skyward-sklearn an integration over the
public pool (``skyward`` itself and the few pool modules it builds on). The walk reads
every module with ``ast``, so an import inside a function or under ``TYPE_CHECKING``
counts as much as one at the top.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

PROVIDER_CONTRACT = ("skyward.providers", "skyward.errors")
"""Module prefixes a provider plugin may import from core (a prefix covers its submodules)."""

PROVIDER_PLUGINS = {
    "skyward-aws": ROOT / "skyward-aws" / "src",
    "skyward-digitalocean": ROOT / "skyward-digitalocean" / "src",
    "skyward-gcp": ROOT / "skyward-gcp" / "src",
    "skyward-verda": ROOT / "skyward-verda" / "src",
    "skyward-vastai": ROOT / "skyward-vastai" / "src",
    "skyward-runpod": ROOT / "skyward-runpod" / "src",
}

EXAMPLE = ROOT / "tests" / "plugin_example" / "src"
EXAMPLE_BACKEND = ("skyward.plugins.contributions",)
"""The example plugin is a provider and a distributed backend: its backend half takes
``DistributedBackend`` from the hook records; its provider half, the contract only."""

OTHER_PLUGINS: dict[str, tuple[Path, tuple[str, ...]]] = {
    "skyward-torch": (
        ROOT / "skyward-torch" / "src",
        (
            "skyward.errors",
            "skyward.distributed.backends",  # the backend kit: decorator, env, rendezvous, framework checks
            "skyward.runtime.context",  # where a worker is (InstanceInfo)
            "skyward.plugins.contributions",  # DistributedBackend
            "skyward.plugins.hookspecs",  # hookimpl
        ),
    ),
    "skyward-sklearn": (
        ROOT / "skyward-sklearn" / "src",
        (
            "skyward.errors",
            "skyward.api.compute",  # PendingCompute, what a task submitted to the pool is
            "skyward.api.pool",  # ComputePool, which its pools extend
            "skyward.api.options",  # PoolOptions: ComputePool's parameters, shared by its pools
            "skyward.api.failover",  # ProviderChoice: what a pool's provider= may be
            "skyward.image",  # Image
            "skyward.providers",  # Local, the default provider of its pools
            "skyward.runtime.context",  # instance_info, on the worker
            "skyward.transport",  # serialize: joblib's batches travel as the pool's payloads
            "skyward.plugins.hookspecs",  # hookimpl
        ),
    ),
}


def core_imports(source: Path) -> Iterator[tuple[Path, int, str]]:
    """(file, line, module) for every import of a ``skyward.*`` module under ``source``.
    ``import skyward`` and ``from skyward import X`` (the public API) are not core
    internals and are not reported."""
    for path in sorted(source.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
            elif isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            else:
                continue
            for module in modules:
                if module.startswith("skyward."):
                    yield path, node.lineno, module


def outside(source: Path, allowed: tuple[str, ...]) -> list[str]:
    def permitted(module: str) -> bool:
        return any(module == prefix or module.startswith(prefix + ".") for prefix in allowed)

    return [
        f"{path.relative_to(source)}:{line}: {module}"
        for path, line, module in core_imports(source)
        if not permitted(module)
    ]


@pytest.mark.parametrize("plugin", sorted(PROVIDER_PLUGINS))
def test_a_provider_plugin_imports_nothing_from_core_but_the_contract_and_the_errors(plugin: str) -> None:
    source = PROVIDER_PLUGINS[plugin]
    assert list(core_imports(source)), f"{plugin}: no import of core found under {source}: the walk looks elsewhere"
    assert outside(source, PROVIDER_CONTRACT) == []


def test_the_example_provider_imports_the_contract_and_only_its_backend_half_more() -> None:
    assert outside(EXAMPLE, PROVIDER_CONTRACT + EXAMPLE_BACKEND) == []


@pytest.mark.parametrize("plugin", sorted(OTHER_PLUGINS))
def test_the_plugins_that_are_not_providers_keep_to_their_named_surfaces(plugin: str) -> None:
    source, allowed = OTHER_PLUGINS[plugin]
    assert list(core_imports(source)), f"{plugin}: no import of core found under {source}"
    assert outside(source, allowed) == []


def test_the_walk_sees_imports_inside_functions_and_type_checking_blocks(tmp_path: Path) -> None:
    """The rule is only as good as the walk: an import hidden in a function or a
    TYPE_CHECKING block, or written as ``import skyward.x``, is reported."""
    (tmp_path / "plugin.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "import skyward\n"
        "from skyward import ComputePool\n"
        "from skyward.providers import PoolSpec\n"
        "if TYPE_CHECKING:\n"
        "    from skyward.api.spec import build_spec\n"
        "def f() -> None:\n"
        "    from skyward.cli.model import Resource\n"
        "    import skyward.baking\n"
    )
    assert [line.split(": ", 1)[1] for line in outside(tmp_path, PROVIDER_CONTRACT)] == [
        "skyward.api.spec",
        "skyward.cli.model",
        "skyward.baking",
    ]


def test_every_name_the_contract_lists_is_importable_from_it() -> None:
    import skyward.providers
    import skyward.providers.cloud

    for module in (skyward.providers, skyward.providers.cloud):
        missing = [name for name in module.__all__ if not hasattr(module, name)]
        assert missing == [], f"{module.__name__} lists names it does not have: {missing}"
