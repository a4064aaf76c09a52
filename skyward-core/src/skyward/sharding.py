"""Split data across the workers of a pool, so each worker processes only its part.

Every worker of a pool runs the same function on the same full input; :func:`shard`
turns that into data parallelism by keeping, on each worker, only the slice that its
rank owns. No worker talks to another: agreement comes from every worker computing
the same deterministic partition from ``(length, rank, world_size, seed)``.

The partition is over *worker slots*, not nodes: with 2 nodes of 4 workers each there
are 8 shards, and worker ``w`` of node ``n`` takes shard ``n * 4 + w`` (see
:class:`~skyward.runtime.context.InstanceInfo`).
"""

from __future__ import annotations

import hashlib
import random
import sys
from collections.abc import Mapping
from typing import Any, TypeVar, overload

from skyward.errors import ConfigurationError
from skyward.runtime.context import instance_info

__all__ = ["derive_seed", "shard", "shard_bounds", "shard_indices"]

_E = TypeVar("_E")


def shard_bounds(length: int, rank: int, world_size: int) -> tuple[int, int]:
    """``(start, stop)`` of the contiguous block that ``rank`` owns out of ``length`` items.

    Blocks are balanced: the first ``length % world_size`` ranks get one extra item, so
    sizes differ by at most one and no rank ends up with a much larger share (a
    ``ceil``-sized split would leave the last ranks short or empty). Ranks past the
    data (``world_size > length``) get an empty block rather than an error, because a
    pool larger than a small input is legitimate.
    """
    _check_partition(length, rank, world_size)
    base, extra = divmod(length, world_size)
    start = rank * base + min(rank, extra)
    stop = start + base + (1 if rank < extra else 0)
    return start, stop


def shard_indices(
    length: int,
    rank: int,
    world_size: int,
    *,
    shuffle: bool = False,
    seed: int | None = None,
) -> range | list[int]:
    """The indices of the ``length`` items that ``rank`` owns out of ``world_size`` ranks.

    Without ``shuffle`` this is the contiguous block of :func:`shard_bounds`, returned
    as a ``range`` so that callers can slice instead of gather (no copy of a list,
    a view of a numpy array). With ``shuffle`` the indices ``0..length-1`` are first
    permuted with ``random.Random(seed).shuffle`` and the same balanced block is taken
    from the permutation, in permuted order: every rank computes the *same*
    permutation, so the shards are still disjoint and cover everything.

    ``seed`` is required when shuffling: ``random.Random(None)`` seeds from OS entropy,
    which would give each worker a different permutation and silently duplicate and
    drop data. :func:`shard` derives a seed from the job id when the user gives none.
    The permutation is stable for a given Python minor version (workers and client
    are required to share it).
    """
    start, stop = shard_bounds(length, rank, world_size)
    if not shuffle:
        return range(start, stop)
    if seed is None:
        raise ConfigurationError(
            "shard_indices(shuffle=True) needs a seed: every worker must draw the same "
            "permutation, and an unseeded one differs per process"
        )
    permutation = list(range(length))
    random.Random(seed).shuffle(permutation)
    return permutation[start:stop]


def derive_seed(job_id: str) -> int:
    """A shuffle seed that every worker of the job ``job_id`` derives identically.

    Uses SHA-256 rather than ``hash()``, which is salted per process
    (``PYTHONHASHSEED``) and would give each worker a different seed.
    """
    return int.from_bytes(hashlib.sha256(job_id.encode("utf-8")).digest()[:8], "big")


@overload
def shard(array: list[_E], /, *, shuffle: bool = ..., seed: int | None = ...) -> list[_E]: ...


@overload
def shard(array: tuple[_E, ...], /, *, shuffle: bool = ..., seed: int | None = ...) -> tuple[_E, ...]: ...


@overload
def shard(array: Any, /, *, shuffle: bool = ..., seed: int | None = ...) -> Any: ...


@overload
def shard(
    first: Any,
    second: Any,
    /,
    *arrays: Any,
    shuffle: bool = ...,
    seed: int | None = ...,
) -> tuple[Any, ...]: ...


def shard(*arrays: Any, shuffle: bool = False, seed: int | None = None) -> Any:
    """This worker's part of each of ``arrays``: one result for one input, else a tuple.

    Reads ``rank`` and ``world_size`` from :func:`~skyward.instance_info`, so it only
    works inside a computation (it raises :class:`~skyward.NotInComputationError`
    elsewhere, e.g. under ``fn.local(...)``): outside a pool there is no partition to
    take a part of, and returning everything silently would hide the mistake.

    All arrays must have the same length and are cut with the *same* indices, so
    ``x_local[i]`` still pairs with ``y_local[i]``.

    Types are kept where that is well defined:

    - ``list`` -> ``list``, ``tuple`` -> ``tuple`` (subclasses come back as the base
      type, since slicing drops them);
    - ``numpy.ndarray`` -> ``ndarray``: a slice (a view, no copy) when not shuffled,
      fancy indexing along the first axis (a copy) when shuffled. numpy is never
      imported by this module: an object can only be an ndarray if numpy is already
      loaded;
    - any other object with ``__len__`` and ``__getitem__`` (``range``, ``str``, a
      tensor, ...) is sliced with ``obj[start:stop]`` when not shuffled, so it gets
      whatever type its own slicing returns, and gathered into a ``list`` of
      ``obj[i]`` when shuffled, since arbitrary index lists are not a sequence
      protocol. Mappings are rejected: their ``__getitem__`` takes keys, not positions.

    With ``shuffle=True`` the data is permuted before it is split (see
    :func:`shard_indices`). Every worker must draw the same permutation, so when
    ``seed`` is ``None`` it is derived from the job id (:func:`derive_seed`): all
    workers of one job agree, and a new job (a new call) gets a new shuffle. Pass a
    ``seed`` to make it reproducible across jobs.
    """
    if not arrays:
        raise ConfigurationError("shard() needs at least one array to shard")
    lengths = [_length_of(array, position) for position, array in enumerate(arrays)]
    if len(set(lengths)) != 1:
        raise ConfigurationError(f"shard() needs arrays of equal length to keep them aligned, got lengths {lengths}")
    info = instance_info()
    if shuffle and seed is None:
        seed = derive_seed(info.job_id)
    indices = shard_indices(lengths[0], info.rank, info.world_size, shuffle=shuffle, seed=seed)
    parts = tuple(_take(array, indices) for array in arrays)
    return parts[0] if len(parts) == 1 else parts


def _check_partition(length: int, rank: int, world_size: int) -> None:
    """Reject partitions that cannot be meant, before they yield a silently wrong block."""
    if length < 0:
        raise ConfigurationError(f"length must be >= 0, got {length}")
    if world_size < 1:
        raise ConfigurationError(f"world_size must be >= 1, got {world_size}")
    if not 0 <= rank < world_size:
        raise ConfigurationError(f"rank must be in [0, {world_size}), got {rank}")


def _length_of(array: Any, position: int) -> int:
    """``len(array)``, with an error naming the offending argument when it is no sequence."""
    error = ConfigurationError(
        f"shard() argument {position} ({type(array).__name__}) is not a sequence: "
        "pass a list, tuple, numpy array or another object with __len__ and "
        "positional __getitem__"
    )
    if isinstance(array, Mapping) or not (hasattr(array, "__len__") and hasattr(array, "__getitem__")):
        raise error
    try:
        return len(array)
    except TypeError as exc:  # e.g. a 0-d numpy array: it has __len__ but no length
        raise error from exc


def _is_ndarray(array: Any) -> bool:
    """Whether ``array`` is a numpy array, without importing numpy when it is not loaded."""
    numpy = sys.modules.get("numpy")
    return numpy is not None and isinstance(array, numpy.ndarray)


def _take(array: Any, indices: range | list[int]) -> Any:
    """``array`` restricted to ``indices``, keeping its type where that is well defined."""
    if isinstance(indices, range):
        # contiguous block: slicing keeps the type and, for ndarrays, avoids a copy
        return array[indices.start : indices.stop]
    if _is_ndarray(array):
        numpy = sys.modules["numpy"]
        return array[numpy.asarray(indices, dtype=numpy.intp)]
    if isinstance(array, tuple):
        return tuple(array[i] for i in indices)
    return [array[i] for i in indices]
