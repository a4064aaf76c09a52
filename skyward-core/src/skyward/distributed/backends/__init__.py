"""Distributed backends and the pieces they share.

A backend is a *launcher*: a frozen, picklable value whose ``session(info)`` sets up a
framework's process group for one call on one worker and tears it down afterwards.
``skyward.distributed.<name>(...)`` (a plugin's :class:`~skyward.plugins.contributions.
DistributedBackend` factory) returns a decorator that wraps the user's function in a
:class:`~skyward.distributed.backends.base.DistributedFunction` carrying its launcher.

The backends whose frameworks need nothing from Skyward beyond the standard library
live here, in core (``jax``, ``keras``, ``tensorflow``): each imports its framework
lazily, inside ``session``, on the node, so they add no dependency to skyward-core and
cost nothing when unused, and a separate distribution for them would only add a package
to install. ``torch`` and ``transformers`` live in the skyward-torch plugin.
"""

from __future__ import annotations

from skyward.distributed.backends.base import DistributedFunction, Launcher, wrap
from skyward.distributed.backends.frameworks import FrameworkNotInstalledError, require

__all__ = ["DistributedFunction", "FrameworkNotInstalledError", "Launcher", "require", "wrap"]
