"""distributed.torch on a real Local pool: DDP training, collectives, set-up and tear-down.

CPU only (gloo); the nccl path needs an NVIDIA GPU and is skipped without one.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest

import skyward as sky
from skyward import distributed
from skyward.distributed.backends import FrameworkNotInstalledError
from skyward.errors import ConfigurationError
from skyward.providers.local_gpus import detect_gpus, identify_gpu

torch = pytest.importorskip("torch")

pytestmark = [pytest.mark.heavy, pytest.mark.slow]

ENV_NAMES = ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "NODE_RANK")


class PlannedFailure(Exception):
    pass


@sky.compute
@distributed.torch(backend="gloo", timeout=60)
def train_ddp(epochs: int) -> dict[str, Any]:
    """A linear regression trained with DDP on this rank's DistributedSampler shard."""
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel
    from torch.utils.data import DataLoader, TensorDataset

    torch.manual_seed(0)  # the same data everywhere; each rank keeps its own shard
    x = torch.randn(512, 4)
    y = x @ torch.tensor([[1.0], [-2.0], [0.5], [3.0]]) + 0.01 * torch.randn(512, 1)
    dataset = TensorDataset(x, y)
    sampler = sky.DistributedSampler(dataset, shuffle=True, seed=1)
    loader = DataLoader(dataset, batch_size=32, sampler=sampler)

    torch.manual_seed(100 + dist.get_rank())  # different initial weights per rank: DDP
    model = DistributedDataParallel(torch.nn.Linear(4, 1))  # must broadcast rank 0's
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    epoch_losses = []
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        total = torch.zeros(2)
        for bx, by in loader:
            loss = torch.nn.functional.mse_loss(model(bx), by)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += torch.tensor([loss.item() * len(bx), len(bx)])
        dist.all_reduce(total)  # the mean loss over every rank's samples
        epoch_losses.append((total[0] / total[1]).item())
    return {
        "rank": dist.get_rank(),
        "world": dist.get_world_size(),
        "indices": list(sampler),
        "params": [p.detach().clone().numpy().tolist() for p in model.module.parameters()],
        "losses": epoch_losses,
    }


@sky.compute
@distributed.torch(backend="gloo", timeout=60)
def all_reduce_and_env() -> dict[str, Any]:
    import os

    import torch
    import torch.distributed as dist

    info = sky.instance_info()
    value = torch.tensor([float(dist.get_rank() + 1)])
    dist.all_reduce(value)  # sum of 1..world
    gathered = [torch.zeros(1) for _ in range(dist.get_world_size())]
    dist.all_gather(gathered, torch.tensor([float(dist.get_rank())]))
    return {
        "initialized": dist.is_initialized(),
        "backend": dist.get_backend(),
        "rank": dist.get_rank(),
        "world": dist.get_world_size(),
        "sum": value.item(),
        "gathered": [g.item() for g in gathered],
        "env": {name: os.environ.get(name) for name in ENV_NAMES},
        "info": {
            "rank": info.rank,
            "world": info.world_size,
            "worker": info.worker,
            "workers_per_node": info.workers_per_node,
            "node": info.node,
            "head_addr": info.head_addr,
            "head_port": info.head_port,
        },
    }


@sky.compute
@distributed.torch(backend="gloo", timeout=60)
def fail_after_init() -> None:
    import torch.distributed as dist

    assert dist.is_initialized()
    raise PlannedFailure(f"rank {dist.get_rank()} failed on purpose")


@sky.compute
def process_group_state() -> dict[str, Any]:
    import os

    import torch.distributed as dist

    return {"initialized": dist.is_initialized(), "env": {n: os.environ.get(n) for n in ENV_NAMES}}


@sky.compute
def call_with_torch_hidden() -> None:
    """Runs a distributed.torch function in a worker where ``import torch`` fails, as on a
    node whose image lacks torch."""
    hidden = {name: sys.modules.pop(name) for name in list(sys.modules) if name == "torch" or name.startswith("torch.")}
    sys.modules["torch"] = None  # type: ignore[assignment]
    try:
        distributed.torch(backend="gloo")(lambda: None)()
    finally:
        del sys.modules["torch"]
        sys.modules.update(hidden)


@sky.compute
def call_nccl_on_cpu_node() -> None:
    distributed.torch(backend="nccl")(lambda: None)()


def test_ddp_training_keeps_ranks_identical_and_lowers_the_loss(pool2: sky.ComputePool) -> None:
    results = sorted(train_ddp(6) @ pool2, key=lambda r: r["rank"])
    _check_training(results)
    # Again in the same workers: torch keeps a DDP-used store alive after
    # destroy_process_group, so this checks that the second group does not meet the
    # first one's leftovers.
    assert train_ddp(6) @ pool2 == tuple(results)


def _check_training(results: list[dict[str, Any]]) -> None:
    assert [r["rank"] for r in results] == [0, 1]
    assert all(r["world"] == 2 for r in results)
    # each rank trained on its own half of the data...
    first, second = (set(r["indices"]) for r in results)
    assert len(first) == len(second) == 256
    assert not first & second
    assert first | second == set(range(512))
    # ...and DDP kept one model: bit-identical parameters after training
    assert results[0]["params"] == results[1]["params"]
    losses = results[0]["losses"]
    assert results[1]["losses"] == losses
    assert losses[-1] < 0.05 * losses[0], losses
    weights = results[0]["params"][0][0]
    assert weights == pytest.approx([1.0, -2.0, 0.5, 3.0], abs=0.1)


def test_all_reduce_sums_and_env_matches_instance_info(pool2: sky.ComputePool) -> None:
    results = all_reduce_and_env() @ pool2

    for result in results:
        assert result["initialized"] is True
        assert result["backend"] == "gloo"
        assert result["sum"] == 3.0  # 1 + 2
        assert result["gathered"] == [0.0, 1.0]
        info = result["info"]
        assert result["rank"] == info["rank"]
        assert result["env"] == {
            "MASTER_ADDR": info["head_addr"],
            "MASTER_PORT": results[0]["env"]["MASTER_PORT"],  # the call's store (see below)
            "WORLD_SIZE": "2",
            "RANK": str(info["rank"]),
            "LOCAL_RANK": "0",
            "LOCAL_WORLD_SIZE": "1",
            "NODE_RANK": str(info["node"]),
        }
    assert [r["rank"] for r in results] == [0, 1]
    assert 0 < int(results[0]["env"]["MASTER_PORT"]) < 65536


def test_group_is_destroyed_after_a_raise_and_the_next_call_rebuilds_it(pool2: sky.ComputePool) -> None:
    with pytest.raises(PlannedFailure, match="failed on purpose"):
        fail_after_init() @ pool2

    # the same long-lived workers: no group, no torchrun variables left behind
    for state in process_group_state() @ pool2:
        assert state == {"initialized": False, "env": dict.fromkeys(ENV_NAMES)}
    # and a new group forms on the same port
    assert [r["sum"] for r in all_reduce_and_env() @ pool2] == [3.0, 3.0]
    assert [r["sum"] for r in all_reduce_and_env() @ pool2] == [3.0, 3.0]


def test_worker_slots_are_ranks_consistent_with_instance_info(make_pool: Any) -> None:
    with make_pool(nodes=2, concurrency=2) as pool:
        results = all_reduce_and_env() @ pool

    assert [r["rank"] for r in results] == [0, 1, 2, 3]
    for result in results:
        info = result["info"]
        assert result["sum"] == 10.0  # 1 + 2 + 3 + 4
        assert result["gathered"] == [0.0, 1.0, 2.0, 3.0]
        assert result["env"] == {
            "MASTER_ADDR": info["head_addr"],
            "MASTER_PORT": results[0]["env"]["MASTER_PORT"],
            "WORLD_SIZE": str(info["world"]),
            "RANK": str(info["rank"]),
            "LOCAL_RANK": str(info["worker"]),
            "LOCAL_WORLD_SIZE": str(info["workers_per_node"]),
            "NODE_RANK": str(info["node"]),
        }
    assert [(r["env"]["NODE_RANK"], r["env"]["LOCAL_RANK"]) for r in results] == [
        ("0", "0"),
        ("0", "1"),
        ("1", "0"),
        ("1", "1"),
    ]
    assert {r["env"]["LOCAL_WORLD_SIZE"] for r in results} == {"2"}
    assert {r["env"]["WORLD_SIZE"] for r in results} == {"4"}


def test_missing_torch_on_the_node_names_the_package_and_the_image(pool2: sky.ComputePool) -> None:
    with pytest.raises(FrameworkNotInstalledError) as caught:
        call_with_torch_hidden() >> pool2
    assert isinstance(caught.value, ImportError)
    assert caught.value.name == "torch"
    message = str(caught.value)
    assert "distributed.torch needs the 'torch' package" in message
    assert "Image(pip=['torch'])" in message


def test_nccl_on_a_node_without_gpu_fails_clearly(pool2: sky.ComputePool) -> None:
    with pytest.raises(ConfigurationError, match=r"backend='nccl'\) needs an NVIDIA GPU.*use backend='gloo'"):
        call_nccl_on_cpu_node() >> pool2


@sky.compute
@distributed.torch(backend="nccl", timeout=60)
def nccl_sum() -> float:
    import torch
    import torch.distributed as dist

    value = torch.ones(1, device="cuda") * (dist.get_rank() + 1)
    dist.all_reduce(value)
    return float(value.item())


def _local_gpu_model() -> str | None:
    """The catalog model of this machine's first NVIDIA GPU (``"H100"``), None without one."""
    gpus = detect_gpus()
    entry = identify_gpu(gpus[0]) if gpus else None
    return entry.model if entry is not None else None


GPU_MODEL = _local_gpu_model()
NO_GPU = f"nccl needs an NVIDIA GPU and torch sees {torch.cuda.device_count()} on this machine"


@pytest.mark.skipif(GPU_MODEL is None or torch.cuda.device_count() < 1, reason=NO_GPU)
def test_nccl_all_reduce_on_the_gpu_the_pool_asked_for(make_pool: Any) -> None:
    with make_pool(nodes=1, accelerator=GPU_MODEL) as pool:
        assert nccl_sum() @ pool == (1.0,)


@pytest.mark.skipif(GPU_MODEL is None or torch.cuda.device_count() < 1, reason=NO_GPU)
def test_nccl_for_two_workers_sharing_one_gpu_fails_naming_the_fix(make_pool: Any) -> None:
    # NCCL itself refuses it later with "Duplicate GPU detected" (seen on an H100)
    with make_pool(nodes=1, concurrency=2, accelerator=GPU_MODEL) as pool:
        with pytest.raises(ConfigurationError, match=r"needs one GPU per worker.*2 workers on 1 GPU.*concurrency=1"):
            nccl_sum() @ pool


@pytest.mark.skipif(
    GPU_MODEL is None or torch.cuda.device_count() < 2,
    reason=f"nccl needs one NVIDIA GPU per rank (2 here) and torch sees {torch.cuda.device_count()} on this machine",
)
def test_nccl_all_reduce_on_gpus(make_pool: Any) -> None:
    # one node, two worker slots: local ranks 0 and 1 take GPUs 0 and 1
    with make_pool(nodes=1, concurrency=2, accelerator=f"{GPU_MODEL}:2") as pool:
        assert nccl_sum() @ pool == (3.0, 3.0)
