"""The API reference (docs/reference/*.md, rendered by mkdocstrings) covers every public
name of every distribution: ``skyward.<Name>``, the ``__all__`` of each public module of
the core (``PUBLIC_MODULES``) and of every plugin package in this repository (found from
its ``skyward-*/src`` folders, so a new plugin cannot be left out by forgetting a list).

A name counts as covered when a ``::: dotted.path`` directive names it (as the user
writes it or where it is defined), or names the module it is reached through or defined
in (a whole module is rendered with its public members). A new public name without a
place in the reference fails here, naming it.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from xml.etree import ElementTree

import pytest

import skyward

ROOT = Path(__file__).resolve().parents[2]
# Core modules whose whole ``__all__`` is public API: the provider contract, its test kit,
# the events. (Other core modules keep an ``__all__`` for their own imports; what of them
# is public is exported as ``skyward.<Name>``.)
PUBLIC_MODULES = ("skyward.providers", "skyward.providers.cloud", "skyward.testing", "skyward.events")


def plugin_packages() -> list[str]:
    """Every plugin package of this repository: ``skyward-<name>/src/<package>``."""
    return sorted(
        package.name
        for package in ROOT.glob("skyward-*/src/*")
        if package.is_dir() and (package / "__init__.py").is_file() and package.name != "skyward"
    )


PLUGIN_PACKAGES = tuple(plugin_packages())
_DIRECTIVE = re.compile(r"^:::\s+([\w.]+)\s*$", re.MULTILINE)


def documented() -> set[str]:
    pages = (ROOT / "docs" / "reference").glob("*.md")
    return {m for page in pages for m in _DIRECTIVE.findall(page.read_text(encoding="utf-8"))}


def _home(obj: object, fallback: str) -> str:
    """The module that defines ``obj`` (where mkdocstrings finds it)."""
    module = getattr(obj, "__module__", None)
    return module if isinstance(module, str) and module.startswith("skyward") else fallback


def public_names() -> list[tuple[str, str]]:
    """(what the user writes, the dotted path of its definition)."""
    names = []
    for name, module in skyward._CORE_EXPORTS.items():
        names.append((f"skyward.{name}", f"{_home(getattr(skyward, name), module)}.{name}"))
    for package in (*PUBLIC_MODULES, *PLUGIN_PACKAGES):
        imported = importlib.import_module(package)
        for name in imported.__all__:
            names.append((f"{package}.{name}", f"{_home(getattr(imported, name), package)}.{name}"))
    return names


def _covered(path: str, directives: set[str], written: str | None = None) -> bool:
    if written is not None and (written in directives or written.rpartition(".")[0] in directives):
        return True  # as the user writes it, or its whole public module
    module, _, name = path.rpartition(".")
    if path in directives or module in directives:
        return True
    # a constant has no __module__: any directive of the same distribution naming it
    package = path.partition(".")[0]
    return any(d.partition(".")[0] == package and d.endswith(f".{name}") for d in directives)


def test_every_public_name_has_a_place_in_the_api_reference() -> None:
    directives = documented()
    missing = [f"{name} (defined at {path})" for name, path in public_names() if not _covered(path, directives, name)]
    assert not missing, "add these to a page of docs/reference/:\n" + "\n".join(missing)


def test_every_plugin_package_and_public_module_is_enumerated() -> None:
    # the seven plugins of this repository, each with a public name the reference must hold
    assert set(PLUGIN_PACKAGES) == {
        "skyward_aws", "skyward_digitalocean", "skyward_gcp", "skyward_verda", "skyward_vastai", "skyward_runpod",
        "skyward_torch", "skyward_sklearn",
    }  # fmt: skip
    enumerated = {written for written, _ in public_names()}
    for expected in ("skyward_vastai.VastAI", "skyward_runpod.RunPod", "skyward.testing.EmulatedInstances",
                     "skyward.providers.PoolSpec", "skyward.providers.cloud.CloudProvider"):  # fmt: skip
        assert expected in enumerated


@pytest.mark.parametrize(
    ("written", "directive"),
    [
        ("skyward.ComputePool", "skyward.api.pool.ComputePool"),
        ("skyward_vastai.VastAI", "skyward_vastai.VastAI"),
        ("skyward_runpod.RunPod", "skyward_runpod.RunPod"),
        ("skyward.testing.EmulatedInstances", "skyward.testing"),
        ("skyward.providers.PoolSpec", "skyward.providers"),
    ],
)
def test_a_public_name_missing_from_the_reference_is_caught(written: str, directive: str) -> None:
    directives = documented()
    assert directive in directives
    path = dict(public_names())[written]
    assert _covered(path, directives, written)
    assert not _covered(path, directives - {directive}, written)


@pytest.mark.parametrize("directive", sorted(documented()))
def test_every_reference_directive_names_something_that_exists(directive: str) -> None:
    module, _, attribute = directive.rpartition(".")
    try:
        importlib.import_module(directive)
    except ModuleNotFoundError:
        assert hasattr(importlib.import_module(module), attribute), directive


@pytest.mark.parametrize("picture", sorted((ROOT / "docs" / "assets").glob("*.svg")), ids=lambda p: p.name)
def test_every_picture_is_well_formed_svg(picture: Path) -> None:
    # a browser shows nothing but an error for an SVG that is not well-formed XML (an
    # unescaped & did that to the lifecycle diagram once), and mkdocs cannot tell
    root = ElementTree.parse(picture).getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
