"""skyward-runpod: RunPod's GPU pods as a Skyward provider.

``skyward.RunPod()`` once installed; the API key comes from ``RUNPOD_API_KEY``. Nodes
are pods of the smallest GPU type that fits, in RunPod's secure or community cloud; see
the package README for spot pods and cleanup.
"""

from skyward_runpod.config import KEY_ENV, RunPod

__all__ = ["KEY_ENV", "RunPod"]
