"""skyward-digitalocean: DigitalOcean provider (droplets, GPU droplets).

``skyward.DigitalOcean(region="nyc1")`` once installed; the API token comes from
``DIGITALOCEAN_TOKEN``. See :mod:`skyward_digitalocean.reaper` for why and how droplets
that outlive their pool are deleted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from skyward_digitalocean.config import REGIONS, TOKEN_ENV, DigitalOcean

if TYPE_CHECKING:
    from skyward_digitalocean.reaper import Reaped, reap

__all__ = ["REGIONS", "TOKEN_ENV", "DigitalOcean", "Reaped", "reap"]


def __getattr__(name: str) -> object:
    """``reap`` and ``Reaped``, imported on first use: the plugin registry imports this
    package in every process that reads it (a Local pool's client too), and the reaper
    brings the API client (requests and its dependencies: 120 ms for this package alone on
    the 2-core development machine, most of a Local pool's first start there)."""
    if name in ("Reaped", "reap"):
        from skyward_digitalocean import reaper  # noqa: PLC0415  # see above

        return getattr(reaper, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
