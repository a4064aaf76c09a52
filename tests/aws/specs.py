"""Building a PoolSpec and a driver the way ComputePool does, for driver-level tests."""

from __future__ import annotations

from typing import Any

from skyward.api.spec import PoolSpec, build_spec
from skyward_aws import AWS
from skyward_aws.driver import AWSDriver


def make_spec(provider: AWS, **options: Any) -> PoolSpec:
    defaults: dict[str, Any] = {
        "image": None, "pip": None, "nodes": 1, "machine": None, "accelerator": None, "cpu": None,
        "memory": None, "volume": None, "spot": None, "timeout": 600, "env": None, "concurrency": 1,
        "display": "quiet", "collect_metrics": False,
    }  # fmt: skip
    defaults.update(options)
    return build_spec(provider=provider, **defaults)


def make_driver(provider: AWS, sleeps: list[float] | None = None) -> AWSDriver:
    """A driver whose waits are recorded (and skipped) when ``sleeps`` is given."""
    if sleeps is None:
        return AWSDriver(provider)
    return AWSDriver(provider, sleep=sleeps.append)
