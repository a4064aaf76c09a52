"""Fixtures of the distributed-backend tests: small Local pools."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager

import pytest

import skyward as sky


@sky.compute
def _head_port() -> int:
    return sky.instance_info().head_port


def wait_for_cluster(pool: sky.ComputePool, timeout: float = 30.0) -> None:
    """Wait until every worker holds the pool's cluster information.

    Tasks travel straight to the workers while the cluster information goes through each
    node's supervisor, so the very first task can run before it arrives (head_port is
    still 0). /tmp/proposals/distributed-1.patch makes workers wait for it; until that
    lands, the tests wait here so that they test the backends rather than that race.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(_head_port() @ pool):
            return
        time.sleep(0.05)
    raise TimeoutError(f"the workers did not receive the cluster information in {timeout:g} s")


@contextmanager
def local_pool(nodes: int = 2, concurrency: int = 1, **kwargs: object) -> Iterator[sky.ComputePool]:
    with sky.ComputePool(nodes=nodes, concurrency=concurrency, display="quiet", **kwargs) as pool:  # type: ignore[arg-type]
        wait_for_cluster(pool)
        yield pool


@pytest.fixture(scope="session")
def make_pool() -> Callable[..., AbstractContextManager[sky.ComputePool]]:
    """``with make_pool(nodes=2, concurrency=2) as pool:``, for tests that need their own."""
    return local_pool


@pytest.fixture(scope="module")
def pool2() -> Iterator[sky.ComputePool]:
    """Two nodes of one worker each, shared by a test module: the frameworks are imported
    once per worker, and successive tests exercise set-up and tear-down in the same
    long-lived worker processes."""
    with local_pool(nodes=2) as pool:
        yield pool
