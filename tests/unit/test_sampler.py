"""DistributedSampler: torch's contract, with the pool's workers as replicas."""

from __future__ import annotations

import importlib
import random
import sys
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skyward.errors import ConfigurationError, NotInComputationError
from skyward.runtime.context import InstanceInfo, set_instance_info
from skyward.sampler import DistributedSampler, epoch_permutation


@pytest.fixture(autouse=True)
def _outside_any_computation() -> Iterator[None]:
    set_instance_info(None)
    yield
    set_instance_info(None)


def global_order(
    n: int,
    replicas: int,
    *,
    shuffle: bool,
    drop_last: bool,
    seed: int = 0,
    epoch: int = 0,
) -> tuple[list[list[int]], list[int]]:
    """Each rank's indices, and the global list they were strided from (position k
    belongs to rank k % replicas)."""
    per_rank: list[list[int]] = []
    for rank in range(replicas):
        sampler = DistributedSampler(range(n), replicas, rank, shuffle=shuffle, seed=seed, drop_last=drop_last)
        sampler.set_epoch(epoch)
        indices = list(sampler)
        assert len(indices) == len(sampler)
        per_rank.append(indices)
    length = len(per_rank[0])
    assert all(len(indices) == length for indices in per_rank), "ranks out of step"
    merged = [per_rank[k % replicas][k // replicas] for k in range(length * replicas)]
    return per_rank, merged


@settings(deadline=None)  # the first shuffle imports torch, when installed
@given(
    n=st.integers(0, 200),
    replicas=st.integers(1, 16),
    shuffle=st.booleans(),
    seed=st.integers(0, 2**31),
    epoch=st.integers(0, 50),
)
def test_without_drop_last_every_index_is_covered_and_padded_from_the_start(
    n: int, replicas: int, shuffle: bool, seed: int, epoch: int
) -> None:
    _, merged = global_order(n, replicas, shuffle=shuffle, drop_last=False, seed=seed, epoch=epoch)
    total = -(-n // replicas) * replicas
    assert len(merged) == total
    head, padding = merged[:n], merged[n:]
    assert sorted(head) == list(range(n))
    if not shuffle:
        assert head == list(range(n))
    if n:
        assert padding == (head * total)[: total - n]


@settings(deadline=None)  # the first shuffle imports torch, when installed
@given(
    n=st.integers(0, 200),
    replicas=st.integers(1, 16),
    shuffle=st.booleans(),
    seed=st.integers(0, 2**31),
    epoch=st.integers(0, 50),
)
def test_with_drop_last_the_tail_is_dropped_and_nothing_repeats(
    n: int, replicas: int, shuffle: bool, seed: int, epoch: int
) -> None:
    _, merged = global_order(n, replicas, shuffle=shuffle, drop_last=True, seed=seed, epoch=epoch)
    assert len(merged) == (n // replicas) * replicas
    assert len(set(merged)) == len(merged)
    assert set(merged) <= set(range(n))
    if not shuffle:
        assert merged == list(range(len(merged)))


def test_torch_padding_example() -> None:
    per_rank, _ = global_order(10, 4, shuffle=False, drop_last=False)
    assert per_rank == [[0, 4, 8], [1, 5, 9], [2, 6, 0], [3, 7, 1]]
    per_rank, _ = global_order(10, 4, shuffle=False, drop_last=True)
    assert per_rank == [[0, 4], [1, 5], [2, 6], [3, 7]]
    # fewer items than replicas: the few indices repeat as often as needed
    per_rank, _ = global_order(2, 5, shuffle=False, drop_last=False)
    assert per_rank == [[0], [1], [0], [1], [0]]


def test_the_order_changes_with_the_epoch_only_when_shuffled() -> None:
    sampler = DistributedSampler(range(100), num_replicas=2, rank=1, shuffle=True, seed=3)
    first = list(sampler)
    assert list(sampler) == first  # same epoch, same order
    sampler.set_epoch(1)
    second = list(sampler)
    assert second != first
    assert sorted(second) != second or sorted(first) != first
    fixed = DistributedSampler(range(100), num_replicas=2, rank=1, shuffle=False)
    before = list(fixed)
    fixed.set_epoch(5)
    assert list(fixed) == before == list(range(1, 100, 2))


def test_the_seed_changes_the_order() -> None:
    one = DistributedSampler(range(100), num_replicas=1, rank=0, seed=0)
    other = DistributedSampler(range(100), num_replicas=1, rank=0, seed=1)
    assert list(one) != list(other)


def test_replicas_and_rank_default_to_the_pools_worker_slots() -> None:
    set_instance_info(InstanceInfo(node=1, total_nodes=2, worker=2, workers_per_node=3))
    sampler = DistributedSampler(range(60))
    assert (sampler.num_replicas, sampler.rank) == (6, 5)
    assert len(sampler) == 10
    overridden = DistributedSampler(range(60), num_replicas=12)
    assert (overridden.num_replicas, overridden.rank) == (12, 5)
    assert DistributedSampler(range(60), rank=0).num_replicas == 6


def test_outside_a_pool_explicit_values_are_needed() -> None:
    with pytest.raises(NotInComputationError):
        DistributedSampler(range(10))
    with pytest.raises(NotInComputationError):
        DistributedSampler(range(10), num_replicas=2)
    assert list(DistributedSampler(range(10), num_replicas=2, rank=0, shuffle=False)) == [
        0,
        2,
        4,
        6,
        8,
    ]


@pytest.mark.parametrize(("replicas", "rank"), [(2, 2), (2, -1), (0, 0)])
def test_invalid_replicas_or_rank_are_refused_like_torch(replicas: int, rank: int) -> None:
    with pytest.raises(ValueError):
        DistributedSampler(range(10), num_replicas=replicas, rank=rank)
    with pytest.raises(ConfigurationError):
        DistributedSampler(range(10), num_replicas=replicas, rank=rank)


def test_a_dataset_that_changes_length_is_reported() -> None:
    data = list(range(10))
    sampler = DistributedSampler(data, num_replicas=2, rank=0)
    data.extend(range(10))
    with pytest.raises(ConfigurationError, match="length changed"):
        list(sampler)


def test_without_torch_the_permutation_comes_from_random(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # makes ``import torch`` fail
    expected = list(range(30))
    random.Random(5 + 2).shuffle(expected)
    assert epoch_permutation(30, 7) == expected
    sampler = DistributedSampler(range(30), num_replicas=3, rank=1, seed=5)
    sampler.set_epoch(2)
    assert list(sampler) == expected[1::3]


# -- index-for-index equality with torch ----------------------------------------------


@settings(deadline=None)
@given(
    n=st.integers(0, 150),
    replicas=st.integers(1, 12),
    shuffle=st.booleans(),
    drop_last=st.booleans(),
    seed=st.integers(0, 2**31),
    epoch=st.integers(0, 20),
)
def test_indices_equal_torchs_distributed_sampler(
    n: int, replicas: int, shuffle: bool, drop_last: bool, seed: int, epoch: int
) -> None:
    # torch is pinned in requirements-dev.txt: importorskip lets tests/skip_policy.py fail
    # the run when it is missing instead of skipping quietly. Imported as a module (typed
    # Any) so type checking does not depend on torch.
    TorchSampler = pytest.importorskip("torch.utils.data.distributed").DistributedSampler

    for rank in range(replicas):
        ours = DistributedSampler(range(n), replicas, rank, shuffle, seed, drop_last)
        theirs = TorchSampler(range(n), replicas, rank, shuffle, seed, drop_last)
        ours.set_epoch(epoch)
        theirs.set_epoch(epoch)
        assert (len(ours), ours.num_samples, ours.total_size) == (
            len(theirs),
            theirs.num_samples,
            theirs.total_size,
        )
        assert list(ours) == list(theirs)


def test_works_as_a_dataloader_sampler() -> None:
    torch = pytest.importorskip("torch")  # pinned: a missing torch fails the run (tests/skip_policy.py)
    data = importlib.import_module("torch.utils.data")
    DataLoader, TensorDataset = data.DataLoader, data.TensorDataset

    dataset = TensorDataset(torch.arange(10))
    set_instance_info(InstanceInfo(node=0, total_nodes=2, worker=1, workers_per_node=2))
    sampler = DistributedSampler(dataset, shuffle=False)
    loader = DataLoader(dataset, sampler=sampler, batch_size=2)
    batches = [batch[0].tolist() for batch in loader]
    assert batches == [[1, 5], [9]]
    assert len(loader) == 2
