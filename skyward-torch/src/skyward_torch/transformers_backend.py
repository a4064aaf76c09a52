"""``distributed.transformers``: what the Hugging Face Trainer needs to train data-parallel.

The Trainer does not launch processes; it detects a launcher's environment through
accelerate's ``PartialState``: ``LOCAL_RANK`` (and ``RANK``, ``WORLD_SIZE``,
``MASTER_ADDR``, ``MASTER_PORT``) set by torchrun, and an initialised torch.distributed
process group, which it reuses. This backend provides exactly that, as
``distributed.torch`` does, plus one thing torchrun users pass by hand: on a node
without a CUDA GPU, accelerate only goes multi-process when told the run is on CPU
(``ACCELERATE_USE_CPU``, what ``TrainingArguments(use_cpu=True)`` sets); without it,
every worker would silently train a full copy of the model on its own.

accelerate keeps its state in process-wide singletons, which would point at a destroyed
process group on the next call in the same worker; they are reset after every call.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from skyward.distributed.backends.base import DistributedDecorator, decorator
from skyward.distributed.backends.env import scoped_environ
from skyward.distributed.backends.frameworks import require
from skyward.runtime.context import InstanceInfo
from skyward_torch.torch_backend import TorchBackendName, check_options, process_group

TRANSFORMERS_PIP = ("torch", "transformers", "accelerate")


def trainer_env(cuda_available: bool) -> dict[str, str]:
    """Variables, beyond torchrun's, that make the Trainer go data-parallel here."""
    return {} if cuda_available else {"ACCELERATE_USE_CPU": "true"}


def reset_accelerate_state() -> None:
    """Forget accelerate's process-wide state (it holds the destroyed process group)."""
    if "accelerate" not in sys.modules:
        return
    state = importlib.import_module("accelerate.state")
    state.AcceleratorState._reset_state(reset_partial_state=True)
    state.PartialState._reset_state()
    gradient_state = getattr(state, "GradientState", None)
    if gradient_state is not None:
        gradient_state._reset_state()


@dataclass(frozen=True, slots=True)
class TransformersLauncher:
    """The launcher behind ``distributed.transformers(backend=..., timeout=...)``."""

    backend: str | None = None
    timeout: float | None = None

    def __post_init__(self) -> None:
        check_options(self.backend, self.timeout, "distributed.transformers")

    @property
    def name(self) -> str:
        return "transformers"

    @contextmanager
    def session(self, info: InstanceInfo) -> Iterator[None]:
        torch = require("torch", backend=self.name, pip=TRANSFORMERS_PIP)
        # checked up front: a missing package should fail the call before the group
        # forms, not halfway through the user's function
        require("transformers", backend=self.name, pip=TRANSFORMERS_PIP)
        require("accelerate", backend=self.name, pip=TRANSFORMERS_PIP)
        reset_accelerate_state()  # whatever an earlier, non-distributed call left
        with scoped_environ(trainer_env(bool(torch.cuda.is_available()))):
            try:
                with process_group(info, self.backend, self.timeout, "distributed.transformers", TRANSFORMERS_PIP):
                    yield
            finally:
                reset_accelerate_state()


def transformers(backend: TorchBackendName | None = None, *, timeout: float | None = None) -> DistributedDecorator:
    """``@distributed.transformers(backend="gloo")``: a Hugging Face ``Trainer`` created in
    the function trains data-parallel across every worker of the pool.

    backend: ``"nccl"`` (NVIDIA GPUs) or ``"gloo"`` (CPU); unset, each node picks nccl
             when torch sees a CUDA GPU and gloo otherwise.
    timeout: seconds collectives wait for peers before failing; unset, torch's default.
    """
    return decorator(TransformersLauncher(backend=backend, timeout=timeout))
