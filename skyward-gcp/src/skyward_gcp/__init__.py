"""skyward-gcp: Google Cloud provider (Compute Engine GPU VMs, Cloud TPU VMs and slices).

``skyward.GCP(project=None, region=None, zone=None)`` once installed; credentials come
from Google's own chain (see :mod:`skyward_gcp.credentials`). Importing this package
loads none of Google's client libraries: the driver and the tools do, when used.
"""

from skyward_gcp.config import GCP

__all__ = ["GCP"]
