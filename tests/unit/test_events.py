"""The event model: the seed's names and fields, immutability, and pattern matching."""

from __future__ import annotations

import dataclasses
import pickle
from typing import get_args

import pytest

from skyward import events
from skyward.events import (
    EVENT_TYPES,
    BootstrapProgress,
    CostFinal,
    Error,
    InfraCreating,
    InstanceInterrupted,
    KnownProviderName,
    LogLine,
    Metrics,
    Notice,
    PoolStarted,
    PoolStopping,
    SkywardEvent,
    TaskProgress,
    is_event,
)

# api-reference.md, "Events", field for field, plus the three display events, the failover
# event, and (issue 17) the provider and region that CostUpdate and CostFinal end with.
EXPECTED_FIELDS: dict[str, tuple[str, ...]] = {
    "InfraCreating": (),
    "InfraCreated": ("region",),
    "InstanceLaunching": ("count", "instance_type", "provider"),
    "InstanceProvisioned": (
        "instance_id",
        "node",
        "spot",
        "provider",
        "ip",
        "instance_type",
        "price_on_demand",
        "price_spot",
    ),
    "BootstrapStarting": ("instance_id",),
    "BootstrapProgress": ("instance_id", "step"),
    "BootstrapCompleted": ("instance_id",),
    "PoolStarted": (),
    "Metrics": (
        "instance_id",
        "node",
        "cpu_percent",
        "memory_percent",
        "memory_used_mb",
        "memory_total_mb",
        "gpu_utilization",
        "gpu_memory_used_mb",
        "gpu_memory_total_mb",
        "gpu_temperature",
    ),
    "LogLine": ("node", "instance_id", "line", "timestamp"),
    "PoolStopping": (),
    "InstanceStopping": ("instance_id",),
    "CostUpdate": (
        "elapsed_seconds",
        "accumulated_cost",
        "hourly_rate",
        "spot_count",
        "ondemand_count",
        "provider",
        "region",
    ),
    "CostFinal": (
        "total_cost",
        "total_seconds",
        "hourly_rate",
        "spot_count",
        "ondemand_count",
        "savings_vs_ondemand",
        "provider",
        "region",
    ),
    "CandidateFailed": ("candidate", "provider", "region", "reason", "message"),
    "Error": ("message", "instance_id"),
    "TaskProgress": ("done", "submitted", "failed"),
    "InstanceInterrupted": ("instance_id", "node", "reason"),
    "Notice": ("message",),
    "NodeAdded": ("node", "instance_id", "reason"),
    "NodeRemoved": ("node", "instance_id", "reason"),
    "PoolResized": ("desired", "current", "reason"),
}


def _metrics(**changes: object) -> Metrics:
    base = Metrics("i-1", 0, 50.0, 25.0, 4096.0, 16384.0, 90.0, 1000.0, 80000.0, 70.0)
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


@pytest.mark.parametrize(("name", "fields"), EXPECTED_FIELDS.items())
def test_event_has_the_seed_fields_in_order(name: str, fields: tuple[str, ...]) -> None:
    cls = getattr(events, name)
    assert tuple(f.name for f in dataclasses.fields(cls)) == fields


def test_union_covers_every_event_and_nothing_else() -> None:
    assert {cls.__name__ for cls in get_args(SkywardEvent)} == set(EXPECTED_FIELDS)
    assert set(EVENT_TYPES) == set(get_args(SkywardEvent))


@pytest.mark.parametrize("cls", EVENT_TYPES)
def test_events_are_frozen_slotted_values(cls: type) -> None:
    params = dataclasses.fields(cls)
    kwargs = {f.name: "x" for f in params}  # dataclasses do not check types
    event = cls(**kwargs)
    assert not hasattr(event, "__dict__")
    if params:
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(event, params[0].name, "changed")
    assert pickle.loads(pickle.dumps(event)) == event
    assert hash(event) == hash(cls(**kwargs))
    assert is_event(event)


def test_is_event_rejects_other_values() -> None:
    assert not is_event("Error")
    assert not is_event(None)
    assert not is_event(Error)


def test_match_on_fieldless_and_positional_patterns() -> None:
    def kind(event: SkywardEvent) -> str:
        match event:
            case PoolStarted():
                return "started"
            case PoolStopping():
                return "stopping"
            case InfraCreating():
                return "infra"
            case BootstrapProgress(iid, step):
                return f"{iid}:{step}"
            case Error(message=message, instance_id=None):
                return f"pool error {message}"
            case _:
                return "other"

    assert kind(PoolStarted()) == "started"
    assert kind(PoolStopping()) == "stopping"
    assert kind(InfraCreating()) == "infra"
    assert kind(BootstrapProgress("i-1", "deps")) == "i-1:deps"
    assert kind(Error("boom", None)) == "pool error boom"
    assert kind(Error("boom", "i-1")) == "other"


def test_metrics_short_aliases_match_the_concepts_example() -> None:
    # concepts.md matches ``Metrics(cpu=cpu, gpu=gpu)``; the aliases make that work.
    match _metrics(cpu_percent=12.5, gpu_utilization=None):
        case Metrics(cpu=cpu, gpu=gpu):
            assert (cpu, gpu) == (12.5, None)
        case _:
            pytest.fail("Metrics(cpu=..., gpu=...) did not match")


def test_task_progress_running_never_negative() -> None:
    assert TaskProgress(done=3, submitted=10, failed=2).running == 5
    assert TaskProgress(done=5, submitted=4, failed=0).running == 0


def test_provider_names() -> None:
    assert set(get_args(KnownProviderName)) == {"aws", "digitalocean", "verda", "local"}
    # a plugin's provider name is just a str
    assert InstanceInterrupted("i-1", 0, "capacity").reason == "capacity"


def test_cost_final_and_notice_values() -> None:
    final = CostFinal(1.0, 3600.0, 1.0, 1, 0, 2.0)
    assert final.savings_vs_ondemand == 2.0
    assert Notice("spot unavailable").message == "spot unavailable"
    assert LogLine(0, "i-1", "hi", 1.5).line == "hi"
