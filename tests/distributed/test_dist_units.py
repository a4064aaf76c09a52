"""The distributed backends' pure parts and seams, without any framework or pool."""

from __future__ import annotations

import os
import pickle
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cloudpickle
import pytest
from hypothesis import given
from hypothesis import strategies as st

import skyward as sky
from skyward import distributed
from skyward.distributed.backends import FrameworkNotInstalledError, require
from skyward.distributed.backends import tensorflow_backend as tfb
from skyward.distributed.backends.base import DistributedFunction, wrap
from skyward.distributed.backends.env import PROCESS_GROUP_VARIABLES, process_group_env, scoped_environ
from skyward.distributed.backends.jax_backend import JaxLauncher, initialize_arguments
from skyward.distributed.backends.keras_backend import KerasLauncher, keras_pip, keras_seed
from skyward.distributed.backends.rendezvous import Peer, RendezvousError, _parse_table, exchange
from skyward.distributed.backends.tensorflow_backend import (
    ClusterChangedError,
    TensorFlowLauncher,
    tf_cluster,
    tf_config,
    worker_addresses,
)
from skyward.errors import ConfigurationError, NotInComputationError
from skyward.plugins.registry import registry
from skyward.runtime.context import InstanceInfo, set_instance_info
from skyward_torch.torch_backend import TorchLauncher, resolve_backend
from skyward_torch.transformers_backend import TransformersLauncher, reset_accelerate_state, trainer_env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def info(
    node: int = 0, total_nodes: int = 2, worker: int = 0, workers_per_node: int = 1, port: int = 29500
) -> InstanceInfo:
    return InstanceInfo(
        node=node,
        total_nodes=total_nodes,
        worker=worker,
        workers_per_node=workers_per_node,
        head_addr="10.0.0.5",
        head_port=port,
        job_id="job-1",
    )


@pytest.fixture
def in_computation() -> Iterator[InstanceInfo]:
    """This process posing as worker 0 of a one-slot pool, as a worker process does."""
    current = InstanceInfo(node=0, total_nodes=1, head_addr="127.0.0.1", head_port=free_port(), job_id="unit")
    set_instance_info(current)
    yield current
    set_instance_info(None)


# -- the environment -------------------------------------------------------------------


@given(
    total_nodes=st.integers(1, 64),
    workers_per_node=st.integers(1, 8),
    data=st.data(),
)
def test_process_group_env_is_instance_info(total_nodes: int, workers_per_node: int, data: st.DataObject) -> None:
    node = data.draw(st.integers(0, total_nodes - 1))
    worker = data.draw(st.integers(0, workers_per_node - 1))
    slot = info(node, total_nodes, worker, workers_per_node)

    env = process_group_env(slot, "torch")

    assert tuple(env) == PROCESS_GROUP_VARIABLES
    assert env == {
        "MASTER_ADDR": "10.0.0.5",
        "MASTER_PORT": "29500",
        "WORLD_SIZE": str(slot.world_size),
        "RANK": str(slot.rank),
        "LOCAL_RANK": str(worker),
        "LOCAL_WORLD_SIZE": str(workers_per_node),
        "NODE_RANK": str(node),
    }
    assert 0 <= int(env["RANK"]) < int(env["WORLD_SIZE"])
    assert int(env["RANK"]) == node * workers_per_node + worker


def test_ranks_of_all_slots_are_distinct_and_cover_the_world() -> None:
    slots = [info(n, 3, w, 4) for n in range(3) for w in range(4)]
    ranks = [int(process_group_env(s, "torch")["RANK"]) for s in slots]
    assert ranks == list(range(12))


def test_master_port_override() -> None:
    assert process_group_env(info(), "torch", master_port=4242)["MASTER_PORT"] == "4242"
    with pytest.raises(ValueError, match="port number"):
        process_group_env(info(), "torch", master_port=70000)


@pytest.mark.parametrize("port", [0, -1, 65536])
def test_missing_head_port_is_refused(port: int) -> None:
    with pytest.raises(ConfigurationError, match=rf"distributed.torch: .*head_port={port}"):
        process_group_env(info(port=port), "torch")


def test_scoped_environ_restores_set_and_unset_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKYWARD_T_SET", "before")
    monkeypatch.delenv("SKYWARD_T_UNSET", raising=False)
    with pytest.raises(KeyError), scoped_environ({"SKYWARD_T_SET": "during", "SKYWARD_T_UNSET": "x"}):
        assert os.environ["SKYWARD_T_SET"] == "during"
        assert os.environ["SKYWARD_T_UNSET"] == "x"
        raise KeyError("the block fails")
    assert os.environ["SKYWARD_T_SET"] == "before"
    assert "SKYWARD_T_UNSET" not in os.environ


# -- importing frameworks --------------------------------------------------------------


def test_missing_framework_names_the_package_and_the_image(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "skyward_absent_framework", None)
    with pytest.raises(FrameworkNotInstalledError) as caught:
        require("skyward_absent_framework", backend="jax", pip=("jax", "jaxlib"))
    error = caught.value
    assert isinstance(error, ImportError) and isinstance(error, ModuleNotFoundError)
    assert error.name == "skyward_absent_framework"
    assert str(error) == (
        "distributed.jax needs the 'skyward_absent_framework' package on the node, and it is "
        "not installed there: add it to the pool's image, e.g. "
        "ComputePool(..., image=Image(pip=['jax', 'jaxlib']))"
    )
    # it travels back to the client like any task error
    copy = pickle.loads(cloudpickle.dumps(error))
    assert type(copy) is FrameworkNotInstalledError
    assert str(copy) == str(error) and copy.name == error.name


def test_a_broken_install_is_not_reported_as_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "skyward_broken_framework.py").write_text("raise ImportError('undefined symbol: foo')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ImportError, match="undefined symbol") as caught:
        require("skyward_broken_framework", backend="torch", pip=("torch",))
    assert not isinstance(caught.value, FrameworkNotInstalledError)


def test_plugins_import_no_framework() -> None:
    """Importing the backends and resolving every distributed.<name> stays cheap."""
    code = (
        "import sys\n"
        "import skyward.plugins.builtin\n"  # the core's backends (jax, keras, tensorflow)
        "from skyward import distributed\n"
        "for name in ('torch', 'transformers', 'jax', 'keras', 'tensorflow'):\n"
        "    getattr(distributed, name)()\n"
        "frameworks = ('torch', 'jax', 'keras', 'tensorflow', 'transformers', 'accelerate')\n"
        "print(sorted(m for m in frameworks if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "[]"


# -- the wrapper -----------------------------------------------------------------------


@dataclass(frozen=True)
class RecordingLauncher:
    """A launcher that records what the wrapper did with it."""

    events: list[str] = field(default_factory=list, compare=False)

    @property
    def name(self) -> str:
        return "recording"

    @contextmanager
    def session(self, info: InstanceInfo) -> Iterator[None]:
        self.events.append(f"enter rank {info.rank}")
        try:
            yield
        finally:
            self.events.append("exit")


def sample(x: int, *, y: int = 1) -> int:
    """Adds."""
    return x + y


def test_wrapper_runs_inside_the_session_and_leaves_it_on_raise(in_computation: InstanceInfo) -> None:
    launcher = RecordingLauncher()
    assert wrap(sample, launcher)(2, y=3) == 5
    assert launcher.events == ["enter rank 0", "exit"]

    def failing() -> None:
        launcher.events.append("body")
        raise LookupError("boom")

    with pytest.raises(LookupError, match="boom"):
        wrap(failing, launcher)()
    assert launcher.events[2:] == ["enter rank 0", "body", "exit"]


def test_wrapper_keeps_the_function_identity_and_pickles_small() -> None:
    wrapped = distributed.torch(backend="gloo")(sample)
    assert isinstance(wrapped, DistributedFunction)
    assert wrapped.__name__ == "sample" and wrapped.__qualname__ == "sample"
    assert wrapped.__module__ == __name__ and wrapped.__doc__ == "Adds."
    assert wrapped.function is sample
    assert wrapped.launcher == TorchLauncher(backend="gloo")
    assert repr(wrapped) == "<distributed.torch 'sample'>"

    raw = cloudpickle.dumps(wrapped)
    assert b"skyward_torch.torch_backend" in raw  # the launcher travels by reference
    copy = pickle.loads(raw)
    assert copy.launcher == wrapped.launcher and copy.function(1) == 2


def test_wrapped_function_only_runs_on_a_pool() -> None:
    with pytest.raises(NotInComputationError, match=r"distributed.torch\(...\).*only runs on a pool"):
        distributed.torch(backend="gloo")(sample)(1)
    with pytest.raises(NotInComputationError, match="only runs on a pool"):
        sky.compute(distributed.torch(backend="gloo")(sample)).local(1)


def test_decorator_order_is_checked() -> None:
    with pytest.raises(ConfigurationError, match=r"applied on top of @compute; put @compute on top"):
        distributed.torch(backend="gloo")(sky.compute(sample))
    with pytest.raises(ConfigurationError, match=r"distributed.keras\(...\) was applied on top of @compute"):
        distributed.keras(backend="torch")(sky.compute(sample))
    with pytest.raises(ConfigurationError, match="decorates a function, got int"):
        distributed.jax()(42)


# -- options are checked on the client -------------------------------------------------


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: distributed.torch(backend="mpi"), r"distributed.torch\(backend='mpi'\): use 'nccl'"),
        (lambda: distributed.torch(timeout=0), r"timeout=0\): must be a positive"),
        (lambda: distributed.transformers(backend="NCCL"), r"distributed.transformers\(backend='NCCL'\)"),
        (lambda: distributed.jax(timeout=0.5), r"distributed.jax\(timeout=0.5\): must be at least 1"),
        (lambda: distributed.jax(local_device_ids=[0, -1]), r"local_device_ids=\[0, -1\]\)"),
        (lambda: distributed.jax(local_device_ids="01"), r"local_device_ids='01'\)"),
        (lambda: distributed.keras(backend="numpy"), r"distributed.keras\(backend='numpy'\): use one of 'jax'"),
        (lambda: distributed.tensorflow(timeout=-1), r"distributed.tensorflow\(timeout=-1\)"),
        (lambda: distributed.keras(seed=-1), r"distributed.keras\(seed=-1\): must be an integer from 0 to"),
        (lambda: distributed.keras(seed=2**32), r"distributed.keras\(seed=4294967296\)"),
        (lambda: distributed.keras(seed="0"), r"distributed.keras\(seed='0'\)"),
    ],
)
def test_bad_options_fail_at_decoration(make: Any, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        make()


@given(job_id=st.text(max_size=40))
def test_every_worker_of_a_job_derives_one_keras_seed_numpy_accepts(job_id: str) -> None:
    infos = [InstanceInfo(node=n, total_nodes=3, job_id=job_id) for n in range(3)]
    seeds = {keras_seed(None, info) for info in infos}
    assert len(seeds) == 1
    assert 0 <= seeds.pop() < 2**32
    assert keras_seed(7, infos[0]) == 7


def test_backends_resolve_through_the_registry() -> None:
    import skyward_torch

    backends = registry.distributed_backends()
    assert backends["torch"].factory is skyward_torch.torch
    assert backends["transformers"].factory is skyward_torch.transformers
    assert {"jax", "keras", "tensorflow"} <= set(backends)
    assert distributed.torch is skyward_torch.torch
    with pytest.raises(AttributeError, match=r"no backend 'mxnet' \(available: .*jax.*torch"):
        distributed.mxnet  # noqa: B018


def test_a_fresh_process_sees_every_backend_without_registering_anything() -> None:
    code = "import skyward as sky; print(sky.distributed.jax.__module__, sky.distributed.keras.__module__, " \
        "sky.distributed.tensorflow.__module__, sky.distributed.torch.__module__)"  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == [
        "skyward.distributed.backends.jax_backend",
        "skyward.distributed.backends.keras_backend",
        "skyward.distributed.backends.tensorflow_backend",
        "skyward_torch.torch_backend",
    ]


def test_keras_on_torch_needs_the_torch_plugin(monkeypatch: pytest.MonkeyPatch) -> None:
    without_torch = {k: v for k, v in registry.distributed_backends().items() if k != "torch"}
    monkeypatch.setattr(registry, "distributed_backends", lambda: without_torch)
    with pytest.raises(ConfigurationError, match=r"skyward-torch plugin.*pip install 'skyward\[torch\]'"):
        distributed.keras(backend="torch")


def test_keras_on_torch_composes_the_torch_wrapper() -> None:
    wrapped = distributed.keras(backend="torch", timeout=30)(sample)
    assert wrapped.launcher == KerasLauncher(backend="torch", timeout=30)
    inner = wrapped.function
    assert isinstance(inner, DistributedFunction)
    assert inner.launcher == TorchLauncher(backend=None, timeout=30)
    assert inner.function is sample


def test_launchers_are_values() -> None:
    assert TorchLauncher("gloo", 5.0) == TorchLauncher("gloo", 5.0)
    assert hash(JaxLauncher(3.0, (0,))) == hash(JaxLauncher(3.0, (0,)))
    assert {TensorFlowLauncher(), TransformersLauncher(), KerasLauncher()}  # hashable
    assert keras_pip("jax") == ("keras", "jax")
    assert keras_pip("tensorflow") == ("keras", "tensorflow")


# -- per-backend decisions -------------------------------------------------------------


def test_torch_backend_choice() -> None:
    assert resolve_backend(None, gpus=1, workers_per_node=1, where="distributed.torch") == "nccl"
    assert resolve_backend(None, gpus=0, workers_per_node=1, where="distributed.torch") == "gloo"
    assert resolve_backend("gloo", gpus=1, workers_per_node=1, where="distributed.torch") == "gloo"
    assert resolve_backend("nccl", gpus=1, workers_per_node=1, where="distributed.torch") == "nccl"
    with pytest.raises(ConfigurationError, match=r"backend='nccl'\) needs an NVIDIA GPU"):
        resolve_backend("nccl", gpus=0, workers_per_node=1, where="distributed.torch")


def test_nccl_is_never_chosen_for_workers_sharing_a_gpu() -> None:
    # NCCL refuses two ranks on one device ("Duplicate GPU detected", seen on an H100)
    assert resolve_backend(None, gpus=1, workers_per_node=2, where="distributed.torch") == "gloo"
    assert resolve_backend(None, gpus=2, workers_per_node=2, where="distributed.torch") == "nccl"
    with pytest.raises(ConfigurationError, match=r"2 workers on 1 GPU .*concurrency=1 or fewer.*backend='gloo'"):
        resolve_backend("nccl", gpus=1, workers_per_node=2, where="distributed.torch")


def test_trainer_env_asks_accelerate_for_cpu_only_without_gpus() -> None:
    assert trainer_env(cuda_available=False) == {"ACCELERATE_USE_CPU": "true"}
    assert trainer_env(cuda_available=True) == {}


def test_reset_accelerate_state_without_accelerate(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "accelerate", raising=False)
    reset_accelerate_state()  # nothing imported, nothing to reset


def test_jax_initialize_arguments() -> None:
    slot = info(node=1, total_nodes=2, worker=1, workers_per_node=2)
    assert initialize_arguments(slot, None, None, "jax") == {
        "coordinator_address": "10.0.0.5:29500",
        "num_processes": 4,
        "process_id": 3,
    }
    assert initialize_arguments(slot, 60.5, (1,), "jax") == {
        "coordinator_address": "10.0.0.5:29500",
        "num_processes": 4,
        "process_id": 3,
        "local_device_ids": [1],
        "initialization_timeout": 60,
    }


def test_tf_config_shape() -> None:
    workers = ["10.0.0.5:2222", "10.0.0.6:2223"]
    assert tf_config(workers, 1) == {"cluster": {"worker": workers}, "task": {"type": "worker", "index": 1}}
    with pytest.raises(ValueError, match="not in a cluster of 2"):
        tf_config(workers, 2)


def test_worker_addresses_in_rank_order_with_ipv6_bracketed() -> None:
    peers = [Peer(1, "fd00::2", {"port": 2223}), Peer(0, "10.0.0.5", {"port": 2222})]
    assert worker_addresses(peers) == ["10.0.0.5:2222", "[fd00::2]:2223"]


def test_tf_cluster_sets_and_restores_tf_config(in_computation: InstanceInfo, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tfb, "_own_port", None)
    monkeypatch.setattr(tfb, "_joined_cluster", None)
    monkeypatch.delenv("TF_CONFIG", raising=False)
    with tf_cluster(in_computation, timeout=10) as config:
        assert os.environ["TF_CONFIG"] == __import__("json").dumps(config)
        port = tfb._own_port
        assert config == tf_config([f"127.0.0.1:{port}"], 0)
    assert "TF_CONFIG" not in os.environ
    with tf_cluster(in_computation, timeout=10) as again:
        assert again == config  # the worker keeps its port


def test_tf_cluster_refuses_to_switch_clusters(in_computation: InstanceInfo, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tfb, "_own_port", 2222)
    monkeypatch.setattr(tfb, "_joined_cluster", ("127.0.0.1:2222", "127.0.0.1:2223"))
    with (
        pytest.raises(ClusterChangedError, match="cannot switch clusters within a process"),
        tf_cluster(in_computation, timeout=10),
    ):
        pass


# -- the rendezvous --------------------------------------------------------------------


def _exchange_all(world: int, port: int, records: dict[int, dict[str, Any]], timeout: float = 10) -> dict[int, Any]:
    results: dict[int, Any] = {}

    def run(rank: int) -> None:
        try:
            results[rank] = exchange(
                head_addr="127.0.0.1", head_port=port, rank=rank, world_size=world,
                job_id="job", record=records.get(rank, {}), timeout=timeout,
            )  # fmt: skip
        except Exception as exc:
            results[rank] = exc

    # the highest ranks first: they must wait for rank 0 to listen
    threads = [threading.Thread(target=run, args=(r,)) for r in reversed(range(world))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout + 5)
    return results


def test_rendezvous_gives_every_rank_the_same_table() -> None:
    results = _exchange_all(4, free_port(), {r: {"port": 1000 + r} for r in range(4)})
    tables = [results[r] for r in range(4)]
    assert all(t == tables[0] for t in tables)
    assert [(p.rank, p.addr, dict(p.record)) for p in tables[0]] == [
        (r, "127.0.0.1", {"port": 1000 + r}) for r in range(4)
    ]


def test_rendezvous_ignores_strangers() -> None:
    port = free_port()
    stop = threading.Event()

    def stranger() -> None:
        # another job knocking on the port while the real ranks meet
        while not stop.is_set():
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                    s.sendall(b'{"job":"other","world":2,"rank":1,"record":{}}\n')
                    s.recv(100)
            except OSError:
                pass

    thread = threading.Thread(target=stranger, daemon=True)
    thread.start()
    try:
        results = _exchange_all(2, port, {0: {"a": 0}, 1: {"a": 1}})
    finally:
        stop.set()
        thread.join(5)
    assert [dict(p.record) for p in results[0]] == [{"a": 0}, {"a": 1}]
    assert results[1] == results[0]


def test_rendezvous_times_out_naming_the_missing_ranks() -> None:
    port = free_port()
    joined: list[Any] = []

    def rank_one() -> None:
        try:
            exchange(head_addr="127.0.0.1", head_port=port, rank=1, world_size=3, job_id="j", record={}, timeout=3)
        except RendezvousError as exc:
            joined.append(exc)

    thread = threading.Thread(target=rank_one)
    thread.start()
    with pytest.raises(RendezvousError, match=r"ranks \[2\] of 3 did not reach the head at 127.0.0.1"):
        exchange(head_addr="127.0.0.1", head_port=port, rank=0, world_size=3, job_id="j", record={}, timeout=1)
    thread.join(10)
    assert len(joined) == 1  # rank 1 is not left waiting for a table forever


def test_rendezvous_join_alone_times_out_clearly() -> None:
    port = free_port()
    with pytest.raises(RendezvousError, match=rf"rank 1 could not meet rank 0 at 127.0.0.1:{port}"):
        exchange(head_addr="127.0.0.1", head_port=port, rank=1, world_size=2, job_id="j", record={}, timeout=0.5)


def test_malformed_tables_are_refused() -> None:
    with pytest.raises(RendezvousError, match="malformed"):
        _parse_table(b'{"job": "self-connect echo"}\n', 2)
    with pytest.raises(RendezvousError, match=r"ranks \[0\], expected 0..1"):
        _parse_table(b'[{"rank": 0, "addr": "a", "record": {}}]\n', 2)
