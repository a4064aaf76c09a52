"""skyward-digitalocean: DigitalOcean provider (droplets, GPU droplets).

``skyward.DigitalOcean(region="nyc1")`` once installed; the API token comes from
``DIGITALOCEAN_TOKEN``. See :mod:`skyward_digitalocean.reaper` for why and how droplets
that outlive their pool are deleted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from skyward.providers import deferred_attributes
from skyward_digitalocean.config import REGIONS, TOKEN_ENV, DigitalOcean

if TYPE_CHECKING:
    from skyward_digitalocean.reaper import Reaped, reap

__all__ = ["REGIONS", "TOKEN_ENV", "DigitalOcean", "Reaped", "reap"]


# ``reap`` and ``Reaped`` are imported on first use: see deferred_attributes
__getattr__ = deferred_attributes(__name__, "skyward_digitalocean.reaper", ("Reaped", "reap"))
