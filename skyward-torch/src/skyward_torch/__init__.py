"""skyward-torch: PyTorch and Hugging Face distributed backends.

``skyward.distributed.torch(...)`` and ``skyward.distributed.transformers(...)`` resolve
here through the ``skyward_distributed_backends`` hook. Neither this package nor its
plugin module imports torch: the frameworks are imported on the node, by the wrapper.
"""

from __future__ import annotations

from skyward_torch.torch_backend import TorchLauncher, torch
from skyward_torch.transformers_backend import TransformersLauncher, transformers

__all__ = ["TorchLauncher", "TransformersLauncher", "torch", "transformers"]
