"""Public names that plugins provide, and the error that says which extra to install.

``skyward.AWS`` and ``from skyward import AWS`` reach a missing name by two roads, and
each must end in the install hint:

- attribute access (``skyward.AWS``, ``getattr``, ``hasattr``) calls the package's
  ``__getattr__``, which raises an ``AttributeError`` (``hasattr`` must still answer False);
- ``from skyward import AWS``: Python turns that ``AttributeError`` into a bare "cannot
  import name" (the hint lost), but first tries to import ``skyward.AWS`` as a submodule.
  :class:`MissingPluginFinder`, last on ``sys.meta_path``, answers that import with a
  :class:`~skyward.errors.PluginMissingError` (an ``ImportError``), which goes through.

Standard library only: ``import skyward`` installs the finder, and it runs in every worker.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from skyward.errors import PluginMissingError

if TYPE_CHECKING:
    from importlib.machinery import ModuleSpec
    from types import ModuleType

# Where the well-known public names live, so a missing plugin can say what to install.
# This is a hint table only; nothing here is imported.
KNOWN_EXTRAS: Mapping[str, str] = {
    "AWS": "aws",
    "S3Volume": "aws",
    "DigitalOcean": "digitalocean",
    "Verda": "verda",
    "VastAI": "vastai",
    "RunPod": "runpod",
    "torch": "torch",
    "transformers": "torch",
    "JoblibPool": "sklearn",
    "ScikitLearnPool": "sklearn",
    "joblib_backend": "sklearn",
    "sklearn_backend": "sklearn",
}

PACKAGES = ("skyward", "skyward.distributed", "skyward.integrations")
"""The packages whose ``__getattr__`` resolves names that plugins contribute."""


def install_command(extra: str) -> str:
    """How to install the ``skyward-<extra>`` plugin, in the ways that work today: from a
    checkout of the repository, or from the wheels ``python3 tasks.py dist`` builds; and
    the published form, ``skyward[<extra>]``. Nothing is on the public index yet, and the
    name ``skyward`` there is another project's: a plain ``pip install 'skyward[aws]'``
    fetches that one (a different API) or nothing."""
    return (
        f"from a skyward checkout: pip install ./skyward-{extra}; from the wheels `python3 tasks.py dist` "
        f"builds: pip install --find-links dist skyward-{extra}; once published: pip install 'skyward[{extra}]'"
    )


def install_hint(name: str, where: str) -> str | None:
    """``where.name`` comes from a plugin that is not installed: what to install; None for
    a name no known plugin provides."""
    extra = KNOWN_EXTRAS.get(name)
    if extra is None:
        return None
    return (
        f"{where}.{name} is provided by the skyward-{extra} plugin, which is not installed. "
        f"Install it {install_command(extra)}"
    )


def missing_plugin_error(name: str, where: str = "skyward", *, importing: bool) -> ImportError | AttributeError:
    """The error for ``where.name`` that no installed plugin provides.

    ``importing``: the name was asked for by an import (``from skyward import AWS``, seen
    by :class:`MissingPluginFinder`), which gets a :class:`PluginMissingError`; attribute
    access gets an ``AttributeError`` with the same words."""
    hint = install_hint(name, where)
    if hint is None:
        message = f"module {where!r} has no attribute {name!r}"
        return ImportError(message, name=where) if importing else AttributeError(message)
    return PluginMissingError(hint, name=where) if importing else AttributeError(hint)


class MissingPluginFinder:
    """A ``sys.meta_path`` finder, consulted last, for ``skyward.AWS`` imported as a module
    (what ``from skyward import AWS`` tries once the attribute is missing): raises the
    install hint for a known plugin name that the package does not have, and finds
    nothing otherwise (the import fails as it would have)."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        package, _, name = fullname.rpartition(".")
        if package not in PACKAGES or name not in KNOWN_EXTRAS:
            return None
        module = sys.modules.get(package)
        if module is None or hasattr(module, name):  # present: not ours to explain
            return None
        raise missing_plugin_error(name, package, importing=True)


def install_finder() -> None:
    """Put :class:`MissingPluginFinder` last on ``sys.meta_path`` (once)."""
    if not any(isinstance(finder, MissingPluginFinder) for finder in sys.meta_path):
        sys.meta_path.append(MissingPluginFinder())
