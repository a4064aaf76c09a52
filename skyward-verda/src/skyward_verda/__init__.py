"""skyward-verda: Verda (formerly DataCrunch) provider.

``skyward.Verda(region=None)`` once installed; API client credentials come from
``VERDA_CLIENT_ID`` and ``VERDA_CLIENT_SECRET``. See :mod:`skyward_verda.reaper` for how
instances that outlive their pool are deleted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from skyward_verda.config import CLIENT_ID_ENV, CLIENT_SECRET_ENV, Verda

if TYPE_CHECKING:
    from skyward_verda.reaper import Reaped, reap

__all__ = ["CLIENT_ID_ENV", "CLIENT_SECRET_ENV", "Reaped", "Verda", "reap"]


def __getattr__(name: str) -> object:
    """``reap`` and ``Reaped``, imported on first use: the plugin registry imports this
    package in every process that reads it (a Local pool's client too), and the reaper
    brings the API client (requests and its dependencies: 120 ms for this package alone on
    the 2-core development machine, most of a Local pool's first start there)."""
    if name in ("Reaped", "reap"):
        from skyward_verda import reaper  # noqa: PLC0415  # see above

        return getattr(reaper, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
