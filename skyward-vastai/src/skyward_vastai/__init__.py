"""skyward-vastai: VastAI's GPU marketplace as a Skyward provider.

``skyward.VastAI()`` once installed; the API key comes from ``VAST_API_KEY`` or the file
the official ``vastai`` CLI writes. Nodes are containers rented from the cheapest
reliable offers that fit; see the package README for spot (bids) and cleanup.
"""

from skyward_vastai.config import KEY_ENV, VastAI

__all__ = ["KEY_ENV", "VastAI"]
