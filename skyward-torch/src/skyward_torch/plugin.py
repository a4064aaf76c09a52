"""Hook implementations of skyward-torch, loaded through the ``skyward`` entry-point group."""

from __future__ import annotations

from collections.abc import Sequence

from skyward.distributed.backends.base import TorchBackendFactory
from skyward.plugins.contributions import DistributedBackend
from skyward.plugins.hookspecs import hookimpl

# Importing the backend modules imports neither torch nor transformers: they are imported
# on the node, when a wrapped function runs.
from skyward_torch.torch_backend import torch
from skyward_torch.transformers_backend import transformers

# Core types ``sky.distributed.torch`` by this signature (it never imports a plugin):
# mypy checks here that both functions keep it.
_TYPED_AS: tuple[TorchBackendFactory, TorchBackendFactory] = (torch, transformers)


@hookimpl
def skyward_distributed_backends() -> Sequence[DistributedBackend]:
    return [
        DistributedBackend(name="torch", factory=torch),
        DistributedBackend(name="transformers", factory=transformers),
    ]
