"""skyward-verda: Verda (formerly DataCrunch) provider.

``skyward.Verda(region=None)`` once installed; API client credentials come from
``VERDA_CLIENT_ID`` and ``VERDA_CLIENT_SECRET``. See :mod:`skyward_verda.reaper` for how
instances that outlive their pool are deleted.
"""

from skyward_verda.config import CLIENT_ID_ENV, CLIENT_SECRET_ENV, Verda
from skyward_verda.reaper import Reaped, reap

__all__ = ["CLIENT_ID_ENV", "CLIENT_SECRET_ENV", "Reaped", "Verda", "reap"]
