"""skyward-digitalocean: DigitalOcean provider (droplets, GPU droplets).

``skyward.DigitalOcean(region="nyc1")`` once installed; the API token comes from
``DIGITALOCEAN_TOKEN``. See :mod:`skyward_digitalocean.reaper` for why and how droplets
that outlive their pool are deleted.
"""

from skyward_digitalocean.config import REGIONS, TOKEN_ENV, DigitalOcean
from skyward_digitalocean.reaper import Reaped, reap

__all__ = ["REGIONS", "TOKEN_ENV", "DigitalOcean", "Reaped", "reap"]
