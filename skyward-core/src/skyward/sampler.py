"""A drop-in ``DistributedSampler`` whose replicas are the workers of a Skyward pool.

``torch.utils.data.distributed.DistributedSampler`` asks ``torch.distributed`` for the
world size and rank, so it needs a process group even for plain data parallelism.
This sampler takes them from :func:`~skyward.instance_info` instead, and otherwise
keeps torch's contract exactly (same constructor, attributes, padding, ``drop_last``
and, when torch is installed, the same indices), so code written for torch's sampler
behaves identically on a pool.
"""

from __future__ import annotations

import importlib
import random
from collections.abc import Iterator, Sized

from skyward.errors import ConfigurationError
from skyward.runtime.context import instance_info

__all__ = ["DistributedSampler", "epoch_permutation"]


def epoch_permutation(n: int, seed: int) -> list[int]:
    """A permutation of ``range(n)`` that every replica draws identically from ``seed``.

    When torch is importable this is ``torch.randperm(n, generator=g)`` with
    ``g.manual_seed(seed)``, exactly what torch's ``DistributedSampler`` draws, so the
    two samplers are interchangeable index for index. Without torch (it is only needed
    by ``DataLoader``, which may not be in use) it falls back to
    ``random.Random(seed).shuffle``: still identical on every replica, but a different
    permutation than torch's. All workers of a pool share one image, so they all take
    the same branch.
    """
    try:
        # import_module rather than ``import torch``: the type checker's view must not
        # depend on whether torch happens to be installed
        torch = importlib.import_module("torch")
    except ImportError:
        permutation = list(range(n))
        random.Random(seed).shuffle(permutation)
        return permutation
    generator = torch.Generator()
    generator.manual_seed(seed)
    indices: list[int] = torch.randperm(n, generator=generator).tolist()
    return indices


class DistributedSampler:
    """Yields the dataset indices of one replica (by default: this worker of the pool).

    The contract is torch's ``DistributedSampler``:

    - each epoch, the indices ``0..len(dataset)-1`` (permuted with seed
      ``seed + epoch`` when ``shuffle``) are made evenly divisible by
      ``num_replicas``: padded by repeating indices from the start, or, with
      ``drop_last``, truncated; then replica ``rank`` takes every
      ``num_replicas``-th index starting at ``rank``;
    - so every replica yields ``len(self)`` indices, and all replicas together cover
      every index of the dataset (a few twice when padded), which keeps collective
      ops in step: no replica runs out of batches first;
    - call :meth:`set_epoch` before each epoch, or every epoch repeats one order.

    ``num_replicas`` and ``rank`` default to the pool's ``world_size`` and ``rank``
    (every worker slot is a replica, not only every node); explicit values override
    them, and with both given the sampler works outside a computation too.

    It is not a subclass of ``torch.utils.data.Sampler``: subclassing would make torch
    a hard dependency. ``DataLoader(sampler=...)`` only needs ``__iter__`` and
    ``__len__``, which this provides (duck typing).
    """

    def __init__(
        self,
        dataset: Sized,
        num_replicas: int | None = None,
        rank: int | None = None,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
    ) -> None:
        if num_replicas is None or rank is None:
            info = instance_info()
            num_replicas = info.world_size if num_replicas is None else num_replicas
            rank = info.rank if rank is None else rank
        if num_replicas < 1:
            raise ConfigurationError(f"num_replicas must be >= 1, got {num_replicas}")
        if not 0 <= rank < num_replicas:
            raise ConfigurationError(f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}]")
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.drop_last = drop_last
        self.shuffle = shuffle
        self.seed = seed
        length = len(dataset)
        if drop_last and length % num_replicas != 0:
            # torch: ceil((length - num_replicas) / num_replicas), i.e. drop the tail
            self.num_samples = length // num_replicas
        else:
            self.num_samples = -(-length // num_replicas)
        self.total_size = self.num_samples * num_replicas

    def __iter__(self) -> Iterator[int]:
        length = len(self.dataset)
        indices = epoch_permutation(length, self.seed + self.epoch) if self.shuffle else list(range(length))
        if self.drop_last:
            indices = indices[: self.total_size]
        else:
            padding = self.total_size - len(indices)
            if padding > 0 and indices:
                # repeat from the start, as often as needed when the dataset is tiny
                repeats = -(-padding // len(indices))
                indices += (indices * repeats)[:padding]
        if len(indices) != self.total_size:
            raise ConfigurationError(
                f"the dataset's length changed from the sampler's creation "
                f"({self.total_size} indices expected, {len(indices)} found); "
                "create a new DistributedSampler for the new dataset"
            )
        own = indices[self.rank : self.total_size : self.num_replicas]
        return iter(own)

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """Set the epoch, which reseeds the shuffle so each epoch has a new order.

        All replicas must be given the same epoch, or their permutations (and so
        their shards) stop agreeing.
        """
        self.epoch = epoch
