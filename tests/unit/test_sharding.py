"""shard() and shard_indices(): every worker slot gets a disjoint, balanced part."""

from __future__ import annotations

import random
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skyward.errors import ConfigurationError, NotInComputationError
from skyward.runtime.context import InstanceInfo, set_instance_info
from skyward.sharding import derive_seed, shard, shard_bounds, shard_indices


@pytest.fixture(autouse=True)
def _outside_any_computation() -> Iterator[None]:
    """Each test starts and ends outside a computation, whatever it simulated."""
    set_instance_info(None)
    yield
    set_instance_info(None)


@contextmanager
def as_worker(
    node: int,
    total_nodes: int,
    worker: int = 0,
    workers_per_node: int = 1,
    job_id: str = "job",
) -> Iterator[InstanceInfo]:
    """Run the block as worker ``worker`` of node ``node``, as a pool's worker would."""
    info = InstanceInfo(
        node=node,
        total_nodes=total_nodes,
        worker=worker,
        workers_per_node=workers_per_node,
        job_id=job_id,
    )
    set_instance_info(info)
    try:
        yield info
    finally:
        set_instance_info(None)


def shards_of_all_workers(
    data: Any,
    total_nodes: int,
    workers_per_node: int,
    *,
    shuffle: bool = False,
    seed: int | None = None,
    job_id: str = "job",
) -> list[Any]:
    """What ``shard(data)`` returns on each worker of the pool, in rank order."""
    by_rank: dict[int, Any] = {}
    for node in range(total_nodes):
        for worker in range(workers_per_node):
            with as_worker(node, total_nodes, worker, workers_per_node, job_id) as info:
                by_rank[info.rank] = shard(data, shuffle=shuffle, seed=seed)
    return [by_rank[rank] for rank in range(total_nodes * workers_per_node)]


def assert_exact_partition(parts: list[list[int]], length: int) -> None:
    flat = [i for part in parts for i in part]
    assert sorted(flat) == list(range(length)), "not disjoint, or not covering everything"
    sizes = [len(part) for part in parts]
    assert max(sizes) - min(sizes) <= 1, f"unbalanced sizes {sizes}"


# -- shard_indices: the pure partition ------------------------------------------------


@given(
    length=st.integers(0, 400),
    world_size=st.integers(1, 40),
    shuffle=st.booleans(),
    seed=st.integers(-(2**63), 2**63),
)
def test_shard_indices_of_all_ranks_form_an_exact_balanced_partition(
    length: int, world_size: int, shuffle: bool, seed: int
) -> None:
    parts = [list(shard_indices(length, rank, world_size, shuffle=shuffle, seed=seed)) for rank in range(world_size)]
    assert_exact_partition(parts, length)


@given(length=st.integers(0, 400), world_size=st.integers(1, 40))
def test_unshuffled_shards_are_contiguous_blocks_in_rank_order(length: int, world_size: int) -> None:
    parts = [shard_indices(length, rank, world_size) for rank in range(world_size)]
    assert all(isinstance(part, range) for part in parts)
    assert [i for part in parts for i in part] == list(range(length))
    # the larger blocks come first
    sizes = [len(part) for part in parts]
    assert sizes == sorted(sizes, reverse=True)


@given(length=st.integers(0, 300), world_size=st.integers(1, 20), seed=st.integers())
def test_shuffled_shards_are_consecutive_blocks_of_one_shared_permutation(
    length: int, world_size: int, seed: int
) -> None:
    expected = list(range(length))
    random.Random(seed).shuffle(expected)
    parts = [shard_indices(length, rank, world_size, shuffle=True, seed=seed) for rank in range(world_size)]
    assert [i for part in parts for i in part] == expected


def test_shard_bounds_give_the_extra_items_to_the_first_ranks() -> None:
    assert [shard_bounds(10, rank, 4) for rank in range(4)] == [
        (0, 3),
        (3, 6),
        (6, 8),
        (8, 10),
    ]
    assert [shard_bounds(2, rank, 4) for rank in range(4)] == [
        (0, 1),
        (1, 2),
        (2, 2),
        (2, 2),
    ]


def test_shuffle_without_a_seed_is_refused_by_the_pure_function() -> None:
    with pytest.raises(ConfigurationError, match="seed"):
        shard_indices(10, 0, 2, shuffle=True, seed=None)


@pytest.mark.parametrize(
    ("length", "rank", "world_size"),
    [(-1, 0, 1), (10, 0, 0), (10, -1, 2), (10, 2, 2)],
)
def test_impossible_partitions_are_refused(length: int, rank: int, world_size: int) -> None:
    with pytest.raises(ConfigurationError):
        shard_indices(length, rank, world_size)


def test_derived_seed_is_stable_and_depends_on_the_job() -> None:
    assert derive_seed("job-1") == derive_seed("job-1")
    assert derive_seed("job-1") != derive_seed("job-2")
    # stable across processes, unlike hash(), which is salted per process
    code = "from skyward.sharding import derive_seed; print(derive_seed('job-1'))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert int(out) == derive_seed("job-1")


# -- shard(): the worker-side API -----------------------------------------------------


@settings(max_examples=60)
@given(
    length=st.integers(0, 120),
    total_nodes=st.integers(1, 4),
    workers_per_node=st.integers(1, 4),
    shuffle=st.booleans(),
    seed=st.none() | st.integers(0, 2**32),
)
def test_shards_of_every_worker_slot_form_an_exact_partition(
    length: int,
    total_nodes: int,
    workers_per_node: int,
    shuffle: bool,
    seed: int | None,
) -> None:
    parts = shards_of_all_workers(list(range(length)), total_nodes, workers_per_node, shuffle=shuffle, seed=seed)
    assert len(parts) == total_nodes * workers_per_node
    assert_exact_partition(parts, length)


def test_every_worker_slot_is_a_shard_not_only_every_node() -> None:
    # 2 nodes x 2 workers: worker 0 of node 1 is rank 2 of 4
    with as_worker(node=1, total_nodes=2, worker=0, workers_per_node=2):
        assert shard(list(range(8))) == [4, 5]
    with as_worker(node=0, total_nodes=2, worker=1, workers_per_node=2):
        assert shard(list(range(8))) == [2, 3]


@given(seed=st.integers(0, 2**32), total_nodes=st.integers(1, 3), workers=st.integers(1, 3))
def test_with_a_seed_every_worker_draws_the_same_permutation(seed: int, total_nodes: int, workers: int) -> None:
    length = 50
    expected = list(range(length))
    random.Random(seed).shuffle(expected)
    parts = shards_of_all_workers(list(range(length)), total_nodes, workers, shuffle=True, seed=seed)
    assert [i for part in parts for i in part] == expected


def test_a_seed_makes_the_shuffle_independent_of_the_job() -> None:
    data = list(range(100))
    first = shards_of_all_workers(data, 2, 2, shuffle=True, seed=7, job_id="a")
    second = shards_of_all_workers(data, 2, 2, shuffle=True, seed=7, job_id="b")
    assert first == second


def test_without_a_seed_the_workers_of_one_job_agree_and_jobs_differ() -> None:
    data = list(range(100))
    job_a = shards_of_all_workers(data, 2, 3, shuffle=True, job_id="job-a")
    assert_exact_partition(job_a, 100)
    assert job_a != shards_of_all_workers(data, 2, 3, shuffle=True, job_id="job-b")
    assert job_a == shards_of_all_workers(data, 2, 3, shuffle=True, job_id="job-a")
    assert [i for part in job_a for i in part] != data  # it did shuffle


@pytest.mark.parametrize("shuffle", [False, True])
def test_lists_tuples_and_ndarrays_keep_their_type(shuffle: bool) -> None:
    with as_worker(node=1, total_nodes=3):
        as_list = shard(list(range(9)), shuffle=shuffle, seed=1)
        as_tuple = shard(tuple(range(9)), shuffle=shuffle, seed=1)
        as_array = shard(np.arange(9), shuffle=shuffle, seed=1)
    assert type(as_list) is list
    assert type(as_tuple) is tuple
    assert isinstance(as_array, np.ndarray)
    assert list(as_tuple) == as_list == as_array.tolist()
    assert len(as_list) == 3


def test_an_unshuffled_ndarray_shard_is_a_view_and_rows_stay_whole() -> None:
    matrix = np.arange(20).reshape(10, 2)
    with as_worker(node=0, total_nodes=2):
        part = shard(matrix)
        shuffled = shard(matrix, shuffle=True, seed=3)
    assert np.shares_memory(part, matrix)
    assert part.shape == (5, 2)
    np.testing.assert_array_equal(part, matrix[:5])
    assert shuffled.shape == (5, 2)
    assert all(row[1] == row[0] + 1 for row in shuffled.tolist())


def test_other_sequences_are_sliced_or_gathered_into_a_list() -> None:
    with as_worker(node=0, total_nodes=2):
        assert shard(range(10)) == range(5)
        assert shard("abcdef") == "abc"
        gathered = shard(range(10), shuffle=True, seed=0)
    assert type(gathered) is list
    assert len(gathered) == 5


@given(
    length=st.integers(0, 60),
    node=st.integers(0, 3),
    shuffle=st.booleans(),
    seed=st.integers(0, 1000),
)
def test_multiple_arrays_are_cut_with_the_same_indices(length: int, node: int, shuffle: bool, seed: int) -> None:
    x = list(range(length))
    y = tuple(10 * i for i in range(length))
    z = np.arange(length) * 100
    with as_worker(node=node, total_nodes=4):
        x_local, y_local, z_local = shard(x, y, z, shuffle=shuffle, seed=seed)
    assert [10 * i for i in x_local] == list(y_local)
    assert [100 * i for i in x_local] == z_local.tolist()
    assert (type(x_local), type(y_local), type(z_local)) == (list, tuple, np.ndarray)


def test_one_array_comes_back_alone_and_several_as_a_tuple() -> None:
    with as_worker(node=0, total_nodes=1):
        assert shard([1, 2]) == [1, 2]
        assert shard([1, 2], [3, 4]) == ([1, 2], [3, 4])
        assert shard((1, 2), (3, 4)) == ((1, 2), (3, 4))


def test_outside_a_computation_shard_raises_a_clear_error() -> None:
    with pytest.raises(NotInComputationError, match="outside"):
        shard([1, 2, 3])


def test_arrays_of_unequal_length_are_refused() -> None:
    with (
        as_worker(node=0, total_nodes=2),
        pytest.raises(ConfigurationError, match=r"\[3, 2\]"),
    ):
        shard([1, 2, 3], [1, 2])


def test_no_arrays_is_refused() -> None:
    with (
        as_worker(node=0, total_nodes=2),
        pytest.raises(ConfigurationError, match="at least one"),
    ):
        shard()  # type: ignore[call-overload]  # refused statically too


@pytest.mark.parametrize("not_a_sequence", [{"a": 1}, (i for i in range(3)), 42, {1, 2}, np.array(5)])
def test_non_sequences_are_refused(not_a_sequence: Any) -> None:
    with (
        as_worker(node=0, total_nodes=2),
        pytest.raises(ConfigurationError, match="argument 0"),
    ):
        shard(not_a_sequence)


def test_shard_never_imports_numpy_itself() -> None:
    code = (
        "import sys\n"
        "from skyward.runtime.context import InstanceInfo, set_instance_info\n"
        "from skyward.sharding import shard\n"
        "set_instance_info(InstanceInfo(node=0, total_nodes=2, job_id='j'))\n"
        "assert shard([1, 2, 3, 4], shuffle=True) is not None\n"
        "assert 'numpy' not in sys.modules, 'numpy was imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
