"""Importing a backend's framework on the node, with an error that says how to get it."""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from types import ModuleType

from skyward.errors import SkywardError


class FrameworkNotInstalledError(SkywardError, ModuleNotFoundError):
    """A distributed backend's framework is not installed on the node running the call.

    A ``ModuleNotFoundError`` too, so ``except ImportError`` still catches it; ``name``
    is the module that could not be found.
    """


def missing_framework_message(backend: str, missing: str, pip: Sequence[str]) -> str:
    """What to tell the user when ``missing`` cannot be imported for ``backend``."""
    packages = ", ".join(repr(p) for p in pip)
    return (
        f"distributed.{backend} needs the {missing!r} package on the node, and it is not "
        f"installed there: add it to the pool's image, e.g. "
        f"ComputePool(..., image=Image(pip=[{packages}]))"
    )


def require(module: str, *, backend: str, pip: Sequence[str]) -> ModuleType:
    """``importlib.import_module(module)``, or a :class:`FrameworkNotInstalledError`
    naming the missing package and the ``Image(pip=...)`` that provides it.

    Only a *missing* module becomes that error (the framework itself or one of its
    dependencies); any other import failure (a broken or ABI-incompatible install) is
    raised as it is, since adding a package would not fix it.
    """
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        missing = exc.name or module
        error = FrameworkNotInstalledError(missing_framework_message(backend, missing.split(".")[0], pip), name=missing)
        raise error from exc
