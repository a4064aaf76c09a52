"""Turning a provider's instance types into the command's offers (pure).

Kept for the provider plugins that import it; the functions live in
:mod:`skyward.offer_table`, with ``sky.offers``.
"""

from __future__ import annotations

from skyward.offer_table import fits, offers_from, query

__all__ = ["fits", "offers_from", "query"]
