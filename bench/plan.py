"""How much each measure does in each mode (pure values)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Plan:
    mode: str
    baselines: tuple[str, ...]  # compared with Skyward in latency, throughput, bandwidth, startup
    latency_calls: int
    latency_rounds: int
    warmup_calls: int
    gather_tasks: int
    gather_rounds: int
    bandwidth_mb: int
    bandwidth_rounds: int
    startup_rounds: int
    pip_rounds: int  # 0: the cached-dependencies start is not measured
    pip_package: str
    broadcast_calls: int
    broadcast_nodes: int
    memory_batches: int
    memory_batch: int
    sklearn: bool


QUICK = Plan(
    mode="quick",
    baselines=("floor", "processpool", "loky"),
    latency_calls=400,
    latency_rounds=4,
    warmup_calls=20,
    gather_tasks=2_000,
    gather_rounds=2,
    bandwidth_mb=32,
    bandwidth_rounds=5,
    startup_rounds=5,
    pip_rounds=0,
    pip_package="six",
    broadcast_calls=60,
    broadcast_nodes=4,
    memory_batches=4,
    memory_batch=4_000,
    sklearn=False,
)

FULL = Plan(
    mode="full",
    baselines=("floor", "processpool", "loky", "ray", "dask"),
    latency_calls=2_000,
    latency_rounds=10,
    warmup_calls=100,
    gather_tasks=10_000,
    gather_rounds=3,
    bandwidth_mb=256,
    bandwidth_rounds=5,
    startup_rounds=5,
    pip_rounds=5,
    pip_package="six",
    broadcast_calls=300,
    broadcast_nodes=4,
    memory_batches=10,
    memory_batch=10_000,
    sklearn=True,
)
