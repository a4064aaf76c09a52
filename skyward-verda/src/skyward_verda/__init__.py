"""skyward-verda: Verda (formerly DataCrunch) provider.

``skyward.Verda(region=None)`` once installed; API client credentials come from
``VERDA_CLIENT_ID`` and ``VERDA_CLIENT_SECRET``. See :mod:`skyward_verda.reaper` for how
instances that outlive their pool are deleted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from skyward.providers import deferred_attributes
from skyward_verda.config import CLIENT_ID_ENV, CLIENT_SECRET_ENV, Verda

if TYPE_CHECKING:
    from skyward_verda.reaper import Reaped, reap

__all__ = ["CLIENT_ID_ENV", "CLIENT_SECRET_ENV", "Reaped", "Verda", "reap"]


# ``reap`` and ``Reaped`` are imported on first use: see deferred_attributes
__getattr__ = deferred_attributes(__name__, "skyward_verda.reaper", ("Reaped", "reap"))
