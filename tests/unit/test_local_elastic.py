"""The Local provider's nodes come and go (ElasticNodes, NodeWatch): the conformance kit's
elastic cases on real node processes, and what only Local can show (a killed process is
noticed at the next poll, GPUs per index, a pool that cannot fit at its largest refused)."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import psutil
import pytest

import skyward as sky
from skyward.accelerators import parse_accelerator
from skyward.errors import ConfigurationError, ProvisioningError
from skyward.image import Image
from skyward.providers import ElasticNodes, NodeWatch, ProviderSettings
from skyward.providers.local import NODE_POLL_INTERVAL, Local, LocalDriver
from skyward.providers.spec import PoolSpec
from skyward.scaling import Nodes
from skyward.testing.conformance import ElasticConformance, ElasticPool, wait_for


@dataclass
class LocalUnderTest:
    """Local nodes whose run directories live in ``root`` (this test's own temp dir)."""

    root: Path

    def config(self, **overrides: object) -> ProviderSettings:
        return Local(**overrides)  # type: ignore[arg-type]

    def leftovers(self) -> Mapping[str, Sequence[str]]:
        processes = []
        for process in psutil.process_iter(["cwd", "pid"]):
            cwd = process.info.get("cwd") or ""
            if cwd.startswith(str(self.root)):
                processes.append(f"pid {process.info['pid']} in {cwd}")
        left = {"processes": processes, "run directories": [str(p) for p in self.root.glob("skyward-*")]}
        return {k: v for k, v in left.items() if v}


@pytest.fixture
def local_root(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """This test's run directories, apart from every other pool's (short: an ipc socket's
    path must fit in 107 bytes, which pytest's tmp_path can pass)."""
    root = Path(tempfile.mkdtemp(prefix="sky-el-", dir="/tmp"))
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


class TestLocalElastic(ElasticConformance):
    @pytest.fixture
    def cloud(self, local_root: Path) -> LocalUnderTest:
        return LocalUnderTest(local_root)


def test_local_declares_both_abilities_with_a_poll_that_notices_an_exit_at_once() -> None:
    driver = LocalDriver(Local())
    assert isinstance(driver, ElasticNodes) and isinstance(driver, NodeWatch)
    assert driver.node_poll_interval == NODE_POLL_INTERVAL <= 0.1


def test_a_node_whose_process_was_killed_is_gone_and_the_others_are_not(local_root: Path) -> None:
    """The pool polls ``gone`` (NodeWatch): the killed node is reported with its signal,
    the other is not, and the pool says so before replacing it."""
    under = LocalUnderTest(local_root)
    notices: list[str] = []
    with sky.ComputePool(
        provider=Local(), nodes=2, display="quiet", on_event=lambda e: notices.append(getattr(e, "message", ""))
    ) as pool:
        driver = pool._driver
        assert isinstance(driver, LocalDriver)
        first, second = pool.nodes
        pid = next(n.process.pid for n in driver._nodes if n.instance_id == second.instance_id)
        os.killpg(pid, signal.SIGKILL)  # the node dies, as to an OOM kill or a host failure
        said = f"node 1 ({second.instance_id}) was lost: the local node's process killed by signal 9"
        assert wait_for(lambda: any(m.startswith(said) for m in notices), timeout=10), notices
        assert not any(first.instance_id in m for m in notices)
        assert driver.gone([first]) == {}
    assert wait_for(lambda: not under.leftovers(), timeout=30), under.leftovers()


def test_terminate_given_some_nodes_stops_only_those_and_teardown_the_rest(local_root: Path) -> None:
    under = LocalUnderTest(local_root)
    with sky.ComputePool(provider=Local(), nodes=3, display="quiet") as pool:
        driver = pool._driver
        assert isinstance(driver, LocalDriver)
        handles = pool.nodes  # as they were: the pool heals the stopped node meanwhile
        driver.terminate([handles[1]])
        assert list(driver.gone(handles)) == [handles[1].instance_id]
    assert wait_for(lambda: not under.leftovers(), timeout=30), under.leftovers()


def test_a_node_started_again_at_an_index_gets_its_own_instance_id_and_files(local_root: Path) -> None:
    events: list[object] = []
    with sky.ComputePool(provider=Local(), nodes=1, display="quiet", on_event=events.append) as pool:
        elastic = ElasticPool(pool, events)
        old = pool.nodes[0]
        elastic.remove(old)
        new = elastic.add(0)
        again = ElasticPool(pool, events)
        again.driver.remove_nodes([new])
        third = again.add(0)
        assert len({old.instance_id, new.instance_id, third.instance_id}) == 3
        assert len({old.endpoint, new.endpoint, third.endpoint}) == 3


def _spec(**fields: object) -> PoolSpec:
    return replace(PoolSpec(provider=Local(), image=Image()), **fields)  # type: ignore[arg-type]


def test_a_local_pool_that_cannot_fit_at_its_largest_is_refused_naming_max() -> None:
    cores = os.cpu_count() or 1
    driver = LocalDriver(Local())
    driver.validate(_spec(nodes=1, cpu=1))  # one node of one core fits anywhere
    with pytest.raises(ConfigurationError, match=rf"cpu=1 per worker.*sky.Nodes\(max={cores + 1}\)"):
        driver.validate(_spec(nodes=1, cpu=1, scaling=Nodes(desired=1, max=cores + 1)))
    with pytest.raises(ConfigurationError, match=r"accelerator=.*sky.Nodes\(max=64\)"):
        driver.validate(_spec(nodes=1, accelerator=parse_accelerator("H100"),
                              scaling=Nodes(desired=1, max=64)))  # fmt: skip


def test_every_index_up_to_the_max_has_its_own_devices() -> None:
    devices = LocalDriver(Local()).visible_devices(_spec(nodes=1, scaling=Nodes(desired=1, max=3), concurrency=2))
    assert devices == [["", ""]] * 3  # no accelerator asked: no GPU, for every index the pool may use


def _failing_script(node: int, bind: str, context: object, **_: object) -> str:
    return "echo 'the bootstrap of this node fails' >&2\nexit 3\n"


def test_a_node_that_fails_to_start_is_stopped_alone_and_says_why(local_root: Path) -> None:
    under = LocalUnderTest(local_root)
    with sky.ComputePool(provider=Local(), nodes=1, display="quiet") as pool:
        driver = pool._driver
        assert isinstance(driver, LocalDriver)
        spec = replace(pool.spec, scaling=Nodes(desired=1, max=2))
        with pytest.raises(ProvisioningError, match=r"(?s)local node 1 failed to start.*status 3.*this node fails"):
            driver.add_nodes(spec, [1], _failing_script, [].append)
        assert [n.index for n in driver._nodes] == [0]  # only the one that failed was stopped
        assert driver.gone(pool.nodes) == {}
        with pytest.raises(ConfigurationError, match=r"node \[0\] already running"):
            driver.add_nodes(spec, [0], _failing_script, [].append)
        assert (sky.compute(abs)(-2) >> pool) == 2
    assert wait_for(lambda: not under.leftovers(), timeout=30), under.leftovers()
